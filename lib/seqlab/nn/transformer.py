"""The Transformer's stacks and model, twins of ``torch.nn``'s (torch's state_dicts load strictly); notebooks 12-13.

Masks at the boundary are torch's (True = blocked). Unlike torch: a causal hint alone builds the mask, an
all-padding sequence gives a finite output, and there is no nested-tensor path. Keyword-only extras:
``positional=`` (owned by the outermost module), ``need_weights``, ``fused``, a KV ``cache``.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.nn.layer_norm import LayerNorm
from seqlab.nn.masks import causal_mask, to_additive
from seqlab.nn.multihead import Rotation
from seqlab.nn.positional import PositionalEncoding
from seqlab.nn.transformer_checks import check_heads, check_sequence
from seqlab.nn.transformer_layers import (
    Activation,
    TransformerDecoderLayer,
    TransformerEncoderLayer,
    TransformerLayer,
    self_attention_positions,
)

__all__ = ["TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder", "TransformerDecoder",
           "Transformer"]


def _is_causal_mask(mask: Tensor | None, is_causal: bool | None, size: int) -> bool:
    """torch's rule: a given hint wins; with ``None``, whether ``mask`` is exactly the ``(size, size)`` causal mask."""
    if is_causal is not None:
        return is_causal
    if mask is None or tuple(mask.shape) != (size, size):
        return False
    allowed = causal_mask(size, device=mask.device)                          # seqlab's meaning: True = may attend
    if mask.dtype == torch.bool:
        return bool((mask == ~allowed).all())                                # torch's meaning: True = blocked
    return bool((mask == to_additive(allowed, mask.dtype)).all())


def _stack(weights: list[Tensor | None]) -> Tensor | None:
    return None if any(w is None for w in weights) else torch.stack(weights)  # (L, B, H, n, m)


def _clones(layer: nn.Module, num_layers: int, positional: PositionalEncoding | None,
            owner: str) -> tuple[nn.ModuleList, PositionalEncoding | None]:
    """``num_layers`` copies of ``layer`` (as torch) and the encoding the stack owns (else the template's)."""
    ours = isinstance(layer, TransformerLayer)
    if not ours and positional is not None:
        raise TypeError(f"{owner}(positional=...) needs seqlab's layers (seqlab.nn.{owner}Layer), which take its "
                        f"rotate and score_bias; got a {type(layer).__module__}.{type(layer).__name__}")
    layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
    if not ours:
        return layers, None
    for each in layers:
        if each.positional is not None:
            del each.positional                # the submodule goes: the stack owns the template's encoding
            each.positional = None
    return layers, positional if positional is not None else layer.positional


def _stacked_length(layers: nn.ModuleList, owner: str, name: str, x: Tensor) -> int:
    """The input's sequence length, checked if the layers are seqlab's (a foreign layer checks it itself)."""
    first = layers[0]
    if isinstance(first, TransformerLayer):
        return check_sequence(owner, name, x, first.d_model, first.batch_first)[1]
    batch_first = getattr(getattr(first, "self_attn", None), "batch_first", False)
    return x.shape[1 if batch_first and x.dim() == 3 else 0]


def _seqlab_extras(layers: nn.ModuleList, owner: str, need_weights: bool, positions: dict[str, Any]) -> dict:
    """The keywords only seqlab's layers take, checked: a foreign layer gets torch's arguments alone."""
    extras = {"need_weights": True} if need_weights else {}
    extras.update(positions)
    if extras and not isinstance(layers[0], TransformerLayer):
        raise TypeError(f"{owner}: {sorted(extras)} need seqlab's layers (seqlab.nn.{owner}Layer); this stack holds "
                        f"{type(layers[0]).__module__}.{type(layers[0]).__name__}, called with torch's arguments only")
    return extras


class TransformerEncoder(nn.Module):
    """``num_layers`` copies of ``encoder_layer`` (any layer module), then ``norm``; as torch's.

    ``need_weights=True`` adds weights ``(L, N, H, S, S)``.
    """

    def __init__(self, encoder_layer: nn.Module, num_layers: int, norm: nn.Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True, *,
                 positional: PositionalEncoding | None = None) -> None:
        super().__init__()
        self.layers, self.positional = _clones(encoder_layer, num_layers, positional, "TransformerEncoder")
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src: Tensor, mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None, *, need_weights: bool = False, rotate: Rotation | None = None,
                score_bias: Tensor | None = None) -> Tensor | tuple[Tensor, Tensor]:
        n = _stacked_length(self.layers, type(self).__name__, "src", src)
        is_causal = _is_causal_mask(mask, is_causal, n)
        extras = _seqlab_extras(self.layers, "TransformerEncoder", need_weights,
                                self_attention_positions(self, rotate, score_bias, n, n, src))
        x, weights = src, []
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal, **extras)
            if need_weights:
                x, w = x
                weights.append(w)                                              # (N, H, S, S)
        if self.norm is not None:
            x = self.norm(x)
        return (x, _stack(weights)) if need_weights else x


class TransformerDecoder(nn.Module):
    """``num_layers`` copies of ``decoder_layer``, then ``norm``; as torch's.

    ``need_weights=True`` adds ``{"self": (L, N, H, T, T), "cross": (L, N, H, T, S)}``.
    """

    def __init__(self, decoder_layer: nn.Module, num_layers: int, norm: nn.Module | None = None, *,
                 positional: PositionalEncoding | None = None) -> None:
        super().__init__()
        self.layers, self.positional = _clones(decoder_layer, num_layers, positional, "TransformerDecoder")
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False, *, need_weights: bool = False,
                rotate: Rotation | None = None,
                score_bias: Tensor | None = None) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        t = _stacked_length(self.layers, type(self).__name__, "tgt", tgt)
        tgt_is_causal = _is_causal_mask(tgt_mask, tgt_is_causal, t)
        extras = _seqlab_extras(self.layers, "TransformerDecoder", need_weights,
                                self_attention_positions(self, rotate, score_bias, t, t, tgt))
        x, self_weights, cross_weights = tgt, [], []
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask, tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                      memory_is_causal=memory_is_causal, **extras)
            if need_weights:
                x, w = x
                self_weights.append(w["self"])                                 # (N, H, T, T)
                cross_weights.append(w["cross"])                               # (N, H, T, S)
        if self.norm is not None:
            x = self.norm(x)
        return (x, {"self": _stack(self_weights), "cross": _stack(cross_weights)}) if need_weights else x


class Transformer(nn.Module):
    """``Decoder(tgt, Encoder(src))`` on embeddings ``(S, N, E)``, ``(T, N, E)``, as ``torch.nn.Transformer``.

    ``need_weights=True`` adds ``{"encoder", "decoder_self", "cross"}`` weights ``(L, N, H, ., .)``.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6, num_decoder_layers: int = 6,
                 dim_feedforward: int = 2048, dropout: float = 0.1, activation: Activation = F.relu,
                 custom_encoder: Any | None = None, custom_decoder: Any | None = None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None, *,
                 positional: PositionalEncoding | None = None, fused: bool = False) -> None:
        super().__init__()
        check_heads(d_model, nhead)
        factory = {"device": device, "dtype": dtype}
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                      bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(*layer_args, **factory, fused=fused),
                num_encoder_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(*layer_args, **factory, fused=fused),
                num_decoder_layers, LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory))
        if positional is not None and not (isinstance(self.encoder, TransformerEncoder)
                                           and isinstance(self.decoder, TransformerDecoder)):
            raise TypeError("Transformer(positional=...) hands rotate and score_bias to its stacks, which must be "
                            "seqlab's TransformerEncoder and TransformerDecoder (custom_encoder / custom_decoder)")
        self.positional = positional          # the one owner of the encoding for both stacks
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None, memory_is_causal: bool = False,
                *, need_weights: bool = False) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        src_batch, s = check_sequence("Transformer", "src", src, self.d_model, self.batch_first)
        tgt_batch, t = check_sequence("Transformer", "tgt", tgt, self.d_model, self.batch_first)
        if src.dim() != tgt.dim() or src_batch != tgt_batch:
            raise ValueError(f"src and tgt must have the same batch size: src {tuple(src.shape)} has {src_batch}, "
                             f"tgt {tuple(tgt.shape)} has {tgt_batch} (batch_first={self.batch_first})")
        weights_kw = {"need_weights": True} if need_weights else {}        # custom stacks need not know the keyword
        # each stack's self-attention: S queries over S keys in the encoder, T over T in the decoder
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal,
                              **weights_kw, **self_attention_positions(self, None, None, s, s, src))
        if need_weights:
            memory, encoder_weights = memory
        output = self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                              tgt_key_padding_mask=tgt_key_padding_mask,
                              memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                              memory_is_causal=memory_is_causal, **weights_kw,
                              **self_attention_positions(self, None, None, t, t, tgt))
        if not need_weights:
            return output
        output, decoder_weights = output
        return output, {"encoder": encoder_weights, "decoder_self": decoder_weights["self"],
                        "cross": decoder_weights["cross"]}

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: torch.device | str | None = None,
                                        dtype: torch.dtype | None = None) -> Tensor:
        """torch's causal mask ``(sz, sz)``: 0 on and below the diagonal, -inf above (no reading ahead)."""
        return to_additive(causal_mask(sz, device=device), dtype or torch.get_default_dtype())

    def _reset_parameters(self) -> None:
        """Xavier-uniform for every matrix, as torch.nn.Transformer (biases and LN keep their init)."""
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
