"""Notebook 10 — multi-head attention: built from notebook 9's attention and watched inside the trained
charlm-gpt, one head or two (predict, then measure), what h costs (predict, then measure), and cross-attention
from scratch."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import (Case, Exercise, Measured, as_pair, first_difference, pair_within, randn64,
                                   register, shares_pair, tensor_hint, tensors_close)


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, atol=1e-9)


# -- 1. predict, then measure: one head instead of two on the neighbour task ------------------------------
TOLERANCE = 0.10          # ten percentage points


def _one_head(measured: tuple[float, float]) -> tuple[float, float]:
    return measured                           # the right prediction is the measurement itself


def _diagnose_one_head(args: tuple, got: Any, expected: tuple[float, float]) -> str | None:
    pair = as_pair(got)
    if pair is None:
        return "put two shares in my_prediction: (left letter, right letter), e.g. (0.5, 0.5)."
    if max(pair) > 1:
        return f"give shares between 0 and 1 (0.5 for 50%), not percentages: you wrote {pair}."
    told = (f"measured {expected[0]:.0%} (left) and {expected[1]:.0%} (right) with one head; "
            f"you predicted {pair[0]:.0%} and {pair[1]:.0%}")
    if min(pair) < min(expected) - TOLERANCE:
        if min(pair) <= 0.2:
            advice = ("one head is not stuck at chance (12.5%) on a side: it can read both neighbours in one "
                      "weighted average")
        else:
            advice = ("an average of two letters need not lose which was where: with unequal weights (say 0.4 on "
                      "the left, 0.2 on the right) the mix still tells them apart, and the feed-forward layer "
                      "after the head decodes it")
    else:
        advice = ("one head carries both letters in one average of width d_model, so it cannot beat two heads; "
                  "compare with the two-head model's accuracy above")
    return f"{told}: {advice}."


register(Exercise(
    name="predict_one_head",
    signature="(left, right): your prediction of the share of left and of right letters that the same model with "
              "one head (d_k = 32) names right after the same 400 steps (checked against the notebook's "
              "measurement, +-0.10 each)",
    reference=_one_head,
    cases=[Case((), "the neighbour task, one head of d_k = 32, 400 steps")],
    hint="the two-head model names both neighbours; ask what one weighted average of the letters can still say.",
    diagnose=_diagnose_one_head,
    same=pair_within(TOLERANCE),
    measured=Measured("(one_left, one_right), the one-head model's shares of left and of right letters named right",
                      "section 5's cell that trains one head", shares_pair),
))


# -- 2. cross-attention: queries from one sequence, keys and values from another ---------------------------
def _heads(M: Tensor, h: int) -> Tensor:
    n, d_model = M.shape
    return M.view(n, h, d_model // h).transpose(0, 1)             # (h, n, d_k)


def _cross_attention(X_q: Tensor, X_kv: Tensor, W_Q: Tensor, W_K: Tensor, W_V: Tensor, W_O: Tensor,
                     h: int) -> Tensor:
    n, d_model = X_q.shape
    Q = _heads(X_q @ W_Q, h)                                       # (h, n, d_k): one query per row of X_q
    K, V = _heads(X_kv @ W_K, h), _heads(X_kv @ W_V, h)            # (h, m, d_k): m rows of the other sequence
    A = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(d_model // h), dim=-1)     # (h, n, m)
    Z = (A @ V).transpose(0, 1).reshape(n, d_model)                # Concat(head_1, ..., head_h): (n, d_model)
    return Z @ W_O


def _cross_variant(X_q, X_kv, W_Q, W_K, W_V, W_O, h, *, scale=None, dim=-1, out=True, split=None, merge=None):
    n, d_model = X_q.shape
    d_k = d_model // h
    split = split or (lambda M: _heads(M, h))
    Q, K, V = split(X_q @ W_Q), split(X_kv @ W_K), split(X_kv @ W_V)
    A = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(scale or d_k), dim=dim)
    Z = A @ V
    Z = merge(Z) if merge else Z.transpose(0, 1).reshape(n, d_model)
    return Z @ W_O if out else Z


def _diagnose_cross(args: tuple, got: Any, expected: Tensor) -> str | None:
    X_q, X_kv, W_Q, W_K, W_V, W_O, h = args
    n, d_model = X_q.shape
    m = X_kv.shape[0]
    if isinstance(got, Tensor) and got.shape == (h, n, m) != expected.shape:
        return "those are the attention weights A of every head (h, n, m); multiply by V, concatenate, apply W_O."
    if isinstance(got, Tensor) and got.shape == (m, d_model) and m != n:
        return (f"one row per key ({m}): the output has one row per query, n = {n}. The queries come from X_q, "
                "the keys and values from X_kv -- the roles are swapped.")
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    variants = [
        (dict(scale=1.0), "scale the scores by 1/sqrt(d_k) before the softmax: without it they grow with d_k and "
                          "the softmax saturates."),
        (dict(scale=d_model), "scale each head's scores by 1/sqrt(d_k) = 1/sqrt(d_model / h), the size of a head, "
                              "not 1/sqrt(d_model)."),
        (dict(dim=-2), "the softmax runs over the keys (dim=-1), so that each query's weights over the m keys sum "
                       "to 1; yours sum to 1 over the queries."),
        (dict(out=False), "W_O is missing: Concat(head_1, ..., head_h) W_O, the heads are mixed by W_O at the end."),
        (dict(split=lambda M: M.reshape(h, M.shape[0], d_model // h)),
         "the heads are split with a reshape to (h, length, d_k) and no transpose, which mixes tokens into heads: "
         "view each projection as (length, h, d_k), then .transpose(0, 1)."),
        (dict(merge=lambda Z: Z.reshape(n, d_model)),
         "the heads are concatenated with a reshape to (n, d_model) and no transpose, which mixes tokens: "
         "Z.transpose(0, 1).reshape(n, d_model)."),
    ]
    for change, message in variants:
        try:
            if _close(got, _cross_variant(*args, **change)):
                return message
        except RuntimeError:
            continue
    if _close(got, _cross_attention(X_q, X_q, W_Q, W_K, W_V, W_O, h)):
        return ("that is self-attention on X_q: in cross-attention the keys and values come from the other "
                "sequence, K = X_kv W_K and V = X_kv W_V.")
    if m == n and _close(got, _cross_attention(X_kv, X_q, W_Q, W_K, W_V, W_O, h)):
        return "the roles are swapped: the queries come from X_q, the keys and values from X_kv."
    if h > 1 and _close(got, _cross_attention(X_q, X_kv, W_Q, W_K, W_V, W_O, 1)):
        return (f"that is one wide head (h = 1); split Q, K and V into h = {h} heads of d_k = {d_model // h} "
                "features each.")
    return f"{first_difference(got, expected)}."


_LENGTHS = ("if the error is about a shape: the keys and values have the other sequence's length m = "
            "X_kv.shape[0], not the queries' n, so split them with their own length (view(m, h, d_k)).")

register(Exercise(
    name="cross_attention",
    forbidden=("scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward"),
    signature="cross_attention(X_q (n, d_model), X_kv (m, d_model), W_Q, W_K, W_V, W_O (d_model, d_model) each, "
              "h: int) -> (n, d_model): Concat(head_1..head_h) W_O, head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i "
              "with Q = X_q W_Q, K = X_kv W_K, V = X_kv W_V",
    reference=_cross_attention,
    cases=[Case((randn64(3, 4, seed=10), randn64(5, 4, seed=9), randn64(4, 4, seed=11), randn64(4, 4, seed=12),
                 randn64(4, 4, seed=13), torch.eye(4, dtype=torch.float64), 2),
                "3 queries, 5 keys, d_model = 4, h = 2, W_O = I", hint=_LENGTHS),
           Case((randn64(4, 6, seed=14), randn64(2, 6, seed=24), randn64(6, 6, seed=15), randn64(6, 6, seed=16),
                 randn64(6, 6, seed=17), randn64(6, 6, seed=18), 3),
                "4 queries, 2 keys, d_model = 6, h = 3", hint=_LENGTHS),
           Case((randn64(5, 8, seed=19), randn64(5, 8, seed=25), randn64(8, 8, seed=20), randn64(8, 8, seed=21),
                 randn64(8, 8, seed=22), randn64(8, 8, seed=23), 4),
                "5 queries, 5 keys of another sequence, d_model = 8, h = 4")],
    hidden=lambda seed: [Case((randn64(2, 6, seed=seed), randn64(7, 6, seed=seed + 1),
                                *(randn64(6, 6, seed=seed + j) for j in (2, 3, 4, 5)), 2),
                               "2 queries, 7 keys, d_model = 6, h = 2")],
    hint="Q from X_q, K and V from X_kv; split each into (h, length, d_k) with its own length; "
         "A = softmax(Q K^T / sqrt(d_k)) per head, (h, n, m); Z = A @ V; concatenate to (n, d_model); multiply by W_O.",
    diagnose=_diagnose_cross,
    same=_close,
))


# -- 3. predict, then measure: what h costs at a fixed width ------------------------------------------------
COST_KEYS = ("parameters", "flops", "weights")


def measure_costs(d_model: int, n: int, h: int) -> dict[str, int]:
    """Measured on seqlab's MultiheadAttention(d_model, h): its parameter count, the FLOPs of one self-attention
    forward pass over one sequence of ``n`` tokens (counted by ``torch.utils.flop_counter``: a multiply-add is
    2 FLOPs; softmax, scaling and bias additions are not counted), and the number of attention weights it
    computes (per head, ``need_weights=True, average_attn_weights=False``)."""
    from torch.utils.flop_counter import FlopCounterMode

    from seqlab.nn.multihead import MultiheadAttention

    with torch.random.fork_rng(devices=[]):   # any weights will do; leave the student's generator alone
        torch.manual_seed(0)
        attention = MultiheadAttention(d_model, h, batch_first=True)
        X = torch.randn(1, n, d_model)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        _, weights = attention(X, X, X, need_weights=True, average_attn_weights=False)
    return {"parameters": sum(p.numel() for p in attention.parameters()),
            "flops": int(counter.get_total_flops()),
            "weights": weights.numel()}


def _same_costs(got: Any, expected: dict[str, int]) -> bool:
    return (isinstance(got, dict) and set(got) >= set(COST_KEYS)
            and all(isinstance(got[k], (int, float)) and got[k] == expected[k] for k in COST_KEYS))


def _diagnose_costs(args: tuple, got: Any, expected: dict[str, int]) -> str | None:
    d_model, n, h = args
    if not isinstance(got, dict) or not set(got) >= set(COST_KEYS):
        return f"return a dict with the keys {COST_KEYS}, got {_short_dict(got)}."
    for key in COST_KEYS:
        if not isinstance(got[key], (int, float)):
            return f"{key!r} should be a number, got {type(got[key]).__name__}."
    wrong = [k for k in COST_KEYS if got[k] != expected[k]]
    lines = [f"measured {k} = {expected[k]:,}, you predicted {got[k]:,}" for k in wrong]
    one_head = measure_costs(d_model, n, 1)
    advice = []
    if "parameters" in wrong:
        if h > 1 and got["parameters"] == h * one_head["parameters"]:
            advice.append("the heads do not each get d_model x d_model matrices: they split d_model into h slices "
                          "of d_k = d_model / h, so W_Q, W_K, W_V, W_O stay d_model x d_model (plus 4 d_model "
                          "biases) whatever h is")
        elif got["parameters"] == 4 * d_model * d_model:
            advice.append("count the biases too: in_proj_bias has 3 d_model numbers and out_proj.bias d_model")
        else:
            advice.append("four d_model x d_model matrices (W_Q, W_K, W_V, W_O) and their biases")
    if "flops" in wrong:
        if h > 1 and got["flops"] == h * one_head["flops"]:
            advice.append("h heads of size d_k = d_model / h do the work of one head of size d_model: the projections "
                          "are the same d_model x d_model products, and the scores cost h * n^2 * d_k = n^2 * d_model "
                          "multiply-adds")
        elif 2 * got["flops"] == expected["flops"]:
            advice.append("you counted multiply-adds; a multiply-add is 2 FLOPs (as torch's flop counter counts)")
        else:
            advice.append("projections 4 * n * d_model^2 multiply-adds, scores Q K^T and A V n^2 * d_model each, "
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
    signature="predict_costs(d_model: int, n: int, h: int) -> {'parameters': int, 'flops': int, 'weights': int} "
              "for MultiheadAttention(d_model, h) on one sequence of n tokens (checked against a measurement)",
    reference=measure_costs,
    cases=[Case((64, 32, 1), "d_model = 64, n = 32, one head"),
           Case((64, 32, 8), "d_model = 64, n = 32, eight heads"),
           Case((48, 10, 3), "d_model = 48, n = 10, three heads")],
    hint="parameters 4 d_model^2 + 4 d_model; FLOPs 2 * (4 n d_model^2 + 2 n^2 d_model); weights h n^2.",
    diagnose=_diagnose_costs,
    same=_same_costs,
))


# -- 4. build: multi-head attention from the equations, then watch it inside charlm-gpt ---------------------
# The parameters come as one dict in the lectures' orientation (X @ W_Q), with torch's biases, so that the same
# function runs on a hand-made case and on every layer of the trained charlm-gpt (seqlab.watch.attention_params).
ATTENTION_KEYS = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")


def attention(Q: Tensor, K: Tensor, V: Tensor, mask: Tensor | None = None) -> Tensor:
    """Notebook 9's attention of one head, softmax(Q K^T / sqrt(d_k)) V, with its causal mask (True = may attend)
    applied before the softmax. Q (..., n, d_k), K and V (..., m, d_k), mask (n, m) bool or None."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(K.shape[-1])          # (..., n, m)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))              # a hidden key gets weight 0
    return torch.softmax(scores, dim=-1) @ V                           # (..., n, d_k)


def multi_head_attention(X: Tensor, p: dict[str, Tensor], h: int, mask: Tensor | None = None) -> Tensor:
    """Concat(head_1, ..., head_h) W_O + b_O, head_i = attention(X W_Q^(i) + b_Q^(i), ...) on the columns of
    head i. X (..., n, d_model); p holds ATTENTION_KEYS, W_* (d_model, d_model), b_* (d_model,)."""
    d_model = X.shape[-1]
    d_k = d_model // h
    Q, K, V = X @ p["W_Q"] + p["b_Q"], X @ p["W_K"] + p["b_K"], X @ p["W_V"] + p["b_V"]   # (..., n, d_model)
    heads = [attention(Q[..., i * d_k:(i + 1) * d_k], K[..., i * d_k:(i + 1) * d_k],
                       V[..., i * d_k:(i + 1) * d_k], mask) for i in range(h)]               # h of (..., n, d_k)
    return torch.cat(heads, dim=-1) @ p["W_O"] + p["b_O"]                                  # (..., n, d_model)


def _mha_variant(X: Tensor, p: dict[str, Tensor], h: int, mask: Tensor | None = None, *, split: str = "right",
                 merge: str = "right", scale: str = "sqrt_dk", out: bool = True, bias_O: bool = True,
                 use_mask: bool = True, dim: int = -1) -> Tensor:
    """The reference with one thing done wrong (the usual mistakes; the watch in notebook 10 runs them too)."""
    *lead, n, d_model = X.shape
    d_k = d_model // h

    def heads_of(M: Tensor) -> Tensor:                                 # (..., n, d_model) -> (..., h, n, d_k)
        if split == "view":                                            # view(..., h, n, d_k): no transpose
            return M.reshape(*lead, h, n, d_k)
        return M.reshape(*lead, n, h, d_k).transpose(-3, -2)

    Q, K, V = (heads_of(X @ p[f"W_{c}"] + p[f"b_{c}"]) for c in "QKV")
    divide = {"sqrt_dk": math.sqrt(d_k), "sqrt_dmodel": math.sqrt(d_model), "dk": d_k, "none": 1.0}[scale]
    scores = Q @ K.transpose(-2, -1) / divide
    if mask is not None and use_mask:
        scores = scores.masked_fill(~mask, float("-inf"))
    Z = torch.softmax(scores, dim=dim) @ V                             # (..., h, n, d_k)
    if merge == "view":                                                # reshape without moving h back: tokens mix
        Z = Z.reshape(*lead, n, d_model)
    elif merge == "head_inner":                                        # Concat with features outer, heads inner
        Z = Z.permute(*range(len(lead)), -2, -1, -3).reshape(*lead, n, d_model)
    else:
        Z = Z.transpose(-3, -2).reshape(*lead, n, d_model)
    if not out:
        return Z
    return Z @ p["W_O"] + (p["b_O"] if bias_O else 0)


MHA_MISTAKES: dict[str, tuple[dict, str]] = {
    "split without transpose": (dict(split="view"), (
        "the heads are split with a view to (..., h, n, d_k) and no transpose, which hands head 0 the first n/h "
        "tokens' features instead of the first d_k features of every token: view as (..., n, h, d_k), then "
        "transpose, or take the column slice [..., i*d_k:(i+1)*d_k] for head i.")),
    "concat without transpose": (dict(merge="view"), (
        "the heads are concatenated with a reshape of (..., h, n, d_k) to (..., n, d_model) without moving the head "
        "axis back, which mixes tokens: transpose to (..., n, h, d_k) first, or torch.cat(heads, dim=-1).")),
    "concat in the wrong order": (dict(merge="head_inner"), (
        "Concat puts head 1's d_k features first, then head 2's, ...; yours interleaves them (feature j of every "
        "head together), so W_O's rows meet the wrong features: torch.cat(heads, dim=-1).")),
    "no W_O": (dict(out=False), "W_O is missing: Concat(head_1, ..., head_h) W_O + b_O mixes the heads at the end."),
    "no b_O": (dict(bias_O=False), "the output bias b_O is missing: Concat(...) W_O + b_O."),
    "scale sqrt(d_model)": (dict(scale="sqrt_dmodel"), (
        "each head's scores are scaled by 1/sqrt(d_k) = 1/sqrt(d_model / h), the size of a head, not by "
        "1/sqrt(d_model).")),
    "scale d_k": (dict(scale="dk"), "scale by 1/sqrt(d_k), not 1/d_k."),
    "no scale": (dict(scale="none"), "scale the scores by 1/sqrt(d_k) before the softmax."),
    "mask ignored": (dict(use_mask=False), (
        "the mask is ignored: where mask is False the score must be -inf before the softmax (a hidden key gets "
        "weight 0), as in notebook 9.")),
    "softmax over the queries": (dict(dim=-2), "the softmax runs over the keys (dim=-1): each query's weights sum to 1."),
}


def _diagnose_mha(args: tuple, got: Any, expected: Tensor) -> str | None:
    X, p, h = args[:3]
    n, d_model = X.shape[-2:]
    if isinstance(got, Tensor) and got.shape[-2:] == (n, n) and got.shape != expected.shape:
        return "those are attention weights (n x n); multiply them by V, concatenate the heads, apply W_O."
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    for change, message in MHA_MISTAKES.values():
        try:
            if _close(got, _mha_variant(*args, **change)):
                return message
        except RuntimeError:
            continue
    if h > 1 and _close(got, multi_head_attention(X, p, 1, *args[3:])):
        return f"that is one wide head (h = 1); split Q, K and V into h = {h} heads of d_k = {d_model // h} features."
    if "b_Q" in p and _close(got, multi_head_attention(X, {**p, "b_Q": p["b_Q"] * 0, "b_K": p["b_K"] * 0,
                                                           "b_V": p["b_V"] * 0}, h, *args[3:])):
        return "the biases of the projections are missing: Q = X W_Q + b_Q, and the same for K and V."
    return f"{first_difference(got, expected)}."


def _mha_params(d_model: int, seed: int) -> dict[str, Tensor]:
    return {key: randn64(*((d_model, d_model) if key[0] == "W" else (d_model,)), seed=seed + i) / math.sqrt(d_model)
            * (1 if key[0] == "W" else 0.5) for i, key in enumerate(ATTENTION_KEYS)}


def _causal(n: int) -> Tensor:
    return torch.ones(n, n, dtype=torch.bool).tril()


register(Exercise(
    name="multi_head_attention",
    mistakes=tuple(message for _, message in MHA_MISTAKES.values()),
    forbidden=("scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward"),
    signature="multi_head_attention(X (..., n, d_model), p: dict of W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, h: int, "
              "mask: BoolTensor (n, n) or None, True = may attend) -> (..., n, d_model): Concat(head_1..head_h) W_O "
              "+ b_O, head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i on head i's d_k = d_model / h columns",
    reference=multi_head_attention,
    cases=[Case((randn64(4, 6, seed=40) * 2, _mha_params(6, 41), 2, None), "4 tokens, d_model = 6, h = 2, no mask"),
           Case((randn64(5, 8, seed=50) * 2, _mha_params(8, 51), 4, _causal(5)),
                "5 tokens, d_model = 8, h = 4, a causal mask"),
           Case((randn64(2, 6, 12, seed=60) * 2, _mha_params(12, 61), 3, _causal(6)),
                "a batch of 2 sequences of 6 tokens, d_model = 12, h = 3, causal")],
    hidden=lambda seed: [Case((randn64(3, 5, 8, seed=seed) * 2, _mha_params(8, seed + 1), 2, _causal(5)),
                               "a batch of 3 sequences of 5 tokens, d_model = 8, h = 2, causal")],
    hint="Q = X @ W_Q + b_Q (and K, V); head i reads columns i*d_k:(i+1)*d_k of each; attention(Q_i, K_i, V_i, mask) "
         "per head; torch.cat(heads, dim=-1) @ W_O + b_O.",
    diagnose=_diagnose_mha,
    same=_close,
))


def mha_with_mistake(mistake: str) -> Callable[..., Tensor]:
    """The reference multi_head_attention with one of MHA_MISTAKES made, for watching what it does."""
    if mistake not in MHA_MISTAKES:
        raise KeyError(f"no catalogued mistake {mistake!r}; known: {sorted(MHA_MISTAKES)}")
    change = MHA_MISTAKES[mistake][0]

    def wrong(X: Tensor, p: dict[str, Tensor], h: int, mask: Tensor | None = None) -> Tensor:
        return _mha_variant(X, p, h, mask, **change)

    wrong.__name__ = f"multi_head_attention ({mistake})"
    return wrong
