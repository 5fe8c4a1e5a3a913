r"""The Transformer (Vaswani et al., 2017): encoder and decoder layers, their stacks, and the encoder-decoder.

Every layer is a few *sublayers*, each wrapped in a residual connection and a layer norm
(:class:`seqlab.nn.layer_norm.LayerNorm`). Two ways to wrap, both built here (``norm_first``):

.. math::

    \text{post-norm (the paper, } \texttt{norm\_first=False}\text{):}\quad
        x \leftarrow \mathrm{LN}\big(x + \mathrm{Sublayer}(x)\big)

    \text{pre-norm (GPT-2 and most models since, } \texttt{norm\_first=True}\text{):}\quad
        x \leftarrow x + \mathrm{Sublayer}\big(\mathrm{LN}(x)\big)

Post-norm normalises the residual stream itself after every sublayer; pre-norm leaves the stream
alone (an identity path from input to output, which is why deep pre-norm stacks train without a
learning-rate warm-up, Xiong et al., 2020) and so needs one last LN after the stack (the ``norm``
of :class:`TransformerEncoder` / :class:`TransformerDecoder`).

The sublayers:

- **self-attention** over the layer's own sequence,
  :math:`\mathrm{MultiHead}(x, x, x)` (:class:`seqlab.nn.multihead.MultiheadAttention`);
  in the decoder it is *masked* (causal): position :math:`t` reads positions :math:`\le t` only;
- **cross-attention** (decoder only): queries from the decoder, keys and values from the
  encoder's output, the *memory*: :math:`\mathrm{MultiHead}(x, m, m)`;
- the position-wise **feed-forward network**, the same two-layer MLP applied to every token:

  .. math::

      \mathrm{FFN}(x) = \max(0,\; x W_1 + b_1)\, W_2 + b_2,
      \qquad W_1 \in \mathbb{R}^{d_{model} \times d_{ff}},\; W_2 \in \mathbb{R}^{d_{ff} \times d_{model}}

  with ReLU in the paper (:math:`d_{model} = 512`, :math:`d_{ff} = 2048`) and GELU in BERT and GPT
  (``activation="gelu"``).

Dropout is applied to each sublayer's output before the residual sum, to the attention weights,
and between the two FFN layers, as in ``torch.nn``.

**torch.nn twins.** Every class mirrors its ``torch.nn`` namesake: the same constructor arguments,
submodule and parameter names (``self_attn``, ``multihead_attn``, ``linear1``, ``dropout``,
``linear2``, ``norm1..3``, ``dropout1..3``, ``layers.N``, ``norm``), so a ``torch.nn`` state_dict
loads with ``strict=True``, and torch's meaning of the masks: a boolean ``*_mask`` is True where
attending is *not* allowed, a float one is added to the scores; ``*_key_padding_mask`` ``(N, S)``
is True at padding; ``is_causal`` / ``tgt_is_causal`` / ``memory_is_causal`` are *hints* that the
given mask is the causal one (the stacks detect it when the hint is ``None``, as torch does); the
mask itself is what counts. One addition: a causal hint *without* a mask builds the causal mask
(seqlab's ``MultiheadAttention`` does; torch raises). A sequence that is all padding gives a finite output (its attention
reads nothing, see :func:`seqlab.nn.attention.attend`) where ``torch.nn`` gives NaN.

What ``torch.nn`` lacks is added as keyword-only arguments:

- ``positional=`` (a :class:`seqlab.nn.positional.PositionalEncoding`) acts in every
  *self*-attention (never cross-attention: the memory's positions are not the queries'), through
  its ``rotate`` (RoPE) and ``score_bias`` (ALiBi). One module owns it, as a submodule (so
  ``.to(device)`` moves it and a learned table is saved once): the layer built with it, or, once
  layers are stacked, the stack (it takes the template layer's encoding, or its own ``positional=``),
  or the :class:`Transformer`. The owner hands what the attention needs down as call arguments,
  ``rotate=`` and ``score_bias=`` (:meth:`~seqlab.nn.positional.PositionalEncoding.attention_args`),
  which every layer and stack's ``forward`` also takes from a model that owns the encoding itself
  (GPT, :class:`~seqlab.models.encoder.EncoderModel`). Encodings *added to the embeddings*
  (sinusoidal, learned) are the model's job, before the first layer: ``x = positional(x)``.
- ``TransformerEncoder`` / ``TransformerDecoder`` stack any layer module, as torch's do (e.g. a
  ``torch.nn.TransformerEncoderLayer``), calling it with torch's arguments; the seqlab extras
  (``need_weights``, ``positional``) need seqlab's layers.
- ``forward(..., need_weights=True)`` also returns every attention's per-head weights, always
  batch-first: a layer's ``(B, H, n, m)``, a stack's ``(L, B, H, n, m)`` over its ``L`` layers.
- ``fused=True`` computes attention with ``torch.nn.functional.scaled_dot_product_attention``
  (faster, no weights kept) whenever the weights are not asked for.
- ``TransformerEncoderLayer.forward(..., cache=AttentionCache())``: a KV cache for a causal
  (decoder-only, GPT-style) stack generating a few new positions at a time; the self-attention
  appends their keys and values (:mod:`seqlab.nn.multihead`), and masks have ``offset + n`` key columns.

Note that ``torch.nn.Transformer`` (and :class:`Transformer` here) always puts a final LN after each
stack, also in post-norm where the paper has none: 2 x 2 x d_model parameters more than the paper.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.nn.layer_norm import LayerNorm
from seqlab.nn.masks import causal_mask, check_mask, to_additive
from seqlab.nn.multihead import AttentionCache, MultiheadAttention, Rotation
from seqlab.nn.positional import PositionalEncoding

#: The activations known by name (torch.nn knows the same two); any callable works too.
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}

Activation = str | Callable[[Tensor], Tensor]


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


def _check_heads(d_model: int, nhead: int) -> None:
    if nhead < 1 or d_model % nhead:
        raise ValueError(f"d_model must be divisible by nhead (each head gets d_model / nhead features), "
                         f"got d_model={d_model}, nhead={nhead}")


def _check_sequence(owner: str, name: str, x: Tensor, d_model: int, batch_first: bool) -> tuple[int | None, int]:
    """Check ``x``'s shape against ``d_model``; return (batch size or None if unbatched, length)."""
    layout = "(N, L, E)" if batch_first else "(L, N, E)"
    if not isinstance(x, Tensor) or x.dim() not in (2, 3) or x.shape[-1] != d_model:
        got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{owner} expects {name} of shape {layout} (batch_first={batch_first}) or (L, E) unbatched, "
                         f"with E = d_model = {d_model}; got {got}")
    if x.dim() == 2:
        return None, x.shape[0]
    return (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])


def _check_attn_mask(name: str, mask: Tensor | None, batch: int | None, nhead: int, n: int, m: int) -> None:
    if mask is not None:
        stacked = (nhead if batch is None else batch * nhead, n, m)
        check_mask(name, mask, [(n, m), stacked],
                   what="torch's meaning: True or -inf where attending is not allowed")


def _check_padding_mask(name: str, mask: Tensor | None, batch: int | None, m: int) -> None:
    if mask is not None:
        check_mask(name, mask, [(m,) if batch is None else (batch, m)], what="torch's meaning: True at padding")


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


def _positions(owner: nn.Module, rotate: Rotation | None, score_bias: Tensor | None, n: int, m: int,
               x: Tensor) -> dict[str, Any]:
    """The self-attention's position arguments for ``n`` queries over ``m`` keys: the caller's, or else those of
    the encoding ``owner`` holds (computed in ``x``'s dtype, on its device). Never both: one owner."""
    given = {name: value for name, value in (("rotate", rotate), ("score_bias", score_bias)) if value is not None}
    positional = getattr(owner, "positional", None)
    if positional is None:
        return given
    if given:
        raise ValueError(f"{type(owner).__name__} owns a positional encoding ({type(positional).__name__}), which "
                         f"gives its self-attention rotate and score_bias; pass {sorted(given)} only to a module "
                         f"built without positional=")
    return positional.attention_args(n, m, device=x.device, dtype=x.dtype)


def _stack(weights: list[Tensor | None]) -> Tensor | None:
    return None if any(w is None for w in weights) else torch.stack(weights)  # (L, B, H, n, m)


class TransformerEncoderLayer(nn.Module):
    r"""One encoder layer: self-attention, then the FFN, each in a residual connection with LayerNorm.

    Post-norm (``norm_first=False``, the paper): :math:`x \leftarrow \mathrm{LN}_1(x + \mathrm{SelfAttn}(x))`,
    :math:`x \leftarrow \mathrm{LN}_2(x + \mathrm{FFN}(x))`. Pre-norm (``norm_first=True``):
    :math:`x \leftarrow x + \mathrm{SelfAttn}(\mathrm{LN}_1(x))`, :math:`x \leftarrow x + \mathrm{FFN}(\mathrm{LN}_2(x))`.

    ``forward(src (N, S, E) or (S, N, E) or (S, E), src_mask, src_key_padding_mask, is_causal)`` as
    ``torch.nn.TransformerEncoderLayer``; ``need_weights=True`` returns ``(output, weights (N, H, S, S))``.
    ``cache=`` (a :class:`seqlab.nn.multihead.AttentionCache`) makes ``src`` the ``S`` *new* positions
    after ``cache.offset`` cached ones: the masks and the weights then have ``offset + S`` key columns.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Activation = F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None, *, positional: PositionalEncoding | None = None,
                 fused: bool = False) -> None:
        super().__init__()
        _check_heads(d_model, nhead)
        factory = {"device": device, "dtype": dtype}
        self.d_model, self.nhead, self.batch_first, self.norm_first = d_model, nhead, batch_first, norm_first
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **factory, fused=fused)
        self.positional = positional          # owned here while the layer stands alone (a stack takes it over)
        # the FFN: linear1 = (W_1, b_1), linear2 = (W_2, b_2)
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.activation = _activation(activation)

    def feed_forward(self, x: Tensor) -> Tensor:
        r""":math:`\mathrm{FFN}(x) = \max(0, x W_1 + b_1) W_2 + b_2` on every token (max(0, .) = ReLU, or the
        chosen activation), with dropout on the hidden ``d_ff`` units in training."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))    # (.., d_ff) -> (.., d_model)

    def forward(self, src: Tensor, src_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                is_causal: bool = False, *, need_weights: bool = False, cache: AttentionCache | None = None,
                rotate: Rotation | None = None, score_bias: Tensor | None = None) -> Tensor | tuple[Tensor, Tensor]:
        batch, n = _check_sequence(type(self).__name__, "src", src, self.d_model, self.batch_first)
        m = n + (0 if cache is None else cache.offset)                        # keys: cached, then the n new ones
        _check_attn_mask("src_mask", src_mask, batch, self.nhead, n, m)
        _check_padding_mask("src_key_padding_mask", src_key_padding_mask, batch, m)
        self_attn_args = {"attn_mask": src_mask, "key_padding_mask": src_key_padding_mask, "is_causal": is_causal,
                          "need_weights": need_weights, "cache": cache,
                          **_positions(self, rotate, score_bias, n, m, src)}          # RoPE, ALiBi
        x = src
        if self.norm_first:                                                    # pre-norm: x + Sublayer(LN(x))
            a, weights = self._self_attention(self.norm1(x), **self_attn_args)
            x = x + a
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))
        else:                                                                  # post-norm: LN(x + Sublayer(x))
            a, weights = self._self_attention(x, **self_attn_args)
            x = self.norm1(x + a)
            x = self.norm2(x + self.dropout2(self.feed_forward(x)))
        return (x, weights) if need_weights else x

    def _self_attention(self, x: Tensor, **self_attn_args: Any) -> tuple[Tensor, Tensor | None]:
        a, weights = self.self_attn(x, x, x, average_attn_weights=False, **self_attn_args)
        return self.dropout1(a), weights                                       # weights (N, H, n, m) per head

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}, batch_first={self.batch_first}"


class TransformerDecoderLayer(nn.Module):
    r"""One decoder layer: masked self-attention, cross-attention to the memory, then the FFN.

    Post-norm (``norm_first=False``, the paper):
    :math:`x \leftarrow \mathrm{LN}_1(x + \mathrm{SelfAttn}(x))`,
    :math:`x \leftarrow \mathrm{LN}_2(x + \mathrm{CrossAttn}(x, m))`,
    :math:`x \leftarrow \mathrm{LN}_3(x + \mathrm{FFN}(x))`. Pre-norm (``norm_first=True``):
    :math:`x \leftarrow x + \mathrm{SelfAttn}(\mathrm{LN}_1(x))`,
    :math:`x \leftarrow x + \mathrm{CrossAttn}(\mathrm{LN}_2(x), m)`,
    :math:`x \leftarrow x + \mathrm{FFN}(\mathrm{LN}_3(x))` (the memory :math:`m` is used as it comes).

    ``forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
    tgt_is_causal, memory_is_causal)`` as ``torch.nn.TransformerDecoderLayer`` (the self-attention is
    masked only by the ``tgt_mask`` you pass: build it with :meth:`Transformer.generate_square_subsequent_mask`);
    ``need_weights=True`` returns ``(output, {"self": (N, H, T, T), "cross": (N, H, T, S)})``.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Activation = F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None, *, positional: PositionalEncoding | None = None,
                 fused: bool = False) -> None:
        super().__init__()
        _check_heads(d_model, nhead)
        factory = {"device": device, "dtype": dtype}
        self.d_model, self.nhead, self.batch_first, self.norm_first = d_model, nhead, batch_first, norm_first
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **factory, fused=fused)
        self.positional = positional          # owned here while the layer stands alone (a stack takes it over)
        # cross-attention: no positional encoding, the memory's positions are not the queries'
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **factory, fused=fused)
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.activation = _activation(activation)

    feed_forward = TransformerEncoderLayer.feed_forward                     # the same FFN, word for word

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool = False, memory_is_causal: bool = False, *, need_weights: bool = False,
                rotate: Rotation | None = None,
                score_bias: Tensor | None = None) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        batch, t, s = self._check(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
        self_attn_args = {"attn_mask": tgt_mask, "key_padding_mask": tgt_key_padding_mask,
                          "is_causal": tgt_is_causal, "need_weights": need_weights,
                          **_positions(self, rotate, score_bias, t, t, tgt)}          # RoPE, ALiBi
        x = tgt
        if self.norm_first:                                                    # pre-norm: x + Sublayer(LN(x))
            a, self_weights = self._self_attention(self.norm1(x), **self_attn_args)
            x = x + a
            c, cross_weights = self._cross_attention(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                                                     memory_is_causal, need_weights)
            x = x + c
            x = x + self.dropout3(self.feed_forward(self.norm3(x)))
        else:                                                                  # post-norm: LN(x + Sublayer(x))
            a, self_weights = self._self_attention(x, **self_attn_args)
            x = self.norm1(x + a)
            c, cross_weights = self._cross_attention(x, memory, memory_mask, memory_key_padding_mask,
                                                     memory_is_causal, need_weights)
            x = self.norm2(x + c)
            x = self.norm3(x + self.dropout3(self.feed_forward(x)))
        return (x, {"self": self_weights, "cross": cross_weights}) if need_weights else x

    _self_attention = TransformerEncoderLayer._self_attention                # weights (N, H, T, T)

    def _cross_attention(self, x: Tensor, memory: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                         is_causal: bool, need_weights: bool) -> tuple[Tensor, Tensor | None]:
        c, weights = self.multihead_attn(x, memory, memory, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                         need_weights=need_weights, average_attn_weights=False, is_causal=is_causal)
        return self.dropout2(c), weights                                       # weights (N, H, T, S)

    def _check(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None, memory_mask: Tensor | None,
               tgt_key_padding_mask: Tensor | None,
               memory_key_padding_mask: Tensor | None) -> tuple[int | None, int, int]:
        owner = type(self).__name__
        batch, t = _check_sequence(owner, "tgt", tgt, self.d_model, self.batch_first)
        if not isinstance(memory, Tensor) or memory.dim() != tgt.dim() or memory.shape[-1] != self.d_model:
            layout = "(N, S, E)" if self.batch_first else "(S, N, E)"
            got = tuple(memory.shape) if isinstance(memory, Tensor) else type(memory).__name__
            raise ValueError(f"{owner} expects memory (the encoder's output) of shape "
                             f"{layout if tgt.dim() == 3 else '(S, E)'} with E = d_model = {self.d_model}, "
                             f"like tgt {tuple(tgt.shape)}; got {got}")
        memory_batch, s = _check_sequence(owner, "memory", memory, self.d_model, self.batch_first)
        if memory_batch != batch:
            raise ValueError(f"{owner}: tgt {tuple(tgt.shape)} has batch size {batch} but memory "
                             f"{tuple(memory.shape)} has {memory_batch} (batch_first={self.batch_first})")
        _check_attn_mask("tgt_mask", tgt_mask, batch, self.nhead, t, t)
        _check_attn_mask("memory_mask", memory_mask, batch, self.nhead, t, s)
        _check_padding_mask("tgt_key_padding_mask", tgt_key_padding_mask, batch, t)
        _check_padding_mask("memory_key_padding_mask", memory_key_padding_mask, batch, s)
        return batch, t, s

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}, batch_first={self.batch_first}"


def _clones(layer: nn.Module, num_layers: int, positional: PositionalEncoding | None,
            owner: str) -> tuple[nn.ModuleList, PositionalEncoding | None]:
    """``num_layers`` copies of ``layer`` (as torch: independent parameters, the same initial values), and the
    positional encoding the stack will own: ``positional`` if given, else the template layer's.

    Any module is copied as torch copies it. A seqlab layer's copies hold no encoding of their own: the
    stack owns the one encoding and hands its self-attention arguments to every layer on each call.
    """
    ours = isinstance(layer, (TransformerEncoderLayer, TransformerDecoderLayer))
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
    """The sequence length of a stack's input: checked against a seqlab layer; a foreign layer checks it itself
    (its length read as torch reads it, from ``self_attn.batch_first``)."""
    first = layers[0]
    if isinstance(first, (TransformerEncoderLayer, TransformerDecoderLayer)):
        return _check_sequence(owner, name, x, first.d_model, first.batch_first)[1]
    batch_first = getattr(getattr(first, "self_attn", None), "batch_first", False)
    return x.shape[1 if batch_first and x.dim() == 3 else 0]


def _seqlab_extras(layers: nn.ModuleList, owner: str, need_weights: bool, positions: dict[str, Any]) -> dict:
    """The keywords only seqlab's layers take, checked: a foreign layer gets torch's arguments alone."""
    extras = {"need_weights": True} if need_weights else {}
    extras.update(positions)
    if extras and not isinstance(layers[0], (TransformerEncoderLayer, TransformerDecoderLayer)):
        raise TypeError(f"{owner}: {sorted(extras)} need seqlab's layers (seqlab.nn.{owner}Layer); this stack holds "
                        f"{type(layers[0]).__module__}.{type(layers[0]).__name__}, called with torch's arguments only")
    return extras


class TransformerEncoder(nn.Module):
    r"""A stack of ``num_layers`` copies of ``encoder_layer`` (``layers.0 ..``), then ``norm`` if given.

    As ``torch.nn.TransformerEncoder``; ``enable_nested_tensor`` and ``mask_check`` are accepted for
    compatibility and change nothing (there is no nested-tensor fast path here). ``encoder_layer`` may be
    any layer module (a ``torch.nn.TransformerEncoderLayer`` too), called as torch calls it. The stack
    owns the positional encoding (``positional``, else the template layer's) and hands ``rotate`` and
    ``score_bias`` to every layer (unless the caller passes them). ``need_weights=True`` returns
    ``(output, weights (L, N, H, S, S))``.
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
                                _positions(self, rotate, score_bias, n, n, src))
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
    r"""A stack of ``num_layers`` copies of ``decoder_layer`` (``layers.0 ..``), then ``norm`` if given.

    As ``torch.nn.TransformerDecoder``; every layer attends to the same ``memory``. Any layer module is
    stacked, and the positional encoding owned, as in :class:`TransformerEncoder`. ``need_weights=True``
    returns ``(output, {"self": (L, N, H, T, T), "cross": (L, N, H, T, S)})``.
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
                                _positions(self, rotate, score_bias, t, t, tgt))
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
    r"""The encoder-decoder: ``memory = Encoder(src)``, ``output = Decoder(tgt, memory)``, as ``torch.nn.Transformer``.

    Defaults are the paper's base model (d_model 512, 8 heads, 6 + 6 layers, d_ff 2048, dropout 0.1,
    ReLU): 44,140,544 parameters, exactly ``torch.nn.Transformer()``'s, without the embeddings (see
    notebook 12 for the count with the paper's shared 37,000-token vocabulary). Inputs are embeddings
    ``(N, S, E)`` / ``(N, T, E)`` (batch_first) or ``(S, N, E)`` / ``(T, N, E)``; the output has the
    target's shape. Each stack ends in a LayerNorm (``encoder.norm``, ``decoder.norm``), as in torch.

    ``positional`` (owned here, once) acts in the self-attention of every encoder and decoder layer: the
    model hands each stack its ``rotate`` and ``score_bias`` on every call; ``need_weights=True``
    returns ``(output, {"encoder": (L, N, H, S, S), "decoder_self": (L, N, H, T, T), "cross": (L, N, H, T, S)})``.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6, num_decoder_layers: int = 6,
                 dim_feedforward: int = 2048, dropout: float = 0.1, activation: Activation = F.relu,
                 custom_encoder: Any | None = None, custom_decoder: Any | None = None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None, *,
                 positional: PositionalEncoding | None = None, fused: bool = False) -> None:
        super().__init__()
        _check_heads(d_model, nhead)
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
        src_batch, s = _check_sequence("Transformer", "src", src, self.d_model, self.batch_first)
        tgt_batch, t = _check_sequence("Transformer", "tgt", tgt, self.d_model, self.batch_first)
        if src.dim() != tgt.dim() or src_batch != tgt_batch:
            raise ValueError(f"src and tgt must have the same batch size: src {tuple(src.shape)} has {src_batch}, "
                             f"tgt {tuple(tgt.shape)} has {tgt_batch} (batch_first={self.batch_first})")
        weights_kw = {"need_weights": True} if need_weights else {}        # custom stacks need not know the keyword
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal,
                              **weights_kw, **_positions(self, None, None, s, s, src))     # S queries, S keys
        if need_weights:
            memory, encoder_weights = memory
        output = self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                              tgt_key_padding_mask=tgt_key_padding_mask,
                              memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                              memory_is_causal=memory_is_causal, **weights_kw,
                              **_positions(self, None, None, t, t, tgt))                      # T queries, T keys
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
