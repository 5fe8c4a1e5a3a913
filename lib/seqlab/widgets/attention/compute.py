"""The attention explorer's compute part: one kind of attention for one example, checked, and its heads summarised.

It shows the per-head weights a model returns (``need_weights=True``) and recomputes nothing.
Arrays in, arrays out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["KINDS", "ROW_SUM_ATOL", "AttentionMap", "HeadSummary", "attention_from_model", "attention_map", "head_shares",
           "check_view", "clip_token", "describe_view", "summarize_head", "top_attended"]

KINDS = {"encoder": "encoder self-attention", "decoder_self": "decoder masked self-attention",
         "self": "decoder masked self-attention", "cross": "cross-attention"}
ROW_SUM_ATOL = 1e-3        # loose enough for float32 softmax rows, tight enough to refuse scores


@dataclass(frozen=True)
class AttentionMap:
    """One kind of attention for one example: ``weights[l, h, i, j]`` ``(layers, heads, n_queries, n_keys)``
    is how much query ``query_tokens[i]`` reads key ``key_tokens[j]`` in head ``h`` of layer ``l``.
    ``self_attention``: queries and keys are one sequence, the queries its last ``n_queries`` positions.
    Build it with :func:`attention_map`."""

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

    ``weights``: numpy or torch, ``(layers, heads, n, m)``, ``(heads, n, m)`` or ``(n, m)``.
    ``key_tokens`` defaults to ``query_tokens``; ``self_attention`` to "``kind`` does not say cross".
    Raises ValueError unless every weight is in [0, 1] and every row sums to 1 (0 for a fully masked
    query), within :data:`ROW_SUM_ATOL`.
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
    """(..., N, M) padded -> (..., n, m): the real tokens (padding at the end, masked)."""
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

    ``weights`` (batch-first; ``L`` layers, ``B`` batch, ``H`` heads) is ``Transformer``'s dict
    ``{"encoder": (L,B,H,S,S), "decoder_self": (L,B,H,T,T), "cross": (L,B,H,T,S)}``, a decoder's
    ``{"self", "cross"}`` (with or without ``L``), or a tensor ``(L,B,H,n,m)``, ``(B,H,n,m)`` or
    ``(B,n,m)``: self-attention over ``source_tokens``, or cross-attention (queries ``target_tokens``)
    when those are given. ``index=None``: no batch axis. Returns kind -> map.
    """
    def example(array, what: str, core: int) -> np.ndarray:
        """Drop the batch axis of a ``core``-dimensional example (layers before it)."""
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
    """The ``k`` largest weights of one query's row as ``(position, token, weight)``, largest (then
    earliest) first; masked keys (weight 0) are left out."""
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
    r"""One head's attention matrix in numbers, means over the queries that read anything.

    ``entropy`` (nats) and ``max_entropy`` (a uniform row's); ``peak`` the largest weight; ``first``
    the weight on key 0; for self-attention only (else nan) the weight on ``itself``, the ``previous``
    and ``next`` positions, and ``distance`` :math:`\sum_j a_{ij} |i - j|`. ``name``: a guess, e.g.
    "previous token", "broad", "sharp", "mixed".
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
        """Two short lines of these numbers."""
        first = f"entropy {self.entropy:.2f} of {self.max_entropy:.2f} nats"
        if math.isnan(self.distance):
            return f"{first}\non first {self.first:.2f}"
        return (f"{first}, mean distance {self.distance:.1f}\n"
                f"on previous {self.previous:.2f}, itself {self.itself:.2f}, next {self.next:.2f}, first {self.first:.2f}")


def summarize_head(weights, *, self_attention: bool = True) -> HeadSummary:
    """:class:`HeadSummary` of one head's ``weights`` ``(n_queries, n_keys)``."""
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


def check_view(amap: AttentionMap, layer: int, head: int, token: int) -> None:
    """Raise ValueError naming the range when ``layer``, ``head`` or ``token`` is outside ``amap``."""
    for name, value, size in (("layer", layer, amap.layers), ("head", head, amap.heads), ("token", token, amap.n_queries)):
        if not 0 <= value < size:
            raise ValueError(f"{name} must be in 0..{size - 1} for {amap.kind!r}, got {value}")



def clip_token(token: str, width: int = 12) -> str:
    """``token`` cut to ``width`` characters, the last one "…"."""
    return token if len(token) <= width else token[: width - 1] + "…"


def _head_words(summary: HeadSummary) -> str:
    """What the guessed name rests on, in words."""
    shares = {"previous token": summary.previous, "next token": summary.next, "itself": summary.itself,
              "first token": summary.first}
    if summary.name in shares:
        return f"{summary.name!r}: on average {shares[summary.name]:.2f} of a query's weight on it"
    if summary.name == "sharp":
        return f"'sharp': on average {summary.peak:.2f} of a query's weight on one key"
    return (f"{summary.name!r}: mean entropy {summary.entropy:.2f} of at most {summary.max_entropy:.2f} nats"
            if summary.name != "reads nothing" else "'reads nothing': every row is masked")


def describe_view(amap: AttentionMap, layer: int, head: int, token: int, *, all_heads: bool = False, top: int = 3,
                  summaries: Sequence[HeadSummary] | None = None) -> str:
    """The explorer's picture of a view in words (its alt text): the plot, what query ``token``
    reads most (``top`` weights) and what the head looks like. ``summaries``: the layer's, if computed."""
    check_view(amap, layer, head, token)
    if summaries is None:
        summaries = [summarize_head(w, self_attention=amap.self_attention) for w in amap.weights[layer]]
    query = f"query {token} {clip_token(amap.query_tokens[token], 20)!r} (the outlined row)"
    size = f"{amap.n_queries} query tokens (rows) by {amap.n_keys} key tokens (columns), weights from 0 to 1"

    def reads(h: int, k: int) -> list[str]:
        return [f"{clip_token(t, 20)!r} ({w:.2f})" for _, t, w in top_attended(amap.weights[layer, h, token],
                                                                               amap.key_tokens, k)]
    if all_heads:
        heads = "; ".join(f"head {h} ({summaries[h].name}) {(reads(h, 1) or ['nothing'])[0]}"
                          for h in range(amap.heads))
        return (f"Grid of heatmaps of the {amap.heads} heads of {amap.kind}, layer {layer}, head {head} framed: "
                f"{size}. The {query} attends most, by head, to: {heads}.")
    listed = reads(head, top)
    most = (f"attends most to {listed[0]}" + (f", then {' and '.join(listed[1:])}" if len(listed) > 1 else "")
            if listed else "attends to nothing (its row is all masked)")
    return (f"Heatmap of {amap.kind}, layer {layer}, head {head}: {size}. The {query} {most}. "
            f"Head {head} looks like {_head_words(summaries[head])}.")


def head_shares(attentions: Sequence) -> dict[str, np.ndarray]:
    """Each head's mean share on the previous, next, first and last token, averaged over sentences:
    ``attentions`` holds one ``(layers, heads, n, n)`` per sentence; returns ``{kind: (layers, heads)}``."""
    if not len(attentions):
        raise ValueError("head_shares needs at least one sentence's attention weights")
    kinds = ("previous token", "next token", "first token", "last token")
    totals: dict[str, np.ndarray] | None = None
    for weights in attentions:
        A = _to_numpy(weights, "attentions").astype(np.float64)
        if A.ndim != 4 or A.shape[-1] != A.shape[-2]:
            raise ValueError(f"each sentence's weights must be (layers, heads, n, n), got shape {A.shape}")
        if totals is None:
            totals = {kind: np.zeros(A.shape[:2]) for kind in kinds}
        elif A.shape[:2] != totals[kinds[0]].shape:
            raise ValueError(f"every sentence needs the same (layers, heads) {totals[kinds[0]].shape}, got {A.shape[:2]}")
        for layer in range(A.shape[0]):
            for head in range(A.shape[1]):
                s = summarize_head(A[layer, head])
                totals["previous token"][layer, head] += s.previous
                totals["next token"][layer, head] += s.next
                totals["first token"][layer, head] += s.first
                totals["last token"][layer, head] += A[layer, head, :, -1].mean()
    return {kind: table / len(attentions) for kind, table in totals.items()}
