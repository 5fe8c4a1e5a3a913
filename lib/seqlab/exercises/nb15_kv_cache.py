"""Notebook 15 — the KV cache and four models in one race: one cached decoding step of attention,
predicting the size of a KV cache before measuring it, predicting how much work the cache saves a step, and the
loss at each position of a window (how much context a model uses)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import (Case, Exercise, Measured, first_difference, randn64, register, tensor_hint,
                                   tensors_close)

NEG_INF = float("-inf")


# -- 1. one cached decoding step of attention --------------------------------------------------------------
def _cached_attention_step(q: Tensor, k_new: Tensor, v_new: Tensor, K_cache: Tensor,
                           V_cache: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    K = torch.cat([K_cache, k_new], dim=-2)                           # (B, h, t + 1, d_k): the new key at the end
    V = torch.cat([V_cache, v_new], dim=-2)
    scores = q @ K.transpose(-2, -1) / math.sqrt(q.shape[-1])         # (B, h, 1, t + 1): one query, every key
    return torch.softmax(scores, dim=-1) @ V, K, V                    # (B, h, 1, d_k), and the grown caches


def _step_case(B: int, h: int, t: int, d_k: int, seed: int) -> tuple[Tensor, ...]:
    """(q, k_new, v_new, K_cache, V_cache) for a step after ``t`` cached positions."""
    q, k_new, v_new = (randn64(B, h, 1, d_k, seed=seed + i) for i in range(3))
    return q, k_new, v_new, randn64(B, h, t, d_k, seed=seed + 3), randn64(B, h, t, d_k, seed=seed + 4)


def _same_step(got: Any, expected: tuple[Tensor, Tensor, Tensor]) -> bool:
    return (isinstance(got, tuple) and len(got) == 3
            and all(tensors_close(g, e, rtol=1e-9, atol=1e-12) for g, e in zip(got, expected)))


def _attend(q: Tensor, K: Tensor, V: Tensor, scale: bool = True, dim: int = -1) -> Tensor:
    scores = q @ K.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    return torch.softmax(scores, dim=dim) @ V


def _diagnose_step(args: tuple, got: Any, expected: tuple[Tensor, Tensor, Tensor]) -> str | None:
    q, k_new, v_new, K_cache, V_cache = args
    if not isinstance(got, tuple) or len(got) != 3:
        return f"return three tensors (output, K, V): the output and the grown caches, not a {type(got).__name__}."
    for name, g, e in zip(("the output", "K", "V"), got, expected):
        hint = tensor_hint(g, e)
        if hint:
            if name != "the output" and isinstance(g, Tensor) and g.shape == K_cache.shape:
                return (f"{name} still has the {K_cache.shape[-2]} cached positions: append the new token's "
                        f"{'key' if name == 'K' else 'value'} (torch.cat along dim=-2) and return the grown cache, "
                        f"which the next step reads.")
            return f"{name}: {hint}"
    out, K, V = got
    if not (torch.allclose(K, expected[1]) and torch.allclose(V, expected[2])):
        if torch.allclose(K, torch.cat([k_new, K_cache], dim=-2)):
            return ("the new key went to the front of the cache: append it at the end (dim=-2), so that position "
                    "i of the cache stays the key of token i.")
        return "K and V must be the caches with k_new and v_new appended at the end (torch.cat along dim=-2)."
    K_all, V_all = expected[1], expected[2]
    wrong_outputs = {
        "the new token attends only to the cached positions: append k_new and v_new *before* attending, so that "
        "the query also reads its own key and value (a causal mask allows position t to read itself).":
            _attend(q, K_cache, V_cache),
        "scale the scores by 1/sqrt(d_k) before the softmax, as in training; without it the cached step differs "
        "from the uncached forward pass.": _attend(q, K_all, V_all, scale=False),
        "the softmax must run over the keys (dim=-1), one distribution over the t + 1 positions for the query.":
            _attend(q, K_all, V_all, dim=-2),
    }
    for message, wrong in wrong_outputs.items():
        if torch.allclose(out.to(wrong.dtype), wrong):
            return message
    if torch.allclose(out.to(q.dtype), _attend(k_new, K_all, V_all)):
        return "the scores use the new key as the query: score q against every key, q @ K^T."
    return "the output: " + first_difference(out, expected[0]) + "."


register(Exercise(
    name="cached_attention_step",
    hidden=lambda seed: [Case(_step_case(2, 2, 4, 6, seed=seed), "a batch of 2, 2 heads, 4 cached positions, d_k = 6")],
    forbidden=("scaled_dot_product_attention",),
    signature="cached_attention_step(q, k_new, v_new: (B, h, 1, d_k), K_cache, V_cache: (B, h, t, d_k)) -> "
              "(output (B, h, 1, d_k), K (B, h, t + 1, d_k), V (B, h, t + 1, d_k))",
    reference=_cached_attention_step,
    cases=[Case(_step_case(1, 1, 3, 4, seed=0), "one head, 3 cached positions, d_k = 4"),
           Case(_step_case(2, 3, 5, 8, seed=10), "a batch of 2, 3 heads, 5 cached positions, d_k = 8"),
           Case(_step_case(1, 2, 0, 4, seed=20), "the first token: an empty cache (t = 0)",
                hint="with an empty cache (t = 0) the token attends only to itself: its output is its own value.")],
    hint="K = cat([K_cache, k_new], -2), V likewise; output = softmax(q K^T / sqrt(d_k), dim=-1) V.",
    diagnose=_diagnose_step,
    same=_same_step,
))


def _attend_then_append(q: Tensor, k_new: Tensor, v_new: Tensor, K_cache: Tensor,
                        V_cache: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    return _attend(q, K_cache, V_cache), torch.cat([K_cache, k_new], dim=-2), torch.cat([V_cache, v_new], dim=-2)


def _cache_not_grown(q: Tensor, k_new: Tensor, v_new: Tensor, K_cache: Tensor,
                     V_cache: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    out, _, _ = _cached_attention_step(q, k_new, v_new, K_cache, V_cache)
    return out, K_cache, V_cache


# two slips the checker names, as steps notebook 15 runs inside charlm-gpt (the text shows what each does)
STEP_MISTAKES = {"a slip: attend, then append (the token never reads itself)": _attend_then_append,
                 "a slip: the cache is not returned grown": _cache_not_grown}


# -- 2. predict, then measure: the size of a KV cache ------------------------------------------------------
def measure_kv_cache_bytes(num_layers: int, nhead: int, d_model: int, T: int, batch_size: int) -> int:
    """Build a seqlab GPT of these sizes (float32), read ``batch_size`` sequences of ``T`` tokens into a
    fresh KV cache, and return the bytes the cache holds (:meth:`seqlab.nn.multihead.KVCache.nbytes`)."""
    from seqlab.models.gpt import GPT, GPTConfig

    with torch.random.fork_rng(devices=[]):   # any weights will do; leave the student's generator alone
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=16, max_len=T, d_model=d_model, num_layers=num_layers, nhead=nhead)).eval()
    cache = model.new_cache()
    ids = torch.arange(batch_size * T).view(batch_size, T) % 16
    with torch.no_grad():
        model(ids, cache=cache)
    return cache.nbytes()


def _diagnose_cache(args: tuple, got: Any, expected: int) -> str | None:
    num_layers, nhead, d_model, T, B = args
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return f"return a number of bytes (an int), not a {type(got).__name__}."
    numbers = 2 * num_layers * B * T * d_model
    known = {
        numbers: "you counted numbers; each float32 number takes 4 bytes.",
        expected // 2: "a cache holds two tensors per layer, the keys K and the values V: count both.",
        expected * nhead: "the heads split d_model between them (d_head = d_model / nhead): the cache holds "
                          "nhead x d_head = d_model numbers per position per tensor, not nhead x d_model.",
        expected // num_layers: "every layer has its own keys and values: multiply by num_layers.",
        expected // B: "each of the batch_size sequences has its own cache: multiply by batch_size.",
        expected * 8: "that is bits; a float32 number is 4 bytes (32 bits).",
        8 * num_layers * B * T * T: "the cache does not grow like T^2 (that is the attention matrix): it keeps "
                                    "one key and one value vector of d_model numbers per position.",
        4 * num_layers * B * T * T * nhead: "the cache keeps keys and values, not attention weights: "
                                            "2 x T x d_model numbers per layer and sequence, not T^2 per head.",
    }
    diff = f"predicted {got:,.0f} bytes, measured {expected:,} ({expected / 1e6:.3g} MB)"
    for value, message in known.items():
        if value != expected and got == value:
            return f"{diff}: {message}"
    return (f"{diff}, off by a factor {got / expected:.3g}. Per layer and sequence the cache keeps K and V, each "
            f"T x d_model float32 numbers.")


register(Exercise(
    name="kv_cache_bytes",
    signature="kv_cache_bytes(num_layers: int, nhead: int, d_model: int, T: int, batch_size: int) -> int, your "
              "prediction of the bytes a float32 KV cache holds after T tokens (checked against a measured cache)",
    reference=measure_kv_cache_bytes,
    cases=[Case((3, 4, 128, 50, 1), "3 layers, 4 heads, d_model = 128, 50 tokens, one sequence"),
           Case((5, 2, 64, 40, 3), "5 layers, 2 heads, d_model = 64, 40 tokens, 3 sequences"),
           Case((3, 1, 24, 10, 2), "3 layers, one head, d_model = 24, 10 tokens, 2 sequences")],
    hidden=lambda seed: [Case((2 + seed % 3, 3, 48, 17, 2),
                               "2 to 4 layers, 3 heads, d_model = 48, 17 tokens, 2 sequences")],
    hint="2 (K and V) x num_layers x batch_size x T x d_model numbers, 4 bytes each; nhead does not matter.",
    diagnose=_diagnose_cache,
    same=lambda got, expected: isinstance(got, (int, float)) and not isinstance(got, bool) and got == expected,
))


# -- 2b. predict, then measure: how many times the work of a cached step is an uncached one? ----------------
SAVING_AT = 64                     # m: charlm-gpt's whole context
SAVING_TOLERANCE = 0.1             # 10 % of the measured ratio


def _saving(flops: Any) -> float:
    """Section 1's ``flops``, ``{m: (FLOPs with the cache, FLOPs without)}``: the ratio without / with at m = 64."""
    if not isinstance(flops, dict) or SAVING_AT not in flops:
        raise TypeError(f"expected the dict of counted FLOPs by length m, with m = {SAVING_AT} among its keys")
    try:
        cached, uncached = (float(v) for v in flops[SAVING_AT])
    except (TypeError, ValueError):
        raise TypeError(f"expected flops[{SAVING_AT}] to be two counts (with the cache, without)") from None
    if not 0 < cached <= uncached:
        raise ValueError(f"expected two positive counts, the uncached one the larger; got {flops[SAVING_AT]}")
    return uncached / cached


def _predict_saving(measured: float) -> float:
    return measured


def _same_saving(got: Any, expected: float) -> bool:
    return (isinstance(got, (int, float)) and not isinstance(got, bool)
            and abs(float(got) - expected) <= SAVING_TOLERANCE * expected)


def _diagnose_saving(args: tuple, got: Any, expected: float) -> str | None:
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return f"put your prediction as a number (how many times), not a {type(got).__name__}."
    got, m = float(got), SAVING_AT
    near = lambda value: abs(got - value) <= SAVING_TOLERANCE * value   # noqa: E731
    said = f"measured {expected:,.1f} times, you predicted {got:,.4g}"
    if got < 1:
        return f"{said}: the ratio is uncached / cached FLOPs, and the uncached step does more work, so it is above 1."
    if near(m * m) or near(m * m / 2):
        return (f"{said}: the uncached scores form an m x m matrix, but the cached step's scores grow too, one query "
                f"against m keys: that part is also m times smaller, not m^2.")
    if got > expected:
        return (f"{said}: the uncached step does each of the cached step's products m = {m} times (all m tokens "
                f"instead of one), and no more: the m x m scores are m rows of the cached step's one.")
    if near(1) or got < 2:
        return f"{said}: without the cache every one of the m = {m} tokens goes through every layer again."
    return (f"{said}: less than m = {m}? The cached step still reads all m keys, but the uncached step reads them "
            f"for each of its m queries: every term of its count is m times the cached step's, the read-out too.")


register(Exercise(
    name="predict_cache_saving",
    signature=f"predict_cache_saving() -> float: how many times the FLOPs of a cached generation step the uncached "
              f"step costs at m = {SAVING_AT} (checked against section 1's count, within {SAVING_TOLERANCE:.0%})",
    reference=_predict_saving,
    cases=[Case((), f"charlm-gpt, the step that gives token m = {SAVING_AT}: FLOPs without / with the cache")],
    hint="with the cache one token goes through every layer and its query meets m keys; without it, all m tokens do.",
    diagnose=_diagnose_saving,
    same=_same_saving,
    measured=Measured("flops, the counted FLOPs {m: (with the cache, without)}", "section 1's FLOPs cell", _saving),
))


# -- 3. the loss at each position of a window ---------------------------------------------------------------
def _loss_by_position(logits: Tensor, targets: Tensor) -> Tensor:
    log_p = torch.log_softmax(logits, dim=-1)                              # (B, n, V)
    return -log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1).mean(0)   # (n,): mean over the windows


def _position_case(B: int, n: int, V: int, seed: int) -> tuple[Tensor, Tensor]:
    logits = randn64(B, n, V, seed=seed) * 2
    targets = torch.randint(V, (B, n), generator=torch.Generator().manual_seed(seed + 1))
    return logits, targets


def _diagnose_by_position(args: tuple, got: Any, expected: Tensor) -> str | None:
    logits, targets = args
    B, n, V = logits.shape
    if isinstance(got, Tensor) and got.dim() == 0:
        return f"that is one number (the mean over everything); keep one loss per position: shape ({n},)."
    if isinstance(got, Tensor) and got.shape == (B,):
        return f"you averaged over the positions (shape ({B},), one per window); average over the windows (dim=0)."
    if isinstance(got, Tensor) and got.shape == (B, n):
        return f"one loss per window and position ({B}, {n}): average over the windows (dim=0) to get ({n},)."
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    log_p = torch.log_softmax(logits, dim=-1)
    picked = log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    raw = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    known = {
        "the loss is the *negative* log-probability of the target: flip the sign.": picked.mean(0),
        "use log-probabilities (log_softmax over the vocabulary), not the raw logits.": -raw.mean(0),
        "use the log of the target's probability; the probability itself is not the cross-entropy.":
            -torch.softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1).mean(0),
        "you summed over the windows; average them (the mean over dim=0), so the figure is in nats per character.":
            -picked.sum(0),
    }
    for message, wrong in known.items():
        if torch.allclose(got.to(wrong.dtype), wrong):
            return message
    for shift in (1, -1):
        shifted = -log_p.gather(-1, targets.roll(shift, 1).unsqueeze(-1)).squeeze(-1).mean(0)
        if torch.allclose(got.to(shifted.dtype), shifted):
            return "the targets are already shifted (target t follows input t): do not shift them again."
    return first_difference(got, expected) + "."


register(Exercise(
    name="loss_by_position",
    signature="loss_by_position(logits: (B, n, V), targets: LongTensor (B, n)) -> Tensor (n,): the mean "
              "cross-entropy (nats) of each position over the B windows",
    reference=_loss_by_position,
    cases=[Case(_position_case(4, 6, 5, seed=0), "4 windows of 6 positions, a vocabulary of 5"),
           Case(_position_case(1, 3, 7, seed=5), "one window of 3 positions"),
           Case(_position_case(3, 1, 4, seed=9), "windows of a single position")],
    hidden=lambda seed: [Case(_position_case(2, 8, 6, seed=seed), "2 windows of 8 positions, a vocabulary of 6")],
    hint="log_p = log_softmax(logits, -1); -log_p.gather(-1, targets[..., None])[..., 0].mean(0).",
    diagnose=_diagnose_by_position,
    same=lambda got, expected: tensors_close(got, expected, rtol=1e-9, atol=1e-12),
))
