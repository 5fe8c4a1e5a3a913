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
attention (notebook 10) runs several of these side by side. The softmax and the weighted sum are
:func:`seqlab.nn.attention.attend`, the one every attention in seqlab calls; masks follow
:mod:`seqlab.nn.masks`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.nn.attention import attend
from seqlab.nn.masks import causal_mask, check_mask, merge_masks


class SelfAttention(nn.Module):
    """One self-attention head: ``forward(x (B, n, d_model))`` -> ``z (B, n, d_v)`` (and the weights).

    ``causal=True`` masks the future for every call (a decoder, a GPT). ``key_mask`` ``(B, n)`` has
    seqlab's meaning: True = may attend (a real token); a False key (padding) gets no weight.
    ``seqlab.nn.masks.padding_mask(lengths)`` builds one from lengths. (Not a torch twin, so not
    torch's "True at padding": that meaning lives only at the boundary of the ``torch.nn`` twins.)
    """

    def __init__(self, d_model: int, d_k: int, d_v: int | None = None, *, causal: bool = False):
        super().__init__()
        self.d_model, self.d_k, self.d_v, self.causal = d_model, d_k, d_v or d_k, causal
        self.W_q = nn.Linear(d_model, d_k, bias=False)
        self.W_k = nn.Linear(d_model, d_k, bias=False)
        self.W_v = nn.Linear(d_model, self.d_v, bias=False)

    def forward(self, x: Tensor, *, key_mask: Tensor | None = None,
                return_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"SelfAttention expects x of shape (B, n, {self.d_model}), got {tuple(x.shape)}")
        if not x.is_floating_point() or x.dtype != self.W_q.weight.dtype:
            raise TypeError(f"SelfAttention expects x of dtype {self.W_q.weight.dtype} (the weights'), got {x.dtype}")
        if x.device != self.W_q.weight.device:
            raise RuntimeError(f"x is on {x.device} but the weights are on {self.W_q.weight.device}")
        batch, n, _ = x.shape
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)                       # (B, n, d_k), (B, n, d_k), (B, n, d_v)
        causal = causal_mask(n, device=x.device) if self.causal else None       # (n, n), True = may attend
        real = None
        if key_mask is not None:
            check_mask("key_mask", key_mask, [(batch, n)], what="True = may attend")
            if key_mask.dtype != torch.bool:
                raise TypeError(f"key_mask must be boolean (True = may attend), got {key_mask.dtype}")
            real = key_mask[:, None, :]                                         # (B, 1, n), True = real token
        z, weights = attend(q, k, v, merge_masks(causal, real))
        return (z, weights) if return_weights else z

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_k={self.d_k}, d_v={self.d_v}, causal={self.causal}"
