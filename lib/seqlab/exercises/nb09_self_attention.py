"""Notebook 09 — self-attention: a scaled softmax, a causal mask, one head from scratch."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, randn64, register, tensor_hint, tensors_close


_randn, _shape_hint = randn64, tensor_hint


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, atol=1e-9)


# -- 1. the scaled softmax --------------------------------------------------------------------------
def _scaled_softmax(scores: Tensor, d_k: int) -> Tensor:
    return torch.softmax(scores / math.sqrt(d_k), dim=-1)


def _diagnose_scaled(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = _shape_hint(got, expected)
    if hint:
        return hint
    scores, d_k = args
    if torch.isnan(got).any():
        return "exp overflowed: subtract each row's largest score before exp (the softmax does not change)."
    if _close(got, torch.softmax(scores, dim=-1)):
        return "divide the scores by sqrt(d_k) before the softmax."
    if _close(got, torch.softmax(scores / d_k, dim=-1)):
        return "divide by the square root of d_k, not by d_k itself."
    if _close(got, torch.softmax(scores * math.sqrt(d_k), dim=-1)):
        return "divide by sqrt(d_k); you multiplied."
    return None


register(Exercise(
    name="scaled_softmax",
    signature="scaled_softmax(scores: Tensor (..., n), d_k: int) -> weights, softmax(scores / sqrt(d_k)) over the last dim",
    reference=_scaled_softmax,
    cases=[Case((torch.tensor([112.0, 96.0], dtype=torch.float64), 64), "'Thinking Machines': 112 and 96, d_k = 64"),
           Case((torch.tensor([92.0, 124.0, 22.0, 8.0], dtype=torch.float64), 64), "92 / 124 / 22 / 8, d_k = 64"),
           Case((_randn(3, 5, seed=0) * 3, 4), "three rows of five scores, d_k = 4"),
           Case((torch.tensor([[9000.0, 8990.0]], dtype=torch.float64), 16), "very large scores")],
    hint="torch.softmax(scores / math.sqrt(d_k), dim=-1), or exp of (scores / sqrt(d_k) minus the row's maximum), "
         "divided by the row's sum.",
    diagnose=_diagnose_scaled,
    same=_close,
))


# -- 2. the causal mask ------------------------------------------------------------------------------
def _causal_mask(n: int) -> Tensor:
    return torch.ones(n, n, dtype=torch.bool).tril()


def _diagnose_mask(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = _shape_hint(got, expected)
    if hint:
        return hint
    if got.dtype != torch.bool:
        return "return booleans (dtype torch.bool): True where attending is allowed."
    if torch.equal(got, expected.T):
        return "that is the transpose: row i is the query, column j the key, and query i may read keys j <= i."
    if torch.equal(got, expected.tril(-1)):
        return "the diagonal must be True: a token may attend to itself."
    if torch.equal(got, ~expected):
        return "True marks what is *allowed* (j <= i), not what is hidden."
    return None


register(Exercise(
    name="causal_mask",
    signature="causal_mask(n: int) -> BoolTensor (n, n), True where query i may attend to key j",
    reference=_causal_mask,
    cases=[Case((3,), "three tokens"), Case((1,), "one token"), Case((6,), "six tokens")],
    hint="torch.ones(n, n, dtype=torch.bool).tril(): the lower triangle, diagonal included.",
    diagnose=_diagnose_mask,
    same=lambda got, expected: isinstance(got, Tensor) and got.dtype == torch.bool and torch.equal(got, expected),
))


# -- 3. one head from scratch -------------------------------------------------------------------------
def _self_attention(X: Tensor, W_q: Tensor, W_k: Tensor, W_v: Tensor) -> Tensor:
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    return torch.softmax(Q @ K.T / math.sqrt(K.shape[1]), dim=-1) @ V


def _diagnose_head(args: tuple, got: Any, expected: Tensor) -> str | None:
    X, W_q, W_k, W_v = args
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    d_k = K.shape[1]
    if isinstance(got, Tensor) and got.shape == (X.shape[0], X.shape[0]):
        return "that is the weight matrix A; multiply it by V to get the output Z = A V."
    hint = _shape_hint(got, expected)
    if hint:
        return hint
    if _close(got, torch.softmax(Q @ K.T, dim=-1) @ V):
        return "scale the scores by 1/sqrt(d_k) before the softmax."
    if _close(got, torch.softmax(Q @ K.T / d_k, dim=-1) @ V):
        return "scale by 1/sqrt(d_k), not 1/d_k."
    if _close(got, torch.softmax(Q @ K.T / math.sqrt(d_k), dim=0) @ V):
        return "the softmax runs along each row (dim=-1): each query's weights over the keys sum to 1."
    if _close(got, torch.softmax(K @ Q.T / math.sqrt(d_k), dim=-1) @ V):
        return "the scores are Q K^T (row i: query i against every key), not K Q^T."
    if _close(got, torch.softmax(Q @ K.T / math.sqrt(d_k), dim=-1) @ X):
        return "the weights average the values V = X W_v, not the inputs X."
    return None


register(Exercise(
    name="self_attention",
    signature="self_attention(X: (n, d_model), W_q: (d_model, d_k), W_k: (d_model, d_k), W_v: (d_model, d_v)) -> Z (n, d_v)",
    reference=_self_attention,
    cases=[Case((torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64), torch.eye(2, dtype=torch.float64),
                 torch.eye(2, dtype=torch.float64), torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)),
                "'I like pizza' with the W_V as given"),
           Case((_randn(4, 3, seed=1), _randn(3, 2, seed=2), _randn(3, 2, seed=3), _randn(3, 5, seed=4)),
                "four tokens, d_model = 3, d_k = 2, d_v = 5"),
           Case((_randn(6, 4, seed=5), _randn(4, 4, seed=6), _randn(4, 4, seed=7), _randn(4, 4, seed=8)),
                "six tokens, all sizes 4")],
    hint="Q, K, V = X @ W_q, X @ W_k, X @ W_v; then softmax(Q @ K.T / sqrt(d_k), dim=-1) @ V.",
    diagnose=_diagnose_head,
    same=_close,
))
