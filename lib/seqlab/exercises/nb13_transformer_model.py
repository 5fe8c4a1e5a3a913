"""Notebook 13 — the whole Transformer: predicting an encoder layer's parameter count before measuring it, the
decoder's cross-attention sublayer built from its modules, and the whole pre-norm decoder block, watched inside the
trained reversal Transformer (:func:`decoding_with`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from seqlab.exercises._core import Case, Exercise, randn64, register, tensor_hint, tensors_close
from seqlab.nn.layer_norm import LayerNorm
from seqlab.nn.multihead import MultiheadAttention
from seqlab.nn.transformer import TransformerDecoderLayer, TransformerEncoderLayer


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, rtol=1e-6, atol=1e-9)


# -- 1. predict, then measure: the parameters of one encoder layer ------------------------------------------
def measured_encoder_layer_parameters(d_model: int, d_ff: int, nhead: int = 1) -> int:
    """Build seqlab's TransformerEncoderLayer(d_model, nhead, d_ff) and count its parameters."""
    layer = TransformerEncoderLayer(d_model, nhead, d_ff, device="meta")    # meta: shapes only, no memory
    return sum(p.numel() for p in layer.parameters())


def _diagnose_count(args: tuple, got: Any, expected: int) -> str | None:
    d, d_ff = args
    if not isinstance(got, int) or isinstance(got, bool):
        return f"return a whole number (an int), not a {type(got).__name__}."
    diff = got - expected
    known = {
        -4 * d: "you left out the two LayerNorms: each has a gamma and a beta of d_model numbers (4 d_model in all).",
        -2 * d: "each LayerNorm has two vectors of d_model numbers, gamma and beta (you counted one of them).",
        -(d * d + d): "four projections in the attention: W_Q, W_K, W_V and the output W_O, each d_model x d_model "
                      "plus a bias (you counted three).",
        -(4 * d + d_ff + d): "the biases are missing: 4 x d_model in the attention (b_Q, b_K, b_V, b_O), and b_1 "
                             "(d_ff) and b_2 (d_model) in the FFN.",
        -(d_ff + d): "the FFN has biases too: b_1 (d_ff numbers) and b_2 (d_model).",
        -(d * d_ff + d): "the FFN has two matrices, W_1 (d_model x d_ff) and W_2 (d_ff x d_model), each with a bias.",
        4 * d * d + 4 * d + 2 * d: "that counts a decoder layer's cross-attention (and its LayerNorm); an encoder "
                                   "layer has one attention, the self-attention.",
    }
    if diff in known:
        return f"predicted {got:,}, measured {expected:,} (off by {diff:+,}): {known[diff]}"
    return (f"predicted {got:,}, measured {expected:,} (off by {diff:+,}). Count attention (4 matrices d x d and "
            f"4 biases), FFN (W_1, b_1, W_2, b_2) and two LayerNorms (gamma, beta).")


register(Exercise(
    name="predict_encoder_layer_parameters",
    signature="predict_encoder_layer_parameters(d_model: int, d_ff: int) -> int, your prediction of the parameter count "
              "of one encoder layer (checked against a measured seqlab TransformerEncoderLayer)",
    reference=measured_encoder_layer_parameters,
    cases=[Case((512, 2048), "the paper's base model: d_model = 512, d_ff = 2048"),
           Case((64, 256), "the notebook's reverser: d_model = 64, d_ff = 256"),
           Case((10, 30), "d_model = 10, d_ff = 30 (not 4 x d_model)")],
    hint="attention 4 d^2 + 4 d; FFN 2 d d_ff + d_ff + d; two LayerNorms 4 d.",
    diagnose=_diagnose_count,
    same=lambda got, expected: isinstance(got, int) and not isinstance(got, bool) and got == expected,
))


# -- 2. the decoder's cross-attention sublayer, post-norm and pre-norm --------------------------------------
def _cross_attention_sublayer(y: Tensor, memory: Tensor, memory_padding: Tensor, attention: nn.Module,
                              norm: nn.Module, norm_first: bool) -> Tensor:
    if norm_first:                            # pre-norm: y + CrossAttn(LN(y), M); the memory is not normalised again
        c, _ = attention(norm(y), memory, memory, key_padding_mask=memory_padding, need_weights=False)
        return y + c
    c, _ = attention(y, memory, memory, key_padding_mask=memory_padding, need_weights=False)
    return norm(y + c)                        # post-norm (the paper): LN(y + CrossAttn(y, M))


@torch.no_grad()
def _padding_weight(query: Tensor, memory: Tensor, memory_padding: Tensor, attention: nn.Module) -> float:
    """The largest weight a query puts on a padded source position when the mask is left out."""
    _, weights = attention(query, memory, memory, need_weights=True)          # (B, T, S), averaged over heads
    return float(weights.masked_fill(~memory_padding[:, None, :], 0.0).max())


def _diagnose_cross_sublayer(args: tuple, got: Any, expected: Tensor) -> str | None:
    y, M, pad, attn, LN, norm_first = args
    if isinstance(got, tuple):
        return ("you returned a tuple: attention(...) gives (output, weights); keep the output, "
                "c, _ = attention(...), and return the sublayer's result.")
    if isinstance(got, Tensor) and got.shape == M.shape != y.shape:
        return (f"one row per source position ({M.shape[1]}): the queries come from the decoder, y, so the "
                f"output has one row per target position ({y.shape[1]}); the keys and values come from memory.")
    hint = tensor_hint(got, expected)
    if hint:
        return hint

    def mha(q: Tensor, kv: Tensor, mask: Tensor | None = pad) -> Tensor:
        return attn(q, kv, kv, key_padding_mask=mask, need_weights=False)[0]

    q = LN(y) if norm_first else y                                       # what the queries are made from
    mistakes = [
        (lambda: LN(y + mha(y, M)) if norm_first else y + mha(LN(y), M),
         f"that is {'post' if norm_first else 'pre'}-norm; with norm_first={norm_first} it is "
         + ("pre-norm: y + CrossAttn(LN(y), memory)." if norm_first else "post-norm: LN(y + CrossAttn(y, memory)).")),
        (lambda: y + mha(q, q, None) if norm_first else LN(y + mha(y, y, None)),
         "that is self-attention on y: in cross-attention only the queries come from the decoder; the keys and "
         "values are the encoder's memory, attention(query, memory, memory, ...)."),
        (lambda: y + mha(q, M, None) if norm_first else LN(y + mha(y, M, None)),
         "the padded source positions are read: pass key_padding_mask=memory_padding (without it a query puts up "
         f"to {_padding_weight(q, M, pad, attn):.2f} of its weight on padding here)."),
        (lambda: y + mha(q, M, ~pad) if norm_first else LN(y + mha(y, M, ~pad)),
         "the mask is inverted: in torch's meaning, which seqlab's layers take, True marks padding, so pass "
         "memory_padding as it is (with ~memory_padding only the padding is read)."),
        (lambda: mha(q, M) if norm_first else LN(mha(y, M)),
         "the residual is missing: add the sublayer's input y back, "
         + ("y + CrossAttn(LN(y), memory)." if norm_first else "LN(y + CrossAttn(y, memory)).")),
    ]
    if norm_first:
        mistakes += [
            (lambda: y + mha(q, LN(M)), "the memory is not normalised again: in pre-norm the encoder's final "
                                        "LayerNorm already did that; only the decoder's stream goes through norm, "
                                        "y + CrossAttn(LN(y), memory)."),
            (lambda: LN(y + mha(q, M)), "pre-norm does not normalise the sum: return y + CrossAttn(LN(y), memory)."),
            (lambda: q + mha(q, M), "add the *un*-normalised y: y + CrossAttn(LN(y), memory)."),
        ]
    else:
        mistakes += [
            (lambda: y + mha(y, M), "post-norm normalises the sum: LN(y + CrossAttn(y, memory))."),
            (lambda: y + LN(mha(y, M)), "normalise the sum, LN(y + CrossAttn(y, memory)), not only the attention's "
                                        "output."),
        ]
    with torch.no_grad():
        for wrong, message in mistakes:
            try:
                if _close(got, wrong()):
                    return message
            except (RuntimeError, ValueError):       # a variant that cannot be computed for this case
                continue
    return None


def _cross_sublayer_case(seed: int, d_model: int, nhead: int, t: int, s: int, lengths: list[int],
                         norm_first: bool) -> tuple:
    with torch.random.fork_rng(devices=[]):   # seeded, without touching the student's global generator
        torch.manual_seed(seed)
        attention = MultiheadAttention(d_model, nhead, batch_first=True).double()
    norm = LayerNorm(d_model).double()
    with torch.no_grad():                     # a gamma and beta away from 1 and 0, so that every mistake shows
        norm.weight.copy_(1 + randn64(d_model, seed=seed + 1) / 2)
        norm.bias.copy_(randn64(d_model, seed=seed + 2))
    batch = len(lengths)
    y = randn64(batch, t, d_model, seed=seed + 3) * 2 + 1                 # the decoder's stream (B, T, d_model)
    memory = randn64(batch, s, d_model, seed=seed + 4)                    # the encoder's output (B, S, d_model)
    padding = torch.arange(s)[None, :] >= torch.tensor(lengths)[:, None]  # (B, S), True = padding (torch's meaning)
    return y, memory, padding, attention, norm, norm_first


register(Exercise(
    name="cross_attention_sublayer",
    forbidden=("TransformerDecoderLayer",),
    signature="cross_attention_sublayer(y: (B, n, d_model), memory: (B, m, d_model), memory_padding: (B, m) bool, "
              "True = padding, attention: MultiheadAttention (batch_first), norm: LayerNorm, norm_first: bool) -> "
              "(B, n, d_model)",
    reference=_cross_attention_sublayer,
    cases=[Case(_cross_sublayer_case(40, 8, 2, 3, 5, [5, 3], False),
                "post-norm, 3 target positions reading 5 source positions, the second source padded after 3"),
           Case(_cross_sublayer_case(50, 8, 2, 4, 6, [6, 2], True),
                "pre-norm, 4 target positions, 6 source positions, the second source padded after 2"),
           Case(_cross_sublayer_case(60, 12, 3, 5, 5, [4, 5, 1], False),
                "post-norm, 5 target and 5 source positions, three sources of 4, 5 and 1 tokens"),
           Case(_cross_sublayer_case(70, 12, 3, 5, 5, [4, 5, 1], True), "the same in pre-norm")],
    hidden=lambda seed: [Case(_cross_sublayer_case(seed, 6, 2, 2, 4, [4, 2, 3], bool(seed % 2)),
                               "2 target positions reading 4 source positions, three sources, d_model = 6")],
    hint="norm_first=False: c, _ = attention(y, memory, memory, key_padding_mask=memory_padding); return "
         "norm(y + c). norm_first=True: c, _ = attention(norm(y), memory, memory, key_padding_mask=memory_padding); "
         "return y + c.",
    diagnose=_diagnose_cross_sublayer,
    same=lambda got, expected: isinstance(got, Tensor) and _close(got.detach(), expected.detach()),
))


# -- 3. the whole decoder block (pre-norm, as the trained reverser), watched inside the reverser ----------------
def _decoder_block(y: Tensor, memory: Tensor, memory_padding: Tensor | None, layer: nn.Module) -> Tensor:
    T = y.shape[1]
    future = torch.ones(T, T, dtype=torch.bool, device=y.device).triu(1)   # torch's meaning: True = may not attend
    h = layer.norm1(y)
    y = y + layer.self_attn(h, h, h, attn_mask=future, need_weights=False)[0]           # masked self-attention
    h = layer.norm2(y)
    y = y + layer.multihead_attn(h, memory, memory, key_padding_mask=memory_padding, need_weights=False)[0]
    h = layer.norm3(y)
    return y + layer.linear2(layer.activation(layer.linear1(h)))                         # the FFN


def decoder_block_slip(slip: str) -> Callable[..., Tensor]:
    """The reference decoder block with one catalogued slip, by name (:data:`DECODER_SLIPS`): what the checker
    recognises, and what notebook 13 runs inside the trained reverser to show what each slip does."""
    if slip not in DECODER_SLIPS:
        raise KeyError(f"no slip named {slip!r}; known: {sorted(DECODER_SLIPS)}")

    def block(y: Tensor, memory: Tensor, memory_padding: Tensor | None, layer: nn.Module) -> Tensor:
        T = y.shape[1]
        future = torch.ones(T, T, dtype=torch.bool, device=y.device).triu(1)
        mask = {"no causal mask": None, "inverted causal mask": ~future}.get(slip, future)
        h = layer.norm1(y)
        a = layer.self_attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        y = a if slip == "no residual" else y + a
        h = layer.norm2(y)
        kv = h if slip == "keys and values from the decoder" else memory
        pad = None if slip in ("no padding mask", "keys and values from the decoder") else memory_padding
        kv = layer.norm2(memory) if slip == "memory normalised" else kv
        y = y + layer.multihead_attn(h, kv, kv, key_padding_mask=pad, need_weights=False)[0]
        h = y if slip == "no norm before the FFN" else layer.norm3(y)
        out = y + layer.linear2(layer.activation(layer.linear1(h)))
        return layer.norm3(out) if slip == "post-norm" else out
    return block


DECODER_SLIPS: dict[str, str] = {
    "no causal mask": "the self-attention has no causal mask: position t reads the target tokens after it, which in "
                      "teacher-forced training are the answers; mask the future, attn_mask = torch.ones(T, T, "
                      "dtype=torch.bool).triu(1) (True = may not attend).",
    "inverted causal mask": "the causal mask is inverted: in torch's meaning True marks what may *not* be read, so "
                            "pass the strict upper triangle, .triu(1), not the lower one.",
    "keys and values from the decoder": "the cross-attention reads the decoder's own stream: its keys and values "
                                        "come from the encoder's memory, multihead_attn(LN_2(y), memory, memory).",
    "no padding mask": "the padded source positions are read: pass key_padding_mask=memory_padding to the "
                       "cross-attention.",
    "memory normalised": "the memory is normalised again: only the decoder's stream goes through norm2; the "
                         "encoder's final LayerNorm already normalised the memory.",
    "no residual": "the self-attention sublayer's residual is missing: y = y + SelfAttn(LN_1(y)), not the attention "
                   "alone.",
    "no norm before the FFN": "the FFN reads the stream without its LayerNorm: pre-norm is y + FFN(LN_3(y)).",
    "post-norm": "that is post-norm at the end (LN_3 of the sum); the reverser is pre-norm: y + FFN(LN_3(y)), the "
                 "stream itself never normalised.",
}


def _diagnose_decoder_block(args: tuple, got: Any, expected: Tensor) -> str | None:
    y, memory, padding, layer = args
    if isinstance(got, tuple):
        return "you returned a tuple: each attention returns (output, weights); keep the output, [0]."
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    with torch.no_grad():
        for slip, message in DECODER_SLIPS.items():
            try:
                if _close(got, decoder_block_slip(slip)(y, memory, padding, layer)):
                    return message
            except (RuntimeError, ValueError):
                continue
        for which, residual_missing in (("cross-attention", 2), ("FFN", 3)):
            if _close(got, _without_residual(y, memory, padding, layer, residual_missing)):
                return (f"the {which} sublayer's residual is missing: add its input back, y = y + ... (every "
                        f"sublayer is wrapped in a residual).")
    return None


def _without_residual(y: Tensor, memory: Tensor, padding: Tensor | None, layer: nn.Module, which: int) -> Tensor:
    T = y.shape[1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    h = layer.norm1(y)
    y = y + layer.self_attn(h, h, h, attn_mask=future, need_weights=False)[0]
    h = layer.norm2(y)
    c = layer.multihead_attn(h, memory, memory, key_padding_mask=padding, need_weights=False)[0]
    y = c if which == 2 else y + c
    f = layer.linear2(layer.activation(layer.linear1(layer.norm3(y))))
    return f if which == 3 else y + f


def _decoder_case(seed: int, d_model: int, nhead: int, t: int, s: int, lengths: list[int]) -> tuple:
    with torch.random.fork_rng(devices=[]):   # seeded, without touching the student's global generator
        torch.manual_seed(seed)
        layer = TransformerDecoderLayer(d_model, nhead, 2 * d_model, dropout=0.0, batch_first=True,
                                        norm_first=True).double()
        with torch.no_grad():                 # gammas and betas away from 1 and 0, so that every slip shows
            for k in (1, 2, 3):
                norm = getattr(layer, f"norm{k}")
                norm.weight.copy_(1 + torch.rand(d_model, dtype=torch.float64))
                norm.bias.copy_(torch.randn(d_model, dtype=torch.float64) / 2)
    batch = len(lengths)
    y = randn64(batch, t, d_model, seed=seed + 3) * 2 + 1
    memory = randn64(batch, s, d_model, seed=seed + 4)
    padding = torch.arange(s)[None, :] >= torch.tensor(lengths)[:, None]     # (B, S), True = padding
    return y, memory, padding, layer.eval()


register(Exercise(
    name="decoder_block",
    hidden=lambda seed: [Case(_decoder_case(seed, 8, 4, 3, 6, [6, 2]), "3 target and 6 source positions, 4 heads")],
    forbidden=("TransformerDecoderLayer", "TransformerDecoder", "decoder_block_slip"),
    signature="decoder_block(y: (B, n, d_model), memory: (B, m, d_model), memory_padding: (B, m) bool, True = "
              "padding, layer: TransformerDecoderLayer (pre-norm, batch_first)) -> (B, n, d_model)",
    reference=_decoder_block,
    cases=[Case(_decoder_case(80, 8, 2, 4, 5, [5, 3]), "4 target positions reading 5 source positions, the second "
                                                        "source padded after 3"),
           Case(_decoder_case(90, 12, 3, 6, 4, [2, 4, 3]), "6 target and 4 source positions, three sources of 2, 4 "
                                                            "and 3 tokens")],
    hint="y = y + SelfAttn(LN_1(y)) with the causal mask (torch's meaning: .triu(1)); y = y + CrossAttn(LN_2(y), "
         "memory, memory) with key_padding_mask=memory_padding; return y + FFN(LN_3(y)).",
    diagnose=_diagnose_decoder_block,
    same=lambda got, expected: isinstance(got, Tensor) and _close(got.detach(), expected.detach()),
))


def decoding_with(model: nn.Module, block: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """A ``decode`` for a pre-norm :class:`~seqlab.models.transformer_seq2seq.TransformerSeq2Seq` whose every decoder
    layer runs ``block(y, memory, memory_padding, layer)``: set it as ``model.decode`` (an instance attribute; delete
    it to restore the model's own) and greedy decoding, ``translate`` and the loss run on ``block``."""
    def decode(tgt_in: Tensor, memory: Tensor, memory_real: Tensor | None, *, need_weights: bool = False) -> Tensor:
        if need_weights:
            raise ValueError("a plugged-in decoder block returns no attention weights")
        y = model.embed(tgt_in, model.tgt_embed)
        padding = None if memory_real is None else ~memory_real                  # torch's meaning: True = padding
        for layer in model.transformer.decoder.layers:
            y = block(y, memory, padding, layer)
        norm = model.transformer.decoder.norm
        return model.head(y if norm is None else norm(y))
    return decode
