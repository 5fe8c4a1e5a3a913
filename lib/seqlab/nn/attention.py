"""Encoder-decoder :class:`Attention` (Luong's and Bahdanau's :data:`SCORES`) and :func:`attend`, which
every seqlab attention ends in (a row with no allowed key gives zeros, not NaN). Masks as in
:mod:`seqlab.nn.masks`. Notebooks 8 (scores), 9 (``attend``) and 15 (:func:`sliding_window_attend`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.nn.masks import allowed_anywhere, causal_mask, merge_masks

SCORES = ("dot", "scaled", "general", "additive")



def masked_softmax(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """``softmax(scores + M)`` over the last dimension, with a defined answer for rows that allow nothing.

    ``scores`` ``(..., n, m)``; ``mask`` broadcasts to it: boolean (True = may attend) or additive
    (0 / -inf), see :mod:`seqlab.nn.masks`. A row whose keys are all blocked gets all-zero weights
    (not the NaN of ``0 / 0``), and its gradient is zero too: such a row reads nothing.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    if mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    else:
        scores = scores + mask
    empty = ~allowed_anywhere(mask)                  # (..., n, 1) rows with no key to attend to
    if not empty.any():                              # the usual case: one ordinary softmax
        return torch.softmax(scores, dim=-1)
    # give the empty rows finite scores (so softmax and its backward stay finite), then zero them
    weights = torch.softmax(scores.masked_fill(empty, 0.0), dim=-1)
    return weights.masked_fill(empty, 0.0)


def _check_broadcasts(mask: Tensor, q: Tensor, k: Tensor) -> None:
    """A ValueError naming the shapes unless ``mask`` broadcasts to the scores ``(..., n, m)``."""
    scores = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
    try:
        torch.broadcast_shapes(mask.shape, scores)
    except RuntimeError:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the scores (..., n, m) = "
                         f"{scores} of q {tuple(q.shape)} against k {tuple(k.shape)}") from None


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, scale: float | None = None,
           dropout_p: float = 0.0, fused: bool = False, is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    r"""Scaled dot-product attention, :math:`\mathrm{softmax}(q k^\top \cdot \text{scale} + M)\, v`: ``(output, weights)``.

    ``q`` ``(..., n, d_k)``, ``k`` ``(..., m, d_k)``, ``v`` ``(..., m, d_v)``; ``mask`` broadcasts
    to ``(..., n, m)`` in seqlab's convention (:mod:`seqlab.nn.masks`); ``scale`` defaults to
    :math:`1/\sqrt{d_k}`. Returns the output ``(..., n, d_v)`` and the weights ``(..., n, m)``
    (after dropout, as torch returns them). Rows with no allowed key give zeros (:func:`masked_softmax`).
    Dropout is applied whenever ``dropout_p > 0``: a module passes ``dropout_p`` only in training mode.

    ``fused=True`` calls ``torch.nn.functional.scaled_dot_product_attention`` instead (one kernel,
    no ``(n, m)`` matrix kept, much faster on a GPU) and returns ``None`` for the weights; the
    explicit path is the one to read, and the one to use wherever weights are shown.

    ``is_causal=True`` adds the causal mask (the queries are the last ``n`` of ``m`` positions; see
    :func:`seqlab.nn.masks.causal_mask`). Fused, with no other mask and ``n == m``, it is passed to the
    kernel as a flag, so no ``(n, m)`` mask is built or kept for backward (notebook 17 measures the
    difference); otherwise the mask is built and merged with ``mask``.
    """
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"queries and keys need the same size d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"one value per key: got {k.shape[-2]} keys (k {tuple(k.shape)}) and "
                         f"{v.shape[-2]} values (v {tuple(v.shape)})")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    n, m = q.shape[-2], k.shape[-2]
    if mask is not None:
        _check_broadcasts(mask, q, k)
    if is_causal and fused and mask is None and n == m:       # torch's kernel applies the flag itself
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, scale=scale, is_causal=True), None
    if is_causal:
        if n > m:
            raise ValueError(f"is_causal=True needs no more queries than keys (the queries are the last n of m "
                             f"positions), got n={n}, m={m}")
        mask = merge_masks(causal_mask(n, m, device=q.device), mask)
    if fused:
        empty = None if mask is None else ~allowed_anywhere(mask)
        if empty is not None and empty.any():        # SDPA gives NaN there; let it attend anywhere, zero later
            mask = mask | empty if mask.dtype == torch.bool else mask.masked_fill(empty, 0.0)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
        if empty is not None and empty.any():
            out = out.masked_fill(empty, 0.0)
        return out, None
    weights = masked_softmax(q @ k.transpose(-2, -1) * scale, mask)     # (..., n, m), rows sum to 1 (or 0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights                                         # (..., n, d_v)


def window_offsets(window: int, *, causal: bool = False) -> list[int]:
    """The key offsets ``j - i`` of the windowed weights' columns: ``-window .. window`` (causal: ``.. 0``)."""
    if isinstance(window, bool) or not isinstance(window, int):
        raise TypeError(f"window must be an int (keys on each side of the query), got {type(window).__name__}")
    if window < 0:
        raise ValueError(f"window must be >= 0 (keys on each side of the query; 0 = itself only), got {window}")
    return list(range(-window, 1 if causal else window + 1))


def sliding_window_attend(q: Tensor, k: Tensor, v: Tensor, window: int, *, causal: bool = False,
                          key_mask: Tensor | None = None, scale: float | None = None) -> tuple[Tensor, Tensor]:
    """``attend(q, k, v, band_mask(n, window, causal=causal))`` without the ``(n, n)`` scores (Longformer).

    ``q``, ``k`` ``(..., n, d_k)``, ``v`` ``(..., n, d_v)``; boolean ``key_mask`` broadcasts to ``(..., n)``.
    Returns the output ``(..., n, d_v)`` and weights ``(..., n, W)``, column ``c`` for offset
    ``window_offsets(window, causal=causal)[c]``.
    """
    offsets = window_offsets(window, causal=causal)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, Tensor) or x.dim() < 2:
            raise ValueError(f"sliding_window_attend expects {name} of shape (..., n, d), got "
                             f"{tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"queries and keys need the same size d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if not q.shape[:-1] == k.shape[:-1] == v.shape[:-1]:
        raise ValueError(f"sliding-window self-attention needs one key and one value per query (the same (..., n)), "
                         f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if not (q.device == k.device == v.device):
        raise RuntimeError(f"q, k and v must be on one device, got {q.device}, {k.device} and {v.device}")
    n = q.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    before, after = -offsets[0], offsets[-1]
    k_padded = F.pad(k, (0, 0, before, after))                       # (..., before + n + after, d_k)
    v_padded = F.pad(v, (0, 0, before, after))                       # key i + o sits at row i + o + before
    # column c of the scores: every query against the key o_c places away (one diagonal of the band)
    scores = torch.stack([(q * k_padded[..., before + o:before + o + n, :]).sum(-1) for o in offsets],
                         dim=-1) * scale                             # (..., n, W)
    position = torch.arange(n, device=q.device)[:, None] + torch.tensor(offsets, device=q.device)   # (n, W): j = i + o
    allowed = (position >= 0) & (position < n)                       # keys that exist
    if key_mask is not None:
        if key_mask.dtype != torch.bool:
            raise TypeError(f"key_mask must be boolean (True = may be read), got {key_mask.dtype}")
        try:
            key_mask = key_mask.expand(q.shape[:-1])
        except RuntimeError:
            raise ValueError(f"key_mask must broadcast to {tuple(q.shape[:-1])} (one entry per key), "
                             f"got {tuple(key_mask.shape)}") from None
        windows = F.pad(key_mask, (before, after), value=False).unfold(-1, len(offsets), 1)   # (..., n, W)
        allowed = allowed & windows
    weights = masked_softmax(scores, allowed)                        # (..., n, W), rows sum to 1 (or 0)
    output = sum(weights[..., c, None] * v_padded[..., before + o:before + o + n, :]
                 for c, o in enumerate(offsets))                     # (..., n, d_v)
    return output, weights


def window_to_dense(weights: Tensor, window: int, *, causal: bool = False) -> Tensor:
    """Windowed weights ``(..., n, W)`` as the dense ``(..., n, n)`` matrix, zero outside the band."""
    offsets = window_offsets(window, causal=causal)
    if weights.dim() < 2 or weights.shape[-1] != len(offsets):
        raise ValueError(f"windowed weights must have shape (..., n, {len(offsets)}) for window={window}, "
                         f"causal={causal}, got {tuple(weights.shape)}")
    n = weights.shape[-2]
    dense = weights.new_zeros(*weights.shape[:-1], n)
    rows = torch.arange(n, device=weights.device)
    for c, o in enumerate(offsets):
        inside = (rows + o >= 0) & (rows + o < n)
        dense[..., rows[inside], rows[inside] + o] = weights[..., rows[inside], c]
    return dense


class Attention(nn.Module):
    """``forward(queries (B, T, d_s), memory (B, S, d_h), mask (B, S) True = real)`` -> context
    ``(B, T, d_h)``, weights ``(B, T, S)``."""

    def __init__(self, score: str, query_size: int, memory_size: int, *, attention_size: int | None = None):
        super().__init__()
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}")
        if score in ("dot", "scaled") and query_size != memory_size:
            raise ValueError(f"the {score!r} score needs queries and memory of the same size, got "
                             f"{query_size} and {memory_size}; use 'general' or 'additive'")
        self.score, self.query_size, self.memory_size = score, query_size, memory_size
        if score == "general":
            self.W = nn.Linear(memory_size, query_size, bias=False)                # s^T (W h)
        elif score == "additive":
            size = attention_size or query_size
            self.W_s = nn.Linear(query_size, size, bias=False)
            self.W_h = nn.Linear(memory_size, size, bias=True)
            self.v = nn.Linear(size, 1, bias=False)

    def scores(self, queries: Tensor, memory: Tensor) -> Tensor:
        """The unnormalised scores :math:`e_{tj}`, shape ``(B, T, S)``."""
        if self.score == "dot":
            return queries @ memory.transpose(1, 2)
        if self.score == "scaled":
            return queries @ memory.transpose(1, 2) / math.sqrt(self.query_size)
        if self.score == "general":
            return queries @ self.W(memory).transpose(1, 2)
        # additive: v^T tanh(W_s s_t + W_h h_j) for every pair (t, j), by broadcasting
        return self.v(torch.tanh(self.W_s(queries)[:, :, None, :] + self.W_h(memory)[:, None, :, :]))[..., 0]

    def forward(self, queries: Tensor, memory: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        self._check(queries, memory, mask)
        e = self.scores(queries, memory)                                          # (B, T, S)
        weights = masked_softmax(e, None if mask is None else mask[:, None, :])   # a_tj, rows sum to 1
        return weights @ memory, weights                                          # c_t (B, T, d_h)

    def _check(self, queries: Tensor, memory: Tensor, mask: Tensor | None) -> None:
        if queries.dim() != 3 or queries.shape[-1] != self.query_size:
            raise ValueError(f"attention expects queries of shape (B, T, {self.query_size}), got {tuple(queries.shape)}")
        if memory.dim() != 3 or memory.shape[-1] != self.memory_size or memory.shape[0] != queries.shape[0]:
            raise ValueError(f"attention expects memory of shape ({queries.shape[0]}, S, {self.memory_size}) "
                             f"(B as in the queries), got {tuple(memory.shape)}")
        if mask is not None:
            if mask.shape != memory.shape[:2] or mask.dtype != torch.bool:
                raise ValueError(f"attention expects a boolean mask of shape {tuple(memory.shape[:2])} (True at real "
                                 f"positions), got {mask.dtype} of shape {tuple(mask.shape)}")

    def extra_repr(self) -> str:
        return f"score={self.score!r}, query_size={self.query_size}, memory_size={self.memory_size}"



class OneQueryAttention(nn.Module):
    """:class:`Attention`'s ``forward`` from notebook 8's one-query ``fn(s (d,), H (S, d)) -> (weights, context)``.

    Padded positions are left out of ``H`` and get weight 0.
    """

    score = "dot"

    def __init__(self, fn, size: int):
        super().__init__()
        if not callable(fn):
            raise TypeError(f"OneQueryAttention needs a function fn(s, H) -> (weights, context), got {type(fn).__name__}")
        self.fn, self.query_size, self.memory_size = fn, size, size

    def forward(self, queries: Tensor, memory: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        Attention._check(self, queries, memory, mask)
        B, T, _ = queries.shape
        context = queries.new_zeros(B, T, memory.shape[-1])
        weights = queries.new_zeros(B, T, memory.shape[1])
        for b in range(B):
            real = torch.ones(memory.shape[1], dtype=torch.bool, device=memory.device) if mask is None else mask[b]
            H = memory[b, real]                                                  # (S_b, d): the real positions
            for t in range(T):
                a, c = self.fn(queries[b, t], H)
                a, c = torch.as_tensor(a), torch.as_tensor(c)
                if a.shape != (H.shape[0],) or c.shape != (H.shape[1],):
                    raise ValueError(f"the attention function must return weights of shape ({H.shape[0]},) and a "
                                     f"context of shape ({H.shape[1]},), got {tuple(a.shape)} and {tuple(c.shape)}")
                weights[b, t, real] = a.to(weights.dtype)
                context[b, t] = c.to(context.dtype)
        return context, weights

    def extra_repr(self) -> str:
        return f"fn={getattr(self.fn, '__name__', self.fn)!r}, size={self.query_size}"
