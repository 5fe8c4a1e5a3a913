r"""Attention explorer: what each head of a trained model attends to, on one example.

Every attention in seqlab returns its weights per head (``need_weights=True``),

.. math::

    A^{(\ell, h)} = \mathrm{softmax}\Big(\frac{Q^{(\ell, h)} {K^{(\ell, h)}}^\top}{\sqrt{d_k}} + M\Big)
    \in \mathbb{R}^{n \times m},

one row per query token, one column per key token, each row summing to 1 (or to 0 for a query
that may attend nowhere, see :func:`seqlab.nn.attention.attend`). The explorer shows these
matrices as the model returned them; it recomputes nothing, so any model that returns per-head
weights (the next issue's BERT and GPT too) can feed it.

- **compute** -- :func:`attention_map` checks and holds one kind of attention for one example
  (an :class:`AttentionMap`: weights ``(layers, heads, n_queries, n_keys)``, query and key
  tokens); :func:`attention_from_model` builds them from what seqlab's modules return for a
  batch; :func:`top_attended` lists what one query reads most; :func:`summarize_head` gives the
  numbers that help name what a head does (entropy, mean distance, share on the previous token,
  on itself, on the first token) and a guess at the name.
- **draw** -- :func:`draw_attention`: one head's matrix with tokens on both axes, the chosen
  query's row outlined with its weights, and the list "what <token> attends to most"; or all
  heads of a layer as a grid of small matrices. :class:`AttentionPlot` is the same figure kept
  alive and redrawn in layers (a token move redraws only the row highlight and the list).
- **controls** -- :class:`AttentionExplorer`: kind (if more than one), layer, head, an "all
  heads" toggle and the query token.

::

    out, weights = model(src, tgt, need_weights=True)            # seqlab.nn.Transformer
    AttentionExplorer(attention_from_model(weights, src_tokens, tgt_tokens, index=0))
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import ipywidgets as widgets
import numpy as np
from matplotlib import colormaps, rcParams
from matplotlib.colors import Normalize
from matplotlib.patches import Rectangle
from matplotlib.transforms import ScaledTranslation, blended_transform_factory

from seqlab.notebook import FIGURE_DPI
from seqlab.widgets.base import HIGHLIGHT_COLOUR, Widget, draw_matrix, text_colour
from seqlab.widgets.layered import LayeredFigure
from seqlab.widgets.live import PNGFigure

__all__ = ["KINDS", "AttentionExplorer", "AttentionMap", "AttentionPlot", "HeadSummary", "attention_from_model",
           "attention_map", "draw_attention", "summarize_head", "top_attended"]

# the keys of seqlab.nn.Transformer's (and TransformerDecoder's) weights -> the kind's name in the explorer
KINDS = {"encoder": "encoder self-attention", "decoder_self": "decoder masked self-attention",
         "self": "decoder masked self-attention", "cross": "cross-attention"}
CMAP = "Oranges"
ROW_SUM_ATOL = 1e-3        # float32 softmax rows of a few hundred keys sum to 1 within ~1e-6


# ================================================================================================
# compute
# ================================================================================================

@dataclass(frozen=True)
class AttentionMap:
    """One kind of attention for one example: ``weights`` ``(layers, heads, n_queries, n_keys)``.

    ``weights[l, h, i, j]`` is how much query ``i`` (``query_tokens[i]``) reads key ``j``
    (``key_tokens[j]``) in head ``h`` of layer ``l``. ``self_attention`` says queries and keys
    are the same sequence (queries are the last ``n_queries`` of its ``n_keys`` positions), which
    is what makes "previous token" and "distance" meaningful. Build it with :func:`attention_map`.
    """

    kind: str
    weights: np.ndarray                  # (L, H, n, m) float64
    query_tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    self_attention: bool

    @property
    def layers(self) -> int:
        return self.weights.shape[0]

    @property
    def heads(self) -> int:
        return self.weights.shape[1]

    @property
    def n_queries(self) -> int:
        return self.weights.shape[2]

    @property
    def n_keys(self) -> int:
        return self.weights.shape[3]


def _to_numpy(weights, name: str) -> np.ndarray:
    if hasattr(weights, "detach"):                              # a torch tensor, on any device
        if weights.is_complex() or not weights.is_floating_point():
            raise TypeError(f"{name} must be floating-point attention weights, got dtype {weights.dtype}")
        return weights.detach().cpu().double().numpy()
    array = np.asarray(weights)
    if array.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be floating-point attention weights, got dtype {array.dtype}")
    return array.astype(np.float64)


def attention_map(weights, query_tokens: Sequence[str], key_tokens: Sequence[str] | None = None, *,
                  kind: str = "self-attention", self_attention: bool | None = None) -> AttentionMap:
    """Check ``weights`` of one example and hold them with their tokens.

    ``weights``: numpy or torch, ``(layers, heads, n, m)``, or ``(heads, n, m)`` / ``(n, m)``
    for one layer (and one head). ``key_tokens`` defaults to ``query_tokens`` (self-attention).
    ``self_attention`` defaults to "``kind`` does not say cross". Every weight must be in [0, 1]
    and every row sum to 1, or to 0 for a query with no allowed key (within 1e-3).
    """
    array = _to_numpy(weights, f"the weights of {kind!r}")
    if array.ndim not in (2, 3, 4):
        raise ValueError(f"the weights of {kind!r} must be (layers, heads, n_queries, n_keys), (heads, n_queries, "
                         f"n_keys) or (n_queries, n_keys) for one example, got shape {array.shape}")
    array = array.reshape((1,) * (4 - array.ndim) + array.shape)           # (L, H, n, m)
    L, H, n, m = array.shape
    if 0 in array.shape:
        raise ValueError(f"the weights of {kind!r} are empty: shape {array.shape} (layers, heads, queries, keys)")
    query_tokens = tuple(str(t) for t in query_tokens)
    key_tokens = query_tokens if key_tokens is None else tuple(str(t) for t in key_tokens)
    if len(query_tokens) != n:
        raise ValueError(f"the weights of {kind!r} have {n} query rows (shape {array.shape} read as (layers, heads, "
                         f"queries, keys)) but {len(query_tokens)} query tokens were given")
    if len(key_tokens) != m:
        raise ValueError(f"the weights of {kind!r} have {m} key columns (shape {array.shape} read as (layers, heads, "
                         f"queries, keys)) but {len(key_tokens)} key tokens were given")
    bad = ~np.isfinite(array) | (array < -ROW_SUM_ATOL) | (array > 1 + ROW_SUM_ATOL)
    if bad.any():
        l, h, i, j = (int(x) for x in np.argwhere(bad)[0])
        raise ValueError(f"the weights of {kind!r} must be probabilities in [0, 1]: layer {l}, head {h}, query {i} "
                         f"({query_tokens[i]!r}), key {j} ({key_tokens[j]!r}) is {array[l, h, i, j]:.4g}; pass the "
                         "softmax weights, not the scores")
    sums = array.sum(axis=-1)                                               # (L, H, n)
    bad = (np.abs(sums - 1) > ROW_SUM_ATOL) & (np.abs(sums) > ROW_SUM_ATOL)
    if bad.any():
        l, h, i = (int(x) for x in np.argwhere(bad)[0])
        raise ValueError(f"each row of the weights of {kind!r} must sum to 1 (or to 0 for a query with no allowed key): "
                         f"layer {l}, head {h}, query {i} ({query_tokens[i]!r}) sums to {sums[l, h, i]:.4g}; pass "
                         "the softmax weights of one example, keys on the last axis")
    if self_attention is None:
        self_attention = "cross" not in kind.lower()
    if self_attention and n > m:
        raise ValueError(f"{kind!r} is self-attention, so its {n} queries must be among its {m} keys (n <= m)")
    return AttentionMap(kind, np.clip(array, 0.0, 1.0), query_tokens, key_tokens, bool(self_attention))


def _crop(array: np.ndarray, n: int, m: int, kind: str) -> np.ndarray:
    """(..., N, M) padded -> (..., n, m): the real tokens of a padded example (padding at the end)."""
    N, M = array.shape[-2:]
    if n > N or m > M:
        raise ValueError(f"{kind!r}: {n} query and {m} key tokens given, but the weights cover only {N} queries and "
                         f"{M} keys (shape {array.shape})")
    lost = array[..., :n, m:].sum(axis=-1) if m < M else np.zeros(1)
    if lost.max() > ROW_SUM_ATOL:
        raise ValueError(f"{kind!r}: the weights put up to {lost.max():.3g} of a row on key positions {m}..{M - 1}, beyond "
                         f"the {m} key tokens given; give a token for every position, or mask the padding "
                         "(key_padding_mask) so that no query reads it")
    return array[..., :n, :m]


def attention_from_model(weights, source_tokens: Sequence[str], target_tokens: Sequence[str] | None = None, *,
                         index: int | None = 0, kind: str | None = None) -> dict[str, AttentionMap]:
    """The :class:`AttentionMap` s of example ``index`` of a batch, from what a seqlab module returned.

    ``weights`` is one of (``B`` batch, ``L`` layers, ``H`` heads; always batch-first):

    - ``Transformer(..., need_weights=True)``'s dict ``{"encoder": (L,B,H,S,S), "decoder_self":
      (L,B,H,T,T), "cross": (L,B,H,T,S)}`` -> encoder self-, decoder masked self- and
      cross-attention (``source_tokens`` S, ``target_tokens`` T: the decoder's input);
    - ``TransformerDecoder``'s ``{"self": (L,B,H,T,T), "cross": (L,B,H,T,S)}`` (or a decoder
      layer's, without ``L``) -> decoder masked self- and cross-attention;
    - a tensor: ``(L,B,H,n,m)`` (an encoder stack), ``(B,H,n,m)`` (a layer, or
      ``MultiheadAttention(average_attn_weights=False)``) or ``(B,n,m)`` (heads averaged): one
      kind, self-attention over ``source_tokens``, or cross-attention with queries
      ``target_tokens`` and keys ``source_tokens`` when those are given.

    ``index=None`` reads weights without a batch axis (an unbatched call). Tokens shorter than
    the padded length keep the first positions (padding at the end must be masked). ``kind``
    names a tensor's kind (default "self-attention" / "cross-attention"). Returns kind -> map,
    ready for :class:`AttentionExplorer`.
    """
    def example(array, what: str, core: int) -> np.ndarray:
        """Drop the batch axis (the ``core``-dimensional per-example part stays, layers before it)."""
        if array is None:
            raise ValueError(f"no weights for {what!r}: run the model with need_weights=True (and fused=False)")
        array = _to_numpy(array, f"the weights of {what!r}")
        if index is None:
            if array.ndim not in (core, core + 1):
                raise ValueError(f"the weights of {what!r} without a batch axis must have {core} or {core + 1} "
                                 f"dimensions, got shape {array.shape}")
            return array
        batch_axis = array.ndim - core - 1
        if batch_axis not in (0, 1):
            raise ValueError(f"the weights of {what!r} must be ([layers,] batch, " + ("heads, " if core == 3 else "")
                             + f"queries, keys), got shape {array.shape}")
        B = array.shape[batch_axis]
        if not -B <= index < B:
            raise IndexError(f"index {index} is outside the batch of {B} in the weights of {what!r} (shape {array.shape})")
        return np.take(array, index, axis=batch_axis)

    source = tuple(str(t) for t in source_tokens)
    target = None if target_tokens is None else tuple(str(t) for t in target_tokens)
    if isinstance(weights, Mapping):
        known = {"encoder", "decoder_self", "cross"} if "encoder" in weights else {"self", "cross"}
        if set(weights) != known:
            raise ValueError(f"weights as a dict must have the keys of Transformer's {{'encoder', 'decoder_self', "
                             f"'cross'}} or TransformerDecoder's {{'self', 'cross'}}, got {sorted(weights)}")
        if target is None:
            raise ValueError("target_tokens are needed for the decoder's weights (its self- and cross-attention "
                             "read the decoder's input)")
        maps = {}
        for key in ("encoder", "decoder_self", "self", "cross"):
            if key not in weights:
                continue
            queries, keys = (source, source) if key == "encoder" else (target, target) if key != "cross" else (target, source)
            array = example(weights[key], KINDS[key], 3)
            maps[KINDS[key]] = attention_map(_crop(array, len(queries), len(keys), KINDS[key]), queries, keys,
                                             kind=KINDS[key], self_attention=key != "cross")
        return maps
    cross = target is not None
    kind = kind or ("cross-attention" if cross else "self-attention")
    probe = _to_numpy(weights, f"the weights of {kind!r}") if weights is not None else None
    core = 3 if probe is not None and probe.ndim - (index is not None) >= 3 else 2      # (B, n, m): heads averaged
    array = example(probe, kind, core)
    queries = target if cross else source
    return {kind: attention_map(_crop(array, len(queries), len(source), kind), queries, source, kind=kind,
                                self_attention=not cross)}


def top_attended(weights_row, key_tokens: Sequence[str], k: int = 5) -> list[tuple[int, str, float]]:
    """The ``k`` keys with the largest weights in one query's row: ``(position, token, weight)``,
    largest first (ties: earlier position first). Keys with weight 0 (masked) are left out."""
    row = _to_numpy(weights_row, "weights_row")
    if row.ndim != 1:
        raise ValueError(f"weights_row must be one query's row (n_keys,), got shape {row.shape}")
    if len(key_tokens) != row.shape[0]:
        raise ValueError(f"one key token per weight: got {len(key_tokens)} tokens for {row.shape[0]} weights")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    order = np.argsort(-row, kind="stable")
    return [(int(j), str(key_tokens[j]), float(row[j])) for j in order[:k] if row[j] > 0]


@dataclass(frozen=True)
class HeadSummary:
    """Numbers that describe one head's attention matrix (means over the queries that read anything).

    ``entropy`` (nats) of a row's weights, and ``max_entropy`` the mean of log(allowed keys), its
    value for a uniform row; ``peak`` the mean largest weight; ``first`` the mean weight on key 0.
    For self-attention only (else nan): ``itself`` (weight on the query's own position),
    ``previous`` / ``next`` (on the position before / after it) and ``distance``, the mean of
    :math:`\\sum_j a_{ij} |i - j|`. ``name`` is a guess: "previous token", "next token",
    "itself", "first token", "broad" (near uniform), "sharp" (one key per query) or "mixed".
    """

    entropy: float
    max_entropy: float
    peak: float
    first: float
    itself: float
    previous: float
    next: float
    distance: float
    name: str

    def describe(self) -> str:
        """Two short lines: entropy (and mean distance); the shares on previous, itself, next, first."""
        first = f"entropy {self.entropy:.2f} of {self.max_entropy:.2f} nats"
        if math.isnan(self.distance):
            return f"{first}\non first {self.first:.2f}"
        return (f"{first}, mean distance {self.distance:.1f}\n"
                f"on previous {self.previous:.2f}, itself {self.itself:.2f}, next {self.next:.2f}, first {self.first:.2f}")


def summarize_head(weights, *, self_attention: bool = True) -> HeadSummary:
    """:class:`HeadSummary` of one head's ``weights`` ``(n_queries, n_keys)``; with
    ``self_attention`` the queries are the last ``n_queries`` of the ``n_keys`` positions."""
    A = _to_numpy(weights, "weights")
    if A.ndim != 2:
        raise ValueError(f"weights must be one head's matrix (n_queries, n_keys), got shape {A.shape}")
    n, m = A.shape
    reads = A.sum(axis=1) > ROW_SUM_ATOL                       # (n,) queries that read anything
    if not reads.any():
        nan = float("nan")
        return HeadSummary(nan, nan, nan, nan, nan, nan, nan, nan, "reads nothing")
    A = A[reads]
    i = np.flatnonzero(reads) + (m - n)                        # each query's own position among the keys
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(A > 0, A * np.log(A), 0.0).sum(axis=1)
    max_entropy = np.log(np.maximum((A > 0).sum(axis=1), 1))
    peak, first = A.max(axis=1).mean(), A[:, 0].mean()
    nan = float("nan")
    itself = previous = following = distance = nan
    if self_attention:
        if m < n:
            raise ValueError(f"self-attention needs at least as many keys as queries, got {n} queries and {m} keys")
        rows = np.arange(len(i))
        itself = A[rows, i].mean()
        has_prev, has_next = i >= 1, i + 1 < m
        previous = A[rows[has_prev], i[has_prev] - 1].mean() if has_prev.any() else nan
        following = A[rows[has_next], i[has_next] + 1].mean() if has_next.any() else nan
        distance = (A * np.abs(i[:, None] - np.arange(m)[None, :])).sum(axis=1).mean()
    normalised = entropy.mean() / max_entropy.mean() if max_entropy.mean() > 0 else 0.0
    shares = {"previous token": previous, "next token": following, "itself": itself, "first token": first}
    best = max((s, name) for name, s in shares.items() if not math.isnan(s))
    if best[0] >= 0.5:
        name = best[1]
    elif normalised >= 0.9:
        name = "broad"
    elif peak >= 0.6:
        name = "sharp"
    else:
        name = "mixed"
    return HeadSummary(float(entropy.mean()), float(max_entropy.mean()), float(peak), float(first), float(itself),
                       float(previous), float(following), float(distance), name)


def _check_view(amap: AttentionMap, layer: int, head: int, token: int) -> None:
    for name, value, size in (("layer", layer, amap.layers), ("head", head, amap.heads), ("token", token, amap.n_queries)):
        if not 0 <= value < size:
            raise ValueError(f"{name} must be in 0..{size - 1} for {amap.kind!r}, got {value}")


# ================================================================================================
# draw
# ================================================================================================

FONT = 10                 # points: tick labels and text (>= 9 pt at 1280x720, where 1 pt >= 1 px)
CHAR_IN = 0.6 * FONT / 72  # about one character's width in inches


def _short(weight: float) -> str:
    """A weight in a small cell: ".42", "1", "" for ~0."""
    if weight < 0.005:
        return ""
    return "1" if weight >= 0.995 else f"{weight:.2f}".lstrip("0")


def _clip(token: str, width: int = 12) -> str:
    return token if len(token) <= width else token[: width - 1] + "…"


class AttentionPlot:
    """The explorer's figure for one :class:`AttentionMap`, kept alive and redrawn in layers.

    ``all_heads=False``: one head's matrix (query rows, key columns, both labelled), the chosen
    query's row outlined with its weights written in, and on the right the list "what <token>
    attends to most" and the head's summary. ``all_heads=True``: the layer's heads as a grid of
    small matrices, each titled with its guessed name, the chosen row outlined in each, the chosen
    head framed, and the list above. :meth:`update` changes artists in place; :meth:`png` redraws
    only what changed (:class:`~seqlab.widgets.layered.LayeredFigure`): the colour bar, tokens and
    frames once; a layer or head change the heatmaps and titles; a token move the highlight and
    the list.
    """

    def __init__(self, amap: AttentionMap, *, all_heads: bool = False, top: int = 5, dpi: int = FIGURE_DPI,
                 summaries: dict[int, Sequence[HeadSummary]] | None = None):
        self.amap, self.all_heads, self.top = amap, all_heads, top
        self._summaries = summaries if summaries is not None else {}      # layer -> per head; may be shared
        self.norm, self.cmap = Normalize(0.0, 1.0), colormaps[CMAP]
        self.view: tuple[int, int, int] | None = None
        (self._build_grid if all_heads else self._build_single)(dpi)
        # the last few views' pixels are kept: flipping between two heads or layers draws no heatmap again
        self.layered = LayeredFigure(self.figure, self.view_artists, self.step_artists, keep_views=4)

    def summaries(self, layer: int) -> Sequence[HeadSummary]:
        if layer not in self._summaries:
            self._summaries[layer] = [summarize_head(w, self_attention=self.amap.self_attention)
                                      for w in self.amap.weights[layer]]
        return self._summaries[layer]

    # layout ---------------------------------------------------------------------------------------
    def _label_sizes(self, cell: float) -> tuple[float, float, bool]:
        """(width of the y labels, height of the x labels, x labels vertical?) in inches."""
        amap = self.amap
        y_width = CHAR_IN * max(len(_clip(t)) for t in amap.query_tokens) + 0.15
        longest_key = CHAR_IN * max(len(_clip(t)) for t in amap.key_tokens)
        vertical = longest_key > 0.95 * cell
        return y_width, (longest_key + 0.15 if vertical else FONT / 72 + 0.15), vertical

    def _matrix_axes(self, fig, left: float, bottom: float, cell: float, W: float, Hgt: float):
        n, m = self.amap.n_queries, self.amap.n_keys
        return fig.add_axes((left / W, bottom / Hgt, m * cell / W, n * cell / Hgt))

    def _build_single(self, dpi: int) -> None:
        amap = self.amap
        n, m = amap.n_queries, amap.n_keys
        cell = float(np.clip(min(6.0 / m, 5.0 / n), 0.08, 0.45))             # inches per token
        y_width, x_height, _ = self._label_sizes(cell)
        left = 0.35 + y_width                                                  # "query" axis title + labels
        bottom = 0.35 + x_height                                               # "key" axis title + labels
        right_panel = 3.3
        W = left + m * cell + 0.25 + 0.15 + 0.45 + right_panel
        Hgt = max(bottom + n * cell + 0.75, 4.2)
        self.figure = fig = PNGFigure(figsize=(W, Hgt), dpi=dpi, facecolor="white")
        ax = self._matrix_axes(fig, left, bottom, cell, W, Hgt)
        self.image = draw_matrix(ax, amap.weights[0, 0], [_clip(t) for t in amap.query_tokens],
                                 [_clip(t) for t in amap.key_tokens], annotate=False, cmap=CMAP, vmin=0.0, vmax=1.0,
                                 xlabel="key (what is read)", ylabel="query (who reads)", fontsize=FONT)
        every = math.ceil(FONT / (cell * 72))               # long sequences: label every k-th token, not overlapping
        if every > 1:
            ax.set_xticks(range(0, m, every), [_clip(t) for t in amap.key_tokens][::every], fontsize=FONT,
                          rotation=ax.get_xticklabels()[0].get_rotation())
            ax.set_yticks(range(0, n, every), [_clip(t) for t in amap.query_tokens][::every], fontsize=FONT)
        self.axes = [ax]
        cax = fig.add_axes(((left + m * cell + 0.25) / W, bottom / Hgt, 0.15 / W, n * cell / Hgt))
        colorbar = fig.colorbar(self.image, cax=cax)
        colorbar.ax.tick_params(labelsize=9)
        colorbar.set_label("weight", fontsize=9)
        self.title = fig.text(left / W, 1 - 0.12 / Hgt, "", fontsize=11, va="top", ha="left")
        panel_x = 1 - (right_panel - 0.1) / W
        self.summary = fig.text(panel_x, bottom / Hgt, "", fontsize=9, va="bottom", ha="left", linespacing=1.4)
        # the list: what stays is drawn once (static layer); per move only the query, tokens and weights
        line = FONT * 1.45 / 72 / Hgt                          # one line of the list, in figure fractions
        top_y = 1 - 0.6 / Hgt
        self.listing = fig.text(panel_x, top_y, "", fontsize=FONT, va="top", ha="left")
        fig.text(panel_x, top_y - line, "attends most to:", fontsize=FONT, va="top", ha="left")
        fig.text(panel_x, top_y - 2 * line, "\n".join(f"{r}." for r in range(1, self.top + 1)), fontsize=FONT,
                 va="top", ha="left", linespacing=1.45, color="#555555")
        self.list_tokens = fig.text(panel_x + 0.3 / W, top_y - 2 * line, "", fontsize=FONT, va="top", ha="left",
                                    linespacing=1.45)
        self.list_weights = fig.text(panel_x + 1.9 / W, top_y - 2 * line, "", fontsize=FONT, va="top", ha="right",
                                     linespacing=1.45)
        self.view_artists = [self.image, self.title, self.summary]
        # the chosen row: an outline, the weights written in, the query's label again in red
        self.row_box = ax.add_patch(Rectangle((-0.5, -0.5), m, 1, fill=False, edgecolor=HIGHLIGHT_COLOUR, lw=2.2,
                                              clip_on=False, zorder=3))
        # the row's weights in its cells where ".42" fits (else the list says them)
        self.row_texts = [ax.text(j, 0, "", ha="center", va="center", fontsize=9 if cell >= 0.3 else 8, zorder=4)
                          for j in range(m if cell >= 0.22 else 0)]
        pad = ScaledTranslation(-rcParams["ytick.major.pad"] / 72, 0, fig.dpi_scale_trans)   # where tick labels end
        blend = blended_transform_factory(ax.transAxes, ax.transData) + pad
        self.row_label = ax.text(0, 0, "", transform=blend, ha="right", va="center", fontsize=FONT,
                                 fontweight="bold", color=HIGHLIGHT_COLOUR, zorder=4,
                                 bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})
        self.step_artists = [self.row_box, *self.row_texts, self.row_label, self.listing, self.list_tokens,
                             self.list_weights]

    def _build_grid(self, dpi: int) -> None:
        amap = self.amap
        n, m, H = amap.n_queries, amap.n_keys, amap.heads
        cols = H if H <= 4 else math.ceil(H / 2)
        rows = math.ceil(H / cols)
        cell = float(np.clip(min(10.4 / (cols * m), 5.2 / (rows * n)), 0.04, 0.3))
        y_width, x_height, _ = self._label_sizes(cell)
        gap_x, gap_y, top = 0.25, 0.45, 0.95
        left, bottom = 0.35 + y_width, 0.35 + x_height
        W = left + cols * m * cell + (cols - 1) * gap_x + 0.3
        W = max(W, 7.5)
        Hgt = bottom + rows * n * cell + (rows - 1) * gap_y + top
        self.figure = fig = PNGFigure(figsize=(W, Hgt), dpi=dpi, facecolor="white")
        self.axes, self.images, self.titles, self.boxes, self.frames = [], [], [], [], []
        every = math.ceil(9 / (cell * 72))                                   # labels that would overlap: every k-th
        for h in range(H):
            r, c = divmod(h, cols)
            x0 = left + c * (m * cell + gap_x)
            y0 = bottom + (rows - 1 - r) * (n * cell + gap_y)
            ax = fig.add_axes((x0 / W, y0 / Hgt, m * cell / W, n * cell / Hgt))
            image = draw_matrix(ax, amap.weights[0, h], [_clip(t) for t in amap.query_tokens],
                                [_clip(t) for t in amap.key_tokens], annotate=False, cmap=CMAP, vmin=0.0, vmax=1.0,
                                fontsize=FONT, label_fontsize=9)
            ax.set_xticks(range(0, m, every), [_clip(t) for t in amap.key_tokens][::every], fontsize=9,
                          rotation=ax.get_xticklabels()[0].get_rotation())
            ax.set_yticks(range(0, n, every), [_clip(t) for t in amap.query_tokens][::every], fontsize=9)
            if c:
                ax.set_yticklabels([])
            if r < rows - 1 and h + cols < H:
                ax.set_xticklabels([])
            if c == 0 and r == rows - 1:
                ax.set_ylabel("query", fontsize=FONT)
                ax.set_xlabel("key", fontsize=FONT)
            self.titles.append(ax.set_title("", fontsize=9, loc="left", pad=5))   # clear of the thick frame
            self.boxes.append(ax.add_patch(Rectangle((-0.5, -0.5), m, 1, fill=False, edgecolor=HIGHLIGHT_COLOUR,
                                                     lw=1.6, clip_on=False, zorder=3)))
            self.frames.append(ax.add_patch(Rectangle((0, 0), 1, 1, transform=ax.transAxes, fill=False,
                                                      edgecolor="black", lw=3.0, clip_on=False, zorder=3)))
            self.axes.append(ax)
            self.images.append(image)
        self.title = fig.text(0.3 / W, 1 - 0.1 / Hgt, "", fontsize=11, va="top", ha="left")
        self.listing = fig.text(0.3 / W, 1 - 0.42 / Hgt, "", fontsize=FONT, va="top", ha="left")
        # the chosen query's label in red left of each row of the grid (labels may be every other one)
        pad = ScaledTranslation(-rcParams["ytick.major.pad"] / 72, 0, fig.dpi_scale_trans)
        self.row_labels = [ax.text(0, 0, "", transform=blended_transform_factory(ax.transAxes, ax.transData) + pad,
                                   ha="right", va="center", fontsize=9, fontweight="bold", color=HIGHLIGHT_COLOUR,
                                   zorder=4, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})
                           for h, ax in enumerate(self.axes) if h % cols == 0]
        self.view_artists = [*self.images, *self.titles, self.title]
        self.step_artists = [*self.boxes, *self.frames, *self.row_labels, self.listing]

    # update -----------------------------------------------------------------------------------------
    def _list_text(self, layer: int, head: int, token: int) -> str:
        amap = self.amap
        top = top_attended(amap.weights[layer, head, token], amap.key_tokens, self.top)
        query = amap.query_tokens[token]
        if self.all_heads:
            items = ", ".join(f"{_clip(t)!r} {w:.2f}" for _, t, w in top) or "nothing (its row is all masked)"
            return f"head {head}: query {token} {_clip(query)!r} attends most to {items}"
        self.list_tokens.set_text("\n".join(f"{_clip(t)}  ({j})" for j, t, _ in top) or "nothing (row all masked)")
        self.list_weights.set_text("\n".join(f"{w:.2f}" for _, _, w in top))
        return f"query {token}: {_clip(query, 20)!r}"

    def update(self, layer: int, head: int, token: int) -> PNGFigure:
        """Show ``layer`` and ``head`` (the framed one in the grid) and highlight query ``token``."""
        amap = self.amap
        _check_view(amap, layer, head, token)
        old = self.view
        if self.all_heads:
            if old is None or old[0] != layer:
                for h, (image, title, summary) in enumerate(zip(self.images, self.titles, self.summaries(layer))):
                    image.set_data(amap.weights[layer, h])
                    title.set_text(f"head {h}: {summary.name}")
                self.title.set_text(f"{amap.kind}, layer {layer}: all {amap.heads} heads")
                self.layered.view_changed(key=layer)
            for h, (box, frame) in enumerate(zip(self.boxes, self.frames)):
                box.set_y(token - 0.5)
                frame.set_visible(h == head)
            for label in self.row_labels:
                label.set_y(token)
                label.set_text(_clip(amap.query_tokens[token]))
        else:
            if old is None or old[:2] != (layer, head):
                summary = self.summaries(layer)[head]
                self.image.set_data(amap.weights[layer, head])
                self.title.set_text(f"{amap.kind}: layer {layer}, head {head}")
                self.summary.set_text(f"head {head} looks like: {summary.name}\n{summary.describe()}")
                self.layered.view_changed(key=(layer, head))
            row = amap.weights[layer, head, token]
            self.row_box.set_y(token - 0.5)
            for j, text in enumerate(self.row_texts):
                text.set_text(_short(row[j]))
                text.set_visible(bool(text.get_text()))                      # blank cells cost nothing
                text.set_y(token)
                text.set_color(text_colour(self.cmap(self.norm(row[j]))))
            self.row_label.set_y(token)
            self.row_label.set_text(_clip(amap.query_tokens[token]))
        self.listing.set_text(self._list_text(layer, head, token))
        self.view = (layer, head, token)
        return self.figure

    def png(self) -> bytes:
        return self.layered.png()


def draw_attention(amap: AttentionMap, layer: int = 0, head: int = 0, token: int = 0, *, all_heads: bool = False,
                   top: int = 5, dpi: int = FIGURE_DPI) -> PNGFigure:
    """A new figure of ``amap``: head ``head`` of ``layer`` (or all its heads, ``head`` framed) with
    query ``token``'s row highlighted and what it attends to most (see :class:`AttentionPlot`)."""
    return AttentionPlot(amap, all_heads=all_heads, top=top, dpi=dpi).update(layer, head, token)


# ================================================================================================
# controls
# ================================================================================================

def _as_maps(attention, query_tokens, key_tokens, kind) -> dict[str, AttentionMap]:
    if isinstance(attention, AttentionMap):
        maps = [attention]
    elif isinstance(attention, Mapping):
        maps = list(attention.values())
        bad = [k for k, v in attention.items() if not isinstance(v, AttentionMap)]
        if bad:
            raise TypeError(f"a dict of attention must map kind -> AttentionMap (see attention_map and "
                            f"attention_from_model); {bad} are not")
    elif isinstance(attention, (list, tuple)) and attention and all(isinstance(a, AttentionMap) for a in attention):
        maps = list(attention)
    else:
        if query_tokens is None:
            raise ValueError("weights given as an array need their query_tokens (and key_tokens for cross-attention)")
        return {(m := attention_map(attention, query_tokens, key_tokens, kind=kind or "self-attention")).kind: m}
    if query_tokens is not None or key_tokens is not None:
        raise ValueError("tokens come with each AttentionMap; give query_tokens/key_tokens only with a bare array")
    if not maps:
        raise ValueError("no attention given: pass at least one AttentionMap")
    return {m.kind: m for m in maps}


class AttentionExplorer(Widget):
    """Widget: choose the kind of attention (if several), the layer, the head (or all heads) and
    the query token; see the matrix, the token's row and what it attends to most.

    ``attention``: an :class:`AttentionMap`, a dict kind -> map (:func:`attention_from_model`), a
    list of maps, or a bare array with its ``query_tokens`` (and ``key_tokens``). Sliders over a
    single value (one layer, one head) are disabled, as is "all heads" for a one-head model. Set
    ``explorer.head.value = 2`` etc. from code to drive it without a display;
    ``explorer.static_figure()`` is the picture of the state it was made with.
    """

    def __init__(self, attention, query_tokens: Sequence[str] | None = None, key_tokens: Sequence[str] | None = None,
                 *, kind: str | None = None, layer: int = 0, head: int = 0, all_heads: bool = False, token: int = 0,
                 top: int = 5, dpi: int = FIGURE_DPI):
        self.maps = _as_maps(attention, query_tokens, key_tokens, kind if not isinstance(attention, Mapping) else None)
        first = kind if kind is not None and kind in self.maps else next(iter(self.maps))
        if kind is not None and kind not in self.maps:
            raise ValueError(f"kind must be one of {list(self.maps)}, got {kind!r}")
        amap = self.maps[first]
        _check_view(amap, layer, head, token)
        self.top = top
        self._plots: dict[tuple[str, bool], AttentionPlot] = {}
        self._summaries: dict[str, dict[int, Sequence[HeadSummary]]] = {k: {} for k in self.maps}
        wide = {"style": {"description_width": "initial"}, "continuous_update": True}
        self.kind = widgets.Dropdown(options=list(self.maps), value=first, description="attention",
                                     layout=widgets.Layout(width="330px"), style={"description_width": "initial"})
        self.layer = widgets.IntSlider(value=layer, min=0, max=max(amap.layers - 1, 0), description="layer",
                                       layout=widgets.Layout(width="230px"), **wide)
        self.head = widgets.IntSlider(value=head, min=0, max=max(amap.heads - 1, 0), description="head",
                                      layout=widgets.Layout(width="230px"), **wide)
        self.all_heads = widgets.ToggleButton(value=all_heads and amap.heads > 1, description="all heads",
                                              tooltip="all heads of the layer as a grid; the chosen head is framed",
                                              layout=widgets.Layout(width="100px"))
        self.token = widgets.SelectionSlider(options=self._token_options(amap), index=token, description="query token",
                                             layout=widgets.Layout(width="560px"), **wide)
        self._enable(amap)
        controls = {"layer": self.layer, "head": self.head, "all_heads": self.all_heads, "token": self.token}
        first_row: list = ["layer", "head", "all_heads"]
        if len(self.maps) > 1:
            controls = {"kind": self.kind, **controls}
            first_row = ["kind", *first_row]
            # registered before the LiveFigure's own observers: ranges follow the kind before the redraw
            self.kind.observe(self._on_kind, names="value")
        super().__init__(controls, rows=[first_row, ["token"]], dpi=dpi)

    @staticmethod
    def _token_options(amap: AttentionMap) -> list[tuple[str, int]]:
        return [(f"{i}: {_clip(t, 16)}", i) for i, t in enumerate(amap.query_tokens)]

    def _enable(self, amap: AttentionMap) -> None:
        self.layer.disabled = amap.layers == 1
        self.head.disabled = self.all_heads.disabled = amap.heads == 1

    def _on_kind(self, change) -> None:
        """Kind switched: the sliders' ranges follow its layers, heads and queries."""
        amap = self.maps[change["new"]]
        with self.live.held(redraw=False):          # the LiveFigure's own observer redraws next
            self.layer.value = min(self.layer.value, amap.layers - 1)
            self.layer.max = amap.layers - 1
            self.head.value = min(self.head.value, amap.heads - 1)
            self.head.max = amap.heads - 1
            if amap.heads == 1:
                self.all_heads.value = False
            token = min(self.token.value, amap.n_queries - 1)
            self.token.options = self._token_options(amap)
            self.token.value = token
            self._enable(amap)

    @property
    def map(self) -> AttentionMap:
        """The attention shown now."""
        return self.maps[self.kind.value]

    def plot(self, kind: str, all_heads: bool) -> AttentionPlot:
        """The live figure of ``kind`` in one of the two modes (built once)."""
        key = (kind, all_heads)
        if key not in self._plots:
            self._plots[key] = AttentionPlot(self.maps[kind], all_heads=all_heads, top=self.top, dpi=self.dpi,
                                             summaries=self._summaries[kind])
        return self._plots[key]

    def summaries(self, layer: int | None = None, kind: str | None = None) -> list[HeadSummary]:
        """The :class:`HeadSummary` of every head of ``layer`` (default: the shown kind and layer)."""
        kind = self.kind.value if kind is None else kind
        layer = self.layer.value if layer is None else layer
        return list(self.plot(kind, False).summaries(layer))

    # draw -------------------------------------------------------------------------------------------
    def figure(self, layer: int, head: int, all_heads: bool, token: int, kind: str | None = None) -> PNGFigure:
        amap = self.maps[kind if kind is not None else self.kind.value]
        return draw_attention(amap, layer, head, token, all_heads=all_heads, top=self.top, dpi=self.dpi)

    def render(self, layer: int, head: int, all_heads: bool, token: int, kind: str | None = None) -> bytes:
        plot = self.plot(kind if kind is not None else self.kind.value, all_heads)
        plot.update(layer, head, token)
        return plot.png()
