r"""Positional encodings: how a Transformer learns where each token is.

Self-attention alone is blind to order (permute the tokens and the outputs are permuted the same
way, notebook 11). Each encoding here puts position back in at one of three places, and every one
of them plugs into the same model through the three hooks of :class:`PositionalEncoding`:

=================  ==========================================  ==================================
encoding           where position enters                        hook
=================  ==========================================  ==================================
none (NoPE)        nowhere                                      --
sinusoidal         added to the token embeddings               ``forward(x)``
learned absolute   added to the token embeddings               ``forward(x)``
RoPE               rotates each head's queries and keys        ``rotate(q, k)``
ALiBi              a distance penalty added to the scores      ``score_bias(n, m)``
=================  ==========================================  ==================================

A model calls ``x = positional(x)`` on its embeddings, and hands the same object to its
self-attention layers (``MultiheadAttention(..., positional=...)``), which call ``rotate`` on the
per-head queries and keys and add ``score_bias`` to the scores. Hooks an encoding does not use are
the identity (or ``None``), so the model code is the same for all five.

Positions: in ``rotate`` and ``score_bias`` the ``n`` queries are the *last* ``n`` of the ``m``
key positions (``m = n`` in an ordinary forward pass, ``m > n`` when generating with a cache of
earlier keys), the same convention as :func:`seqlab.nn.masks.causal_mask`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class PositionalEncoding(nn.Module):
    """Base class: every hook is the identity. Subclasses override the hooks they use."""

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Token embeddings ``(B, n, d_model)`` of positions ``offset .. offset + n - 1``, with positions added."""
        return x

    def rotate(self, q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        """Per-head queries ``(B, H, n, d_head)`` and keys ``(B, H, m, d_head)``, with positions applied."""
        return q, k

    def score_bias(self, n: int, m: int, *, device: torch.device | None = None,
                   dtype: torch.dtype = torch.float32) -> Tensor | None:
        """An additive bias ``(H, n, m)`` for the scores of ``n`` queries against ``m`` keys, or None."""
        return None


class NoPositionalEncoding(PositionalEncoding):
    """NoPE: no position information at all (every hook is the identity)."""
