r"""One self-attention head, :class:`SelfAttention`; notebook 9.

:math:`Z = \mathrm{softmax}(Q K^\top / \sqrt{d_k} + M)\, V`, :math:`Q, K, V = X W_Q, X W_K, X W_V`;
``W_q.weight`` is :math:`W_Q^\top` ``(d_k, d_model)``, as torch stores an ``nn.Linear``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.nn.attention import attend
from seqlab.nn.masks import causal_mask, check_mask, merge_masks


class SelfAttention(nn.Module):
    """``forward(x (B, n, d_model), key_mask (B, n) True = real token)`` -> ``z (B, n, d_v)`` (and the weights).

    ``causal=True`` masks the future on every call.
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
