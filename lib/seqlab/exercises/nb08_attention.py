"""Notebook 08 — attention: one attention step, a masked softmax, BLEU's modified precision, and a prediction
about reversing 24 digits with and without attention (judged against the notebook's own measurement)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import (Case, Exercise, Measured, as_pair, pair_within, randn64, register, shares_pair,
                                   tensors_close)


_randn = randn64


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, atol=1e-9)


# -- 1. one step of dot-product attention -------------------------------------------------------------
def _attend(s: Tensor, H: Tensor) -> tuple[Tensor, Tensor]:
    weights = torch.softmax(H @ s, dim=0)             # (S,): a_j = softmax_j(s . h_j)
    return weights, weights @ H                       # context (d,) = sum_j a_j h_j


def _same_pair(got: Any, expected: tuple[Tensor, Tensor]) -> bool:
    return isinstance(got, tuple) and len(got) == 2 and _close(got[0], expected[0]) and _close(got[1], expected[1])


def _diagnose_attend(args: tuple, got: Any, expected: tuple[Tensor, Tensor]) -> str | None:
    s, H = args
    if not (isinstance(got, tuple) and len(got) == 2 and all(isinstance(g, Tensor) for g in got)):
        return "return a pair of tensors (weights of shape (S,), context of shape (d,))."
    weights, context = got
    scores = H @ s
    if _close(weights, scores):
        return "those are the scores e_j = s . h_j; the weights are their softmax, a_j = exp(e_j) / sum_k exp(e_k)."
    if _close(weights, scores / scores.sum()):
        return "divide the *exponentials* by their sum (softmax), not the scores themselves: scores can be negative."
    if _close(weights, expected[0]) and _close(context, scores @ H):
        return "the context is the average of the h_j weighted by the softmax weights a_j, not by the raw scores."
    if _close(weights, expected[0]) and weights.shape == context.shape:
        return "the context is a vector of size d, the weighted sum of the rows of H: weights @ H."
    if _close(weights, expected[0]) and _close(context, H.mean(dim=0)):
        return "that is the plain mean of the encoder states; weight each h_j by a_j."
    return None


register(Exercise(
    name="attend",
    forbidden=("scaled_dot_product_attention", "MultiheadAttention"),
    signature="attend(s: Tensor (d,), H: Tensor (S, d)) -> (weights (S,), context (d,)), dot-product scores",
    reference=_attend,
    cases=[Case((torch.tensor([2.0, 1.0], dtype=torch.float64),
                 torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)),
                "the worked example of section 1"),
           Case((_randn(4, seed=0), _randn(6, 4, seed=1)), "six encoder states of size 4, random"),
           Case((_randn(3, seed=2), -_randn(5, 3, seed=3).abs()), "scores that are all negative")],
    hidden=lambda seed: [Case((randn64(5, seed=seed), randn64(7, 5, seed=seed + 1)), "seven encoder states of size 5")],
    hint="scores = H @ s; weights = their softmax; context = weights @ H.",
    diagnose=_diagnose_attend,
    same=_same_pair,
))


# -- 2. a masked softmax --------------------------------------------------------------------------
def _masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def _diagnose_masked(args: tuple, got: Any, expected: Tensor) -> str | None:
    scores, mask = args
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        return f"return a tensor of the scores' shape {tuple(expected.shape)}."
    if _close(got, torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1)):
        return "masking with 0 is not enough: exp(0) = 1 still gets weight. Use -inf, so exp(-inf) = 0."
    if _close(got, torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)):
        return "the mask is True at the *real* positions: blank out where it is False (~mask)."
    if _close(got, torch.softmax(scores, dim=-1) * mask):
        return "zeroing after the softmax leaves rows that no longer sum to 1; mask the scores before it."
    if _close(got, torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=0)):
        return "normalise over the source positions, the last dimension (dim=-1)."
    return None


register(Exercise(
    name="masked_softmax",
    signature="masked_softmax(scores: Tensor (T, S), mask: BoolTensor (S,), True at real positions) -> weights (T, S)",
    reference=_masked_softmax,
    cases=[Case((torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64), torch.tensor([True, True, False])),
                "one row, the last position is padding"),
           Case((_randn(4, 6, seed=4), torch.tensor([True, True, True, True, False, False])),
                "four rows, two padded positions"),
           Case((_randn(3, 3, seed=5), torch.tensor([True, True, True])), "nothing to mask")],
    hidden=lambda seed: [Case((randn64(3, 7, seed=seed), torch.arange(7) < 4 + seed % 3),
                               "three rows of seven scores, the last ones masked")],
    hint="scores.masked_fill(~mask, float('-inf')), then softmax over the last dimension.",
    diagnose=_diagnose_masked,
    same=_close,
))


# -- 3. BLEU's modified n-gram precision -----------------------------------------------------------------
def _grams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def _modified_precision(candidate: list[str], reference: list[str], n: int) -> tuple[int, int]:
    cand, ref = _grams(candidate, n), _grams(reference, n)
    return sum(min(c, ref[g]) for g, c in cand.items()), sum(cand.values())


def _diagnose_precision(args: tuple, got: Any, expected: tuple[int, int]) -> str | None:
    candidate, reference, n = args
    try:
        matches, total = (int(x) for x in got)
    except (TypeError, ValueError):
        return "return a pair of integers (clipped matches, number of candidate n-grams)."
    cand, ref = _grams(candidate, n), _grams(reference, n)
    if total != expected[1]:                        # the denominator first: it says how n-grams were counted
        if n > 1 and total == len(candidate):
            return f"a candidate of {len(candidate)} tokens has {len(candidate) - n + 1} n-grams of order n = {n}."
        if total == len(cand):
            return "count every occurrence of an n-gram, not each distinct n-gram once."
        return None
    if matches == sum(c for g, c in cand.items() if g in ref):
        return "clip each n-gram's count at the number of times it occurs in the reference: min(count_cand, count_ref)."
    if matches == len(set(cand) & set(ref)):
        return "count every occurrence of an n-gram, not each distinct n-gram once."
    return None


def _secret_words(seed: int) -> list[Case]:
    """A candidate of nine words and a reference of eight from a five-word vocabulary, from a secret seed."""
    rng = random.Random(seed)
    candidate = [rng.choice("abcde") for _ in range(9)]
    reference = [rng.choice("abcde") for _ in range(8)]
    return [Case((candidate, reference, 2), "nine candidate and eight reference words, bigrams")]


register(Exercise(
    name="modified_precision",
    signature="modified_precision(candidate: list[str], reference: list[str], n: int) -> (matches, total)",
    reference=_modified_precision,
    cases=[Case(("the the the the the the the".split(), "the cat is on the mat".split(), 1),
                "Papineni's example: seven 'the', two in the reference"),
           Case(("the cat sat on the mat".split(), "the cat is on the mat".split(), 2), "bigrams"),
           Case(("a a b a a b".split(), "a a b b".split(), 2), "a repeated bigram, clipped at one"),
           Case(("x y z".split(), "x y z".split(), 3), "one trigram, matching")],
    hidden=_secret_words,
    hint="count the candidate's n-grams and the reference's; matches = sum over n-grams of "
         "min(candidate count, reference count); total = number of candidate n-grams.",
    diagnose=_diagnose_precision,
    same=lambda got, expected: isinstance(got, (tuple, list)) and len(got) == 2 and tuple(got) == tuple(expected),
))


# -- 4. predict, then measure: 24 digits with and without attention ------------------------------------
TOLERANCE = 0.10          # ten percentage points


def _predict_reversal_24(measured: tuple[float, float]) -> tuple[float, float]:
    return measured                           # the right prediction is the measurement itself


def _diagnose_reversal(args: tuple, got: Any, expected: tuple[float, float]) -> str | None:
    pair = as_pair(got)
    if pair is None:
        return "put two shares in my_prediction: (without attention, with attention), e.g. (0.5, 0.5)."
    (without, with_att), (m_without, m_with) = pair, expected
    if max(pair) > 1:
        return f"give shares between 0 and 1 (0.5 for 50%), not percentages: you wrote {pair}."
    told = f"measured {m_without:.0%} without attention and {m_with:.0%} with; you predicted {without:.0%} and {with_att:.0%}"
    advice = []
    if abs(without - m_without) > TOLERANCE:
        if without < m_without:
            advice.append("without attention it is well above guessing (10%): the first digits written are the last "
                          "ones read, still fresh in c")
        else:
            advice.append("without attention, 64 numbers (after 800 steps) cannot carry 24 digits: past the first few "
                          "written, the digits are close to guesses")
    if abs(with_att - m_with) > TOLERANCE:
        if with_att > m_with:
            advice.append("with attention it still degrades at the longest lengths: the model must find the right "
                          "position among 24 similar states at every step, and lengths near 24 are the rarest in training")
        else:
            advice.append("attention reads every encoder state directly: most digits survive even at 24")
    return f"{told}. " + "; ".join(advice) + "."


register(Exercise(
    name="predict_reversal_24",
    signature="(without_attention, with_attention): your prediction of the share of digits in the right place "
              "for strings of 24 digits after 800 steps (checked against the notebook's measurement, +-0.10 each)",
    reference=_predict_reversal_24,
    cases=[Case((), "reversing 24 digits, 800 steps, 64 units: without and with attention")],
    hint="without attention, think of notebook 7's curve; with attention, the decoder can look up each digit.",
    diagnose=_diagnose_reversal,
    same=pair_within(TOLERANCE),
    measured=Measured("(fixed_acc[24], att_acc[24]), the shares of digits in the right place at 24 digits without and "
                      "with attention", "section 5's cell that prints the table by length", shares_pair),
))
