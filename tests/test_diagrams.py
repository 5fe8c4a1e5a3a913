"""The architecture diagrams: labelled with the equations' symbols, lit where asked, with alt text."""

from __future__ import annotations

import pytest
from matplotlib.colors import same_color

from diagram_helpers import close_figures, faded_labels, label_text as texts, lit_patches  # noqa: F401
from seqlab.diagrams import GRU_PARTS, LSTM_PARTS, Diagram, gru_cell, lstm_cell, multihead_attention, unrolled_rnn


def lit_artists(diagram: Diagram) -> int:
    return len(lit_patches(diagram))


@pytest.mark.parametrize("draw, symbols", [
    (lstm_cell, ["$f_t$", "$i_t$", "$o_t$", "$\\tilde c_t$", "$c_{t-1}$", "$c_t$", "$h_{t-1}$", "$h_t$", "$x_t$"]),
    (gru_cell, ["$r_t$", "$z_t$", "\\tilde h_t", "$h_{t-1}$", "$h_t$", "$x_t$", "$1-$"]),
    (unrolled_rnn, ["$h_0$", "$h_{1}$", "$x_{4}$", "$L_T$", "$W_h$", "$W_x$", "\\partial L_T / \\partial h_t"]),
])
def test_each_diagram_carries_the_symbols_of_its_equations_and_alt_text(draw, symbols):
    diagram = draw()
    figure, alt = diagram                                   # unpacks for show(*diagram)
    assert figure is diagram.figure and len(alt.split()) > 40
    assert all(symbol in texts(diagram) for symbol in symbols), [s for s in symbols if s not in texts(diagram)]
    assert same_color(figure.get_facecolor(), "white")      # opaque: legible on a dark theme
    if draw is not unrolled_rnn:                            # (its gradient path is drawn lit by default)
        assert lit_artists(diagram) == 0                    # nothing lit unless asked


@pytest.mark.parametrize("part", list(LSTM_PARTS))
def test_an_lstm_part_lights_up_and_the_alt_text_says_which(part):
    diagram = lstm_cell(highlight=part)
    assert lit_artists(diagram) >= 1 and f"The {part} part is outlined" in diagram.alt


@pytest.mark.parametrize("part", GRU_PARTS)
def test_a_gru_part_lights_up(part):
    assert lit_artists(gru_cell(highlight=part)) >= 1


def test_the_lstm_is_built_up_in_four_stages_the_later_parts_faded():
    faded = [faded_labels(lstm_cell(stage=s)) for s in (1, 2, 3, 4)]
    assert faded[0] > faded[1] > faded[2] > faded[3] == 0
    assert "stage 1 of 4" in lstm_cell(stage=1).alt and "stage" not in lstm_cell().alt


def test_the_gradient_path_is_optional():
    assert lit_artists(unrolled_rnn(3, gradient=False)) == 0 < lit_artists(unrolled_rnn(3))
    assert "red arrow" in unrolled_rnn(3).alt and "red arrow" not in unrolled_rnn(3, gradient=False).alt


@pytest.mark.parametrize("call, message", [
    (lambda: lstm_cell(stage=5), "stage should be 1, 2, 3 or 4, got 5"),
    (lambda: lstm_cell(highlight="peephole"), "highlight should be one of .* got 'peephole'"),
    (lambda: gru_cell(highlight="forget"), "highlight should be one of .* got 'forget'"),
    (lambda: unrolled_rnn(1), "steps should be between 2 and 8, got 1"),
])
def test_bad_arguments_say_what_is_allowed(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_multihead_attention_shows_each_step_and_every_head():
    diagram = multihead_attention(3)
    labels = texts(diagram)
    for symbol in ("W_Q", "head 1", "head 3", "concatenate", "W_O", "d_{model}"):
        assert symbol in labels, symbol
    assert "3 heads" in diagram.alt and lit_artists(diagram) == 0
    with pytest.raises(ValueError, match="heads should be between 2 and 4, got 5"):
        multihead_attention(5)


def test_masked_lm_shows_what_each_objective_lets_a_position_read():
    from seqlab.diagrams import masked_lm
    diagram = masked_lm(6, 3)
    words = texts(diagram)
    assert "GPT: predict the next token" in words and "BERT: fill in the blank" in words
    assert "[M]" in words and "$x_{4}$" in words and "reads both sides" in words
    assert faded_labels(diagram) == 3, "GPT's position 3 cannot read x_4, x_5, x_6"
    assert "[MASK]" in diagram.alt and len(diagram.alt.split()) > 40
    assert same_color(diagram.figure.get_facecolor(), "white")
    with pytest.raises(ValueError, match="masked should be an int from 2 to 5"):
        masked_lm(6, 6)
    with pytest.raises(ValueError, match="length should be an int from 4 to 8, got 9"):
        masked_lm(9, 3)


def test_the_course_map_lists_every_notebook_in_teaching_order():
    from seqlab import manifest
    from seqlab.diagrams import COURSE_PARTS, course_map
    numbers = [n for _, notebooks in COURSE_PARTS for n, _ in notebooks]
    assert numbers == [nb.name for nb in manifest.NOTEBOOKS if nb.number > 0], "every notebook but 00 (it draws it)"
    diagram = course_map()
    assert all(f"{n}\n" in texts(diagram) for n in numbers) and "16 BERT" in diagram.alt
    assert "five rows" in diagram.alt and all(f"{part}: " in diagram.alt for part, _ in COURSE_PARTS)
    assert same_color(diagram.figure.get_facecolor(), "white")


def test_the_course_map_draws_a_sixth_part_with_a_fill_and_says_six_rows(monkeypatch):
    from matplotlib.patches import FancyBboxPatch

    from seqlab import diagrams
    parts = diagrams.COURSE_PARTS + (("state spaces", (("18", "S4"), ("19", "Mamba"), ("20", "a"), ("21", "b"),
                                                        ("22", "c"))),)
    monkeypatch.setattr(diagrams, "COURSE_PARTS", parts)
    diagram = diagrams.course_map()
    assert "six rows" in diagram.alt and "state spaces: 18 S4, 19 Mamba" in diagram.alt
    boxes = {t.get_text(): t for t in diagram.figure.axes[0].texts}
    assert "18\nS4" in boxes and "22\nc" in boxes and "state spaces" in boxes
    fills = [p.get_facecolor() for p in diagram.figure.axes[0].patches if isinstance(p, FancyBboxPatch)]
    assert len(fills) == sum(len(notebooks) for _, notebooks in parts)
    assert not same_color(fills[-1], "white") and not same_color(fills[-1], fills[-6]), "a fill, not row 5's"
    right = max(p.get_x() + p.get_width() for p in diagram.figure.axes[0].patches if isinstance(p, FancyBboxPatch))
    assert right <= diagram.figure.axes[0].get_xlim()[1], "a five-notebook row stays on the canvas"


def test_bert_pretraining_shows_both_objectives_on_one_packed_pair():
    from diagram_helpers import assert_legible, labels

    from seqlab.diagrams import bert_pretraining

    diagram = bert_pretraining()
    assert_legible(diagram)
    drawn = labels(diagram)
    # the packed input, left to right, and its token types: 0 up to the first [SEP], 1 after it
    tokens = [t for t in drawn if t in ("[CLS]", "$a_1$", "[M]", "[SEP]", "$b_1$", "$b_2$")]
    assert tokens == ["[CLS]", "$a_1$", "[M]", "[SEP]", "$b_1$", "$b_2$", "[SEP]"]
    assert [t for t in drawn if t in ("0", "1")] == ["0"] * 4 + ["1"] * 3
    # the two heads, lit: NSP above [CLS] (its final vector C), the MLM above [MASK]
    ax = diagram.figure.axes[0]
    x_of = {t.get_text(): t.get_position()[0] for t in ax.texts}
    assert x_of["$C$"] == x_of["[CLS]"] and x_of["$z_3$"] == x_of["[M]"]
    assert {"IsNext / NotNext", "predict $a_2$"} <= set(drawn) and len(lit_patches(diagram)) >= 7
    assert "IsNext or NotNext" in diagram.alt and "token type" in diagram.alt and "[MASK]" in diagram.alt


# -- every operation of a cell diagram feeds the output through arrows a reader can see ---------------------
def _flow_graph(diagram: Diagram, tol: float = 0.035):
    """The diagram read back as a graph: nodes are its operations (circles) and boxes, and its line segments;
    a segment leads to the next one where that one starts on it or it ends on that one, and to a node its end
    touches; a node leads to every segment that starts on its edge. Also returns the segments whose arrow head
    leaves less than 6 points of arrow visible (swallowed between two symbols)."""
    import numpy as np
    from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

    ax = diagram.figure.axes[0]
    points_per_unit = ax.transData.transform((1, 0))[0] - ax.transData.transform((0, 0))[0]
    points_per_unit *= 72 / diagram.figure.dpi
    ops = [p for p in ax.patches if isinstance(p, Circle)]
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch) and p.get_zorder() > 0]
    segments = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    ends = [tuple(map(np.asarray, s._posA_posB)) for s in segments]

    def touches(point, node) -> bool:
        if isinstance(node, Circle):
            return abs(np.hypot(*(point - np.asarray(node.center))) - node.radius) < tol
        x0, y0, w, h = node.get_x(), node.get_y(), node.get_width(), node.get_height()
        pad = 0.08
        return x0 - pad <= point[0] <= x0 + w + pad and y0 - pad <= point[1] <= y0 + h + pad

    def on(point, segment) -> bool:
        a, b = segment
        ab, ap = b - a, point - a
        t = np.clip(ap @ ab / (ab @ ab), 0, 1)
        return np.hypot(*(a + t * ab - point)) < tol

    nodes = ops + boxes
    edges = {k: set() for k in range(len(segments) + len(nodes))}      # segment k, then node len(segments) + j
    for k, (start, end) in enumerate(ends):
        for m, other in enumerate(ends):
            if m != k and (on(other[0], (start, end)) or on(end, other)):
                edges[k].add(m)
        for j, node in enumerate(nodes):
            if touches(end, node):
                edges[k].add(len(segments) + j)
            if touches(start, node):
                edges[len(segments) + j].add(k)
    swallowed = [(tuple(a), tuple(b)) for s, (a, b) in zip(segments, ends) if s.get_arrowstyle().__class__.__name__ != "Curve"
                 and np.hypot(*(b - a)) * points_per_unit - 9 < 6]
    return segments, ends, nodes, edges, swallowed


def _reaches(edges: dict, start: int, goals: set) -> bool:
    seen, todo = {start}, [start]
    while todo:
        k = todo.pop()
        if k in goals:
            return True
        for m in edges[k] - seen:
            seen.add(m)
            todo.append(m)
    return False


@pytest.mark.parametrize("draw", [lstm_cell, gru_cell])
def test_every_operation_of_a_cell_diagram_has_an_arrow_in_and_a_visible_path_to_h_t(draw):
    import numpy as np

    diagram = draw()
    segments, ends, nodes, edges, swallowed = _flow_graph(diagram)
    assert not swallowed, f"arrows too short to see between two symbols: {swallowed}"
    ax = diagram.figure.axes[0]
    outputs = [np.asarray(t.get_position()) for t in ax.texts if t.get_text() == "$h_t$"]
    goals = {k for k, (_, end) in enumerate(ends) if any(np.hypot(*(end - out)) < 0.15 for out in outputs)}
    assert goals, "no arrow ends at the h_t label"
    n = len(segments)
    for j, node in enumerate(nodes):
        fed = any(n + j in edges[k] for k in range(n))
        label = [t.get_text() for t in ax.texts if node.contains_point(ax.transData.transform(t.get_position()))]
        assert fed, f"nothing flows into {label or node}"
        assert _reaches(edges, n + j, goals), f"{label or node} does not reach h_t"


def test_the_old_gru_drawing_would_fail_the_flow_check():
    """The check catches the slip it was written for: the (1 - z_t) * n_t product's arrow into "+" hidden
    between the two circles (drawn 0.24 units long, less than an arrow head)."""
    from matplotlib.patches import FancyArrowPatch

    diagram = gru_cell()
    ax = diagram.figure.axes[0]
    ax.add_patch(FancyArrowPatch((9.3, 4.48), (9.3, 4.72), arrowstyle="-|>", mutation_scale=12, shrinkA=0, shrinkB=9))
    assert _flow_graph(diagram)[-1], "a 0.24-unit arrow between two operations should count as swallowed"
