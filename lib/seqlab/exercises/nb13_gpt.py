"""Notebook 13 — a GPT-style language model: one cached decoding step of attention, top-k filtering of
the next-token logits, predicting the size of a KV cache before measuring it, and the loss at each
position of a window (how much context a model uses)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import (Case, Exercise, first_difference, randn64, register, tensor_hint,
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


# -- 2. top-k filtering of the next-token logits -----------------------------------------------------------
def _top_k_filter(logits: Tensor, k: int) -> Tensor:
    if k >= logits.shape[-1]:
        return logits.clone()                                        # nothing to cut
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]           # (..., 1) the k-th largest of each row
    return logits.masked_fill(logits < kth_largest, NEG_INF)        # ties with the k-th are kept


def _same_filtered(got: Any, expected: Tensor) -> bool:
    return (isinstance(got, Tensor) and got.shape == expected.shape and got.is_floating_point()
            and bool(torch.equal(got.to(expected.dtype), expected)))


def _diagnose_top_k(args: tuple, got: Any, expected: Tensor) -> str | None:
    logits, k = args
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    if not got.is_floating_point():
        return f"return logits (floating point, with -inf where cut), not a {got.dtype} tensor."
    V = logits.shape[-1]
    if k >= V:
        return f"k = {k} is at least the vocabulary size V = {V}: there is nothing to cut, return the logits unchanged."
    finite = torch.isfinite(got)
    if bool(finite.all()) and torch.allclose(got.sum(-1), torch.ones((), dtype=got.dtype), atol=1e-6):
        return ("you returned probabilities; return the *logits*, with -inf where a token is cut "
                "(the softmax that follows turns -inf into a probability of exactly 0).")
    if torch.allclose(got.exp().sum(-1), torch.ones((), dtype=got.dtype), atol=1e-6):
        return ("you returned log-probabilities (a log_softmax); return the filtered logits themselves, "
                "the kept ones unchanged and the others -inf.")
    cut = ~torch.isfinite(expected)
    if bool(finite.all()):
        if torch.equal(got, logits.to(got.dtype)):
            return f"nothing was cut: set every logit below the k-th largest of its row (k = {k}) to -inf."
        if bool((got[cut] == 0).all()):
            return ("you set the cut logits to 0, but 0 is an ordinary logit (exp(0) = 1 before normalising): "
                    "set them to -inf, float('-inf').")
        if bool((got[cut] <= -1e3).all()):
            return ("a large negative number still leaves a tiny probability; set the cut logits to -inf exactly, "
                    "so that they get probability 0.")
        return "the logits to cut must become -inf (float('-inf')): all but the k largest of each row."
    kept_got, kept_expected = finite.sum(-1), torch.isfinite(expected).sum(-1)
    kth = logits.topk(k, dim=-1).values[..., -1:]
    if bool((kept_got < kept_expected).any()) and bool(((logits == kth).sum(-1) > 1).any()):
        return ("a tie: keep every logit equal to the k-th largest (compare with the k-th value: logits < kth "
                "-> -inf), so a tie may keep more than k; which of the tied ones topk's indices pick is arbitrary.")
    kth_smallest = logits.topk(k, dim=-1, largest=False).values[..., -1:]
    if torch.equal(finite, logits <= kth_smallest):
        return "you kept the k *smallest* logits; keep the k largest (topk gives the largest by default)."
    if logits.dim() > 1 and torch.equal(finite, logits >= logits.flatten().topk(k).values[-1]):
        return ("you kept the k largest of the whole tensor; keep them in each row (dim=-1): every context "
                "has its own next-token distribution.")
    if int((kept_got - kept_expected).abs().max()) == 1:
        kept = int(kept_got.max())
        return (f"you kept {kept} logit{'s' * (kept != 1)} in a row instead of k = {k}: an off-by-one in the "
                f"k-th value (topk(k).values[..., -1] is the k-th largest).")
    if not torch.equal(got[finite], logits[finite]):
        return "the logits you keep must stay as they are: change only the cut ones to -inf."
    return first_difference(got.nan_to_num(neginf=-1e30), expected.nan_to_num(neginf=-1e30)) + "."


register(Exercise(
    name="top_k_filter",
    signature="top_k_filter(logits: Tensor (..., V), k: int) -> Tensor (..., V): the logits, with all but the k "
              "largest of each row set to -inf",
    reference=_top_k_filter,
    cases=[Case((torch.tensor([2.0, -1.0, 0.5, 3.0, 0.0]), 2), "V = 5, keep the 2 largest"),
           Case((randn64(3, 8, seed=0) * 2, 3), "a batch of 3 rows, V = 8, k = 3: each row on its own"),
           Case((torch.tensor([[1.0, 3.0, 3.0, 2.0], [0.0, 0.0, 0.0, 0.0]]), 1),
                "ties: two logits equal the largest in row 0, all four in row 1"),
           Case((torch.tensor([0.3, -0.2, 1.5]), 3), "k = V: nothing to cut"),
           Case((torch.tensor([0.3, -0.2, 1.5]), 10), "k = 10 > V = 3: nothing to cut either",
                hint="k larger than the vocabulary leaves nothing to cut: return the logits unchanged "
                     "(nanoGPT clamps k to V the same way).")],
    hint="kth = logits.topk(k, dim=-1).values[..., -1:]; return logits.masked_fill(logits < kth, float('-inf')) "
         "(and the logits unchanged when k >= V).",
    diagnose=_diagnose_top_k,
    same=_same_filtered,
))


# -- 3. predict, then measure: the size of a KV cache ------------------------------------------------------
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
    hint="2 (K and V) x num_layers x batch_size x T x d_model numbers, 4 bytes each; nhead does not matter.",
    diagnose=_diagnose_cache,
    same=lambda got, expected: isinstance(got, (int, float)) and not isinstance(got, bool) and got == expected,
))


# -- 4. the loss at each position of a window ---------------------------------------------------------------
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
    hint="log_p = log_softmax(logits, -1); -log_p.gather(-1, targets[..., None])[..., 0].mean(0).",
    diagnose=_diagnose_by_position,
    same=lambda got, expected: tensors_close(got, expected, rtol=1e-9, atol=1e-12),
))
