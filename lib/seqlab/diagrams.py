"""Schematic pictures of the course's architectures, drawn from source with matplotlib.

Each function returns a :class:`Diagram`, a figure and its alt text, to pass to ``seqlab.notebook.show``::

    show(*lstm_cell())                      # the whole LSTM cell
    show(*lstm_cell(stage=1))               # built up part by part, as the notebook's equations are
    show(*lstm_cell(highlight="forget"))    # one part lit, the rest greyed

Matplotlib, not SVG or graphviz, so a diagram is a PNG like every other figure: it renders offline, on
GitHub, in JupyterLab's light and dark themes (opaque white background), in slides and in the HTML edition,
with nothing more to install. The labels are the symbols of the notebooks' equations; parts differ by
label and shape as well as colour, so no meaning rests on hue alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

from seqlab.colours import HIGHLIGHT, WEIGHTS

__all__ = ["Diagram", "LSTM_PARTS", "GRU_PARTS", "gru_cell", "lstm_cell", "multihead_attention",
           "unrolled_rnn"]

INK, FADED = "#222222", "#c8c8c8"
GATE_FILL, CANDIDATE_FILL, STATE_FILL, INPUT_FILL = "#fde0c5", "#dbe9f6", "#e8e8e8", "#d9f0d3"


@dataclass(frozen=True)
class Diagram:
    """A drawn figure and the alt text that says what it shows; unpacks as ``(figure, alt)``."""

    figure: Figure
    alt: str

    def __iter__(self):
        return iter((self.figure, self.alt))


class _Canvas:
    """Boxes, operator circles and arrows on one axes; a part is drawn lit, plain or faded."""

    def __init__(self, width: float, height: float, size: tuple[float, float]):
        self.fig, self.ax = plt.subplots(figsize=size)
        self.fig.patch.set_facecolor("white")
        self.ax.set(xlim=(0, width), ylim=(0, height), aspect="equal")
        self.ax.axis("off")

    def cell_frame(self):
        """The grey rounded box that marks one recurrent cell (LSTM, GRU)."""
        self.ax.add_patch(FancyBboxPatch((1.3, 0.9), 9.2, 4.9, boxstyle="round,pad=0.1", facecolor="#fafafa",
                                         edgecolor="#9a9a9a", lw=1.0, zorder=0))

    @staticmethod
    def _ink(lit: bool | None) -> tuple[str, float]:
        return (HIGHLIGHT, 2.6) if lit else (FADED, 1.0) if lit is False else (INK, 1.3)

    def box(self, x, y, text, fill, *, lit=None, w=1.3, h=0.7, fontsize=12):
        colour, lw = self._ink(lit)
        self.ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.04",
                                         facecolor=fill if lit is not False else "white", edgecolor=colour, lw=lw))
        self.ax.text(x, y, text, ha="center", va="center", fontsize=fontsize,
                     color=INK if lit is not False else FADED, fontweight="bold" if lit else "normal")

    def op(self, x, y, symbol, *, lit=None, r=0.28):
        colour, lw = self._ink(lit)
        self.ax.add_patch(Circle((x, y), r, facecolor="white", edgecolor=colour, lw=lw, zorder=3))
        self.ax.text(x, y, symbol, ha="center", va="center", fontsize=13, color=colour, zorder=4)

    def line(self, points, *, lit=None, arrow=True):
        colour, lw = self._ink(lit)
        for (x0, y0), (x1, y1) in zip(points[:-1], points[1:]):
            last = (x1, y1) == points[-1]
            self.ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>" if arrow and last else "-",
                                              mutation_scale=12, color=colour, lw=lw, shrinkA=0,
                                              shrinkB=9 if arrow and last else 0, zorder=2))

    def label(self, x, y, text, *, lit=None, fontsize=12, **kw):
        self.ax.text(x, y, text, fontsize=fontsize, color=INK if lit is not False else FADED,
                     fontweight="bold" if lit else "normal", **kw)


def _state(parts: str | tuple[str, ...], highlight: str | None, shown: bool) -> bool | None:
    """How to draw what belongs to ``parts``: None plain, True lit (one of them is the highlighted part),
    False faded (another part is lit, or it comes at a later stage of the build-up)."""
    if not shown:
        return False
    if highlight is None:
        return None
    return highlight in ((parts,) if isinstance(parts, str) else parts)


# The LSTM's parts in the order notebook 4 builds them, each with the stage at which it appears.
LSTM_PARTS = {"forget": 1, "input": 1, "output": 1, "candidate": 2, "cell": 3, "hidden": 4}
_LSTM_STAGES = {1: "the three gates f_t, i_t and o_t, each a sigmoid of [h_{t-1}; x_t]",
                2: "the candidate c~_t, a tanh of the same vector",
                3: "the cell update c_t = f_t * c_{t-1} + i_t * c~_t along the top line",
                4: "the output h_t = o_t * tanh(c_t)"}


def lstm_cell(*, stage: int = 4, highlight: str | None = None) -> Diagram:
    """One LSTM step: ``stage`` 1-4 draws the parts of notebook 4's sections up to that stage (the rest faded);
    ``highlight`` (one of :data:`LSTM_PARTS`) lights one part and fades the others."""
    if stage not in _LSTM_STAGES:
        raise ValueError(f"stage should be 1, 2, 3 or 4, got {stage!r}")
    if highlight is not None and highlight not in LSTM_PARTS:
        raise ValueError(f"highlight should be one of {sorted(LSTM_PARTS)} or None, got {highlight!r}")
    s = {part: _state(part, highlight, LSTM_PARTS[part] <= stage) for part in LSTM_PARTS}

    def joint(*parts: str, shown_from: int) -> bool | None:      # shared by several parts, e.g. the x that f_t acts on
        return _state(parts, highlight, stage >= shown_from)

    c = _Canvas(12.0, 6.6, (9.0, 4.95))
    c.cell_frame()
    gates = {"forget": (3.0, "$\\sigma$", "$f_t$"), "input": (4.6, "$\\sigma$", "$i_t$"),
             "candidate": (6.2, "tanh", "$\\tilde c_t$"), "output": (7.8, "$\\sigma$", "$o_t$")}
    # the shared input z_t = [h_{t-1}; x_t]: h_{t-1} from the left along the bottom, x_t from below
    inputs = joint(*gates, shown_from=1)
    c.label(0.1, 1.35, "$h_{t-1}$", lit=inputs, va="center")
    c.line([(0.75, 1.35), (2.2, 1.35), (7.8, 1.35)], lit=inputs, arrow=False)
    c.label(2.1, 0.1, "$x_t$", lit=inputs)
    c.line([(2.2, 0.45), (2.2, 1.35)], lit=inputs, arrow=False)
    c.label(2.35, 0.95, "$z_t = [h_{t-1}; x_t]$", lit=inputs, fontsize=9)
    for part, (x, f, name) in gates.items():
        c.line([(x, 1.35), (x, 2.05)], lit=s[part])
        c.box(x, 2.4, f, CANDIDATE_FILL if part == "candidate" else GATE_FILL, lit=s[part], w=1.15)
        c.label(x - 0.5, 2.95, name, lit=s[part], fontsize=11, ha="right")
    # the cell state's line along the top: c_{t-1} -> (x f_t) -> (+ i_t * c~_t) -> c_t
    cell, keep, write = s["cell"], joint("forget", "cell", shown_from=3), joint("input", "candidate", "cell", shown_from=3)
    c.label(0.1, 5.0, "$c_{t-1}$", lit=keep, va="center")
    c.line([(0.75, 5.0), (2.72, 5.0)], lit=keep)
    c.op(3.0, 5.0, "×", lit=keep)
    c.line([(3.0, 2.75), (3.0, 4.72)], lit=joint("forget", "cell", shown_from=1))
    c.line([(3.28, 5.0), (5.12, 5.0)], lit=cell)
    c.op(5.4, 5.0, "+", lit=write)
    c.op(5.4, 3.65, "×", lit=write)
    c.line([(4.6, 2.75), (4.6, 3.65), (5.12, 3.65)], lit=joint("input", "cell", shown_from=3))
    c.line([(6.2, 2.75), (6.2, 3.65), (5.68, 3.65)], lit=joint("candidate", "cell", shown_from=3))
    c.line([(5.4, 3.93), (5.4, 4.72)], lit=write)
    c.line([(5.68, 5.0), (11.3, 5.0)], lit=cell)
    c.label(11.35, 5.0, "$c_t$", lit=cell, va="center")
    # the output: h_t = o_t * tanh(c_t)
    hidden, show = s["hidden"], joint("output", "hidden", shown_from=4)
    c.line([(9.3, 5.0), (9.3, 4.32)], lit=hidden)
    c.box(9.3, 4.0, "tanh", CANDIDATE_FILL, lit=hidden, w=0.95, h=0.55, fontsize=11)
    c.line([(9.3, 3.72), (9.3, 2.68)], lit=hidden)
    c.op(9.3, 2.4, "×", lit=show)
    c.line([(8.375, 2.4), (9.02, 2.4)], lit=joint("output", "hidden", shown_from=1))
    c.line([(9.3, 2.12), (9.3, 1.35), (11.3, 1.35)], lit=hidden)
    c.label(11.35, 1.35, "$h_t$", lit=hidden, va="center")
    c.line([(10.7, 1.35), (10.7, 6.3)], lit=hidden)
    c.label(10.55, 6.2, "$h_t$ to the next layer", lit=hidden, fontsize=10, ha="right", va="center")
    alt = ("Diagram of one LSTM step. Along the bottom the previous hidden state h_{t-1} and the input x_t form one "
           "vector, which feeds four boxes side by side: sigmoid gates f_t (forget), i_t (input), o_t (output) and "
           "the tanh candidate c~_t. Along the top the cell state runs from c_{t-1} on the left to c_t on the right, "
           "touched only by a multiplication by f_t and an addition of i_t times c~_t: no weight matrix on that line. "
           "On the right, tanh(c_t) times o_t gives h_t, which leaves to the right and upwards.")
    if stage < 4:
        alt += f" Drawn up to stage {stage} of 4: {_LSTM_STAGES[stage]}; the later parts are faded."
    if highlight:
        alt += f" The {highlight} part is outlined in red and bold; the rest is faded."
    return Diagram(c.fig, alt)


GRU_PARTS = ("reset", "update", "candidate", "hidden")


def gru_cell(*, highlight: str | None = None) -> Diagram:
    """One GRU step in torch's convention, h_t = (1 - z_t) * n_t + z_t * h_{t-1}; ``highlight`` (one of
    :data:`GRU_PARTS`) lights one part and fades the others."""
    if highlight is not None and highlight not in GRU_PARTS:
        raise ValueError(f"highlight should be one of {list(GRU_PARTS)} or None, got {highlight!r}")
    s = {part: _state(part, highlight, True) for part in GRU_PARTS}
    c = _Canvas(12.0, 6.6, (9.0, 4.95))
    c.cell_frame()
    # h_{t-1} runs along the top (kept by z_t) and down into the gates; x_t from below
    hid, cand = s["hidden"], s["candidate"]
    c.label(0.1, 5.0, "$h_{t-1}$", va="center")
    c.line([(0.75, 5.0), (5.72, 5.0)], lit=hid)
    c.line([(2.2, 5.0), (2.2, 1.35), (7.6, 1.35)], arrow=False)
    c.label(1.7, 0.1, "$x_t$")
    c.line([(1.8, 0.45), (1.8, 1.35), (2.2, 1.35)], arrow=False)
    for part, x, name in (("reset", 3.2, "$r_t$"), ("update", 4.6, "$z_t$")):
        c.line([(x, 1.35), (x, 2.05)], lit=s[part])
        c.box(x, 2.4, "$\\sigma$", GATE_FILL, lit=s[part], w=1.0)
        c.label(x - 0.45, 2.95, name, lit=s[part], fontsize=11, ha="right")
    # candidate n_t = tanh(W_in x_t + r_t * (W_hn h_{t-1})): r_t scales the recurrent part only
    c.op(6.2, 3.3, "×", lit=cand)
    c.line([(3.2, 2.75), (3.2, 3.3), (5.92, 3.3)], lit=cand if cand is not None else s["reset"])
    c.line([(6.2, 1.35), (6.2, 3.02)], lit=cand)
    c.label(6.3, 2.05, "$W_{hn} h_{t-1}$", fontsize=9, lit=cand)
    c.line([(6.48, 3.3), (7.12, 3.3)], lit=cand)
    c.line([(7.6, 1.35), (7.6, 2.98)], lit=cand)
    c.label(7.7, 2.05, "$W_{in} x_t$", fontsize=9, lit=cand)
    c.box(7.6, 3.3, "tanh", CANDIDATE_FILL, lit=cand, w=0.95, h=0.6, fontsize=11)
    c.label(8.2, 2.85, "$n_t = \\tilde h_t$", lit=cand, fontsize=11)
    c.line([(8.075, 3.3), (9.3, 3.3), (9.3, 3.92)], lit=cand if cand is not None else hid)
    # h_t = z_t * h_{t-1} + (1 - z_t) * n_t: what is kept and what is written add up to one
    upd = hid if hid is not None else s["update"]
    c.op(6.0, 5.0, "×", lit=hid)
    c.line([(4.6, 2.75), (4.6, 4.3), (6.0, 4.3), (6.0, 4.72)], lit=upd)
    c.line([(6.0, 4.3), (7.35, 4.3)], lit=upd, arrow=False)
    c.box(7.75, 4.3, "$1-$", GATE_FILL, lit=upd, w=0.75, h=0.45, fontsize=10)
    c.line([(8.125, 4.3), (9.02, 4.3)], lit=upd)
    c.op(9.3, 4.2, "×", lit=hid)
    c.line([(6.28, 5.0), (9.02, 5.0)], lit=hid)
    c.op(9.3, 5.0, "+", lit=hid)
    c.line([(9.3, 4.48), (9.3, 4.72)], lit=hid)
    c.line([(9.58, 5.0), (11.3, 5.0)], lit=hid)
    c.label(11.35, 5.0, "$h_t$", va="center", lit=hid)
    alt = ("Diagram of one GRU step, in torch's convention. The previous state h_{t-1} runs along the top from left "
           "to right and, with the input x_t, feeds two sigmoid gates along the bottom: the reset gate r_t and the "
           "update gate z_t. r_t multiplies the recurrent part W_hn h_{t-1} before the tanh that makes the candidate "
           "n_t. On the top line the new state is a mix: z_t times h_{t-1} plus (1 - z_t) times n_t, so what is kept "
           "and what is written add up to one. There is no separate cell state: h_t is the memory.")
    if highlight:
        alt += f" The {highlight} part is outlined in red and bold; the rest is faded."
    return Diagram(c.fig, alt)


def unrolled_rnn(steps: int = 4, *, gradient: bool = True) -> Diagram:
    """A vanilla RNN unrolled over ``steps`` steps with one loss at the end; ``gradient`` draws the way
    dL/dh_t travels back through W_h (backpropagation through time)."""
    if not 2 <= steps <= 8:
        raise ValueError(f"steps should be between 2 and 8, got {steps!r}")
    gap, x0 = 2.0, 0.6                      # x0: h_0's centre
    c = _Canvas(gap * steps + 1.6, 4.4, (min(2.1 * steps + 1.8, 11.5), 3.9))
    for t in range(1, steps + 1):
        x = x0 + gap * t
        c.box(x, 0.7, f"$x_{{{t}}}$", INPUT_FILL, w=0.9, h=0.6)
        c.box(x, 2.0, f"$h_{{{t}}}$", STATE_FILL, w=0.9, h=0.6)
        c.line([(x, 1.0), (x, 1.7)])
        c.label(x + 0.08, 1.25, "$W_x$", fontsize=9)
        c.line([(x - gap + 0.45, 2.0), (x - 0.45, 2.0)])
        c.label(x - gap / 2 - 0.2, 2.12, "$W_h$", fontsize=9)
    c.box(x0, 2.0, "$h_0$", "white", w=0.7, h=0.6)
    last = x0 + gap * steps
    c.box(last, 3.5, "$L_T$", GATE_FILL, w=0.9, h=0.6)
    c.line([(last, 2.3), (last, 3.2)])
    alt = (f"Diagram of a vanilla RNN unrolled over {steps} time steps: inputs x_1 to x_{steps} along the bottom, states "
           f"h_1 to h_{steps} in a row above them, each state computed from the previous one through the same W_h and "
           f"from its input through the same W_x, and a loss L_T on the last state.")
    if gradient:
        y = 2.75
        c.line([(last - 0.25, 3.2), (last - 0.25, y), (x0 + gap, y)], lit=True)
        for t in range(1, steps):
            c.label(x0 + gap * t + gap / 2, y + 0.12, "$\\times W_h^\\top D_t$", lit=True, fontsize=9, ha="center")
        c.label(x0 + gap, y + 0.6, "$\\partial L_T / \\partial h_t$ travels back; $D_t = \\mathrm{diag}(\\tanh')$",
                lit=True, fontsize=10)
        alt += (" A red arrow runs from the loss back along the row of states, from h_T to h_1, and between every two "
                "states it is multiplied by W_h transposed and by the tanh derivatives: the product that can shrink "
                "or grow with the distance.")
    return Diagram(c.fig, alt)


_DECODER_WEIGHTS = (0.1, 0.15, 0.6, 0.15)      # an example a_{t1..tS}: position 3 is read most


def attention_decoder(weights: Sequence[float] = _DECODER_WEIGHTS) -> Diagram:
    """One step of Bahdanau et al.'s attentional decoder, in notebook 8's symbols: score every encoder state
    h_j against s_{t-1}, softmax the scores e_{tj} into weights a_{tj}, sum c_t = sum_j a_{tj} h_j, and feed c_t
    with y_{t-1} into the decoder RNN. ``weights`` (3 to 6 numbers >= 0 that sum to 1, one per encoder state)
    set the widths of the arrows from each h_j to c_t."""
    a = [float(w) for w in weights]
    if not 3 <= len(a) <= 6 or min(a) < 0 or abs(sum(a) - 1) > 1e-3:
        raise ValueError(f"weights should be 3 to 6 numbers >= 0 that sum to 1 (one per encoder state), "
                         f"got {tuple(weights)!r}")
    S, x1 = len(a), 2.4
    gap = max(1.7, 5.2 / (S - 1))                          # the score and softmax boxes need 6.8 wide
    xs = [x1 + gap * j for j in range(S)]
    mid, right = (xs[0] + xs[-1]) / 2, xs[-1] + 0.8        # right: where the score and softmax boxes end
    width = xs[-1] + 3.4
    c = _Canvas(width, 7.2, (0.8 * width, 0.8 * 7.2))
    c.fig.subplots_adjust(left=0, right=1, bottom=0, top=1)
    # the encoder's states, one per source position
    for j, x in enumerate(xs, start=1):
        c.box(x, 3.05, f"$h_{{{j}}}$", STATE_FILL, w=0.9, h=0.6, fontsize=14)
        if j < S:
            c.line([(x + 0.45, 3.05), (x + gap - 0.45, 3.05)])
        c.line([(x, 2.75), (x, 2.07)])
    c.label(xs[-1] + 0.6, 3.05, "encoder\nstates", fontsize=12, va="center")
    # 1. score each h_j against the decoder's previous state, 2. softmax over j
    c.box(0.6, 6.2, "$s_{t-1}$", STATE_FILL, w=0.9, h=0.6, fontsize=14)
    c.line([(0.6, 5.9), (0.6, 1.75), (xs[0] - 0.8, 1.75)])
    box_w = right - xs[0] + 0.8
    c.box(mid, 1.75, "1  score:  $e_{tj} = \\mathrm{score}(s_{t-1}, h_j)$", GATE_FILL, w=box_w, h=0.6, fontsize=13)
    for j, x in enumerate(xs, start=1):
        c.line([(x, 1.45), (x, 0.8)])
        c.label(x + 0.08, 1.1, f"$e_{{t{j}}}$", fontsize=12, va="center")
    c.box(mid, 0.5, "2  normalise:  $a_{tj} = \\exp e_{tj} \\,/\\, \\sum_k \\exp e_{tk}$  (softmax)", GATE_FILL,
          w=box_w, h=0.6, fontsize=13)
    # 3. the context: every h_j, weighted by a_{tj} (the arrow's width), summed
    sigma, r = (mid, 4.6), 0.32                            # the sum node: centre and radius
    c.line([(right, 0.5), (width - 0.5, 0.5), (width - 0.5, 4.6), (mid + r, 4.6)])
    c.label(width - 0.4, 2.4, "$a_{tj}$", fontsize=13, va="center")
    for j, (x, w) in enumerate(zip(xs, a), start=1):
        dx, dy = mid - x, sigma[1] - 3.35
        end = (mid - r * dx / math.hypot(dx, dy), sigma[1] - r * dy / math.hypot(dx, dy))
        c.ax.add_patch(FancyArrowPatch((x, 3.35), end, arrowstyle="-|>", mutation_scale=10 + 8 * w, color=INK,
                                       lw=0.6 + 9 * w, shrinkA=0, shrinkB=0, zorder=2, gid=f"a_t{j}"))
        lx, ly = x + 0.3 * dx, 3.35 + 0.3 * dy             # beside the arrow, on its outer side
        c.label(lx - 0.15 if x <= mid else lx + 0.15, ly, f"$a_{{t{j}}}$", fontsize=13,
                ha="right" if x <= mid else "left", va="bottom")
    c.op(*sigma, "Σ", r=r)
    c.label(mid + 0.4, 5.15, "3  average:  $c_t = \\sum_j a_{tj}\\, h_j$", fontsize=13, va="center")
    # the decoder's step: s_t = GRU(s_{t-1}, [y_{t-1}; c_t]), and the output y_t
    c.box(mid, 6.2, "$s_t$", CANDIDATE_FILL, w=1.0, h=0.6, fontsize=14)
    c.line([(1.05, 6.2), (mid - 0.5, 6.2)])
    c.line([(mid, sigma[1] + r), (mid, 5.9)])
    c.box(mid - 2.0, 5.3, "$y_{t-1}$", INPUT_FILL, w=0.9, h=0.55, fontsize=14)
    c.line([(mid - 1.55, 5.3), (mid - 0.3, 5.3), (mid - 0.3, 5.9)])
    c.box(mid + 2.3, 6.2, "$y_t$", INPUT_FILL, w=0.9, h=0.55, fontsize=14)
    c.line([(mid + 0.5, 6.2), (mid + 1.85, 6.2)])
    c.label(mid, 6.85, "decoder: $s_t = \\mathrm{GRU}(s_{t-1}, [y_{t-1}; c_t])$", fontsize=13, ha="center")
    top = max(range(S), key=a.__getitem__)
    alt = (f"Diagram of one step t of Bahdanau et al.'s attentional decoder, in three numbered steps. Across the "
           f"middle, the encoder's states h_1 to h_{S}, one per source position. Below them, step 1 scores each h_j "
           f"against the decoder's previous state s_{{t-1}}, e_tj = score(s_{{t-1}}, h_j), one score per position, and "
           f"step 2, a softmax over j, turns the scores into weights a_tj that sum to 1. Above them, step 3: an arrow "
           f"from every h_j to a sum node gives the context c_t = sum over j of a_tj h_j; each arrow is as wide as its "
           f"weight, here " + ", ".join(f"{w:g}" for w in a) + f", so the thickest comes from h_{top + 1}. At the top, "
           f"c_t and the previous output y_{{t-1}} enter the decoder GRU with s_{{t-1}} and give the new state s_t, "
           f"which gives the output y_t. The context is recomputed at every decoder step.")
    return Diagram(c.fig, alt)


# notebook 9's "I like pizza" weights, softmax(QK^T / sqrt(2)) rounded: drawn as the example of A
_PIZZA_WEIGHTS = ((0.40, 0.20, 0.40), (0.20, 0.40, 0.40), (0.25, 0.25, 0.50))
_SELF_ATTENTION_STEPS = {1: "the projections Q = X W_Q, K = X W_K and V = X W_V",
                         2: "the scores Q K^T / sqrt(d_k), one per pair of tokens",
                         3: "the weights A, a softmax along each row of the scores",
                         4: "the output Z = A V"}


def self_attention(*, step: int = 4) -> Diagram:
    """One self-attention head as notebook 9 computes it, bottom to top: Q, K, V from X; the scores
    QK^T / sqrt(d_k); the row-wise softmax A; the output Z = AV. ``step`` 1-4 draws the steps up to that one
    (the rest faded)."""
    if step not in _SELF_ATTENTION_STEPS:
        raise ValueError(f"step should be 1, 2, 3 or 4, got {step!r}")
    s = {k: None if k <= step else False for k in _SELF_ATTENTION_STEPS}     # plain, or faded (a later step)
    xq, xk, xv = 3.1, 6.1, 9.1                  # the columns of Q, K and V
    mid = (xq + xk) / 2                          # the scores, the weights and the output sit above Q and K
    c = _Canvas(10.6, 7.0, (0.75 * 10.6, 0.75 * 7.0))
    c.fig.subplots_adjust(left=0, right=1, bottom=0, top=1)
    for y, k, name in ((2.0, 1, "project"), (3.4, 2, "score"), (4.8, 3, "normalise"), (6.3, 4, "average")):
        c.label(0.0, y, f"{k}  {name}", lit=s[k], fontsize=13, va="center")
    # 1. three projections of the same X
    c.box(xk, 0.5, "$X$   $(n, d_{model})$", INPUT_FILL, w=2.6, h=0.6, fontsize=13)
    c.line([(xk, 0.8), (xk, 1.7)], lit=s[1])
    c.line([(xk, 1.2), (xq, 1.2), (xq, 1.7)], lit=s[1])
    c.line([(xk, 1.2), (xv, 1.2), (xv, 1.7)], lit=s[1])
    for x, text in ((xq, "$Q = XW_Q$  $(n, d_k)$"), (xk, "$K = XW_K$  $(n, d_k)$"), (xv, "$V = XW_V$  $(n, d_v)$")):
        c.box(x, 2.0, text, GATE_FILL, lit=s[1], w=2.6, h=0.6, fontsize=12)
    # 2. every query against every key
    c.line([(xq, 2.3), (xq, 3.1)], lit=s[2])
    c.line([(xk, 2.3), (xk, 3.1)], lit=s[2])
    c.label(xk + 0.1, 2.7, "$K^\\top$", lit=s[2], fontsize=13, va="center")
    c.box(mid, 3.4, "$QK^\\top / \\sqrt{d_k}$   $(n, n)$", CANDIDATE_FILL, lit=s[2], w=3.6, h=0.6, fontsize=13)
    # 3. softmax along each row: the weights, drawn for "I like pizza"
    c.line([(mid, 3.7), (mid, 4.5)], lit=s[3])
    c.box(mid, 4.8, "$A = \\mathrm{softmax}$ of each row", CANDIDATE_FILL, lit=s[3], w=3.6, h=0.6, fontsize=13)
    cell, gx, gy = 0.4, mid + 2.3, 5.4                     # the grid's cell size and top-left corner
    for i, row in enumerate(_PIZZA_WEIGHTS):
        for j, w in enumerate(row):
            fill = plt.get_cmap(WEIGHTS)(w) if s[3] is not False else "white"
            c.ax.add_patch(Rectangle((gx + j * cell, gy - (i + 1) * cell), cell, cell, facecolor=fill,
                                     edgecolor=INK if s[3] is not False else FADED, lw=0.6))
        c.label(gx + 3 * cell + 0.08, gy - (i + 0.5) * cell, "$\\Sigma = 1$", lit=s[3], fontsize=11, va="center")
    c.label(gx + 1.5 * cell, gy + 0.1, "$A$ of \"I like pizza\"", lit=s[3], fontsize=11, ha="center")
    c.line([(mid + 1.8, 4.8), (gx - 0.08, 4.8)], lit=s[3], arrow=False)
    # 4. each row of Z: the values, averaged with that row of A as weights
    c.line([(mid, 5.1), (mid, 6.0)], lit=s[4])
    c.line([(xv, 2.3), (xv, 6.3), (mid + 1.4, 6.3)], lit=s[4])
    c.box(mid, 6.3, "$Z = AV$   $(n, d_v)$", STATE_FILL, lit=s[4], w=2.8, h=0.6, fontsize=13)
    alt = ("Diagram of one self-attention head, read from the bottom up in four numbered steps. 1, project: the "
           "input X, n token vectors of size d_model, is multiplied by three learned matrices, giving Q = X W_Q "
           "(queries), K = X W_K (keys) and V = X W_V (values). 2, score: Q and K meet in Q K transposed divided by "
           "sqrt(d_k), an n by n table with one score per pair of tokens. 3, normalise: a softmax along each row turns "
           "the scores into the weights A, each row summing to 1; beside it, the 3 by 3 weights of the 'I like pizza' "
           "example are shaded, darker where a token reads more. 4, average: the values V, untouched until now, come "
           "in from the right, and Z = A V gives each token a weighted average of every token's value.")
    if step < 4:
        alt += f" Drawn up to step {step} of 4, {_SELF_ATTENTION_STEPS[step]}; the later steps are faded."
    return Diagram(c.fig, alt)


def multihead_attention(heads: int = 3) -> Diagram:
    """Multi-head attention as notebook 10 computes it: project, split into ``heads``, attend in each, concatenate,
    mix by W_O."""
    if not 2 <= heads <= 4:
        raise ValueError(f"heads should be between 2 and 4, got {heads!r}")
    width = 2.9 * heads + 1.4
    c = _Canvas(width, 7.2, (min(2.0 * heads + 3.0, 10.0), 5.6))
    mid = width / 2
    c.box(mid, 0.5, "$X$  $(n, d_{model})$", INPUT_FILL, w=2.6, h=0.6, fontsize=11)
    c.box(mid, 1.9, "$Q = X W_Q,\\; K = X W_K,\\; V = X W_V$", GATE_FILL, w=min(width - 0.6, 6.4), h=0.6, fontsize=11)
    c.line([(mid, 0.8), (mid, 1.6)])
    xs = [0.7 + 1.45 + 2.9 * i for i in range(heads)]
    for i, x in enumerate(xs, start=1):
        c.line([(x, 2.2), (x, 2.95)])
        c.label(x + 0.1, 2.5, f"columns of head {i}", fontsize=8)
        c.box(x, 3.5, f"head {i}\n$\\mathrm{{softmax}}(Q_{i} K_{i}^\\top/\\sqrt{{d_k}})\\, V_{i}$", CANDIDATE_FILL,
              w=2.65, h=1.0, fontsize=9)
        c.line([(x, 4.0), (x, 4.75)])
    c.box(mid, 5.05, "concatenate: $(n, h\\, d_k) = (n, d_{model})$", STATE_FILL, w=min(width - 0.6, 6.4), h=0.6,
          fontsize=10)
    c.line([(mid, 5.35), (mid, 5.95)])
    c.box(mid, 6.3, "$\\times\\, W_O$  ->  output $(n, d_{model})$", GATE_FILL, w=3.6, h=0.6, fontsize=11)
    alt = (f"Diagram of multi-head attention with {heads} heads, read from the bottom up: the input X, of shape n by "
           f"d_model, is projected once into queries, keys and values (Q = X W_Q, K = X W_K, V = X W_V); their "
           f"columns are split into {heads} blocks of d_k = d_model / h, one per head; each head computes "
           f"softmax(Q_i K_i transposed / sqrt(d_k)) V_i on its own block; the {heads} results are concatenated back "
           f"to n by d_model and multiplied by W_O. The heads share no weights and run side by side.")
    return Diagram(c.fig, alt)

