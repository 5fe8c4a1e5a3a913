"""Notebook 13 — a GPT-style language model: the shifted targets of the causal LM objective, top-k
filtering of the next-token logits, and predicting the size of a KV cache before measuring it."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, first_difference, randn64, register, tensor_hint

NEG_INF = float("-inf")


def _ids(*values: int) -> Tensor:
    return torch.tensor(values, dtype=torch.long)


# -- 1. the causal LM objective: targets are the inputs shifted by one -------------------------------------
def _lm_targets(ids: Tensor) -> tuple[Tensor, Tensor]:
    return ids[:-1], ids[1:]                  # input t is read, target t = the token after it


def _same_pair(got: Any, expected: tuple[Tensor, Tensor]) -> bool:
    return (isinstance(got, tuple) and len(got) == 2 and all(isinstance(g, Tensor) for g in got)
            and all(g.shape == e.shape and torch.equal(g, e) for g, e in zip(got, expected)))


def _diagnose_targets(args: tuple, got: Any, expected: tuple[Tensor, Tensor]) -> str | None:
    (ids,) = args
    if not isinstance(got, tuple) or len(got) != 2:
        return f"return a pair (inputs, targets), not a {type(got).__name__}."
    for name, g, e in zip(("inputs", "targets"), got, expected):
        hint = tensor_hint(g, e)
        if hint:
            if isinstance(g, Tensor) and g.shape == ids.shape:
                return (f"{name} have the full length {ids.shape[-1]}: a sequence of n tokens gives n - 1 "
                        f"(input, target) pairs, since the last token has no next one and the first is never a "
                        f"target. Slice, do not roll (torch.roll wraps the first token round to the end).")
            return f"{name}: {hint}"
    inputs, targets = got
    x, y = expected
    if torch.equal(inputs, y) and torch.equal(targets, x):
        return "inputs and targets are swapped: the model reads ids[:-1] and predicts ids[1:]."
    if torch.equal(targets, x):
        return "the targets are the inputs themselves: each target is the token *after* the input, ids[1:]."
    for name, g, e in zip(("inputs", "targets"), got, expected):
        if not torch.equal(g, e):
            return f"{name}: " + first_difference(g, e) + "."
    return None


register(Exercise(
    name="lm_targets",
    signature="lm_targets(ids: LongTensor (n,)) -> (inputs (n - 1,), targets (n - 1,)), "
              "target t being the token after input t",
    reference=_lm_targets,
    cases=[Case((_ids(7, 3, 3, 9, 1),), "a sequence of 5 ids"),
           Case((_ids(5, 6),), "two ids: one (input, target) pair"),
           Case((_ids(0, 1, 2, 3, 4, 5, 6),), "seven ids")],
    hint="inputs = ids[:-1] and targets = ids[1:].",
    diagnose=_diagnose_targets,
    same=_same_pair,
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
def measure_kv_cache_bytes(n_layer: int, n_head: int, d_model: int, T: int, batch_size: int) -> int:
    """Build a seqlab GPT of these sizes (float32), read ``batch_size`` sequences of ``T`` tokens into a
    fresh KV cache, and return the bytes the cache holds (:meth:`seqlab.nn.multihead.KVCache.nbytes`)."""
    from seqlab.models.gpt import GPT, GPTConfig

    with torch.random.fork_rng(devices=[]):   # any weights will do; leave the student's generator alone
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=16, context=T, d_model=d_model, n_layer=n_layer, n_head=n_head)).eval()
    cache = model.new_cache()
    ids = torch.arange(batch_size * T).view(batch_size, T) % 16
    with torch.no_grad():
        model(ids, cache=cache)
    return cache.nbytes()


def _diagnose_cache(args: tuple, got: Any, expected: int) -> str | None:
    n_layer, n_head, d_model, T, B = args
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return f"return a number of bytes (an int), not a {type(got).__name__}."
    numbers = 2 * n_layer * B * T * d_model
    known = {
        numbers: "you counted numbers; each float32 number takes 4 bytes.",
        expected // 2: "a cache holds two tensors per layer, the keys K and the values V: count both.",
        expected * n_head: "the heads split d_model between them (d_head = d_model / n_head): the cache holds "
                           "n_head x d_head = d_model numbers per position per tensor, not n_head x d_model.",
        expected // n_layer: "every layer has its own keys and values: multiply by n_layer.",
        expected // B: "each of the batch_size sequences has its own cache: multiply by batch_size.",
        expected * 8: "that is bits; a float32 number is 4 bytes (32 bits).",
        8 * n_layer * B * T * T: "the cache does not grow like T^2 (that is the attention matrix): it keeps one key "
                                 "and one value vector of d_model numbers per position.",
        4 * n_layer * B * T * T * n_head: "the cache keeps keys and values, not attention weights: 2 x T x d_model "
                                          "numbers per layer and sequence, not T^2 per head.",
    }
    diff = f"predicted {got:,.0f} bytes, measured {expected:,} ({expected / 1e6:.3g} MB)"
    for value, message in known.items():
        if value != expected and got == value:
            return f"{diff}: {message}"
    return (f"{diff}, off by a factor {got / expected:.3g}. Per layer and sequence the cache keeps K and V, each "
            f"T x d_model float32 numbers.")


register(Exercise(
    name="kv_cache_bytes",
    signature="kv_cache_bytes(n_layer: int, n_head: int, d_model: int, T: int, batch_size: int) -> int, your "
              "prediction of the bytes a float32 KV cache holds after T tokens (checked against a measured cache)",
    reference=measure_kv_cache_bytes,
    cases=[Case((3, 4, 128, 50, 1), "3 layers, 4 heads, d_model = 128, 50 tokens, one sequence"),
           Case((5, 2, 64, 40, 3), "5 layers, 2 heads, d_model = 64, 40 tokens, 3 sequences"),
           Case((3, 1, 24, 10, 2), "3 layers, one head, d_model = 24, 10 tokens, 2 sequences")],
    hint="2 (K and V) x n_layer x batch_size x T x d_model numbers, 4 bytes each; n_head does not matter.",
    diagnose=_diagnose_cache,
    same=lambda got, expected: isinstance(got, (int, float)) and not isinstance(got, bool) and got == expected,
))
