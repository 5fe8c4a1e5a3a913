r"""Self-attention, one head: every position of a sequence attends to every position of the same sequence.

For a sequence :math:`X \in \mathbb{R}^{n \times d_{model}}` (one row per token):

.. math::

    Q = X W_Q, \quad K = X W_K, \quad V = X W_V, \qquad
    Z = \mathrm{softmax}\Big(\frac{Q K^\top}{\sqrt{d_k}} + M\Big) V

with :math:`W_Q, W_K \in \mathbb{R}^{d_{model} \times d_k}`, :math:`W_V \in \mathbb{R}^{d_{model} \times d_v}`
and a mask :math:`M` that is 0 where position :math:`i` may attend to :math:`j` and :math:`-\infty`
where it may not (a *causal* mask forbids :math:`j > i`: no peeking at later tokens). Row
:math:`i` of the weights :math:`A = \mathrm{softmax}(\cdot)` says how much token :math:`i` reads each
token; row :math:`i` of :math:`Z` is what it reads.

seqlab stores each projection as an ``nn.Linear`` without bias, as torch does: ``W_q.weight`` has
shape ``(d_k, d_model)`` and is :math:`W_Q^\top` (``X @ W_q.weight.T`` is :math:`X W_Q`). Multi-head
attention (notebook 10) runs several of these side by side.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def causal_mask(n: int, device: torch.device | None = None) -> Tensor:
    """``(n, n)`` booleans, True where query ``i`` may attend to key ``j``, that is ``j <= i``."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """``softmax(q k^T / sqrt(d_k))`` masked, times ``v``: returns ``(z, weights)``.

    ``q`` ``(..., n, d_k)``, ``k`` ``(..., m, d_k)``, ``v`` ``(..., m, d_v)``; ``mask`` broadcasts
    to ``(..., n, m)`` and is True where attending is allowed. ``z`` is ``(..., n, d_v)``, the
    weights ``(..., n, m)``.
    """
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"queries and keys need the same size d_k, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"one value per key: got {k.shape[-2]} keys and {v.shape[-2]} values")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])               # (..., n, m)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


class SelfAttention(nn.Module):
    """One self-attention head: ``forward(x (B, n, d_model))`` -> ``z (B, n, d_v)`` (and the weights).

    ``causal=True`` masks the future for every call (a decoder, a GPT); ``key_padding_mask``
    ``(B, n)`` is True at real tokens, False at padding, which then gets no weight.
    """

    def __init__(self, d_model: int, d_k: int, d_v: int | None = None, *, causal: bool = False):
        super().__init__()
        self.d_model, self.d_k, self.d_v, self.causal = d_model, d_k, d_v or d_k, causal
        self.W_q = nn.Linear(d_model, d_k, bias=False)
        self.W_k = nn.Linear(d_model, d_k, bias=False)
        self.W_v = nn.Linear(d_model, self.d_v, bias=False)

    def forward(self, x: Tensor, *, key_padding_mask: Tensor | None = None,
                return_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"SelfAttention expects x of shape (B, n, {self.d_model}), got {tuple(x.shape)}")
        if not x.is_floating_point() or x.dtype != self.W_q.weight.dtype:
            raise TypeError(f"SelfAttention expects x of dtype {self.W_q.weight.dtype} (the weights'), got {x.dtype}")
        if x.device != self.W_q.weight.device:
            raise RuntimeError(f"x is on {x.device} but the weights are on {self.W_q.weight.device}")
        batch, n, _ = x.shape
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)                       # (B, n, d_k), (B, n, d_k), (B, n, d_v)
        mask = causal_mask(n, x.device)[None] if self.causal else None         # (1, n, n)
        if key_padding_mask is not None:
            if key_padding_mask.shape != (batch, n) or key_padding_mask.dtype != torch.bool:
                raise ValueError(f"key_padding_mask must be a boolean tensor of shape ({batch}, {n}), True at real "
                                 f"tokens; got {key_padding_mask.dtype} of shape {tuple(key_padding_mask.shape)}")
            padding = key_padding_mask[:, None, :]                             # (B, 1, n)
            mask = padding if mask is None else mask & padding
        z, weights = scaled_dot_product_attention(q, k, v, mask)
        return (z, weights) if return_weights else z

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_k={self.d_k}, d_v={self.d_v}, causal={self.causal}"
