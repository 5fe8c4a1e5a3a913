"""Notebook 13 — the whole Transformer: predicting an encoder layer's parameter count before measuring it, and
the decoder's cross-attention sublayer built from its modules."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from seqlab.exercises._core import Case, Exercise, randn64, register, tensor_hint, tensors_close
from seqlab.nn.layer_norm import LayerNorm
from seqlab.nn.multihead import MultiheadAttention
from seqlab.nn.transformer import TransformerEncoderLayer


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
    name="encoder_layer_parameters",
    signature="encoder_layer_parameters(d_model: int, d_ff: int) -> int, your prediction of the parameter count "
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
    hint="norm_first=False: c, _ = attention(y, memory, memory, key_padding_mask=memory_padding); return "
         "norm(y + c). norm_first=True: c, _ = attention(norm(y), memory, memory, key_padding_mask=memory_padding); "
         "return y + c.",
    diagnose=_diagnose_cross_sublayer,
    same=lambda got, expected: isinstance(got, Tensor) and _close(got.detach(), expected.detach()),
))
