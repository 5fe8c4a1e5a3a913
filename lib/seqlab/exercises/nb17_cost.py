"""Notebook 17 — what attention costs: predict the length at which a Transformer block's n^2 products overtake its
per-token work (measured with torch's FLOP counter), score a band of keys in O(n w), and predict, then measure, how
the memory kept for backward grows with the length."""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
from torch import Tensor

from seqlab.cost import loglog_slope, saved_bytes
from seqlab.exercises._core import Case, Exercise, first_difference, randn64, register, tensor_hint, tensors_close


# -- 1. where a whole block's n^2 overtakes its per-token work (measured) ------------------------------------
@functools.lru_cache(maxsize=16)
def measure_block_flops(d_model: int, d_ff: int, heads: int = 4) -> tuple[int, int]:
    """``(per_token, per_pair)``: one seqlab ``TransformerEncoderLayer``'s forward FLOPs are ``per_token * n + per_pair * n^2``.

    Counted by torch's FLOP counter at n = 1, 2 and 3 (the third checks that nothing else grows).
    """
    from seqlab.cost import count_flops
    from seqlab.nn import TransformerEncoderLayer

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = TransformerEncoderLayer(d_model, heads, d_ff, dropout=0.0).eval()
        xs = {n: torch.randn(n, d_model) for n in (1, 2, 3)}
    with torch.no_grad():
        f = {n: count_flops(lambda: layer(xs[n])) for n in (1, 2, 3)}
    per_pair = (f[2] - 2 * f[1]) // 2
    per_token = f[1] - per_pair
    if per_token * 3 + per_pair * 9 != f[3]:
        raise RuntimeError(f"the block's FLOPs are not a n + b n^2: {f}")
    return per_token, per_pair


def _block_crossover(d_model: int, d_ff: int) -> int:
    per_token, per_pair = measure_block_flops(d_model, d_ff)     # 2 (4 d^2 + 2 d d_ff) and 2 * 2 d
    return per_token // per_pair                                 # = 2 d_model + d_ff


def _diagnose_crossover(args: tuple, got: Any, expected: int) -> str | None:
    d, f = args
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return f"return a number of tokens (an int), not a {type(got).__name__}."
    per_token, per_pair = measure_block_flops(d, f)
    measured = (f"measured on seqlab's TransformerEncoderLayer({d}, 4, {f}): {per_token:,} FLOPs per token and "
                f"{per_pair:,} per (query, key) pair, equal at n = {per_token:,} / {per_pair:,} = {expected:,}")
    known = [
        (2 * d, "that is the attention layer alone (section 1: n = 2 d_model); a block also runs every token "
                "through the FFN, 2 d_model d_ff multiply-adds more per token"),
        (f, "the four projections W_Q, W_K, W_V, W_O are per-token work too: 4 d_model^2 multiply-adds per token"),
        (2 * d + f // 2, "the FFN has two products, d_model -> d_ff and d_ff -> d_model: 2 d_model d_ff "
                         "multiply-adds per token"),
        (3 * d // 2 + f, "there are four projections (W_O too), 4 d_model^2 multiply-adds per token"),
        (2 * (2 * d + f), "the n^2 part is two products, Q K^T and A V, n^2 d_model multiply-adds each "
                          "(you counted one)"),
        ((2 * d + f) // 2, "Q K^T and A V cost n^2 d_model multiply-adds each, 2 n^2 d_model in all "
                           "(you counted twice that)"),
        (6 * d, f"6 d_model holds only when d_ff = 4 d_model; here d_ff = {f}: use it"),
    ]
    for wrong, message in known:
        if got == wrong and got != expected:
            return f"you have {got:,}, expected {expected:,}: {message} ({measured})."
    return (f"you have {got:,}, expected {expected:,}. Per token: 4 d_model^2 (projections) + 2 d_model d_ff (FFN) "
            f"multiply-adds; per pair: 2 d_model (Q K^T and A V); {measured}.")


register(Exercise(
    name="block_crossover",
    signature="block_crossover(d_model: int, d_ff: int) -> int: the length n at which one Transformer block's "
              "n^2 products (Q K^T and A V) cost as many FLOPs as its per-token work (the four projections "
              "and the FFN) together",
    reference=_block_crossover,
    cases=[Case((96, 256), "d_model = 96, d_ff = 256"),           # first: every wrong count above differs here
           Case((128, 512), "the baby GPT's block: d_model = 128, d_ff = 512"),
           Case((512, 2048), "the Transformer base: d_model = 512, d_ff = 2048")],
    hidden=lambda seed: [Case((64 + 32 * (seed % 3), 384), "d_model = 64 to 128, d_ff = 384")],
    hint="per token 4 d_model^2 + 2 d_model d_ff multiply-adds, per (query, key) pair 2 d_model: "
         "n^2 * 2 d_model = n * (4 d_model^2 + 2 d_model d_ff).",
    diagnose=_diagnose_crossover,
    same=lambda got, expected: (isinstance(got, (int, float)) and not isinstance(got, bool)
                                and abs(got - expected) < 0.5),
))


# -- 2. the band's scores, one diagonal at a time -----------------------------------------------------------
def _band_scores(q: Tensor, k: Tensor, window: int) -> Tensor:
    n, d = q.shape
    scores = torch.full((n, 2 * window + 1), float("-inf"), dtype=q.dtype)
    for c, offset in enumerate(range(-window, window + 1)):   # column c holds key i + offset
        i = torch.arange(n)
        i = i[(i + offset >= 0) & (i + offset < n)]           # queries whose key i + offset exists
        scores[i, c] = (q[i] * k[i + offset]).sum(-1) / math.sqrt(d)
    return scores


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, rtol=1e-9, atol=1e-12)


def _diagnose_band(args: tuple, got: Any, expected: Tensor) -> str | None:
    q, k, window = args
    n, d = q.shape
    if isinstance(got, Tensor) and got.shape == (n, n):
        return (f"that is the full (n, n) = {(n, n)} matrix, the n^2 memory the exercise avoids: return only the "
                f"{2 * window + 1} keys around each query, shape (n, 2 * window + 1) = {tuple(expected.shape)}.")
    if isinstance(got, Tensor) and got.shape == (n, window + 1):
        return (f"shape (n, window + 1) = {(n, window + 1)} is a causal window; this one reaches both ways: "
                f"offsets -window .. +window, shape {tuple(expected.shape)}.")
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    if got.dtype.is_floating_point and torch.isnan(got).any():
        return "your scores contain NaN: keys off the ends of the sequence get -inf, not 0 * inf or inf - inf."
    exists = torch.isfinite(expected)
    mistakes = [
        (expected * math.sqrt(d), "scale the dot products by 1 / sqrt(d_k), as full attention does."),
        (expected * math.sqrt(d) / d, "the scale is 1 / sqrt(d_k), not 1 / d_k."),
        (expected.masked_fill(~exists, 0.0), "keys off the ends of the sequence must get -inf (weight 0 after the "
                                             "softmax), not 0: a score of 0 still gets weight."),
        (expected.flip(-1), "the columns are in reverse order: column c holds the key at offset c - window "
                            "(column 0 is the furthest key *behind* the query)."),
    ]
    for wrong, message in mistakes:
        if _close(got, wrong):
            return message
    if not torch.equal(torch.isfinite(got), exists):
        i, c = (int(v) for v in torch.nonzero(torch.isfinite(got) != exists)[0])
        return (f"entry ({i}, {c}) (key {i + c - window}) should be "
                f"{'a score' if exists[i, c] else '-inf (no such key)'}: column c holds key i + c - window, "
                f"which exists only for 0 <= i + c - window < n = {n}.")
    return f"{first_difference(got.masked_fill(~exists, 0.0), expected.masked_fill(~exists, 0.0))}."


def _band_unscaled(q: Tensor, k: Tensor, window: int) -> Tensor:
    return _band_scores(q, k, window) * math.sqrt(q.shape[-1])


def _band_zero_outside(q: Tensor, k: Tensor, window: int) -> Tensor:
    scores = _band_scores(q, k, window)
    return scores.masked_fill(~torch.isfinite(scores), 0.0)


# two slips the checker names, as bands notebook 17 runs on charlm-gpt's head (the figure shows what each does)
BAND_MISTAKES = {"a slip: no 1 / sqrt(d_k)": _band_unscaled,
                 "a slip: 0, not -inf, for keys off the ends": _band_zero_outside}


register(Exercise(
    name="band_scores",
    signature="band_scores(q: Tensor (n, d_k), k: Tensor (n, d_k), window: int) -> Tensor (n, 2 * window + 1): "
              "entry (i, c) is q_i . k_j / sqrt(d_k) for the key j = i + c - window, -inf where j is outside 0..n-1",
    reference=_band_scores,
    cases=[Case((torch.eye(4, dtype=torch.float64), torch.eye(4, dtype=torch.float64), 1),
                "q = k = the 4 x 4 identity, window 1: 0.5 (= 1 / sqrt(4)) in the middle column, 0 beside, -inf off the ends"),
           Case((randn64(7, 4, seed=0), randn64(7, 4, seed=1), 2), "7 random tokens, d = 4, window 2"),
           Case((randn64(5, 3, seed=2), randn64(5, 3, seed=3), 0), "window 0: each query reads only itself"),
           Case((randn64(3, 2, seed=4), randn64(3, 2, seed=5), 4), "a window wider than the sequence")],
    hidden=lambda seed: [Case((randn64(6, 5, seed=seed), randn64(6, 5, seed=seed + 1), 1),
                               "6 tokens, d = 5, window 1")],
    hint="for each offset o in -window..window: scores[i, o + window] = q[i] . k[i + o] / sqrt(d_k) where "
         "0 <= i + o < n, else -inf.",
    diagnose=_diagnose_band,
    same=_close,
))


# -- 3. predict, then measure: how the memory kept for backward grows with n ---------------------------------
SLOPE_KEYS = ("gru", "explicit", "fused", "window")
SLOPE_TOLERANCE = 0.25
MEMORY_LENGTHS = (256, 512, 1024)


def measure_memory_slopes(d: int = 32, heads: int = 4, window: int = 16) -> dict[str, float]:
    """Log-log slopes of the bytes autograd keeps for backward against n = 256, 512, 1024 (one sequence).

    ``gru``: seqlab's GRU(d, d); ``explicit``: MultiheadAttention(d, heads) (softmax then weighted
    sum, the weights kept); ``fused``: the same with ``fused=True`` (one scaled_dot_product_attention
    kernel); ``window``: :func:`seqlab.nn.attention.sliding_window_attend` with ``window`` keys on
    each side, on ``heads`` heads of ``d / heads``. Parameters and inputs are not counted. The
    bytes are deterministic, so one measurement per setting is kept (checking twice waits once).
    """
    return dict(_measured_slopes(d, heads, window))


@functools.lru_cache(maxsize=8)
def _measured_slopes(d: int, heads: int, window: int) -> tuple[tuple[str, float], ...]:
    from seqlab.nn import GRU, MultiheadAttention
    from seqlab.nn.attention import sliding_window_attend

    with torch.random.fork_rng(devices=[]):     # any weights will do; leave the student's generator alone
        torch.manual_seed(0)
        gru = GRU(d, d)
        explicit = MultiheadAttention(d, heads)
        fused = MultiheadAttention(d, heads, fused=True)
        inputs = {n: torch.randn(n, 1, d, requires_grad=True) for n in MEMORY_LENGTHS}            # (n, B, d)
        heads_in = {n: [torch.randn(1, heads, n, d // heads, requires_grad=True) for _ in range(3)]
                    for n in MEMORY_LENGTHS}
    kept: dict[str, list[int]] = {key: [] for key in SLOPE_KEYS}
    for n in MEMORY_LENGTHS:
        x = inputs[n]
        kept["gru"].append(saved_bytes(lambda: gru(x), exclude=[x, *gru.parameters()]))
        for key, layer in (("explicit", explicit), ("fused", fused)):
            kept[key].append(saved_bytes(lambda: layer(x, x, x, need_weights=False),
                                         exclude=[x, *layer.parameters()]))
        q, k, v = heads_in[n]
        kept["window"].append(saved_bytes(lambda: sliding_window_attend(q, k, v, window), exclude=[q, k, v]))
    return tuple((key, round(loglog_slope(MEMORY_LENGTHS, kept[key]), 2)) for key in SLOPE_KEYS)


def _same_slopes(got: Any, expected: dict[str, float]) -> bool:
    return (isinstance(got, dict) and set(got) >= set(SLOPE_KEYS)
            and all(isinstance(got[k], (int, float)) and not isinstance(got[k], bool)
                    and abs(got[k] - expected[k]) <= SLOPE_TOLERANCE for k in SLOPE_KEYS))


WHY = {
    "gru": "a recurrent layer keeps a few (B, H) vectors per step (its states and gates): n steps, n times the memory",
    "explicit": "the explicit path keeps the softmax output, h x n x n numbers, for the backward pass: "
                "double n, four times the memory",
    "fused": "the fused kernel keeps no n x n matrix: it saves q, k, v, its output and one log-sum-exp per row, "
             "and recomputes the weights in backward -- linear in n",
    "window": "a sliding window keeps (n, 2w + 1) weights and the (padded) keys and values: linear in n",
}


def _diagnose_slopes(args: tuple, got: Any, expected: dict[str, float]) -> str | None:
    if not isinstance(got, dict) or not set(got) >= set(SLOPE_KEYS):
        return f"return a dict with the keys {SLOPE_KEYS}, got {sorted(got) if isinstance(got, dict) else type(got).__name__}."
    for key in SLOPE_KEYS:
        if not isinstance(got[key], (int, float)) or isinstance(got[key], bool):
            return f"{key!r} should be a number (a slope), got {type(got[key]).__name__}."
    wrong = [k for k in SLOPE_KEYS if abs(got[k] - expected[k]) > SLOPE_TOLERANCE]
    return " ".join(f"{k}: you predicted {got[k]:g}, measured {expected[k]:g} ({WHY[k]})." for k in wrong)


register(Exercise(
    name="predict_memory_slopes",
    signature="predict_memory_slopes() -> {'gru': slope, 'explicit': slope, 'fused': slope, 'window': slope}: "
              "your prediction of each log-log slope of the memory kept for backward against n "
              f"(measured at n = {', '.join(map(str, MEMORY_LENGTHS))}; within ±{SLOPE_TOLERANCE} passes)",
    reference=measure_memory_slopes,
    cases=[Case((), f"measured at n = {', '.join(map(str, MEMORY_LENGTHS))}, d_model = 32, 4 heads, window 16")],
    hint="memory proportional to n^k is a line of slope k on a log-log plot: which layers keep an n x n matrix?",
    diagnose=_diagnose_slopes,
    same=_same_slopes,
))
