"""The attention diagrams of notebooks 8 and 9: their equations' symbols, the weights drawn, the steps, alt text."""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import same_color
from matplotlib.patches import FancyArrowPatch, Rectangle

from diagram_helpers import close_figures, faded_labels, label_text as texts, lit_patches  # noqa: F401
from seqlab.colours import WEIGHTS
from seqlab.diagrams import attention_decoder, self_attention

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def markdown(notebook: str) -> str:
    cells = json.loads((NOTEBOOKS / notebook).read_text())["cells"]
    return " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


@pytest.mark.parametrize("draw, symbols", [
    (attention_decoder, ["$h_{1}$", "$h_{4}$", "$s_{t-1}$", "$s_t$", "$y_{t-1}$", "$y_t$", "$e_{t1}$", "$a_{t4}$",
                         "e_{tj} = \\mathrm{score}(s_{t-1}, h_j)", "\\exp e_{tj}", "\\sum_k \\exp e_{tk}",
                         "c_t = \\sum_j a_{tj}", "\\mathrm{GRU}(s_{t-1}, [y_{t-1}; c_t])"]),
    (self_attention, ["$X$", "Q = XW_Q", "K = XW_K", "V = XW_V", "QK^\\top / \\sqrt{d_k}", "\\mathrm{softmax}",
                      "Z = AV", "(n, d_k)", "(n, d_v)", "(n, n)", "d_{model}"]),
])
def test_each_diagram_carries_the_symbols_of_its_equations_and_alt_text(draw, symbols):
    diagram = draw()
    figure, alt = diagram                                   # unpacks for show(*diagram)
    assert figure is diagram.figure and len(alt.split()) > 80
    assert all(symbol in texts(diagram) for symbol in symbols), [s for s in symbols if s not in texts(diagram)]
    assert same_color(figure.get_facecolor(), "white")      # opaque: legible on a dark theme
    assert not lit_patches(diagram)


@pytest.mark.parametrize("notebook, symbols", [
    ("08-attention.ipynb", ["e_{tj}", "\\mathrm{score}(s_t, h_j)", "a_{tj}", "\\exp e_{tk}", "c_t = \\sum_j a_{tj}",
                            "s_{t-1}", "y_{t-1}", "h_1, \\dots, h_S"]),
    ("09-self-attention.ipynb", ["Q = XW_Q", "K = XW_K", "V = XW_V", "\\frac{QK^\\top}{\\sqrt{d_k}}", "Z =",
                                 "d_{model}", "d_v"]),
])
def test_the_diagrams_symbols_are_the_ones_their_notebook_writes(notebook, symbols):
    text = markdown(notebook).replace(" ", "")               # spacing in LaTeX is the writer's choice
    missing = [symbol for symbol in symbols if symbol.replace(" ", "") not in text]
    assert not missing, missing


def test_the_decoders_arrows_are_as_wide_as_their_weights():
    weights = (0.05, 0.1, 0.15, 0.5, 0.2)
    diagram = attention_decoder(weights)
    fan = {p.get_gid(): p.get_linewidth() for p in diagram.figure.axes[0].patches if isinstance(p, FancyArrowPatch)}
    widths = [fan.pop(f"a_t{j}") for j in range(1, 6)]     # the arrow from h_j to the sum node
    assert set(fan) == {None}                                # and no other arrow stands for a weight
    assert sorted(range(5), key=widths.__getitem__) == sorted(range(5), key=weights.__getitem__)
    assert "$h_{5}$" in texts(diagram) and "$h_{6}$" not in texts(diagram)
    assert "0.05, 0.1, 0.15, 0.5, 0.2" in diagram.alt and "the thickest comes from h_4" in diagram.alt


def test_self_attention_is_built_up_in_four_steps_the_later_ones_faded():
    faded = [faded_labels(self_attention(step=s)) for s in (1, 2, 3, 4)]
    assert faded[0] > faded[1] > faded[2] > faded[3] == 0
    assert "step 1 of 4" in self_attention(step=1).alt and "faded" not in self_attention().alt


def test_the_weights_drawn_are_notebook_9s_i_like_pizza_example():
    X = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]                # W_Q = W_K = I: the scores are X X^T / sqrt(2)
    rows = [[math.exp(sum(a * b for a, b in zip(x, y)) / math.sqrt(2)) for y in X] for x in X]
    A = [[round(e / sum(row), 2) for e in row] for row in rows]
    cells = [p for p in self_attention().figure.axes[0].patches if isinstance(p, Rectangle)]
    cells.sort(key=lambda p: (-p.get_y(), p.get_x()))       # row by row from the top, as A is written
    assert len(cells) == 9
    assert all(same_color(cell.get_facecolor(), plt.get_cmap(WEIGHTS)(w))
               for cell, w in zip(cells, sum(A, [])))


@pytest.mark.parametrize("call, message", [
    (lambda: self_attention(step=5), "step should be 1, 2, 3 or 4, got 5"),
    (lambda: self_attention(step=0), "step should be 1, 2, 3 or 4, got 0"),
    (lambda: attention_decoder((0.5, 0.5)),
     "weights should be 3 to 6 numbers >= 0 that sum to 1 .* got \\(0.5, 0.5\\)"),
    (lambda: attention_decoder([1 / 7] * 7), "weights should be 3 to 6 numbers"),
    (lambda: attention_decoder((0.5, 0.6, -0.1)), "weights should be 3 to 6 numbers >= 0 .* got \\(0.5, 0.6, -0.1\\)"),
    (lambda: attention_decoder((0.2, 0.2, 0.2)), "that sum to 1 .* got \\(0.2, 0.2, 0.2\\)"),
])
def test_bad_arguments_say_what_is_allowed(call, message):
    with pytest.raises(ValueError, match=message):
        call()
