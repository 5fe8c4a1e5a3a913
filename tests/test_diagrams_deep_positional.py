"""The stacked and bidirectional RNN diagrams (notebook 6) and where positions enter attention (notebook 11):
their symbols, layout (labels inside the figure, apart, no arrows crossing), the notebooks they describe, alt text."""

from __future__ import annotations

import json
import re
from itertools import combinations
from pathlib import Path

import pytest
from matplotlib.patches import FancyArrowPatch

from diagram_helpers import assert_legible, close_figures, labels as texts, lit_patches as lit_artists  # noqa: F401
from seqlab.diagrams import Diagram, bidirectional_rnn, positional_encodings, stacked_rnn
from seqlab.nn.positional import POSITIONAL_ENCODINGS

NOTEBOOK_11 = Path(__file__).resolve().parent.parent / "notebooks" / "11-positional-encodings.ipynb"


def position_of(diagram: Diagram, text: str) -> tuple[float, float]:
    """Where the one label ``text`` stands, in data units."""
    found = [t.get_position() for t in diagram.figure.axes[0].texts if t.get_text() == text]
    assert len(found) == 1, (text, found)
    return found[0]


def crossing(a, b) -> bool:
    """Whether segments a and b cross at a point inside both (touching at an end does not count)."""
    (p, q), (r, s) = a, b

    def side(o, x, y):
        return (x[0] - o[0]) * (y[1] - o[1]) - (x[1] - o[1]) * (y[0] - o[0])

    return side(p, q, r) * side(p, q, s) < 0 and side(r, s, p) * side(r, s, q) < 0


DIAGRAMS = {"stacked_rnn": stacked_rnn, "stacked_rnn(1, 2)": lambda: stacked_rnn(1, 2),
            "stacked_rnn(4, 6)": lambda: stacked_rnn(layers=4, steps=6),
            "bidirectional_rnn": bidirectional_rnn, "bidirectional_rnn(2)": lambda: bidirectional_rnn(2),
            "bidirectional_rnn(6)": lambda: bidirectional_rnn(6), "positional_encodings": positional_encodings}


@pytest.mark.parametrize("name", DIAGRAMS)
def test_each_diagram_is_opaque_described_and_its_labels_neither_overlap_nor_leave_the_figure(name):
    diagram = DIAGRAMS[name]()
    assert_legible(diagram)
    ax = diagram.figure.axes[0]
    # no two arrows cross (each FancyArrowPatch is one straight segment)
    segments = [p._posA_posB for p in ax.patches if isinstance(p, FancyArrowPatch)]
    assert segments and not [(a, b) for a, b in combinations(segments, 2) if crossing(a, b)]


@pytest.mark.parametrize("layers, steps", [(1, 2), (2, 4), (3, 5), (4, 6)])
def test_a_stack_has_a_state_per_layer_and_step_in_notebook_6s_symbols(layers, steps):
    diagram = stacked_rnn(layers, steps)
    labels = texts(diagram)
    assert [s for s in labels if re.fullmatch(r"\$x_\{\d\}\$", s)] == [f"$x_{{{t}}}$" for t in range(1, steps + 1)]
    for l in range(1, layers + 1):
        states = [s for s in labels if re.fullmatch(rf"\$h\^\{{\({l}\)\}}_\{{\d\}}\$", s)]
        assert states == [f"$h^{{({l})}}_{{{t}}}$" for t in range(1, steps + 1)]
        assert f"$h^{{({l})}}_0$" in labels and f"layer {l}" in labels
        assert labels.count(f"$W^{{({l})}}_x$") == labels.count(f"$W^{{({l})}}_h$") == 1   # named once per layer
        # layer l's row sits above layer l - 1's
        below = f"$h^{{({l - 1})}}_{{1}}$" if l > 1 else "$x_{1}$"
        assert position_of(diagram, f"$h^{{({l})}}_{{1}}$")[1] > position_of(diagram, below)[1]
    assert "$h_n$" in labels and any(f"h^{{({layers})}}_{{{steps}}}" in s for s in labels if s.startswith("output"))
    assert f"{steps} time steps" in diagram.alt and "same time step" in diagram.alt and not lit_artists(diagram)


@pytest.mark.parametrize("steps", [2, 4, 6])
def test_a_bidirectional_layer_runs_both_ways_over_the_same_inputs(steps):
    diagram = bidirectional_rnn(steps)
    labels = texts(diagram)
    fw, bw = "\\overrightarrow{h}", "\\overleftarrow{h}"
    for t in range(1, steps + 1):
        x_t, y_t = position_of(diagram, f"$x_{{{t}}}$"), position_of(diagram, f"$y_{{{t}}}$")
        forward, backward = position_of(diagram, f"${fw}_{{{t}}}$"), position_of(diagram, f"${bw}_{{{t}}}$")
        assert backward[1] < x_t[1] == y_t[1] < forward[1]            # x_t and y_t between the two directions
        assert x_t[0] < forward[0] == backward[0] < y_t[0]            # position t's four parts in one column
    # each direction starts at its own end and finishes at the other, where h_n takes its final state
    assert position_of(diagram, f"${fw}_0$")[0] < position_of(diagram, f"${fw}_{{1}}$")[0]
    assert position_of(diagram, f"${bw}_{{{steps + 1}}}$")[0] > position_of(diagram, f"${bw}_{{{steps}}}$")[0]
    assert position_of(diagram, "final state: $h_n[0]$")[0] == position_of(diagram, f"${fw}_{{{steps}}}$")[0]
    assert position_of(diagram, "final state: $h_n[1]$")[0] == position_of(diagram, f"${bw}_{{1}}$")[0]
    assert any(f"$y_t = [{fw}_t" in s for s in labels)
    assert f"{steps} positions" in diagram.alt and "y_t = [forward h_t ; backward h_t]" in diagram.alt
    assert not lit_artists(diagram)


def test_the_positional_panels_name_every_encoding_of_notebook_11_and_light_where_it_enters():
    diagram = positional_encodings()
    labels = texts(diagram)
    # one panel per hook, titled with the registry's encodings that use it (an added one joins its hook's title)
    firsts = ("sinusoidal, learned", "RoPE", "ALiBi", "NoPE (none)")
    titles = [s for s in labels if s.startswith(firsts)]
    assert [next(first for first in firsts if t.startswith(first)) for t in titles] == list(firsts)   # left to right
    assert all(any(name in title.lower() for title in titles) for name in POSITIONAL_ENCODINGS)
    for symbol in ("$PE_{pos}$\nor $P_{pos}$", "$\\tilde q_i = R_i\\, q_i$\n$\\tilde k_j = R_j\\, k_j$",
                   "$-s\\,|i - j|$", "$\\tilde q_i \\cdot \\tilde k_j / \\sqrt{d_k}$"):
        assert symbol in labels, symbol
    assert labels.count("$x_i$, $x_j$") == labels.count("softmax over $j$") == 4       # the same path in each panel
    # the position enters higher up the path from panel to panel: embeddings, then q and k, then the scores
    lit = lit_artists(diagram)
    panel_width = diagram.figure.axes[0].get_xlim()[1] / 4
    heights = {}
    for patch in lit:
        box = patch.get_extents().transformed(diagram.figure.axes[0].transData.inverted())
        heights.setdefault(int(box.x0 // panel_width), []).append((box.y0 + box.y1) / 2)
    assert sorted(heights) == [0, 1, 2]                                                  # NoPE: nothing lit
    assert max(heights[0]) < min(heights[1]) and max(heights[1]) < min(heights[2])
    assert "red and bold" in diagram.alt and "nothing enters" in diagram.alt


def test_each_section_tag_names_the_section_of_notebook_11_about_that_encoding():
    """The tags follow notebook 11's headings: renumber a section and this fails."""
    cells = json.loads(NOTEBOOK_11.read_text())["cells"]
    headings = {int(m.group(1)): m.group(2) for c in cells if c["cell_type"] == "markdown"
                for m in [re.match(r"## (\d+)\. (.*)", "".join(c["source"]))] if m}
    about = {2: "sinusoidal", 5: "learned", 6: "RoPE", 7: "ALiBi", 8: "NoPE"}
    tags = {int(n) for s in texts(positional_encodings()) for n in re.findall(r"§(\d+)", s)}
    assert tags == set(about)
    for number, word in about.items():
        assert word.lower() in headings[number].lower(), (number, headings.get(number))


@pytest.mark.parametrize("call, message", [
    (lambda: stacked_rnn(layers=0), "layers should be an int from 1 to 4, got 0"),
    (lambda: stacked_rnn(layers=5), "layers should be an int from 1 to 4, got 5"),
    (lambda: stacked_rnn(layers=2.0), "layers should be an int from 1 to 4, got 2.0"),
    (lambda: stacked_rnn(layers=True), "layers should be an int from 1 to 4, got True"),
    (lambda: stacked_rnn(steps=1), "steps should be an int from 2 to 6, got 1"),
    (lambda: stacked_rnn(steps=7), "steps should be an int from 2 to 6, got 7"),
    (lambda: bidirectional_rnn(1), "steps should be an int from 2 to 6, got 1"),
    (lambda: bidirectional_rnn("4"), "steps should be an int from 2 to 6, got '4'"),
])
def test_bad_arguments_say_what_is_allowed(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()
