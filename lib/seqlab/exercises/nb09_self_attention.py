"""Notebook 09 — self-attention: undoing a shuffle, a causal mask, one head from scratch, and a prediction of
how its cost grows with the length."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import (Case, Exercise, as_pair, first_difference, randn64, register, tensor_hint,
                                   tensors_close)


_randn, _shape_hint = randn64, tensor_hint


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, atol=1e-9)


# -- 1. undo a shuffle: self-attention is permutation-equivariant -----------------------------------
def _unshuffle(Z_shuffled: Tensor, order: Tensor) -> Tensor:
    return Z_shuffled[torch.argsort(order)]           # row order[i] of the original sits at row i


def _diagnose_unshuffle(args: tuple, got: Any, expected: Tensor) -> str | None:
    Z_shuffled, order = args
    hint = _shape_hint(got, expected)
    if hint:
        return hint
    if _close(got, Z_shuffled[order]):
        return ("that shuffles a second time: row i of Z_shuffled is token order[i]'s output, so it belongs at row "
                "order[i]; the inverse permutation, torch.argsort(order), puts every row back.")
    if _close(got, Z_shuffled):
        return "the rows are still in the shuffled order: the outputs come out shuffled exactly as the inputs went in."
    if _close(got, Z_shuffled.flip(0)):
        return "reversing the rows undoes only a reversal; use the permutation itself (its inverse, torch.argsort(order))."
    return f"{first_difference(got, expected)}."


register(Exercise(
    name="unshuffle",
    signature="unshuffle(Z_shuffled: Tensor (n, d), order: LongTensor (n,)) -> Z (n, d), the outputs of the "
              "unshuffled tokens",
    reference=_unshuffle,
    cases=[Case((_randn(3, 2, seed=10), torch.tensor([2, 0, 1])), "three tokens, order (2, 0, 1): a rotation"),
           Case((_randn(5, 4, seed=11), torch.tensor([2, 0, 3, 1, 4])), "section 6's order (2, 0, 3, 1, 4)"),
           Case((_randn(4, 3, seed=12), torch.tensor([1, 0, 3, 2])), "two swaps (a permutation that is its own inverse)"),
           Case((_randn(6, 2, seed=13), torch.tensor([5, 4, 3, 2, 1, 0])), "a reversal")],
    hidden=lambda seed: [Case((_randn(7, 3, seed=seed),
                                torch.randperm(7, generator=torch.Generator().manual_seed(seed))),
                               "seven tokens in a secret order")],
    hint="row i of Z_shuffled is the output of token order[i]: Z = torch.empty_like(Z_shuffled); Z[order] = "
         "Z_shuffled -- or Z_shuffled[torch.argsort(order)].",
    diagnose=_diagnose_unshuffle,
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
    forbidden=("generate_square_subsequent_mask",),
    signature="causal_mask(n: int) -> BoolTensor (n, n), True where query i may attend to key j",
    reference=_causal_mask,
    cases=[Case((3,), "three tokens"), Case((1,), "one token"), Case((6,), "six tokens")],
    hidden=lambda seed: [Case((7 + seed % 5,), "seven to eleven tokens")],
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
    forbidden=("scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward"),
    signature="self_attention(X: (n, d_model), W_q: (d_model, d_k), W_k: (d_model, d_k), W_v: (d_model, d_v)) -> Z (n, d_v)",
    reference=_self_attention,
    cases=[Case((torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64), torch.eye(2, dtype=torch.float64),
                 torch.eye(2, dtype=torch.float64), torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)),
                "'I like pizza' with the W_V as given"),
           Case((_randn(4, 3, seed=1), _randn(3, 2, seed=2), _randn(3, 2, seed=3), _randn(3, 5, seed=4)),
                "four tokens, d_model = 3, d_k = 2, d_v = 5"),
           Case((_randn(6, 4, seed=5), _randn(4, 4, seed=6), _randn(4, 4, seed=7), _randn(4, 4, seed=8)),
                "six tokens, all sizes 4")],
    hidden=lambda seed: [Case((_randn(5, 3, seed=seed), _randn(3, 4, seed=seed + 1), _randn(3, 4, seed=seed + 2),
                                _randn(3, 2, seed=seed + 3)), "five tokens, d_model = 3, d_k = 4, d_v = 2")],
    hint="Q, K, V = X @ W_q, X @ W_k, X @ W_v; then softmax(Q @ K.T / sqrt(d_k), dim=-1) @ V.",
    diagnose=_diagnose_head,
    same=_close,
))


# -- 4. predict, then measure: what doubling n does to one head ------------------------------------------
GROWTH_D, GROWTH_N = 64, 64        # a head of size d = 64; n doubles from 64 to 128
GROWTH_TOLERANCE = 0.15


def measure_growth(d: int = GROWTH_D, n: int = GROWTH_N) -> tuple[float, float]:
    """Measured on seqlab's SelfAttention(d, d), one sequence: by what factor the number of attention
    weights and the FLOPs of a forward pass (``torch.utils.flop_counter``) grow when ``n`` doubles."""
    from torch.utils.flop_counter import FlopCounterMode

    from seqlab.nn.self_attention import SelfAttention

    with torch.random.fork_rng(devices=[]):   # any weights will do; leave the student's generator alone
        torch.manual_seed(0)
        head = SelfAttention(d, d)
        inputs = [torch.randn(1, length, d) for length in (n, 2 * n)]
    weights, flops = [], []
    with torch.no_grad():
        for x in inputs:
            with FlopCounterMode(display=False) as counter:
                _, A = head(x, return_weights=True)
            weights.append(A.numel())
            flops.append(counter.get_total_flops())
    return weights[1] / weights[0], flops[1] / flops[0]


def _predict_growth() -> tuple[float, float]:
    return measure_growth()


def _same_growth(got: Any, expected: tuple[float, float]) -> bool:
    pair = as_pair(got)
    return pair is not None and all(abs(g - e) <= GROWTH_TOLERANCE for g, e in zip(pair, expected))


def _diagnose_growth(args: tuple, got: Any, expected: tuple[float, float]) -> str | None:
    pair = as_pair(got)
    if pair is None:
        return "put two numbers in my_prediction: (growth of the attention weights, growth of the FLOPs), e.g. (3, 3)."
    (weights, flops), (w_measured, f_measured) = pair, expected
    told = f"measured x{w_measured:.2f} weights and x{f_measured:.2f} FLOPs; you predicted x{weights:g} and x{flops:g}"
    if abs(weights - w_measured) > GROWTH_TOLERANCE:
        return f"{told}. The weights form an n x n matrix: twice the rows and twice the columns."
    if abs(flops - 4) < 0.3:
        return (f"{told}. Not all the work is n^2: the projections X W_Q, X W_K, X W_V cost 3 n d^2 multiply-adds, "
                f"linear in n, and at n = d = 64 they are 3/5 of the work; only QK^T and A V (2 n^2 d) quadruple: "
                f"0.6 x 2 + 0.4 x 4 = 2.8.")
    if abs(flops - 2) < 0.3:
        return f"{told}. The projections double, but the scores QK^T and the product A V (n^2 d each) quadruple."
    return (f"{told}. Add up the multiply-adds: 3 n d^2 for the projections and 2 n^2 d for QK^T and A V, at n = 64 "
            f"and at n = 128, with d = 64.")


register(Exercise(
    name="predict_growth",
    signature="(weights_factor, flops_factor): your prediction of how much the attention weights and the FLOPs of "
              "one head (d = 64) grow when n doubles from 64 to 128 (checked against a measurement, +-0.15 each)",
    reference=_predict_growth,
    cases=[Case((), "one head of size 64, n = 64 -> 128: growth of the weights and of the FLOPs")],
    hint="count: the weights are n x n; the FLOPs are 2 (3 n d^2 + 2 n^2 d).",
    diagnose=_diagnose_growth,
    same=_same_growth,
))
