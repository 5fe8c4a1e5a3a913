"""Notebook 10 — multi-head attention: split the heads, put them back, h heads from scratch, and what h costs."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, first_difference, randn64, register, tensor_hint, tensors_close


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, atol=1e-9)


# -- 1. split the heads ------------------------------------------------------------------------------
def _split_heads(X: Tensor, h: int) -> Tensor:
    B, n, E = X.shape
    return X.view(B, n, h, E // h).transpose(1, 2)                 # (B, n, h, d_k) -> (B, h, n, d_k)


def _diagnose_split(args: tuple, got: Any, expected: Tensor) -> str | None:
    X, h = args
    B, n, E = X.shape
    d_k = E // h
    if isinstance(got, Tensor) and got.shape == (B, n, h, d_k) and _close(got, X.view(B, n, h, d_k)):
        return (f"that is (B, n, h, d_k) = {(B, n, h, d_k)}: the split is right, now swap the token and head axes "
                f"(.transpose(1, 2)) so that each head holds all n tokens.")
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    if _close(got, X.reshape(B, h, n, d_k)):
        return ("the shape is right but the numbers are not: X.view(B, h, n, d_k) (or reshape) reads the memory in "
                "order, so 'head 0' got the first n*d_k numbers -- every feature of the first n/h tokens -- instead "
                "of features 0..d_k-1 of every token. View as (B, n, h, d_k) first, then .transpose(1, 2).")
    if _close(got, X.view(B, n, d_k, h).permute(0, 3, 1, 2)):
        return ("your head i holds every h-th feature (i, i+h, ...). Head i is the contiguous block of features "
                "i*d_k .. (i+1)*d_k - 1 (the columns of W_i^Q): view as (B, n, h, d_k), not (B, n, d_k, h).")
    return f"{first_difference(got, expected)}."


register(Exercise(
    name="split_heads",
    signature="split_heads(X: Tensor (B, n, E), h: int) -> Tensor (B, h, n, d_k), d_k = E // h; "
              "head i gets features i*d_k .. (i+1)*d_k - 1 of every token",
    reference=_split_heads,
    cases=[Case((torch.arange(24, dtype=torch.float64).view(1, 3, 8), 2), "3 tokens numbered 0..23, E = 8, h = 2"),
           Case((randn64(2, 4, 6, seed=0), 3), "batch of 2, 4 tokens, E = 6, h = 3"),
           Case((randn64(1, 5, 4, seed=1), 1), "one head: (B, 1, n, E)"),
           Case((randn64(3, 2, 12, seed=2), 4), "batch of 3, 2 tokens, E = 12, h = 4")],
    hint="B, n, E = X.shape; return X.view(B, n, h, E // h).transpose(1, 2).",
    diagnose=_diagnose_split,
    same=_close,
))


# -- 2. concatenate the heads --------------------------------------------------------------------------
def _concat_heads(Z: Tensor) -> Tensor:
    B, h, n, d_k = Z.shape
    return Z.transpose(1, 2).reshape(B, n, h * d_k)               # (B, n, h, d_k) -> (B, n, E)


def _diagnose_concat(args: tuple, got: Any, expected: Tensor) -> str | None:
    (Z,) = args
    B, h, n, d_k = Z.shape
    if isinstance(got, Tensor) and got.shape == (B, n, h, d_k) and _close(got, Z.transpose(1, 2)):
        return "the axes are swapped back; now merge the last two, (B, n, h, d_k) -> (B, n, h * d_k), with .reshape."
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    if _close(got, Z.reshape(B, n, h * d_k)):
        return ("the shape is right but the numbers are not: Z.reshape(B, n, E) without a transpose glues the rows "
                "of head 0 together first, so 'token 0' gets numbers from several tokens of head 0. "
                "Swap the axes first: Z.transpose(1, 2).reshape(B, n, h * d_k).")
    if _close(got, Z.permute(0, 2, 3, 1).reshape(B, n, h * d_k)):
        return ("your features interleave the heads (head 0's feature 0, head 1's feature 0, ...). Concat puts "
                "head 1's d_k features after all of head 0's: transpose(1, 2), not permute(0, 2, 3, 1).")
    return f"{first_difference(got, expected)}."


register(Exercise(
    name="concat_heads",
    signature="concat_heads(Z: Tensor (B, h, n, d_k)) -> Tensor (B, n, h * d_k): Concat(head_1, ..., head_k) per token",
    reference=_concat_heads,
    cases=[Case((torch.arange(24, dtype=torch.float64).view(1, 2, 3, 4),), "2 heads of 3 tokens x 4 features, numbered"),
           Case((randn64(2, 3, 5, 2, seed=3),), "batch of 2, 3 heads, 5 tokens, d_k = 2"),
           Case((randn64(1, 1, 4, 6, seed=4),), "one head: nothing to concatenate")],
    hint="B, h, n, d_k = Z.shape; return Z.transpose(1, 2).reshape(B, n, h * d_k) -- the inverse of split_heads.",
    diagnose=_diagnose_concat,
    same=_close,
))


# -- 3. multi-head attention from given weights -----------------------------------------------------------
def _heads(M: Tensor, h: int) -> Tensor:
    n, E = M.shape
    return M.view(n, h, E // h).transpose(0, 1)                   # (h, n, d_k)


def _multi_head_attention(X: Tensor, W_Q: Tensor, W_K: Tensor, W_V: Tensor, W_O: Tensor, h: int) -> Tensor:
    n, E = X.shape
    Q, K, V = _heads(X @ W_Q, h), _heads(X @ W_K, h), _heads(X @ W_V, h)          # (h, n, d_k) each
    A = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(E // h), dim=-1)           # (h, n, n)
    Z = (A @ V).transpose(0, 1).reshape(n, E)                                      # Concat(head_1..head_k)
    return Z @ W_O                                                                 # (n, E)


def _mha_variant(X, W_Q, W_K, W_V, W_O, h, *, scale=None, dim=-1, out=True, split=None, merge=None):
    n, E = X.shape
    d_k = E // h
    split = split or (lambda M: _heads(M, h))
    Q, K, V = split(X @ W_Q), split(X @ W_K), split(X @ W_V)
    A = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(scale or d_k), dim=dim)
    Z = A @ V
    Z = merge(Z) if merge else Z.transpose(0, 1).reshape(n, E)
    return Z @ W_O if out else Z


def _diagnose_mha(args: tuple, got: Any, expected: Tensor) -> str | None:
    X, W_Q, W_K, W_V, W_O, h = args
    n, E = X.shape
    if isinstance(got, Tensor) and got.shape == (h, n, n):
        return "those are the attention weights A of every head; multiply by V, concatenate the heads, then apply W_O."
    if isinstance(got, Tensor) and got.shape == (h, n, E // h):
        return "those are the h heads' outputs; concatenate them to (n, E) and multiply by W_O."
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    variants = [
        (dict(out=False), "W_O is missing: Concat(head_1, ..., head_k) W_O, the heads are mixed by W_O at the end."),
        (dict(scale=E), "scale each head's scores by 1/sqrt(d_k) = 1/sqrt(E / h), the size of a head, not 1/sqrt(E)."),
        (dict(scale=1.0), "scale the scores by 1/sqrt(d_k) before the softmax."),
        (dict(dim=-2), "the softmax runs over the keys (dim=-1): each query's weights sum to 1."),
        (dict(split=lambda M: M.reshape(h, n, E // h)),
         "the heads are split with a reshape to (h, n, d_k) and no transpose, which mixes tokens into heads: "
         "view each projection as (n, h, d_k), then .transpose(0, 1)."),
        (dict(merge=lambda Z: Z.reshape(n, E)),
         "the heads are concatenated with a reshape to (n, E) and no transpose, which mixes tokens: "
         "Z.transpose(0, 1).reshape(n, E)."),
    ]
    for change, message in variants:
        if _close(got, _mha_variant(*args, **change)):
            return message
    if h > 1 and _close(got, _multi_head_attention(X, W_Q, W_K, W_V, W_O, 1)):
        return f"that is one wide head (h = 1); split Q, K and V into h = {h} heads of d_k = {E // h} features each."
    return f"{first_difference(got, expected)}."


register(Exercise(
    name="multi_head_attention",
    signature="multi_head_attention(X (n, E), W_Q, W_K, W_V, W_O (E, E) each, h: int) -> (n, E): "
              "Concat(head_1..head_k) W_O, head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i",
    reference=_multi_head_attention,
    cases=[Case((randn64(3, 4, seed=10), randn64(4, 4, seed=11), randn64(4, 4, seed=12), randn64(4, 4, seed=13),
                 torch.eye(4, dtype=torch.float64), 2), "3 tokens, E = 4, h = 2, W_O = I"),
           Case((randn64(5, 6, seed=14), randn64(6, 6, seed=15), randn64(6, 6, seed=16), randn64(6, 6, seed=17),
                 randn64(6, 6, seed=18), 3), "5 tokens, E = 6, h = 3"),
           Case((randn64(4, 8, seed=19), randn64(8, 8, seed=20), randn64(8, 8, seed=21), randn64(8, 8, seed=22),
                 randn64(8, 8, seed=23), 1), "one head of width 8")],
    hint="Q, K, V = X @ W_Q, X @ W_K, X @ W_V; split each into (h, n, d_k); A = softmax(Q K^T / sqrt(d_k)) per head; "
         "Z = A @ V; concatenate to (n, E); multiply by W_O.",
    diagnose=_diagnose_mha,
    same=_close,
))


# -- 4. predict, then measure: what h costs at a fixed width ------------------------------------------------
COST_KEYS = ("parameters", "flops", "weights")


def measure_costs(E: int, n: int, h: int) -> dict[str, int]:
    """Measured on seqlab's MultiheadAttention(E, h): its parameter count, the FLOPs of one self-attention
    forward pass over one sequence of ``n`` tokens (counted by ``torch.utils.flop_counter``: a multiply-add is
    2 FLOPs; softmax, scaling and bias additions are not counted), and the number of attention weights it
    computes (per head, ``need_weights=True, average_attn_weights=False``)."""
    from torch.utils.flop_counter import FlopCounterMode

    from seqlab.nn.multihead import MultiheadAttention

    with torch.random.fork_rng(devices=[]):   # any weights will do; leave the student's generator alone
        torch.manual_seed(0)
        attention = MultiheadAttention(E, h, batch_first=True)
        X = torch.randn(1, n, E)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        _, weights = attention(X, X, X, need_weights=True, average_attn_weights=False)
    return {"parameters": sum(p.numel() for p in attention.parameters()),
            "flops": int(counter.get_total_flops()),
            "weights": weights.numel()}


def _same_costs(got: Any, expected: dict[str, int]) -> bool:
    return (isinstance(got, dict) and set(got) >= set(COST_KEYS)
            and all(isinstance(got[k], (int, float)) and got[k] == expected[k] for k in COST_KEYS))


def _diagnose_costs(args: tuple, got: Any, expected: dict[str, int]) -> str | None:
    E, n, h = args
    if not isinstance(got, dict) or not set(got) >= set(COST_KEYS):
        return f"return a dict with the keys {COST_KEYS}, got {_short_dict(got)}."
    for key in COST_KEYS:
        if not isinstance(got[key], (int, float)):
            return f"{key!r} should be a number, got {type(got[key]).__name__}."
    wrong = [k for k in COST_KEYS if got[k] != expected[k]]
    lines = [f"measured {k} = {expected[k]:,}, you predicted {got[k]:,}" for k in wrong]
    one_head = measure_costs(E, n, 1)
    advice = []
    if "parameters" in wrong:
        if h > 1 and got["parameters"] == h * one_head["parameters"]:
            advice.append("the heads do not each get E x E matrices: they split E into h slices of d_k = E / h, so "
                          "W^Q, W^K, W^V, W^O stay E x E (plus 4E biases) whatever h is")
        elif got["parameters"] == 4 * E * E:
            advice.append("count the biases too: in_proj_bias has 3E numbers and out_proj.bias E")
        else:
            advice.append("four E x E matrices (W^Q, W^K, W^V, W^O) and their biases")
    if "flops" in wrong:
        if h > 1 and got["flops"] == h * one_head["flops"]:
            advice.append("h heads of size d_k = E / h do the work of one head of size E: the projections are the same "
                          "E x E products, and the scores cost h * n^2 * d_k = n^2 * E multiply-adds")
        else:
            advice.append("projections 4 * n * E^2 multiply-adds, scores Q K^T and A V n^2 * E each, "
                          "2 FLOPs per multiply-add")
    if "weights" in wrong:
        if got["weights"] == n * n:
            advice.append("every head has its own n x n weight matrix: h * n^2 numbers -- the one cost that grows with h")
        else:
            advice.append("one n x n matrix per head")
    return "; ".join(lines) + ". " + "; ".join(advice) + "."


def _short_dict(value: Any) -> str:
    return f"keys {sorted(value)}" if isinstance(value, dict) else type(value).__name__


register(Exercise(
    name="predict_costs",
    signature="predict_costs(E: int, n: int, h: int) -> {'parameters': int, 'flops': int, 'weights': int} for "
              "MultiheadAttention(E, h) on one sequence of n tokens (checked against a measurement)",
    reference=measure_costs,
    cases=[Case((64, 32, 1), "E = 64, n = 32, one head"),
           Case((64, 32, 8), "E = 64, n = 32, eight heads"),
           Case((48, 10, 3), "E = 48, n = 10, three heads")],
    hint="parameters 4E^2 + 4E; FLOPs 2 * (4 n E^2 + 2 n^2 E); weights h n^2.",
    diagnose=_diagnose_costs,
    same=_same_costs,
))
