r"""Attention for encoder-decoder models: score every source position, softmax, take the weighted sum.

At decoder step :math:`t`, with decoder state :math:`s_t` and encoder states
:math:`h_1 \dots h_S` (the *memory*):

.. math::

    e_{tj} = \mathrm{score}(s_t, h_j), \qquad
    a_{tj} = \frac{\exp e_{tj}}{\sum_{k} \exp e_{tk}}, \qquad
    c_t = \sum_j a_{tj}\, h_j

with one of four scores (:data:`SCORES`):

========== ======================================= ==============================
name       :math:`\mathrm{score}(s, h)`              parameters
========== ======================================= ==============================
dot        :math:`s^\top h`                          none (needs :math:`d_s = d_h`)
scaled     :math:`s^\top h / \sqrt{d}`               none (needs :math:`d_s = d_h`)
general    :math:`s^\top W h`                        :math:`W \in \mathbb{R}^{d_s \times d_h}`
additive   :math:`v^\top \tanh(W_s s + W_h h)`       :math:`W_s, W_h, v`
========== ======================================= ==============================

``dot``, ``general`` and the "concat" score are Luong et al. (2015); ``additive`` is
Bahdanau et al. (2015); ``scaled`` is the Transformer's (Vaswani et al., 2017), where dividing by
:math:`\sqrt d` keeps the scores' spread independent of the size ``d`` (notebook 9). Padded
source positions get :math:`e_{tj} = -\infty`, hence :math:`a_{tj} = 0`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

SCORES = ("dot", "scaled", "general", "additive")


class Attention(nn.Module):
    """``forward(queries (B, T, d_s), memory (B, S, d_h), mask (B, S))`` -> context ``(B, T, d_h)``
    and weights ``(B, T, S)`` (each row sums to 1 over the unmasked positions).

    ``mask`` is True at real source positions (False at padding); ``None`` means all are real.
    """

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
        if mask is not None:
            e = e.masked_fill(~mask[:, None, :], float("-inf"))
        weights = torch.softmax(e, dim=-1)                                        # a_tj, rows sum to 1
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
            if not mask.any(dim=1).all():
                raise ValueError("every sequence needs at least one unmasked memory position; "
                                 f"rows {(~mask.any(dim=1)).nonzero().flatten().tolist()} are all padding")

    def extra_repr(self) -> str:
        return f"score={self.score!r}, query_size={self.query_size}, memory_size={self.memory_size}"


def length_mask(lengths: Tensor | None, steps: int, device: torch.device | None = None) -> Tensor | None:
    """``(B, S)`` booleans, True at the first ``lengths[b]`` positions of row ``b`` (None if ``lengths`` is)."""
    if lengths is None:
        return None
    lengths = torch.as_tensor(lengths, device=device)
    return torch.arange(steps, device=device)[None, :] < lengths[:, None]
