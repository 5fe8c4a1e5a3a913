"""The state-space diagram (notebook 17): the recurrence and its convolution, their symbols and kernel, Mamba's
selective version, legibility and alt text."""

from __future__ import annotations

import re
from itertools import combinations

import pytest
from matplotlib.patches import FancyArrowPatch

from diagram_helpers import assert_legible, close_figures, faded_labels, labels as texts, lit_patches  # noqa: F401
from seqlab.diagrams import state_space


def crossing(a, b) -> bool:
    """Whether segments a and b cross at a point inside both (touching at an end does not count)."""
    (p, q), (r, s) = a, b

    def side(o, x, y):
        return (x[0] - o[0]) * (y[1] - o[1]) - (x[1] - o[1]) * (y[0] - o[0])

    return side(p, q, r) * side(p, q, s) < 0 and side(r, s, p) * side(r, s, q) < 0


@pytest.mark.parametrize("steps, selective", [(2, False), (4, False), (5, False), (4, True), (5, True)])
def test_the_diagram_is_legible_and_no_two_arrows_cross(steps, selective):
    diagram = state_space(steps, selective=selective)
    assert_legible(diagram)
    segments = [p._posA_posB for p in diagram.figure.axes[0].patches if isinstance(p, FancyArrowPatch)]
    assert len(segments) == 4 * steps and not [(a, b) for a, b in combinations(segments, 2) if crossing(a, b)]


@pytest.mark.parametrize("steps", [2, 3, 4, 5])
def test_the_recurrence_is_unrolled_and_the_kernel_weights_each_input_by_its_distance(steps):
    diagram = state_space(steps)
    labels = texts(diagram)
    for symbol in ("x", "h", "y"):
        drawn = [s for s in labels if re.fullmatch(rf"\${symbol}_\{{\d\}}\$", s)]
        expected = [f"${symbol}_{{{t}}}$" for t in range(1, steps + 1)]
        # the recurrence has every x_t and y_t; the convolution panel repeats the inputs and the last output
        extra = expected if symbol == "x" else [f"$y_{{{steps}}}$"] if symbol == "y" else []
        assert sorted(drawn) == sorted(expected + extra), (symbol, drawn)
    assert "$h_0$" in labels and labels.count("$A$") == labels.count("$B$") == labels.count("$C$") == 1
    # y_steps = sum_j C A^(steps - j) B x_j: x_1 gets the highest power, x_steps gets CB
    kernel = [s for s in labels if re.fullmatch(r"\$CA?(\^\d)?B\$", s)]
    assert kernel == [f"${w}$" for w in (["CA^%dB" % p for p in range(steps - 1, 1, -1)] + ["CAB", "CB"])[-steps:]]
    assert any("h_t = A\\,h_{t-1} + B\\,x_t" in s for s in labels) and any("K = (CB, CAB, CA^2B" in s for s in labels)
    assert not lit_patches(diagram) and faded_labels(diagram) == 0
    assert f"over {steps} tokens" in diagram.alt and "K = (CB, CAB, CA^2B, ...)" in diagram.alt


def test_mambas_version_lights_a_new_a_b_c_at_every_step_and_fades_the_convolution():
    steps = 4
    diagram = state_space(steps, selective=True)
    labels = texts(diagram)
    for t in range(1, steps + 1):
        assert {f"$A_{{{t}}}$", f"$B_{{{t}}}$", f"$C_{{{t}}}$"} <= set(labels)
    assert "$A$" not in labels and any("\\Delta_t" in s for s in labels)
    assert len(lit_patches(diagram)) == 3 * steps                   # every arrow of the recurrence
    assert faded_labels(diagram) >= 2 * steps + 2                   # the convolution panel: inputs, kernel, output
    assert "no fixed kernel" in diagram.alt and "parallel scan" in diagram.alt and "red and bold" in diagram.alt


@pytest.mark.parametrize("call, message", [
    (lambda: state_space(1), "steps should be an int from 2 to 5, got 1"),
    (lambda: state_space(6), "steps should be an int from 2 to 5, got 6"),
    (lambda: state_space(3.0), "steps should be an int from 2 to 5, got 3.0"),
    (lambda: state_space(selective="yes"), "selective should be True (Mamba) or False (S4), got 'yes'"),
])
def test_bad_arguments_say_what_is_allowed(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()
