r"""The Transformer's encoder and decoder layers, ``torch.nn`` twins; notebooks 12 and 13 print them.

Every sublayer sits in :meth:`TransformerLayer.residual`: post-norm :math:`\mathrm{LN}(x + F(x))` (the paper)
or pre-norm :math:`x + F(\mathrm{LN}(x))` (``norm_first``, GPT-2).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.nn.layer_norm import LayerNorm
from seqlab.nn.multihead import AttentionCache, MultiheadAttention, Rotation
from seqlab.nn.positional import PositionalEncoding
from seqlab.nn.transformer_checks import check_attn_mask, check_heads, check_padding_mask, check_sequence

#: The activations known by name (torch.nn knows the same two); any callable works too.
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}

Activation = str | Callable[[Tensor], Tensor]

#: A sublayer as :meth:`TransformerLayer.residual` calls it: its output and, for an attention, its weights.
Sublayer = Callable[[Tensor], tuple[Tensor, Tensor | None]]


def _activation(activation: Activation) -> Callable[[Tensor], Tensor]:
    if isinstance(activation, str):
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}: expected one of {tuple(ACTIVATIONS)} "
                             f"or a callable such as torch.tanh")
        return ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(f"activation must be one of {tuple(ACTIVATIONS)} or a callable, "
                        f"got {type(activation).__name__}")
    return activation


def self_attention_positions(owner: nn.Module, rotate: Rotation | None, score_bias: Tensor | None, n: int, m: int,
                             x: Tensor) -> dict[str, Any]:
    """The self-attention's position arguments: the caller's or the encoding ``owner`` holds (not both)."""
    given = {name: value for name, value in (("rotate", rotate), ("score_bias", score_bias)) if value is not None}
    positional = getattr(owner, "positional", None)
    if positional is None:
        return given
    if given:
        raise ValueError(f"{type(owner).__name__} owns a positional encoding ({type(positional).__name__}), which "
                         f"gives its self-attention rotate and score_bias; pass {sorted(given)} only to a module "
                         f"built without positional=")
    return positional.attention_args(n, m, device=x.device, dtype=x.dtype)


class TransformerLayer(nn.Module):
    """The two layers' shared parts, with torch's constructor, names and order of drawing weights."""

    has_cross_attention: ClassVar[bool] = False

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Activation = F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None, *, positional: PositionalEncoding | None = None,
                 fused: bool = False) -> None:
        super().__init__()
        check_heads(d_model, nhead)
        factory = {"device": device, "dtype": dtype}
        self.d_model, self.nhead, self.batch_first, self.norm_first = d_model, nhead, batch_first, norm_first
        attention = partial(MultiheadAttention, d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                            **factory, fused=fused)
        self.self_attn = attention()
        self.positional = positional          # owned here while the layer stands alone (a stack takes it over)
        if self.has_cross_attention:          # no positional encoding: the memory's positions are not the queries'
            self.multihead_attn = attention()
        # the FFN: linear1 = (W_1, b_1), linear2 = (W_2, b_2)
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias, **factory)
        norm = partial(LayerNorm, d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm1, self.norm2 = norm(), norm()                            # sublayer k has norm{k} and dropout{k}
        if self.has_cross_attention:
            self.norm3 = norm()
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        if self.has_cross_attention:
            self.dropout3 = nn.Dropout(dropout)
        self.activation = _activation(activation)

    def residual(self, x: Tensor, norm: nn.Module, dropout: nn.Module,
                 sublayer: Sublayer) -> tuple[Tensor, Tensor | None]:
        r"""``sublayer`` :math:`F` in its residual connection, with dropout on :math:`F`'s output: post-norm
        :math:`\mathrm{LN}(x + F(x))` or pre-norm :math:`x + F(\mathrm{LN}(x))`. Returns the new ``x`` (the
        shape of ``x``) and the sublayer's attention weights (None for the FFN)."""
        if self.norm_first:                                 # pre-norm: the stream x itself is never normalised
            y, weights = sublayer(norm(x))
            return x + dropout(y), weights
        y, weights = sublayer(x)                             # post-norm (the paper): the sum is normalised
        return norm(x + dropout(y)), weights

    def feed_forward(self, x: Tensor) -> Tensor:
        r""":math:`\mathrm{FFN}(x) = \max(0, x W_1 + b_1) W_2 + b_2` on every token (max(0, .) = ReLU, or the
        chosen activation), with dropout on the hidden ``d_ff`` units in training."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))    # (.., d_ff) -> (.., d_model)

    def self_attention_sublayer(self, x: Tensor, **self_attn_args: Any) -> tuple[Tensor, Tensor | None]:
        r"""Sublayer 1, :math:`\mathrm{MultiHead}(x, x, x)`; weights ``(N, H, n, m)`` or None."""
        return self.residual(x, self.norm1, self.dropout1,
                             lambda h: self.self_attn(h, h, h, average_attn_weights=False, **self_attn_args))

    def feed_forward_sublayer(self, x: Tensor, norm: nn.Module, dropout: nn.Module) -> Tensor:
        """The last sublayer, the FFN."""
        return self.residual(x, norm, dropout, lambda h: (self.feed_forward(h), None))[0]

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}, batch_first={self.batch_first}"


class TransformerEncoderLayer(TransformerLayer):
    r"""Encoder layer: :math:`x \leftarrow \mathrm{LN}_1(x + \mathrm{SelfAttn}(x))`, then the FFN likewise
    (``norm_first``: :math:`x + F(\mathrm{LN}(x))`).

    ``forward`` as torch's; ``need_weights=True`` adds weights ``(N, H, S, S)``. With ``cache=``, ``src``
    is the ``S`` positions after ``cache.offset``.
    """

    def forward(self, src: Tensor, src_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                is_causal: bool = False, *, need_weights: bool = False, cache: AttentionCache | None = None,
                rotate: Rotation | None = None, score_bias: Tensor | None = None) -> Tensor | tuple[Tensor, Tensor]:
        batch, n = check_sequence(type(self).__name__, "src", src, self.d_model, self.batch_first)
        m = n + (0 if cache is None else cache.offset)                        # keys: cached, then the n new ones
        check_attn_mask("src_mask", src_mask, batch, self.nhead, n, m)
        check_padding_mask("src_key_padding_mask", src_key_padding_mask, batch, m)
        x, weights = self.self_attention_sublayer(
            src, attn_mask=src_mask, key_padding_mask=src_key_padding_mask, is_causal=is_causal,
            need_weights=need_weights, cache=cache, **self_attention_positions(self, rotate, score_bias, n, m, src))
        x = self.feed_forward_sublayer(x, self.norm2, self.dropout2)
        return (x, weights) if need_weights else x


class TransformerDecoderLayer(TransformerLayer):
    r"""Decoder layer: self-attention, cross-attention to the memory :math:`m`, FFN, each as the encoder's.

    ``forward`` as torch's (only ``tgt_mask`` masks the self-attention); ``need_weights=True`` adds
    ``{"self": (N, H, T, T), "cross": (N, H, T, S)}``.
    """

    has_cross_attention = True                  # multihead_attn, norm3, dropout3: sublayer 2 of 3

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool = False, memory_is_causal: bool = False, *, need_weights: bool = False,
                rotate: Rotation | None = None,
                score_bias: Tensor | None = None) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        _, t, _ = self._check(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
        x, self_weights = self.self_attention_sublayer(
            tgt, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask, is_causal=tgt_is_causal,
            need_weights=need_weights, **self_attention_positions(self, rotate, score_bias, t, t, tgt))
        x, cross_weights = self.cross_attention_sublayer(x, memory, memory_mask, memory_key_padding_mask,
                                                         memory_is_causal, need_weights)
        x = self.feed_forward_sublayer(x, self.norm3, self.dropout3)
        return (x, {"self": self_weights, "cross": cross_weights}) if need_weights else x

    def cross_attention_sublayer(self, x: Tensor, memory: Tensor, memory_mask: Tensor | None = None,
                                 memory_key_padding_mask: Tensor | None = None, memory_is_causal: bool = False,
                                 need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        r"""Sublayer 2 (``norm2``, ``dropout2``): :math:`\mathrm{MultiHead}(x, m, m)`, queries from the decoder,
        keys and values from the memory (used as it comes, in either placement); weights ``(N, H, T, S)`` or None."""
        return self.residual(x, self.norm2, self.dropout2, lambda h: self.multihead_attn(
            h, memory, memory, attn_mask=memory_mask, key_padding_mask=memory_key_padding_mask,
            need_weights=need_weights, average_attn_weights=False, is_causal=memory_is_causal))

    def _check(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None, memory_mask: Tensor | None,
               tgt_key_padding_mask: Tensor | None,
               memory_key_padding_mask: Tensor | None) -> tuple[int | None, int, int]:
        owner = type(self).__name__
        batch, t = check_sequence(owner, "tgt", tgt, self.d_model, self.batch_first)
        if not isinstance(memory, Tensor) or memory.dim() != tgt.dim() or memory.shape[-1] != self.d_model:
            layout = "(N, S, E)" if self.batch_first else "(S, N, E)"
            got = tuple(memory.shape) if isinstance(memory, Tensor) else type(memory).__name__
            raise ValueError(f"{owner} expects memory (the encoder's output) of shape "
                             f"{layout if tgt.dim() == 3 else '(S, E)'} with E = d_model = {self.d_model}, "
                             f"like tgt {tuple(tgt.shape)}; got {got}")
        memory_batch, s = check_sequence(owner, "memory", memory, self.d_model, self.batch_first)
        if memory_batch != batch:
            raise ValueError(f"{owner}: tgt {tuple(tgt.shape)} has batch size {batch} but memory "
                             f"{tuple(memory.shape)} has {memory_batch} (batch_first={self.batch_first})")
        check_attn_mask("tgt_mask", tgt_mask, batch, self.nhead, t, t)
        check_attn_mask("memory_mask", memory_mask, batch, self.nhead, t, s)
        check_padding_mask("tgt_key_padding_mask", tgt_key_padding_mask, batch, t)
        check_padding_mask("memory_key_padding_mask", memory_key_padding_mask, batch, s)
        return batch, t, s
