r"""Worked-example stepper: self-attention one stage at a time, every number on screen.

    Q, K, V  ->  scores Q K^T  ->  scaled by 1/sqrt(d_k)  ->  masked  ->  softmax A  ->  output A V

- **compute** -- :func:`attention_steps` runs the stages for a small example (numpy in, numpy
  out) and returns an :class:`AttentionSteps` holding every intermediate matrix.
- **draw** -- :func:`draw_attention_stage` draws one stage as annotated matrices, the inputs of
  the stage on the left and its result on the right.
- **controls** -- :class:`AttentionStepper`: a slider over the stages and a causal-mask
  checkbox, a :class:`~seqlab.widgets.base.Widget`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure

from seqlab.notebook import FIGURE_DPI
from seqlab.widgets.base import Widget, draw_matrix
from seqlab.widgets.live import PNGFigure

STAGES = ("Q, K, V", "scores", "scaled", "masked", "softmax", "output")


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


def draw_attention_stage(steps: AttentionSteps, stage: int) -> Figure:
    """One stage (index into :data:`STAGES`) as annotated matrices; returns a new Figure."""
    if not 0 <= stage < len(STAGES):
        raise ValueError(f"stage must be in 0..{len(STAGES) - 1} ({', '.join(STAGES)}), got {stage}")
    t = steps.tokens
    d_k = steps.Q.shape[1]
    lim = max(1.0, float(np.nanmax(np.abs(np.where(np.isfinite(steps.masked), steps.scores, 0)))))
    panels: list[tuple] = []
    if stage == 0:
        panels = [(steps.X, "X (one row per token)", t, None), (steps.Q, "Q = X W_Q", t, None),
                  (steps.K, "K = X W_K", t, None), (steps.V, "V = X W_V", t, None)]
        caption = "1. project every token three ways: a query, a key and a value"
    elif stage == 1:
        panels = [(steps.Q, "Q", t, None), (steps.K.T, "Kᵀ", [f"d{i + 1}" for i in range(d_k)], list(t)),
                  (steps.scores, "Q Kᵀ", t, list(t))]
        caption = "2. score every query against every key: row i, column j is q_i · k_j"
    elif stage == 2:
        panels = [(steps.scores, "Q Kᵀ", t, list(t)), (steps.scaled, f"Q Kᵀ / √{d_k}", t, list(t))]
        caption = f"3. divide by √d_k = √{d_k} = {math.sqrt(d_k):.3f}, so the softmax does not saturate as d_k grows"
    elif stage == 3:
        panels = [(steps.scaled, "scaled", t, list(t)), (steps.masked, "masked", t, list(t))]
        caption = ("4. causal mask: −∞ above the diagonal, token i may not read later tokens" if steps.causal
                   else "4. no mask (tick 'causal' to hide later tokens from each query)")
    elif stage == 4:
        panels = [(steps.masked, "masked", t, list(t)), (steps.weights, "A = softmax(row by row)", t, list(t))]
        caption = "5. softmax along each row: no weight is negative and each row sums to 1"
    else:
        panels = [(steps.weights, "A", t, list(t)), (steps.V, "V", t, None), (steps.Z, "Z = A V", t, None)]
        caption = "6. each output row is the weighted average of the value rows"
    widths = [max(p[0].shape[1], 1.5) for p in panels]
    fig = PNGFigure(figsize=(max(6.5, 0.95 * sum(widths) + 0.9 * len(panels)), 2.9), dpi=FIGURE_DPI,
                    facecolor="white")                   # not pyplot's: redraws leak nothing
    axes = fig.subplots(1, len(panels), gridspec_kw=dict(width_ratios=widths))
    fig.subplots_adjust(left=0.06, right=0.99, top=0.78, bottom=0.08, wspace=0.35)   # before drawing: labels fit
    for ax, (values, title, rows, cols) in zip(np.atleast_1d(axes), panels):
        is_weights = values is steps.weights
        cols = cols if cols is not None else [str(j + 1) for j in range(values.shape[1])]   # feature columns 1, 2, ...
        draw_matrix(ax, values, rows, cols, annotate=True, cmap="Oranges" if is_weights else "Blues",
                    vmin=0.0 if is_weights else -lim, vmax=1.0 if is_weights else lim, fontsize=9)
        ax.set_title(title, fontsize=10)
    fig.suptitle(caption, fontsize=10, x=0.01, ha="left")
    return fig


class AttentionStepper(Widget):
    """Widget: a slider over the stages of self-attention and a causal-mask checkbox, for one example.

    ``X`` ``(n, d_model)``, ``W_q``, ``W_k``, ``W_v`` as in :func:`attention_steps`. Set
    ``stepper.stage.value`` or ``stepper.causal.value`` from code to drive it without a display;
    ``stepper.static_figure()`` is the picture of the stage and mask it was made with.
    """

    def __init__(self, X, W_q, W_k, W_v, *, tokens: Sequence[str] | None = None, stage: int = 0,
                 causal: bool = False):
        self._inputs = (X, W_q, W_k, W_v)
        self.tokens = tokens
        attention_steps(*self._inputs, tokens=tokens)             # check the inputs now, not at the first move
        self.stage = widgets.IntSlider(value=stage, min=0, max=len(STAGES) - 1, description="stage",
                                       continuous_update=True, readout=False)
        self.stage_name = widgets.Label()
        self.causal = widgets.Checkbox(value=causal, description="causal", indent=False)
        super().__init__({"stage": self.stage, "causal": self.causal}, rows=[["stage", self.stage_name, "causal"]])

    def steps(self, causal: bool) -> AttentionSteps:
        return attention_steps(*self._inputs, tokens=self.tokens, causal=causal)

    def update_text(self, stage: int, causal: bool) -> None:
        self.stage_name.value = f"{stage + 1}/{len(STAGES)}: {STAGES[stage]}"

    def figure(self, stage: int, causal: bool) -> Figure:
        return draw_attention_stage(self.steps(causal), stage)
