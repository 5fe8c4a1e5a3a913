"""Notebook 12 — the Transformer block: LayerNorm by hand, the residual sublayer (post- and pre-norm),
and predicting an encoder layer's parameter count before measuring it."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from seqlab.exercises._core import Case, Exercise, randn64, register, tensor_hint, tensors_close
from seqlab.nn.layer_norm import LayerNorm
from seqlab.nn.transformer import TransformerEncoderLayer


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, rtol=1e-6, atol=1e-9)


def _summary(t: Any) -> str:
    """One line about a tensor (never its multi-line repr): shape, and the range of its values."""
    if not isinstance(t, Tensor):
        return type(t).__name__
    if t.numel() == 0:
        return f"an empty tensor of shape {tuple(t.shape)}"
    finite = t[torch.isfinite(t)]
    values = f"values {float(finite.min()):.4g} .. {float(finite.max()):.4g}" if finite.numel() else "no finite values"
    nan = f", {int(torch.isnan(t).sum())} NaN" if torch.isnan(t).any() else ""
    return f"a tensor of shape {tuple(t.shape)}, {values}{nan}"


# -- 1. LayerNorm by hand -------------------------------------------------------------------------------
def _layer_norm(x: Tensor, gamma: Tensor, beta: Tensor, eps: float) -> Tensor:
    mu = x.mean(dim=-1, keepdim=True)
    sigma2 = ((x - mu) ** 2).mean(dim=-1, keepdim=True)          # biased: divide by d, as nn.LayerNorm
    return gamma * (x - mu) / torch.sqrt(sigma2 + eps) + beta


def _diagnose_layer_norm(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    x, gamma, beta, eps = args
    mu = x.mean(-1, keepdim=True)
    biased, unbiased = x.var(-1, unbiased=False, keepdim=True), x.var(-1, unbiased=True, keepdim=True)
    if torch.isnan(got).any() and not torch.isnan(expected).any():
        return (f"you returned NaN ({_summary(got)}): a row whose values are all equal has variance 0, "
                "and without eps you divide 0 by 0. Add eps to the variance inside the square root.")
    mistakes = [
        (gamma * (x - mu) / torch.sqrt(unbiased + eps) + beta,
         "you used the unbiased variance (divide by d - 1; torch's x.var() and x.std() do by default). "
         "LayerNorm divides by d: x.var(-1, unbiased=False), as nn.LayerNorm."),
        (gamma * (x - mu) / torch.sqrt(biased) + beta,
         "eps is missing: divide by sqrt(variance + eps). It matters when a row is (nearly) constant."),
        (gamma * (x - mu) / (torch.sqrt(biased) + eps) + beta,
         "eps goes inside the square root, sqrt(variance + eps), not after it (std + eps, as the Annotated "
         "Transformer does, is not nn.LayerNorm)."),
        (gamma * (x - mu) / (torch.sqrt(unbiased) + eps) + beta,
         "that is the Annotated Transformer's version: unbiased std and eps added to the std. "
         "nn.LayerNorm uses the biased variance (divide by d) and sqrt(variance + eps)."),
        ((x - mu) / torch.sqrt(biased + eps),
         "the normalisation is right; now scale by gamma and shift by beta: gamma * x_hat + beta."),
    ]
    if x.dim() >= 2:
        mu0 = x.mean(0, keepdim=True)
        mistakes.append((gamma * (x - mu0) / torch.sqrt(x.var(0, unbiased=False, keepdim=True) + eps) + beta,
                         "you normalised over the batch (dim 0), which is batch norm. LayerNorm takes the mean "
                         "and variance over each token's own features: the last dimension, dim=-1."))
    for wrong, message in mistakes:
        if _close(got, wrong):
            return message
    return None


register(Exercise(
    name="layer_norm",
    signature="layer_norm(x: Tensor (..., d), gamma: (d,), beta: (d,), eps: float) -> Tensor (..., d), "
              "normalised over the last dimension",
    reference=_layer_norm,
    cases=[Case((torch.tensor([[1.0, 2.0, 3.0, 6.0]], dtype=torch.float64), torch.ones(4, dtype=torch.float64),
                 torch.zeros(4, dtype=torch.float64), 1e-5), "one token, d = 4: mean 3, variance 3.5"),
           Case((randn64(3, 6, seed=0), 1 + randn64(6, seed=1) / 2, randn64(6, seed=2), 1e-5),
                "three tokens, d = 6, a learned gamma and beta"),
           Case((torch.tensor([[5.0, 5.0, 5.0, 5.0], [1.0, 1.002, 0.998, 1.0]], dtype=torch.float64),
                 torch.ones(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64), 1e-5),
                "a constant token and a nearly constant one: eps decides"),
           Case((randn64(2, 3, 8, seed=3) * 4 + 1, 1 + randn64(8, seed=4) / 2, randn64(8, seed=5), 1e-5),
                "a batch of 2 sequences of 3 tokens, d = 8")],
    hint="mu = x.mean(-1, keepdim=True); var = ((x - mu) ** 2).mean(-1, keepdim=True); "
         "return gamma * (x - mu) / torch.sqrt(var + eps) + beta.",
    diagnose=_diagnose_layer_norm,
    same=_close,
))


# -- 2. the residual sublayer, post-norm and pre-norm ------------------------------------------------------
def _sublayer_connection(x: Tensor, sublayer: nn.Module, norm: nn.Module, norm_first: bool) -> Tensor:
    if norm_first:
        return x + sublayer(norm(x))          # pre-norm: x + F(LN(x)), the stream itself is never normalised
    return norm(x + sublayer(x))              # post-norm (the paper): LN(x + F(x))


def _diagnose_sublayer(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    x, F, LN, norm_first = args
    with torch.no_grad():
        if norm_first:
            mistakes = [
                (LN(x + F(x)), "that is post-norm, LN(x + F(x)); with norm_first=True it is pre-norm: x + F(LN(x))."),
                (F(LN(x)), "the residual is missing: add x back, x + F(LN(x))."),
                (LN(x) + F(LN(x)), "add the *un*-normalised x: x + F(LN(x)). The residual stream is never "
                                   "normalised in pre-norm; only the sublayer's input is."),
                (LN(x + F(LN(x))), "pre-norm does not normalise the sum: return x + F(LN(x)) as it is."),
            ]
        else:
            mistakes = [
                (x + F(LN(x)), "that is pre-norm, x + F(LN(x)); with norm_first=False it is post-norm: LN(x + F(x))."),
                (LN(F(x)), "the residual is missing: normalise the sum, LN(x + F(x))."),
                (x + LN(F(x)), "normalise the sum, LN(x + F(x)), not only the sublayer's output."),
                (x + F(x), "post-norm normalises the sum: LN(x + F(x))."),
            ]
        for wrong, message in mistakes:
            if _close(got, wrong):
                return message
    return None


def _sublayer_case(seed: int, d: int, norm_first: bool) -> tuple:
    with torch.random.fork_rng(devices=[]):   # seeded, without touching the student's global generator
        torch.manual_seed(seed)
        F = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d)).double()  # an FFN as the sublayer
    LN = LayerNorm(d).double()
    with torch.no_grad():                     # a gamma and beta away from 1 and 0, so that every mistake shows
        LN.weight.copy_(1 + randn64(d, seed=seed + 1) / 2)
        LN.bias.copy_(randn64(d, seed=seed + 2))
    return randn64(2, 3, d, seed=seed + 3) * 3 + 1, F, LN, norm_first


register(Exercise(
    name="sublayer_connection",
    signature="sublayer_connection(x: Tensor (B, n, d), sublayer: module, norm: LayerNorm, norm_first: bool) -> "
              "Tensor (B, n, d)",
    reference=_sublayer_connection,
    cases=[Case(_sublayer_case(0, 4, False), "post-norm (norm_first=False), d = 4"),
           Case(_sublayer_case(10, 4, True), "pre-norm (norm_first=True), d = 4"),
           Case(_sublayer_case(20, 8, False), "post-norm, d = 8"),
           Case(_sublayer_case(30, 8, True), "pre-norm, d = 8")],
    hint="norm_first=False: norm(x + sublayer(x)); norm_first=True: x + sublayer(norm(x)).",
    diagnose=_diagnose_sublayer,
    same=lambda got, expected: isinstance(got, Tensor) and _close(got.detach(), expected.detach()),
))


# -- 3. predict, then measure: the parameters of one encoder layer ------------------------------------------
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
