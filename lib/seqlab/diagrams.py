"""Schematic pictures of the course's architectures, drawn with matplotlib: each returns a :class:`Diagram`.

``show(*lstm_cell(stage=1))`` builds a picture up part by part; ``highlight=`` lights one part. Labels are
the equations' symbols, and parts differ by label and shape as well as colour.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

from seqlab.colours import HIGHLIGHT, WEIGHTS
from seqlab.manifest import course_parts

__all__ = ["COURSE_PARTS", "Diagram", "LSTM_PARTS", "GRU_PARTS", "attention_decoder", "bidirectional_rnn",
           "course_map", "gpt_block", "gru_cell",
           "kv_cache", "lstm_cell", "masked_lm", "multihead_attention", "positional_encodings", "self_attention", "stacked_rnn",
           "bert_pretraining", "state_space",
           "transformer", "unrolled_rnn"]

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
    """How to draw what belongs to ``parts``: None plain, True lit, False faded (another part lit, or a later stage)."""
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
    """One LSTM step; ``stage`` 1-4 draws notebook 4's parts up to that stage, ``highlight`` lights one of :data:`LSTM_PARTS`."""
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
    """One GRU step in torch's convention; ``highlight`` (one of :data:`GRU_PARTS`) lights one part."""
    if highlight is not None and highlight not in GRU_PARTS:
        raise ValueError(f"highlight should be one of {list(GRU_PARTS)} or None, got {highlight!r}")
    s = {part: _state(part, highlight, True) for part in GRU_PARTS}
    c = _Canvas(12.0, 6.6, (9.0, 4.95))
    c.cell_frame()
    # h_{t-1} runs along the top (kept by z_t) and down into the gates; x_t from below
    hid, cand = s["hidden"], s["candidate"]
    top = 5.3                                # the state's line, high enough for an arrow from the mix's × into +
    c.label(0.1, top, "$h_{t-1}$", va="center")
    c.line([(0.75, top), (5.72, top)], lit=hid)
    c.line([(2.2, top), (2.2, 1.35), (7.6, 1.35)], arrow=False)
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
    c.op(6.0, top, "×", lit=hid)
    c.line([(4.6, 2.75), (4.6, 4.3), (6.0, 4.3), (6.0, top - 0.28)], lit=upd)
    c.line([(6.0, 4.3), (7.35, 4.3)], lit=upd, arrow=False)
    c.box(7.75, 4.3, "$1-$", GATE_FILL, lit=upd, w=0.75, h=0.45, fontsize=10)
    c.line([(8.125, 4.3), (9.02, 4.3)], lit=upd)
    c.op(9.3, 4.2, "×", lit=hid)
    c.line([(6.28, top), (9.02, top)], lit=hid)
    c.op(9.3, top, "+", lit=hid)
    c.line([(9.3, 4.48), (9.3, top - 0.28)], lit=hid)          # (1 - z_t) * n_t into the sum
    c.line([(9.58, top), (11.3, top)], lit=hid)
    c.label(11.35, top, "$h_t$", va="center", lit=hid)
    alt = ("Diagram of one GRU step, in torch's convention. The previous state h_{t-1} runs along the top from left "
           "to right and, with the input x_t, feeds two sigmoid gates along the bottom: the reset gate r_t and the "
           "update gate z_t. r_t multiplies the recurrent part W_hn h_{t-1} before the tanh that makes the candidate "
           "n_t. On the top line the new state is a mix: z_t times h_{t-1} plus (1 - z_t) times n_t, so what is kept "
           "and what is written add up to one. There is no separate cell state: h_t is the memory.")
    if highlight:
        alt += f" The {highlight} part is outlined in red and bold; the rest is faded."
    return Diagram(c.fig, alt)


def unrolled_rnn(steps: int = 4, *, gradient: bool = True) -> Diagram:
    """A vanilla RNN unrolled over ``steps`` with one loss at the end; ``gradient`` draws dL/dh_t travelling back."""
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
    """One step of Bahdanau et al.'s attentional decoder in notebook 8's symbols.

    ``weights`` (3 to 6 numbers >= 0 summing to 1, one per encoder state) set the arrows' widths into c_t.
    """
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
    """One self-attention head as notebook 9 computes it; ``step`` 1-4 draws the steps up to that one."""
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



# --- The Transformer (notebooks 12-13), the GPT block and its KV cache (notebooks 14-15) ---------------------------------

_TAG_INK = "#555555"       # the small "12 §n" tags: which notebook and section build a part


def _check_norm_first(norm_first: object) -> None:
    if not isinstance(norm_first, bool):
        raise ValueError(f"norm_first should be True (pre-norm) or False (post-norm), got {norm_first!r}")


def _tag(c: _Canvas, x: float, y: float, text: str, side: float) -> None:
    c.ax.text(x, y, text, fontsize=9, va="center", ha="left" if side > 0 else "right", color=_TAG_INK,
              style="italic")


def _arrow(c: _Canvas, points: list[tuple[float, float]], *, lit: bool | None = None, head: bool = True) -> None:
    """A path whose arrowhead touches its target (``_Canvas.line`` stops short, which hides short arrows)."""
    colour, lw = c._ink(lit)
    for start, end in zip(points[:-1], points[1:]):
        last = end == points[-1]
        c.ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>" if head and last else "-", mutation_scale=10,
                                       color=colour, lw=lw, shrinkA=0, shrinkB=0, zorder=2))


def _residual(fn: tuple, norm_first: bool, ln: str = "LN", tag: str = "12 §2") -> list[tuple]:
    """One residual sublayer's parts, bottom to top: post-norm LN(x + F(x)), pre-norm x + F(LN(x))."""
    norm = ("box", ln, STATE_FILL, tag, 1.2, 0.45)
    return [("split",), norm, fn, ("add",)] if norm_first else [("split",), fn, ("add",), norm]


def _column(c: _Canvas, x: float, y: float, items: list[tuple], *, bypass: float, tag_side: float,
            gap: float = 0.3) -> tuple[float, dict[str, float]]:
    """Draw ``items`` (``("box", text, fill, tag, w, h)``, ``("split",)``, ``("add",)``) upwards from ``y`` at ``x``.

    The residual branch runs on the ``bypass`` side; returns the top and each box's bottom edge, by text.
    """
    split, bottoms, r = y, {}, 0.24
    for kind, *rest in items:
        if kind == "split":
            split = y + 0.12
            _arrow(c, [(x, y), (x, split)], head=False)
            c.ax.add_patch(Circle((x, split), 0.05, color=INK, zorder=3))
            y = split
        elif kind == "add":
            centre = y + gap + r
            _arrow(c, [(x, y), (x, centre - r)])
            c.op(x, centre, "+", r=r)
            _arrow(c, [(x, split), (x + bypass, split), (x + bypass, centre), (x + (r if bypass > 0 else -r), centre)])
            y = centre + r
        else:
            text, fill, tag, w, h = rest
            bottom = y + gap
            _arrow(c, [(x, y), (x, bottom)])
            c.box(x, bottom + h / 2, text, fill, w=w, h=h, fontsize=10)
            if tag:
                _tag(c, x + tag_side * (w / 2 + 0.1), bottom + h / 2, tag, tag_side)
            bottoms[text] = bottom
            y = bottom + h
    return y, bottoms


def _frame(c: _Canvas, x: float, y0: float, y1: float, half: float, label_x: float) -> None:
    """The rounded frame around a stack of N identical layers, with "N×" beside it."""
    c.ax.add_patch(FancyBboxPatch((x - half, y0), 2 * half, y1 - y0, boxstyle="round,pad=0.05", facecolor="#fafafa",
                                  edgecolor="#9a9a9a", lw=1.0, zorder=0))
    c.label(label_x, (y0 + y1) / 2, "$N\\times$", fontsize=13, ha="center", va="center")


def _embedding(c: _Canvas, x: float, text: str, tag: str, positions: str, positions_tag: str, side: float, *,
               y: float, w: float = 3.2) -> float:
    """The embedding box and the + that adds positions from the side opposite ``side``; returns the top of the +."""
    c.box(x, y + 0.25, text, INPUT_FILL, w=w, h=0.5, fontsize=10)
    _tag(c, x + side * (w / 2 + 0.1), y + 0.25, tag, side)
    _arrow(c, [(x, y + 0.5), (x, y + 0.9)])
    c.op(x, y + 1.14, "+", r=0.24)
    px = x - side * 1.65
    c.box(px, y + 1.14, positions, INPUT_FILL, w=1.5, h=0.55, fontsize=9)
    _arrow(c, [(px + side * 0.75, y + 1.14), (x - side * 0.24, y + 1.14)])
    _tag(c, px - side * 0.85, y + 1.14, positions_tag, -side)
    return y + 1.38


def _legend(c: _Canvas, x: float, y: float, lines: list[str]) -> None:
    for i, line in enumerate(lines):
        c.ax.text(x, y - 0.38 * i, line, fontsize=9.5, color=_TAG_INK, va="top")


def _fit(c: _Canvas, width: float, height: float, inches_per_unit: float) -> None:
    """Crop the canvas to what was drawn, at a fixed scale, with no margin around the axes."""
    c.ax.set(xlim=(0, width), ylim=(0, height))
    c.fig.set_size_inches(width * inches_per_unit, height * inches_per_unit)
    c.fig.subplots_adjust(0, 0, 1, 1)


def transformer(*, norm_first: bool = False) -> Diagram:
    """The encoder-decoder Transformer after Vaswani et al.'s Figure 1, parts tagged with notebook and section.

    ``norm_first=False``: post-norm ``LN(x + F(x))``; ``True``: pre-norm ``x + F(LN(x))`` with a final LN.
    """
    _check_norm_first(norm_first)
    xe, xd, frame_y, w = 3.45, 9.95, 2.75, 3.7
    ffn = ("box", "feed-forward\n$\\mathrm{FFN}$", GATE_FILL, "12 §3", w, 0.8)
    self_attention = ("box", "multi-head self-attention\n$\\mathrm{MultiHead}(X, X, X)$", CANDIDATE_FILL, "12 §4", w, 0.8)
    masked = ("box", "masked self-attention\n$\\mathrm{MaskedMultiHead}(Y, Y, Y)$", CANDIDATE_FILL, "13 §1", w, 0.8)
    cross = ("box", "cross-attention\n$\\mathrm{MultiHead}(Y, M, M)$", CANDIDATE_FILL, "13 §1", w, 0.8)
    final = [("box", "final LN", STATE_FILL, "12 §5", 1.5, 0.45)] if norm_first else []
    c = _Canvas(13.4, 15.0, (7.4, 7.4))

    # source and target: tokens, embedding, + positions; then the two stacks, residual branches outside
    for x, text, side in ((xe, "source tokens", +1), (xd, "target so far (shifted right)", -1)):
        c.label(x, 0.3, text, ha="center", va="center")
        _arrow(c, [(x, 0.55), (x, 1.0)])
        top = _embedding(c, x, "embedding $\\times\\sqrt{d_{model}}$", "13 §4", "positional\nencoding", "nb 11", side,
                         y=1.0)   # the + at 2.14, positions' box up to 2.41
        _arrow(c, [(x, top), (x, frame_y)], head=False)
    top_e, _ = _column(c, xe, frame_y, _residual(self_attention, norm_first) + _residual(ffn, norm_first),
                       bypass=-(w / 2 + 0.3), tag_side=+1, gap=0.4)
    top_d, bottoms = _column(c, xd, frame_y, _residual(masked, norm_first) + _residual(cross, norm_first)
                             + _residual(ffn, norm_first), bypass=w / 2 + 0.3, tag_side=-1, gap=0.4)
    _frame(c, xe, frame_y - 0.05, top_e + 0.15, w / 2 + 0.55, xe - w / 2 - 0.95)
    _frame(c, xd, frame_y - 0.05, top_d + 0.15, w / 2 + 0.55, xd + w / 2 + 0.95)
    if norm_first:                                  # pre-norm never normalises the stream: one LN after each stack
        top_e, _ = _column(c, xe, top_e, final, bypass=0, tag_side=+1, gap=0.4)
        top_d, _ = _column(c, xd, top_d, final, bypass=0, tag_side=-1, gap=0.4)

    # the encoder's output, the memory M, gives the keys and values of every decoder layer's cross-attention
    m_y, mid = bottoms[cross[1]] - 0.22, (xe + xd) / 2
    _arrow(c, [(xe, top_e), (xe, top_e + 0.4), (mid, top_e + 0.4), (mid, m_y), (xd - 1.1, m_y), (xd - 1.1, m_y + 0.22)])
    c.label((xe + mid) / 2, top_e + 0.52, "memory $M$ (keys, values)", fontsize=10, va="bottom", ha="center")

    # the read-out: a linear layer tied to the target embedding, then softmax
    y = top_d
    for text in ("linear: $\\times E_{tgt}^{\\top}$ (tied)", "softmax"):
        _arrow(c, [(xd, y), (xd, y + 0.4)])
        c.box(xd, y + 0.65, text, GATE_FILL, w=2.9, h=0.5, fontsize=10)
        _tag(c, xd - 1.55, y + 0.65, "13 §4", -1)
        y += 0.9
    _arrow(c, [(xd, y), (xd, y + 0.4)])
    c.label(xd, y + 0.45, "next-token probabilities", ha="center", va="bottom")
    height = y + 1.0
    layout = (["pre-norm, $x + F(\\mathrm{LN}(x))$ (12 §5)"] if norm_first
              else ["post-norm, $\\mathrm{LN}(x + F(x))$,", "as in the paper (12 §5)"])
    _legend(c, 0.25, height - 0.25, ["12 §n, 13 §n: the notebook and", "section that build the part;",
                                     "nb n: an earlier notebook.", "Layers here:"] + layout)
    _fit(c, 13.4, height, 7.4 / 13.4)
    parts = ("LN(x + F(x)), the paper's post-norm: the LN follows the plus" if not norm_first else
             "x + F(LN(x)), pre-norm: the LN comes before each sublayer and the residual line is never normalised, "
             "so one final LN follows each stack")
    alt = ("Diagram of the Transformer encoder-decoder of Vaswani et al. (2017), after their Figure 1, read from the "
           "bottom up. Left, the encoder: source tokens are embedded (times the square root of d_model) and a "
           "positional encoding is added; then a frame of N identical layers, each a multi-head self-attention "
           "MultiHead(X, X, X) and a feed-forward network FFN, each wrapped in a residual connection (an arrow around "
           f"it to a plus) and a layer norm LN, in the form {parts}. Right, the decoder: the target so far, shifted "
           "right, embedded the same way, then N layers of three such sublayers: masked self-attention "
           "MaskedMultiHead(Y, Y, Y), cross-attention MultiHead(Y, M, M) and FFN. The encoder's output, the memory M, "
           "enters every decoder layer's cross-attention as its keys and values; the queries come from the decoder. "
           "At the top a linear layer tied to the target embedding, and a softmax, give the next-token "
           "probabilities. Each part is tagged with the notebook and section that builds it: residual and LN "
           "notebook 12 section 2, FFN 12 section 3, encoder 12 section 4, post- and pre-norm 12 section 5, the decoder's attentions "
           "notebook 13 section 1, embeddings and read-out 13 section 4; positional encoding is notebook 11's.")
    return Diagram(c.fig, alt)


def gpt_block(*, norm_first: bool = True) -> Diagram:
    """The decoder-only model of notebook 14 (``seqlab.models.gpt.GPT``); ``norm_first=True`` draws pre-norm blocks."""
    _check_norm_first(norm_first)
    x, w, frame_y, width = 3.3, 3.9, 2.75, 12.0
    attention = ("box", "masked self-attention\n(causal mask, $h$ heads)", CANDIDATE_FILL, "", w, 0.8)
    ffn = ("box", "feed-forward FFN\n(GELU)", GATE_FILL, "", w, 0.8)
    items = (_residual(attention, norm_first, "$\\mathrm{LN}_1$", "")
             + _residual(ffn, norm_first, "$\\mathrm{LN}_2$", ""))
    c = _Canvas(width, 12.0, (6.6, 6.6))
    c.label(x, 0.3, "characters $x_1, \\dots, x_n$", ha="center", va="center")
    _arrow(c, [(x, 0.55), (x, 1.0)])
    top = _embedding(c, x, "token embedding $E[x]$", "", "learned\npositions $P$", "", +1, y=1.0)
    _arrow(c, [(x, top), (x, frame_y)], head=False)
    top, bottoms = _column(c, x, frame_y, items, bypass=-(w / 2 + 0.3), tag_side=+1, gap=0.4)
    _frame(c, x, frame_y - 0.05, top + 0.15, w / 2 + 0.55, x - w / 2 - 0.95)
    after = [("box", "final LN", STATE_FILL, "", 1.5, 0.45)] if norm_first else []
    after += [("box", "linear: $\\times E^{\\top} + b$ (tied)", GATE_FILL, "", 3.2, 0.5),
              ("box", "softmax", GATE_FILL, "", 3.2, 0.5)]
    top, _ = _column(c, x, top + (0.15 if norm_first else 0.25), after, bypass=0, tag_side=1, gap=0.4)
    _arrow(c, [(x, top), (x, top + 0.4)])
    c.label(x, top + 0.45, "next character, at each position", ha="center", va="bottom")
    height = top + 1.0

    # the notebook's equations beside the parts they describe
    eq_x = x + w / 2 + 0.85
    first, second = bottoms[attention[1]] + 0.4, bottoms[ffn[1]] + 0.4
    if norm_first:
        equations = [(first, "$X \\leftarrow X + \\mathrm{MaskedMultiHead}(\\mathrm{LN}_1(X))$"),
                     (second, "$X \\leftarrow X + \\mathrm{FFN}(\\mathrm{LN}_2(X))$"),
                     (top - 1.15, "$\\mathrm{logits} = \\mathrm{LN}(X)\\, E^{\\top} + b$")]
    else:
        equations = [(first, "$X \\leftarrow \\mathrm{LN}_1(X + \\mathrm{MaskedMultiHead}(X))$"),
                     (second, "$X \\leftarrow \\mathrm{LN}_2(X + \\mathrm{FFN}(X))$"),
                     (top - 1.15, "$\\mathrm{logits} = X E^{\\top} + b$")]
    for y, text in [(2.14, "$X^{(0)} = E[x] + P$")] + equations:
        c.label(eq_x, y, text, fontsize=11, va="center")
    if norm_first:
        _legend(c, eq_x, top - 1.75, ["one LN after the stack: pre-norm never", "normalises the residual line itself"])
    layout = "pre-norm" if norm_first else "post-norm"
    _legend(c, eq_x, height - 0.25, [f"a block: notebook 12's {layout} encoder", "layer, called with the causal mask;",
                                     "no encoder, no cross-attention"])
    _fit(c, width, height, 0.55)
    form, logits = (("pre-norm, as seqlab's GPT and GPT-2 build it: each sublayer reads LN(X) and adds its output "
                     "back to X, X <- X + MaskedMultiHead(LN_1(X)) and X <- X + FFN(LN_2(X)), so the residual line "
                     "from E[x] + P to the top is never normalised, and one final LN follows the stack", "LN(X)")
                    if norm_first else
                    ("post-norm: X <- LN_1(X + MaskedMultiHead(X)) and X <- LN_2(X + FFN(X)), with no final LN", "X"))
    alt = ("Diagram of a GPT-style decoder-only language model, read from the bottom up. The characters x_1 to x_n "
           "are looked up in a token embedding E and a learned position table P is added: X(0) = E[x] + P. A frame "
           "marked N times holds one block: masked (causal) multi-head self-attention, then a feed-forward network "
           f"with GELU, each in a residual connection with a layer norm, in the {form}. There is no encoder and no "
           "cross-attention: a block is notebook 12's encoder layer called with the causal mask. At the top a linear "
           f"read-out tied to the embedding (logits = {logits} E transposed + b) and a softmax give the next "
           "character at every position at once.")
    return Diagram(c.fig, alt)


_KV_CACHE_STEPS = range(1, 9)


def kv_cache(step: int = 4) -> Diagram:
    """One generation step with a KV cache, one head of one layer (notebook 15); ``step`` 1 to 8 is the token fed."""
    if not isinstance(step, int) or isinstance(step, bool) or step not in _KV_CACHE_STEPS:
        raise ValueError(f"step should be an int from 1 to 8, got {step!r}")
    t, (xq, xk, xv), row_w, row_h = step, (1.6, 5.4, 8.6), 1.6, 0.36
    c = _Canvas(12.0, 8.0, (6.6, 6.6))
    # the tokens: only x_t goes in; the earlier ones were fed at earlier steps
    for i in range(1, t + 1):
        tx = xk - 0.55 * (t - i)
        c.box(tx, 0.75, f"$x_{{{i}}}$", INPUT_FILL, lit=True if i == t else False, w=0.48, h=0.42, fontsize=9)
    if t > 1:
        earlier = f"tokens 1 to {t - 1}" if t > 2 else "token 1"
        c.ax.text(xk - 0.55 * (t + 1) / 2, 0.25, f"{earlier}: not fed again", color=_TAG_INK, fontsize=9, ha="center",
                  va="center")
    _arrow(c, [(xk, 0.96), (xk, 1.35)], lit=True, head=False)
    _arrow(c, [(xq, 1.35), (xv, 1.35)], lit=True, head=False)
    for x, name, w_name in ((xq, "q", "W_Q"), (xk, "k", "W_K"), (xv, "v", "W_V")):
        _arrow(c, [(x, 1.35), (x, 1.75)], lit=True)
        c.box(x, 2.0, f"${name}_{{{t}}} = x_{{{t}}} {w_name}$", GATE_FILL, lit=True, w=2.1, h=0.5, fontsize=10)
    # the caches: rows 1 .. t-1 kept from earlier steps (grey), row t appended now (lit)
    bottom = 3.0
    for x, name in ((xk, "k"), (xv, "v")):
        for i in range(1, t + 1):
            y = bottom + row_h * (t - i) + row_h / 2
            new = i == t
            c.box(x, y, f"${name}_{{{i}}}$", GATE_FILL if new else STATE_FILL, lit=True if new else None,
                  w=row_w, h=row_h - 0.04, fontsize=9)
        _arrow(c, [(x, 2.25), (x, bottom - 0.02)], lit=True)
        c.label(x + 0.1, 2.55, "append", lit=True, fontsize=9, va="center")
    stack_top = bottom + row_h * t
    for x, name in ((xk, "K"), (xv, "V")):
        c.label(x + row_w / 2 + 0.15, bottom + row_h * t / 2, f"${name}$ cache\n$({t}, d_k)$", fontsize=10,
                va="center")
    # the new query against every cached row
    att_y = max(stack_top, 4.6) + 0.75
    c.box((xq + xv) / 2 + 0.3, att_y, f"$o_{{{t}}} = \\mathrm{{softmax}}(q_{{{t}}} K^\\top / \\sqrt{{d_k}})\\; V$"
          f"   (1 query, {t} key{'s' if t > 1 else ''})", CANDIDATE_FILL, w=9.6, h=0.6, fontsize=11)
    _arrow(c, [(xq, 2.25), (xq, att_y - 0.3)], lit=True)
    for x in (xk, xv):
        _arrow(c, [(x, stack_top), (x, att_y - 0.3)])
    _arrow(c, [((xq + xv) / 2 + 0.3, att_y + 0.3), ((xq + xv) / 2 + 0.3, att_y + 0.75)])
    c.label((xq + xv) / 2 + 0.3, att_y + 0.8, f"$o_{{{t}}}$: one row, to $W_O$ and the rest of the block",
            ha="center", va="bottom", fontsize=10)
    height = att_y + 1.3
    _legend(c, xk + 0.6, 1.05, [f"red, bold: new at step {t}"] + ["grey: kept from earlier steps"] * (t > 1))
    _fit(c, 12.0, height, 0.55)
    fed = (f"Of the tokens x_1 to x_{t}, only the newest, x_{t}, is fed in; the earlier ones are faded: they are not "
           f"fed again." if t > 1 else "The first token, x_1, is fed in; the cache is empty before it.")
    kept = f"rows 1 to {t - 1} are kept from earlier steps" if t > 1 else "so far only the new row"
    alt = (f"Diagram of generation step {t} with a KV cache, for one head of one layer, read from the bottom up. {fed} "
           f"From x_{t} alone three small projections are computed: q_{t} = x_{t} W_Q, k_{t} = x_{t} W_K and "
           f"v_{t} = x_{t} W_V. k_{t} and v_{t} are appended as the last row of two stacks, the K cache and the V "
           f"cache, each {t} rows of d_k numbers ({kept}). The one query q_{t} then attends over all {t} cached "
           f"rows: o_{t} = softmax(q_{t} K transposed / sqrt(d_k)) V, one output row that goes on to W_O and the rest "
           f"of the block. What is new at this step (x_{t}, its q, k and v, the appended rows) is outlined in red "
           f"and bold; what is read from the cache is grey.")
    return Diagram(c.fig, alt)


# --- Deep and bidirectional RNNs (notebook 6), where positions enter attention (notebook 11) ----------------------

_STACK_LAYERS, _RNN_STEPS = range(1, 5), range(2, 7)


def _check_int(name: str, value: object, allowed: range) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value not in allowed:
        raise ValueError(f"{name} should be an int from {allowed.start} to {allowed.stop - 1}, got {value!r}")


def stacked_rnn(layers: int = 2, steps: int = 4) -> Diagram:
    """``layers`` recurrent layers unrolled over ``steps`` steps, in notebook 6's symbols."""
    _check_int("layers", layers, _STACK_LAYERS)
    _check_int("steps", steps, _RNN_STEPS)
    gap, rise, x0, w, h = 2.3, 1.7, 2.3, 1.1, 0.62          # x0: the h_0 column's centre
    last = x0 + gap * steps
    c = _Canvas(last + 2.6, 1.0, (6.6, 6.6))
    row = [0.75 + rise * l for l in range(layers + 1)]        # row[0]: the inputs x_t = h^(0)_t
    c.label(0.15, row[0], "input", va="center", fontsize=11)
    for t in range(1, steps + 1):
        c.box(x0 + gap * t, row[0], f"$x_{{{t}}}$", INPUT_FILL, w=w, h=h)
    for l in range(1, layers + 1):
        y = row[l]
        c.label(0.15, y, f"layer {l}", va="center", fontsize=11)
        c.box(x0, y, f"$h^{{({l})}}_0$", "white", w=0.95, h=h)
        for t in range(1, steps + 1):
            x = x0 + gap * t
            c.box(x, y, f"$h^{{({l})}}_{{{t}}}$", STATE_FILL, w=w, h=h)
            _arrow(c, [(x - gap + (w if t > 1 else 0.95) / 2, y), (x - w / 2, y)])
            _arrow(c, [(x, row[l - 1] + h / 2), (x, y - h / 2)])
        # the weights, named once per layer: the same W^(l)_h and W^(l)_x serve every step of layer l
        c.label(x0 + gap / 2, y + 0.1, f"$W^{{({l})}}_h$", fontsize=10, ha="center", va="bottom")
        c.label(x0 + gap + 0.1, (row[l - 1] + y) / 2, f"$W^{{({l})}}_x$", fontsize=10, va="center")
    # out of the stack: the top layer's whole sequence, and every layer's last state
    top = row[layers] + h / 2
    for t in range(1, steps + 1):
        _arrow(c, [(x0 + gap * t, top), (x0 + gap * t, top + 0.5)])
    between = ", \\dots, " if steps > 2 else ", "
    c.label(x0 + gap * (steps + 1) / 2, top + 0.6, f"output: the top layer's states $h^{{({layers})}}_1{between}"
            f"h^{{({layers})}}_{{{steps}}}$", ha="center", va="bottom", fontsize=11)
    # a bracket, not arrows, gathers the last column: h_n is those states, not something computed from them
    bracket, tick = last + w / 2 + 0.45, 0.25
    c.ax.plot([bracket - tick, bracket, bracket, bracket - tick], [row[1] - 0.2, row[1] - 0.2, row[layers] + 0.2,
              row[layers] + 0.2], color=_TAG_INK, lw=1.2)
    c.label(bracket + 0.15, (row[1] + row[layers]) / 2, "$h_n$", fontsize=12, va="center")
    height = top + 1.25
    _fit(c, last + 2.6, height, min(0.5, 8.8 / (last + 2.6)))          # long ones drawn smaller, under 9 inches
    layer_word = f"{layers} layers" if layers > 1 else "1 layer"
    alt = (f"Diagram of a stacked RNN of {layer_word} unrolled over {steps} time steps, a grid with time to the right "
           f"and depth upwards. The inputs x_1 to x_{steps} are the bottom row. Each layer l is a row of states "
           f"h^(l)_1 to h^(l)_{steps}, starting from h^(l)_0 on the left; each state has two arrows in: from the state "
           f"before it in its own row (through W^(l)_h) and from the state directly below it, at the same time step "
           f"(through W^(l)_x), so layer 1 reads x_t and every higher layer reads the states of the layer below. Each "
           f"layer has its own W^(l)_x and W^(l)_h, the same at every step. Arrows leave the top row upwards: the "
           f"stack's output is the top layer's sequence. On the right a bracket gathers the last state of every layer, "
           f"h^(l)_{steps}: together they are h_n.")
    return Diagram(c.fig, alt)


def bidirectional_rnn(steps: int = 4) -> Diagram:
    """A bidirectional layer over ``steps`` steps, in notebook 6's symbols: y_t = [forward h_t ; backward h_t]."""
    _check_int("steps", steps, _RNN_STEPS)
    gap, x0, w, h, half = 2.5, 2.6, 1.6, 0.62, 0.47         # half: x_t and y_t sit this far left and right of centre
    fwd, mid, bwd = 4.1, 2.55, 1.0
    width = x0 + gap * (steps + 1) + 0.8
    c = _Canvas(width, 1.0, (6.6, 6.6))
    fw, bw = "\\overrightarrow{h}", "\\overleftarrow{h}"
    c.label(0.15, fwd, "forward", va="center", fontsize=11)
    c.label(0.15, bwd, "backward", va="center", fontsize=11)
    c.box(x0, fwd, f"${fw}_0$", "white", w=0.95, h=h)
    c.box(x0 + gap * (steps + 1), bwd, f"${bw}_{{{steps + 1}}}$", "white", w=0.95, h=h)
    for t in range(1, steps + 1):
        x = x0 + gap * t
        c.box(x, fwd, f"${fw}_{{{t}}}$", STATE_FILL, w=w, h=h)
        c.box(x, bwd, f"${bw}_{{{t}}}$", STATE_FILL, w=w, h=h)
        c.box(x - half, mid, f"$x_{{{t}}}$", INPUT_FILL, w=0.74, h=h)
        c.box(x + half, mid, f"$y_{{{t}}}$", CANDIDATE_FILL, w=0.74, h=h)
        # x_t feeds both directions; y_t collects both states: four short vertical arrows, none crossing
        _arrow(c, [(x - half, mid + h / 2), (x - half, fwd - h / 2)])
        _arrow(c, [(x - half, mid - h / 2), (x - half, bwd + h / 2)])
        _arrow(c, [(x + half, fwd - h / 2), (x + half, mid + h / 2)])
        _arrow(c, [(x + half, bwd + h / 2), (x + half, mid - h / 2)])
        left = x - gap + (w if t > 1 else 0.95) / 2
        _arrow(c, [(left, fwd), (x - w / 2, fwd)])                          # left to right
        right = x + gap - (w if t < steps else 0.95) / 2
        _arrow(c, [(right, bwd), (x + w / 2, bwd)])                         # right to left
    last = x0 + gap * steps
    c.ax.text(last, fwd + h / 2 + 0.12, "final state: $h_n[0]$", fontsize=9.5, color=_TAG_INK, ha="center",
              va="bottom", style="italic")
    c.ax.text(x0 + gap, bwd - h / 2 - 0.12, "final state: $h_n[1]$", fontsize=9.5, color=_TAG_INK, ha="center",
              va="top", style="italic")
    height = fwd + h / 2 + 1.35
    c.label(0.15, height - 0.35, f"$y_t = [{fw}_t\\,;\\, {bw}_t]$: both directions read the same $x_t$",
            fontsize=11, va="center")
    _fit(c, width, height, min(0.5, 8.8 / width))
    alt = (f"Diagram of a bidirectional RNN layer over {steps} positions. Along the top, the forward RNN: states "
           f"forward h_1 to h_{steps}, arrows running left to right from forward h_0. Along the bottom, the backward "
           f"RNN: states backward h_{steps} down to h_1, arrows running right to left from backward h_{steps + 1}. In "
           f"the middle row each position t holds its input x_t and its output y_t side by side: x_t sends one arrow "
           f"up into the forward state and one down into the backward state, so both directions read the same inputs; "
           f"y_t receives one arrow from each, y_t = [forward h_t ; backward h_t], the two states side by side. The "
           f"final states sit at opposite ends: the forward one at position {steps} (h_n[0]), the backward one at "
           f"position 1 (h_n[1]).")
    return Diagram(c.fig, alt)


# one panel per hook of seqlab.nn.positional (None: no hook, NoPE): where it enters, the sections that teach it
_ENTRY_BY_HOOK = {"forward": ("added to $x$", "§2, §5"), "rotate": ("rotates $q$ and $k$", "§6"),
                  "score_bias": ("added to the scores", "§7"), None: ("adds nothing", "§8")}


def _entry_panels() -> list[tuple[str, str, str, str | None]]:
    """``(title, where it enters, sections, hook)`` per hook a registered encoding uses, in course order."""
    from seqlab.nn.positional import ENCODING_CLASSES

    names: dict[str | None, list[str]] = {}
    for name, cls in ENCODING_CLASSES.items():
        hook = cls.hooks()[0] if cls.hooks() else None
        names.setdefault(hook, []).append(cls.label if cls.label.lower() == name else f"{cls.label} ({name})")
    return [(", ".join(names[hook]), how, sections, hook) for hook, (how, sections) in _ENTRY_BY_HOOK.items()
            if hook in names]


def positional_encodings() -> Diagram:
    """Where each of notebook 11's encodings puts position into one attention score, one panel per hook."""
    panels = _entry_panels()
    pitch, col_w, height = 4.5, 2.3, 8.4
    width = pitch * len(panels) - 0.15
    c = _Canvas(width, height, (6.6, 6.6))
    ys = {"x": 0.75, "add": 1.7, "qk": 2.65, "rotate": 3.75, "score": 4.8, "bias": 5.75, "softmax": 6.7}
    for p, (title, how, sections, hook) in enumerate(panels):
        left = p * pitch
        cx = left + 0.2 + col_w / 2
        side = cx + col_w / 2 + 0.95                                   # the centre of a box feeding in from the right
        c.ax.add_patch(FancyBboxPatch((left + 0.05, 0.2), pitch - 0.35, height - 0.35, boxstyle="round,pad=0.05",
                                      facecolor="#fafafa", edgecolor="#9a9a9a", lw=1.0, zorder=0))
        c.ax.text(left + 0.2, height - 0.45, title, fontsize=12, fontweight="bold", color=INK, va="center")
        c.ax.text(left + 0.2, height - 0.95, f"{how} ({sections})", fontsize=9.5, color=_TAG_INK, va="center",
                  style="italic")
        rope, added, biased = hook == "rotate", hook == "forward", hook == "score_bias"
        tilde = "\\tilde " if rope else ""
        c.box(cx, ys["x"], "$x_i$, $x_j$", INPUT_FILL, w=col_w, h=0.55, fontsize=11)
        c.box(cx, ys["qk"], "$q_i$, $k_j$", GATE_FILL, w=col_w, h=0.55, fontsize=11)
        c.box(cx, ys["score"], f"${tilde}q_i \\cdot {tilde}k_j / \\sqrt{{d_k}}$", CANDIDATE_FILL, w=col_w, h=0.55,
              fontsize=11)
        c.box(cx, ys["softmax"], "softmax over $j$", CANDIDATE_FILL, w=col_w, h=0.55, fontsize=11)
        # the path up the column, broken where this encoding enters
        stops = [ys["x"] + 0.275]
        if added:
            c.op(cx, ys["add"], "+", lit=True, r=0.24)
            _arrow(c, [(side - 0.7, ys["add"]), (cx + 0.24, ys["add"])], lit=True)
            c.box(side, ys["add"], "$PE_{pos}$\nor $P_{pos}$", INPUT_FILL, lit=True, w=1.4, h=0.8, fontsize=10)
            stops += [ys["add"] - 0.24, ys["add"] + 0.24]
        stops += [ys["qk"] - 0.275, ys["qk"] + 0.275]
        if rope:
            c.box(cx, ys["rotate"], "$\\tilde q_i = R_i\\, q_i$\n$\\tilde k_j = R_j\\, k_j$", GATE_FILL, lit=True,
                  w=col_w, h=0.86, fontsize=11)
            stops += [ys["rotate"] - 0.43, ys["rotate"] + 0.43]
        stops += [ys["score"] - 0.275, ys["score"] + 0.275]
        if biased:
            c.op(cx, ys["bias"], "+", lit=True, r=0.24)
            _arrow(c, [(side - 0.7, ys["bias"]), (cx + 0.24, ys["bias"])], lit=True)
            c.box(side, ys["bias"], "$-s\\,|i - j|$", GATE_FILL, lit=True, w=1.4, h=0.55, fontsize=11)
            stops += [ys["bias"] - 0.24, ys["bias"] + 0.24]
        stops += [ys["softmax"] - 0.275]
        for start, end in zip(stops[::2], stops[1::2]):
            _arrow(c, [(cx, start), (cx, end)])
    _fit(c, width, height, 0.5)
    alt = ("Diagram in four panels, side by side, of where the position enters one attention score in each encoding "
           "of notebook 11. Every panel draws the same path, read from the bottom up: the embeddings x_i and x_j of a "
           "query token at position i and a key token at position j, their query q_i and key k_j, the score "
           "q_i · k_j / sqrt(d_k), and the softmax over j. In each panel the place where the position comes in is "
           "outlined in red and bold, at a different height. Sinusoidal and learned (sections 2 and 5): PE_pos or "
           "P_pos, for the token's position pos, is added to its embedding, at the bottom, before the projections. "
           "RoPE (section 6): nothing is added; q_i and k_j are rotated by R_i and R_j, so the score compares the "
           "rotated q~_i and k~_j and depends on the offset j - i alone. ALiBi (section 7): a penalty -s|i - j| is "
           "added to the score, just before the softmax. NoPE, the encoding 'none' (section 8): nothing enters "
           "anywhere; only a causal mask lets it count positions.")
    return Diagram(c.fig, alt)


def masked_lm(length: int = 6, masked: int = 3) -> Diagram:
    """What GPT's next-token and BERT's masked-LM objectives let position ``masked`` read (notebooks 14 and 16)."""
    if not 4 <= length <= 8:
        raise ValueError(f"length should be an int from 4 to 8, got {length!r}")
    if not 2 <= masked <= length - 1:
        raise ValueError(f"masked should be an int from 2 to {length - 1} (a position with both sides), got {masked!r}")
    gap, panel = 1.05, 1.05 * length + 0.9
    width, height = 2 * panel, 4.4
    c = _Canvas(width, height, (10.0, 10.0 * height / width))
    for side, title in ((0, "GPT: predict the next token"), (1, "BERT: fill in the blank")):
        left = side * panel + 0.6
        target = left + gap * (masked - 1)
        c.label(left - 0.35, 4.0, title, fontsize=12, lit=True)
        for j in range(1, length + 1):
            x = left + gap * (j - 1)
            seen = side == 1 or j <= masked
            text = "[M]" if side == 1 and j == masked else f"$x_{{{j}}}$"
            fill = GATE_FILL if side == 1 and j == masked else INPUT_FILL
            c.box(x, 1.0, text, fill, w=0.8, h=0.55, fontsize=11, lit=None if seen else False)
            if seen:
                c.line([(x, 1.3), (target, 2.65)], lit=True if j == masked else None)
        answer = f"$x_{{{masked + 1}}}$" if side == 0 else f"$x_{{{masked}}}$"
        c.box(target, 3.0, answer, CANDIDATE_FILL, w=0.8, h=0.55, lit=True)
        note = (f"position {masked} reads $x_1 \\ldots x_{{{masked}}}$ only" if side == 0
                else f"position {masked} reads both sides; the loss is taken only at [M]")
        c.label(left - 0.35, 0.2, note, fontsize=10)
    alt = (f"Diagram in two panels over a row of {length} input tokens. Left, GPT: the output at position {masked} "
           f"predicts the next token x_{masked + 1} and is connected to inputs x_1 to x_{masked} only; the later inputs "
           f"are faded, it cannot read them. Right, BERT's masked language model: input {masked} is replaced by "
           f"[MASK] (drawn [M]), and the output at that position predicts the original x_{masked} from every input, "
           f"on both sides; the loss is taken only at the masked positions. What to see: the same position reads "
           f"half the sequence in one objective and all of it in the other.")
    return Diagram(c.fig, alt)


# The course's notebooks in teaching order, by part: (number, short title), read from the course manifest
COURSE_PARTS = tuple((part, tuple((nb.name, nb.short) for nb in notebooks)) for part, notebooks in course_parts())

_COUNTS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


def course_map() -> Diagram:
    """The course as a road: one row per part, one box per notebook, in teaching order (notebook 00)."""
    longest = max(len(notebooks) for _, notebooks in COURSE_PARTS)
    width, height = max(13.4, 2.7 * longest + 0.3), 0.1 + 1.65 * len(COURSE_PARTS)
    c = _Canvas(width, height, (9.5, 9.5 * height / width))
    fills = (STATE_FILL, GATE_FILL, CANDIDATE_FILL, INPUT_FILL)          # in turn, as many rows as there are parts
    previous = None
    for row, (part, notebooks) in enumerate(COURSE_PARTS):
        fill = fills[row % len(fills)]
        y = height - 1.0 - 1.65 * row
        c.label(1.45, y + 0.62, part, fontsize=10.5, va="center", lit=True)   # right of the arrow coming down
        for k, (number, title) in enumerate(notebooks):
            x = 1.25 + 2.7 * k
            c.box(x, y, f"{number}\n{title}", fill, w=2.3, h=0.8, fontsize=9)
            if previous is not None:
                px, py = previous
                c.line([(px + 1.15, py), (x - 1.15, y)] if py == y else [(px, py - 0.4), (px, py - 0.58),
                                                                         (x, py - 0.58), (x, y + 0.4)])
            previous = (x, y)
    names = "; ".join(f"{part}: " + ", ".join(f"{n} {t}" for n, t in notebooks) for part, notebooks in COURSE_PARTS)
    rows = _COUNTS[len(COURSE_PARTS)] if len(COURSE_PARTS) < len(_COUNTS) else str(len(COURSE_PARTS))
    alt = (f"Map of the course: {rows} rows, one per part, each a chain of boxes, one box per notebook, with arrows "
           f"in teaching order that run along each row and down to the start of the next. {names}. What to see: "
           "each part builds on the one above, from the recurrent network to GPT and BERT.")
    return Diagram(c.fig, alt)


# --- A linear state-space layer (notebook 17): one recurrence, two ways to compute it ------------------------------

_SSM_STEPS = range(2, 6)


def _power(t: int) -> str:
    """C A^t B in the notebooks' symbols: CB, CAB, CA^2B, ..."""
    return "CB" if t == 0 else "CAB" if t == 1 else f"CA^{t}B"


def state_space(steps: int = 4, *, selective: bool = False) -> Diagram:
    """A linear state-space layer over ``steps`` tokens (notebook 17): the recurrence and the convolution view.

    ``selective=True`` draws Mamba's input-dependent A_t, B_t, C_t, and fades the fixed-kernel panel.
    """
    _check_int("steps", steps, _SSM_STEPS)
    if not isinstance(selective, bool):
        raise ValueError(f"selective should be True (Mamba) or False (S4), got {selective!r}")
    gap, w, h = 1.75, 0.9, 0.55
    rows = {"x": 1.15, "h": 2.75, "y": 4.35}
    x0 = 1.0                                                   # h_0's column
    left_width = max(x0 + gap * steps + 0.8, 6.8)             # wide enough for the titles when steps is small
    right = left_width + 0.6                                   # the convolution panel's left edge
    xs = [right + 0.8 + gap * j for j in range(steps)]        # its inputs x_1 .. x_steps
    width, height = max(xs[-1] + 1.0, right + 7.0), 6.0
    c = _Canvas(width, height, (6.6, 6.6))
    lit = True if selective else None
    # left: the recurrence, unrolled
    c.label(0.15, height - 0.35, "Mamba: a selective recurrence" if selective else "recurrent view: one step per token",
            fontsize=12, va="center", lit=True)
    c.box(x0, rows["h"], "$h_0$", "white", w=0.75, h=h)
    for t in range(1, steps + 1):
        x = x0 + gap * t
        c.box(x, rows["x"], f"$x_{{{t}}}$", INPUT_FILL, w=w, h=h)
        c.box(x, rows["h"], f"$h_{{{t}}}$", STATE_FILL, w=w, h=h)
        c.box(x, rows["y"], f"$y_{{{t}}}$", CANDIDATE_FILL, w=w, h=h)
        _arrow(c, [(x - gap + (w if t > 1 else 0.75) / 2, rows["h"]), (x - w / 2, rows["h"])], lit=lit)
        _arrow(c, [(x, rows["x"] + h / 2), (x, rows["h"] - h / 2)], lit=lit)
        _arrow(c, [(x, rows["h"] + h / 2), (x, rows["y"] - h / 2)], lit=lit)
        if selective or t == 1:                                # the same A, B, C at every step: named once
            sub = f"_{{{t}}}" if selective else ""
            c.label(x - gap / 2, rows["h"] + 0.12, f"$A{sub}$", fontsize=10, ha="center", va="bottom", lit=lit)
            c.label(x + 0.1, (rows["x"] + rows["h"]) / 2, f"$B{sub}$", fontsize=10, va="center", lit=lit)
            c.label(x + 0.1, (rows["h"] + rows["y"]) / 2, f"$C{sub}$", fontsize=10, va="center", lit=lit)
    equation = ("$h_t = A_t\\,h_{t-1} + B_t\\,x_t$,   $y_t = C_t\\,h_t$" if selective
                else "$h_t = A\\,h_{t-1} + B\\,x_t$,   $y_t = C\\,h_t$")
    c.label(0.15, height - 0.95, equation, fontsize=11, va="center")
    c.ax.text(0.15, 0.35, ("$A_t, B_t, C_t$ computed from $x_t$ (through a step size $\\Delta_t$)" if selective
                           else "the same $A$, $B$, $C$ at every step; $h_t$: $N$ numbers"),
              fontsize=9.5, color=_TAG_INK, va="center", style="italic")
    # right: the same outputs as one convolution, drawn for the last output y_steps
    shown = None if not selective else False
    c.label(right, height - 0.35, "convolution view: all outputs at once", fontsize=12, va="center",
            lit=False if selective else True)
    c.ax.add_patch(Rectangle((right - 0.3, 0.1), 0.02, height - 0.2, color="#9a9a9a", lw=0))
    top_x = (xs[0] + xs[-1]) / 2
    c.box(top_x, rows["y"], f"$y_{{{steps}}}$", CANDIDATE_FILL, w=w, h=h, lit=shown)
    for j, x in enumerate(xs, start=1):
        c.box(x, rows["x"], f"$x_{{{j}}}$", INPUT_FILL, w=w, h=h, lit=shown)
        start, end = (x, rows["x"] + h / 2), (top_x + 0.12 * (j - (steps + 1) / 2), rows["y"] - h / 2)
        _arrow(c, [start, end], lit=shown)
        along = 0.3                                            # the kernel weight sits on its arrow, low down
        c.label(start[0] + along * (end[0] - start[0]), start[1] + along * (end[1] - start[1]),
                f"${_power(steps - j)}$", fontsize=10, ha="center", va="center", lit=shown,
                bbox=dict(facecolor="white", edgecolor="none", pad=1.0))
    c.label(right, height - 0.95, "$y_t = \\sum_j K_j\\, x_{t-j}$,   $K = (CB, CAB, CA^2B, \\dots)$", fontsize=11,
            va="center", lit=shown)
    c.ax.text(right, 0.35, ("no fixed kernel: a parallel scan instead" if selective
                            else "one convolution over the sequence (by FFT)"),
              fontsize=9.5, color=_TAG_INK, va="center", style="italic")
    _fit(c, width, height, min(0.55, 8.8 / width))
    kernel = ", ".join(_power(steps - j) for j in range(1, steps + 1))
    if selective:
        alt = (f"Diagram of Mamba's selective state-space layer over {steps} tokens, in two panels. Left, the "
               f"recurrence unrolled, outlined in red and bold: inputs x_1 to x_{steps} along the bottom, states h_1 to "
               f"h_{steps} in the middle starting from h_0, outputs y_1 to y_{steps} on top; every step has its own A_t, "
               f"B_t and C_t, computed from x_t through a step size Delta_t: h_t = A_t h_(t-1) + B_t x_t, "
               f"y_t = C_t h_t. Right, faded: the convolution view, y_{steps} as a weighted sum of x_1 to x_{steps} with "
               f"weights {kernel}. What to see: with A, B and C changing at every step there is no fixed kernel, so "
               f"the convolution view is gone; a parallel scan computes the states instead.")
    else:
        alt = (f"Diagram of a linear state-space layer over {steps} tokens, in two panels. Left, the recurrence "
               f"unrolled: inputs x_1 to x_{steps} along the bottom, states h_1 to h_{steps} in the middle starting "
               f"from h_0, outputs y_1 to y_{steps} on top; each state has an arrow from the state before it (A) and "
               f"from its input (B), and sends one to its output (C): h_t = A h_(t-1) + B x_t, y_t = C h_t, the same "
               f"A, B, C at every step and a state of N numbers. Right, the same layer as a convolution: the last "
               f"output y_{steps} gathers every input directly, x_1 to x_{steps} weighted by {kernel}, the kernel "
               f"K = (CB, CAB, CA^2B, ...). What to see: the recurrence needs {steps} steps one after another; the "
               f"convolution computes every output at once from the same A, B, C.")
    return Diagram(c.fig, alt)


def bert_pretraining() -> Diagram:
    """BERT's two pre-training objectives, masked LM and next-sentence prediction, on one input (notebook 16)."""
    tokens = ["[CLS]", "$a_1$", "[M]", "[SEP]", "$b_1$", "$b_2$", "[SEP]"]
    types = [0, 0, 0, 0, 1, 1, 1]
    gap, w, h = 1.25, 1.0, 0.55
    xs = [0.9 + gap * i for i in range(len(tokens))]
    width, height = xs[-1] + 1.6, 6.1
    c = _Canvas(width, height, (6.6, 6.6))
    rows = {"types": 0.35, "tokens": 1.1, "encoder": 2.45, "outputs": 3.75, "classifier": 5.05}
    for x, token, kind in zip(xs, tokens, types):
        special = token in ("[CLS]", "[SEP]")
        masked = token == "[M]"
        c.box(x, rows["tokens"], token, GATE_FILL if masked else STATE_FILL if special else INPUT_FILL,
              lit=True if masked else None, w=w, h=h, fontsize=10 if special or masked else 12)
        c.ax.text(x, rows["types"], str(kind), fontsize=9.5, color=_TAG_INK, ha="center", va="center")
        _arrow(c, [(x, rows["tokens"] + h / 2), (x, rows["encoder"] - 0.35)])
    c.box((xs[0] + xs[-1]) / 2, rows["encoder"], "encoder: full attention, both directions", CANDIDATE_FILL,
          w=xs[-1] - xs[0] + w, h=0.7, fontsize=11)
    # the two heads: the MLM at the masked position, NSP on the final [CLS] vector
    mask_x, cls_x = xs[2], xs[0]
    for x, text, lit in ((cls_x, "$C$", True), (mask_x, "$z_3$", True)):
        _arrow(c, [(x, rows["encoder"] + 0.35), (x, rows["outputs"] - h / 2)], lit=lit)
        c.box(x, rows["outputs"], text, STATE_FILL, lit=lit, w=w, h=h)
        _arrow(c, [(x, rows["outputs"] + h / 2), (x, rows["classifier"] - h / 2)], lit=lit)
    c.box(cls_x + 0.55, rows["classifier"], "IsNext / NotNext", GATE_FILL, lit=True, w=2.4, h=h, fontsize=10)
    c.box(mask_x + 0.25, rows["classifier"], "predict $a_2$", GATE_FILL, lit=True, w=1.5, h=h, fontsize=10)
    c.ax.text(cls_x - 0.65, rows["classifier"] + 0.7, "NSP: does B follow A?", fontsize=10, color=INK, ha="left",
              va="center")
    c.ax.text(mask_x + 1.2, rows["classifier"], "MLM: the original token at [M] ([MASK]);\nthe loss is taken there only",
              fontsize=10, color=INK, ha="left", va="center")
    c.ax.text(xs[3] + 0.1, rows["outputs"], "segment A = $a_1 a_2$\nsegment B = $b_1 b_2$", fontsize=9.5,
              color=_TAG_INK, ha="left", va="center")
    c.ax.text(xs[-1] + 0.6, rows["types"], "token\ntype", fontsize=9, color=_TAG_INK, ha="left", va="center")
    _fit(c, width, height, 0.62)
    alt = ("Diagram of BERT's two pre-training objectives on one input, read from the bottom up. The input row is "
           "[CLS] a_1 [MASK] [SEP] b_1 b_2 [SEP]: segment A (a_1 a_2, with a_2 replaced by [MASK]) and segment B "
           "(b_1 b_2), each closed by [SEP]; under each token its token type, 0 for [CLS] A [SEP] and 1 for B [SEP]. "
           "All tokens go through one encoder with full attention, both directions. Two heads, outlined in red: "
           "above [MASK], the masked language model reads the final vector z_3 and predicts the original a_2, the "
           "loss taken only at masked positions; above [CLS], next-sentence prediction reads the final [CLS] vector "
           "C and classifies the pair as IsNext or NotNext (does B follow A in the corpus?).")
    return Diagram(c.fig, alt)
