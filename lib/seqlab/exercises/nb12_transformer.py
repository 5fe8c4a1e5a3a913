"""Notebook 12 — the Transformer block: the residual sublayer (post- and pre-norm), built and then run inside
an encoder stack."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from seqlab.exercises._core import Case, Exercise, randn64, register, tensor_hint, tensors_close
from seqlab.nn.layer_norm import LayerNorm


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, rtol=1e-6, atol=1e-9)


# -- 1. the residual sublayer, post-norm and pre-norm ------------------------------------------------------
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
    signature="sublayer_connection(x: Tensor (B, n, d_model), sublayer: module, norm: LayerNorm, "
              "norm_first: bool) -> Tensor (B, n, d_model)",
    reference=_sublayer_connection,
    cases=[Case(_sublayer_case(0, 4, False), "post-norm (norm_first=False), d = 4"),
           Case(_sublayer_case(10, 4, True), "pre-norm (norm_first=True), d = 4"),
           Case(_sublayer_case(20, 8, False), "post-norm, d = 8"),
           Case(_sublayer_case(30, 8, True), "pre-norm, d = 8")],
    hint="norm_first=False: norm(x + sublayer(x)); norm_first=True: x + sublayer(norm(x)).",
    diagnose=_diagnose_sublayer,
    same=lambda got, expected: isinstance(got, Tensor) and _close(got.detach(), expected.detach()),
))
