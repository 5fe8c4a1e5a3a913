"""Notebook 14 — a GPT-style language model and sampling from it: top-k filtering of the next-token logits."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, first_difference, randn64, register, tensor_hint

NEG_INF = float("-inf")


# -- 1. top-k filtering of the next-token logits -----------------------------------------------------------
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
