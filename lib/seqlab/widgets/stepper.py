"""Worked-example stepper: self-attention one stage at a time, every number on screen.

    Q, K, V  ->  scores Q K^T  ->  scaled by 1/sqrt(d_k)  ->  mask (causal or none)  ->  softmax A  ->  output A V
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from seqlab.colours import VALUES, WEIGHTS
from seqlab.notebook import FIGURE_DPI
from seqlab.widgets.base import Widget, draw_matrix
from seqlab.widgets.live import PNGFigure

STAGES = ("Q, K, V", "scores", "scaled", "mask", "softmax", "output")


@dataclass(frozen=True)
class AttentionSteps:
    """Every matrix of one self-attention head on ``tokens`` (``n`` rows each)."""

    tokens: tuple[str, ...]
    X: np.ndarray          # (n, d_model)
    Q: np.ndarray          # (n, d_k)
    K: np.ndarray          # (n, d_k)
    V: np.ndarray          # (n, d_v)
    scores: np.ndarray     # (n, n)  Q K^T
    scaled: np.ndarray     # (n, n)  Q K^T / sqrt(d_k)
    masked: np.ndarray     # (n, n)  with -inf where the causal mask forbids
    weights: np.ndarray    # (n, n)  softmax of each row
    Z: np.ndarray          # (n, d_v) weights @ V
    causal: bool


def attention_steps(X: np.ndarray, W_q: np.ndarray, W_k: np.ndarray, W_v: np.ndarray, *,
                    tokens: Sequence[str] | None = None, causal: bool = False) -> AttentionSteps:
    """Run one head on ``X`` ``(n, d_model)`` with ``W_q, W_k`` ``(d_model, d_k)`` and ``W_v`` ``(d_model, d_v)``
    (the lectures' orientation: ``Q = X W_q``), keeping every stage."""
    X, W_q, W_k, W_v = (np.asarray(a, dtype=np.float64) for a in (X, W_q, W_k, W_v))
    if X.ndim != 2:
        raise ValueError(f"X must be a matrix (n, d_model), got shape {X.shape}")
    for name, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v)):
        if W.ndim != 2 or W.shape[0] != X.shape[1]:
            raise ValueError(f"{name} must have shape ({X.shape[1]}, d) to multiply X {X.shape}, got {W.shape}")
    if W_q.shape[1] != W_k.shape[1]:
        raise ValueError(f"W_q and W_k need the same number of columns d_k, got {W_q.shape[1]} and {W_k.shape[1]}")
    n = X.shape[0]
    tokens = tuple(tokens) if tokens is not None else tuple(f"x{i + 1}" for i in range(n))
    if len(tokens) != n:
        raise ValueError(f"one token label per row of X: got {len(tokens)} labels for {n} rows")
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    scores = Q @ K.T
    scaled = scores / math.sqrt(Q.shape[1])
    masked = np.where(np.tril(np.ones((n, n), dtype=bool)), scaled, -np.inf) if causal else scaled.copy()
    shifted = np.exp(masked - masked.max(axis=1, keepdims=True))
    weights = shifted / shifted.sum(axis=1, keepdims=True)
    return AttentionSteps(tokens, X, Q, K, V, scores, scaled, masked, weights, weights @ V, causal)


def describe_stage(steps: AttentionSteps, stage: int) -> str:
    """Stage ``stage``'s picture in words (its alt text), numbers to 2-3 significant digits."""
    if not 0 <= stage < len(STAGES):
        raise ValueError(f"stage must be in 0..{len(STAGES) - 1} ({', '.join(STAGES)}), got {stage}")
    t, n = steps.tokens, len(steps.tokens)
    d_k, d_v = steps.Q.shape[1], steps.V.shape[1]
    tokens = ", ".join(repr(token) for token in t)

    def best(matrix: np.ndarray) -> str:
        """Each query row's largest entry: "'I' to 'pizza' 0.51; ..."."""
        return "; ".join(f"{t[i]!r} to {t[j]!r} {matrix[i, j]:.2f}" for i, j in enumerate(matrix.argmax(axis=1)))

    i, j = np.unravel_index(np.argmax(steps.scores), steps.scores.shape)
    masked = int(np.isneginf(steps.masked).sum())
    described = [                                   # one per stage: the matrices drawn, then what to see
        f"X ({n} by {steps.X.shape[1]}, one row per token: {tokens}) and its projections Q, K ({n} by {d_k}) and "
        f"V ({n} by {d_v})",
        f"Q, K transposed and the {n} by {n} scores Q Kᵀ (row i, column j is q_i · k_j) from "
        f"{steps.scores.min():.3g} to {steps.scores.max():.3g}; the largest, {steps.scores[i, j]:.3g}, is query "
        f"{t[i]!r} against key {t[j]!r}",
        f"the scores and the scores divided by √{d_k} = {math.sqrt(d_k):.3g}, which run from "
        f"{steps.scaled.min():.3g} to {steps.scaled.max():.3g}",
        "the scaled scores and the masked ones: " + (f"the causal mask sets the {masked} cells above the "
                                                     "diagonal to −∞" if steps.causal else "no mask, every query "
                                                     "reads every key"),
        f"the {'masked (causal)' if steps.causal else 'unmasked'} scores and their softmax A, row by row; no weight "
        f"is negative, each row sums to 1, and each query reads most: {best(steps.weights)}",
        f"A, V and the output Z = A V ({n} by {d_v}), from {steps.Z.min():.3g} to {steps.Z.max():.3g}: each output "
        "row is the weighted average of the value rows",
    ]
    return (f"Annotated matrices of self-attention, stage {stage + 1} of {len(STAGES)} ({STAGES[stage]}): "
            f"{described[stage]}.")


# sizes in points, legible on a 1280 x 720 projector showing the picture at its own pixel size
LABEL_FONTSIZE = 14         # tokens, feature numbers, panel titles, axis names
CELL_FONTSIZE = 13          # the number in each cell (11 when cells get small)
CELL_INCHES = 0.62          # side of one matrix cell, shrunk to keep the figure within MAX_INCHES
MAX_INCHES = (15.5, 6.5)    # 1240 x 520 px: the widget (controls + picture + status line) fits 1280 x 720
PANEL_PAD_INCHES = 1.25     # per panel: the row labels and the axis name to its left, the gap between


def mask_title(causal: bool) -> str:
    """The masked scores' panel title: what, if anything, is masked."""
    return "masked (causal)" if causal else "no mask"


def draw_attention_stage(steps: AttentionSteps, stage: int) -> Figure:
    """One stage (index into :data:`STAGES`) as annotated matrices, its inputs left of its result;
    returns a new Figure sized for a 1280 x 720 slide."""
    if not 0 <= stage < len(STAGES):
        raise ValueError(f"stage must be in 0..{len(STAGES) - 1} ({', '.join(STAGES)}), got {stage}")
    t = list(steps.tokens)
    d_k = steps.Q.shape[1]
    features = lambda M: [str(j + 1) for j in range(M.shape[1])]            # noqa: E731  feature columns 1, 2, ...
    lim = max(1.0, float(np.nanmax(np.abs(np.where(np.isfinite(steps.masked), steps.scores, 0)))))
    square = dict(ylabel="query i", xlabel="key j")                       # the n x n matrices
    tokens_by_feature = dict(ylabel="token", xlabel="feature")
    masked = mask_title(steps.causal)
    # one panel: (matrix, title, row labels, column labels, axis names)
    if stage == 0:
        panels = [(steps.X, "X (one row per token)", t, features(steps.X), tokens_by_feature),
                  (steps.Q, "Q = X W_Q", t, features(steps.Q), tokens_by_feature),
                  (steps.K, "K = X W_K", t, features(steps.K), tokens_by_feature),
                  (steps.V, "V = X W_V", t, features(steps.V), tokens_by_feature)]
        caption = "1. project every token three ways: a query, a key and a value"
    elif stage == 1:
        panels = [(steps.Q, "Q", t, features(steps.Q), dict(ylabel="query i", xlabel="feature")),
                  (steps.K.T, "Kᵀ", features(steps.Q), t, dict(ylabel="feature", xlabel="key j")),
                  (steps.scores, "Q Kᵀ", t, t, square)]
        caption = "2. score every query against every key: row i, column j is q_i · k_j"
    elif stage == 2:
        panels = [(steps.scores, "Q Kᵀ", t, t, square), (steps.scaled, f"Q Kᵀ / √{d_k}", t, t, square)]
        caption = f"3. divide by √d_k = √{d_k} = {math.sqrt(d_k):.3f}, so the softmax does not saturate as d_k grows"
    elif stage == 3:
        panels = [(steps.scaled, "scaled", t, t, square), (steps.masked, masked, t, t, square)]
        caption = ("4. causal mask: −∞ above the diagonal, token i may not read later tokens" if steps.causal
                   else "4. no mask: every query may read every key (tick 'causal' to hide later tokens)")
    elif stage == 4:
        panels = [(steps.masked, masked, t, t, square), (steps.weights, "A = softmax, row by row", t, t, square)]
        caption = "5. softmax along each row: no weight is negative and each row sums to 1"
    else:
        panels = [(steps.weights, "A", t, t, square), (steps.V, "V", t, features(steps.V), tokens_by_feature),
                  (steps.Z, "Z = A V", t, features(steps.Z), tokens_by_feature)]
        caption = "6. each output row is the weighted average of the value rows"
    columns = [values.shape[1] for values, *_ in panels]
    rows = max(values.shape[0] for values, *_ in panels)
    pads = PANEL_PAD_INCHES * len(panels) + 0.3
    cell = min(CELL_INCHES, (MAX_INCHES[0] - pads) / sum(columns), (MAX_INCHES[1] - 1.6) / rows)
    content = pads + cell * sum(columns)                        # the panels, their labels and the gaps
    caption_inches = 0.6 * LABEL_FONTSIZE * len(caption) / 72 + 0.4   # 0.6 em a character, generous
    width, height = min(max(content, caption_inches), MAX_INCHES[0]), 1.6 + cell * rows
    fig = PNGFigure(figsize=(width, height), dpi=FIGURE_DPI, facecolor="white")   # not pyplot's: redraws leak nothing
    axes = fig.subplots(1, len(panels), gridspec_kw=dict(width_ratios=columns))
    # margins in inches, turned into fractions before drawing (so the cells' sizes are known); a caption
    # wider than the panels widens the figure on the right, the cells keep their size
    fig.subplots_adjust(left=(PANEL_PAD_INCHES - 0.15) / width, right=(content - 0.3 + 0.15) / width,
                        top=1 - 0.85 / height, bottom=0.75 / height,
                        wspace=PANEL_PAD_INCHES / (cell * sum(columns) / len(panels)))
    cell_fontsize = CELL_FONTSIZE if cell >= 0.55 else 11
    for ax, (values, title, row_labels, col_labels, names) in zip(np.atleast_1d(axes), panels):
        is_weights = values is steps.weights
        draw_matrix(ax, values, row_labels, col_labels, annotate=True, cmap=WEIGHTS if is_weights else VALUES,
                    vmin=0.0 if is_weights else -lim, vmax=1.0 if is_weights else lim, fontsize=cell_fontsize,
                    label_fontsize=LABEL_FONTSIZE)
        ax.set_title(title, fontsize=LABEL_FONTSIZE)
        ax.set_ylabel(names["ylabel"], fontsize=LABEL_FONTSIZE - 1, labelpad=2)
        ax.set_xlabel(names["xlabel"], fontsize=LABEL_FONTSIZE - 1, labelpad=2)
    fig.suptitle(caption, fontsize=LABEL_FONTSIZE, x=0.15 / width, y=1 - 0.1 / height, ha="left", va="top")
    return fig


class AttentionStepper(Widget):
    """Widget: a slider over the stages of self-attention and a causal-mask checkbox, for one example.

    ``X``, ``W_q``, ``W_k``, ``W_v`` as in :func:`attention_steps`.
    """

    def __init__(self, X, W_q, W_k, W_v, *, tokens: Sequence[str] | None = None, stage: int = 0,
                 causal: bool = False):
        self._inputs = (X, W_q, W_k, W_v)
        self.tokens = tokens
        attention_steps(*self._inputs, tokens=tokens)             # check the inputs now, not at the first move
        self.stage = widgets.IntSlider(value=stage, min=0, max=len(STAGES) - 1, description="stage",
                                       continuous_update=True, readout=False)
        # a fixed width wide enough for the longest name, and a gap before the checkbox: a label that
        # sizes itself to its text runs into the checkbox when the text grows
        self.stage_name = widgets.Label(layout=widgets.Layout(width="11em", margin="0 1.5em 0 0.5em"))
        self.causal = widgets.Checkbox(value=causal, description="causal", indent=False,
                                       layout=widgets.Layout(width="auto"))
        super().__init__({"stage": self.stage, "causal": self.causal}, rows=[["stage", self.stage_name, "causal"]])

    def steps(self, causal: bool) -> AttentionSteps:
        return attention_steps(*self._inputs, tokens=self.tokens, causal=causal)

    def update_text(self, stage: int, causal: bool) -> None:
        name = f"mask ({'causal' if causal else 'none'})" if STAGES[stage] == "mask" else STAGES[stage]
        self.stage_name.value = f"{stage + 1}/{len(STAGES)}: {name}"

    def describe(self, stage: int, causal: bool) -> str:
        return describe_stage(self.steps(causal), stage)

    def figure(self, stage: int, causal: bool) -> Figure:
        return draw_attention_stage(self.steps(causal), stage)
