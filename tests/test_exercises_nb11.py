"""Notebook 11's exercises: typical wrong answers get the hint that names what is wrong."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.exercises import EXERCISES, check
from seqlab.exercises.nb11_positional import _table_variant, measure_alibi_self_weight
from seqlab.nn.positional import ALiBi, rotate_pairs, sinusoidal_table

from exercise_helpers import failure_message


def test_references_pass_and_agree_with_seqlab():
    for name in ("sinusoidal_table", "rotate_pair", "predict_alibi_self_weight"):
        assert check(name, EXERCISES[name].reference)
    for length, d in [(4, 4), (50, 32)]:
        assert torch.allclose(EXERCISES["sinusoidal_table"].reference(length, d),
                              sinusoidal_table(length, d, dtype=torch.float64))
    x = torch.tensor([0.3, -1.2], dtype=torch.float64)
    assert torch.allclose(EXERCISES["rotate_pair"].reference(x, 5, 0.2),
                          rotate_pairs(x[None], torch.tensor([5]), torch.tensor([0.2]))[0])


@pytest.mark.parametrize("wrong, hint", [
    (lambda L, d: _table_variant(L, d, swap=True), "sine and cosine are swapped"),
    (lambda L, d: _table_variant(L, d, halves=True), "all the sines first"),
    (lambda L, d: _table_variant(L, d, exponent=lambda j: j), "share ONE frequency"),
    (lambda L, d: _table_variant(L, d, exponent=lambda j: 2 * j), "not 2j"),
    (lambda L, d: _table_variant(L, d, start=1), "positions start at 0"),
    (lambda L, d: _table_variant(L, d)[:, : d // 2], "should have shape (4, 4), got (4, 2)"),
    (lambda L, d: _table_variant(L, d).tolist(), "return a torch.Tensor"),
    (lambda L, d: _table_variant(L, d) * 1.5, "the first difference is at index (0, 1): 1.5 instead of 1"),
])
def test_sinusoidal_table_hints(wrong, hint):
    assert hint in failure_message("sinusoidal_table", wrong)


def _rotation(sign=1, use_pos=True, swap=False, degrees=False, scale=1.0):
    def f(x, pos, theta):
        a = sign * (pos if use_pos else 1) * (math.degrees(theta) if degrees else theta)
        out = torch.stack((x[0] * math.cos(a) - x[1] * math.sin(a), x[0] * math.sin(a) + x[1] * math.cos(a))) * scale
        return out[[1, 0]] if swap else out
    return f


@pytest.mark.parametrize("wrong, hint", [
    (_rotation(sign=-1), "clockwise"),
    (_rotation(use_pos=False), "the angle is pos · theta"),
    (_rotation(swap=True), "components are swapped"),
    (_rotation(degrees=True), "radians"),
    (_rotation(scale=2.0), "a rotation keeps the length"),
])
def test_rotate_pair_hints(wrong, hint):
    assert hint in failure_message("rotate_pair", wrong)


def test_the_prediction_is_judged_against_the_measurement():
    measured = measure_alibi_self_weight()
    # the measurement is what ALiBi's slopes say: weights ~ e^(-d/2) over d = 0..7
    assert measured == pytest.approx(1 / sum(math.exp(-d / 2) for d in range(8)), abs=1e-12)
    assert ALiBi(8).slopes[0].item() == 0.5
    assert check("predict_alibi_self_weight", lambda: measured + 0.04)
    assert check("predict_alibi_self_weight", lambda: 0.4)
    assert "without ALiBi" in failure_message("predict_alibi_self_weight", lambda: 1 / 8)
    assert "gentle" in failure_message("predict_alibi_self_weight", lambda: 0.9)
    assert "most local head" in failure_message("predict_alibi_self_weight", lambda: 0.25)
    assert "between 0 and 1" in failure_message("predict_alibi_self_weight", lambda: 1.5)
    assert "as a number" in failure_message("predict_alibi_self_weight", lambda: "0.4")
    assert "as a number" in failure_message("predict_alibi_self_weight", lambda: True)
