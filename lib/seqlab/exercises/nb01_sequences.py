"""Notebook 01 — why sequences: perplexity, bigram counting, and a prediction about shuffled words."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from seqlab.exercises._core import Case, Exercise, register
# shuffle_words too: notebook 1 and tests/test_exercises_nb01.py import it from here
from seqlab.experiments.word_shuffle import measure_word_shuffle, shuffle_words  # noqa: F401


def _perplexity(probs: Sequence[float]) -> float:
    return math.exp(-sum(math.log(p) for p in probs) / len(probs))


def _diagnose_perplexity(args: tuple, got: Any, expected: float) -> str | None:
    (probs,) = args
    try:
        got = float(got)
    except (TypeError, ValueError):
        return "return one number (a float)."
    nll = -sum(math.log(p) for p in probs) / len(probs)
    if not math.isfinite(got) or got == 0.0:
        return ("multiplying thousands of probabilities underflows to 0.0 in floating point; add their "
                "logarithms instead: PPL = exp(-(1/T) sum_t log p_t).")
    if math.isclose(got, nll, rel_tol=1e-6):
        return "that is the mean negative log-likelihood (the cross-entropy in nats); exponentiate it."
    if math.isclose(got, 1 / expected, rel_tol=1e-6):
        return "check the sign: perplexity is exp of the *negative* mean log-probability, so it is >= 1."
    if math.isclose(got, sum(1 / p for p in probs) / len(probs), rel_tol=1e-6):
        return "you averaged 1/p_t (an arithmetic mean); perplexity is the geometric mean of 1/p_t."
    if got > 0 and math.isclose(math.log(got), nll * len(probs), abs_tol=1e-6):  # exp would overflow
        return "divide the summed negative log-probability by T, the number of symbols."
    if math.isclose(got, 2 ** nll, rel_tol=1e-6):
        return "you mixed bases: with natural logs (math.log) use exp; with log2 use 2 ** (...)."
    return None


def _secret_text(seed: int, n: int = 40) -> str:
    """``n`` characters of a, b, c, d and spaces, fixed by an instructor's secret seed: a hidden case's text."""
    rng = random.Random(seed)
    return "".join(rng.choice("abcd ") for _ in range(n))


register(Exercise(
    name="perplexity",
    signature="perplexity(probs: list[float]) -> float, where probs[t] = p(x_t | x_<t)",
    reference=_perplexity,
    cases=[
        Case(([0.25, 0.25, 0.25, 0.25],), "a uniform guess among 4 symbols"),
        Case(([1.0, 1.0, 1.0],), "a model that is always sure and always right"),
        Case(([0.5, 0.25, 0.125],), "probabilities that differ"),
        Case(([0.9, 0.1],), "one good guess and one bad one"),
        Case(([0.01] * 5000,), "a long text",
             hint="the product of 5000 probabilities of 0.01 is 1e-10000, which underflows to 0.0 in floating "
                  "point; add logarithms instead of multiplying probabilities."),
    ],
    hidden=lambda seed: [Case(([random.Random(seed + i).uniform(0.05, 0.95) for i in range(9)],),
                               "nine probabilities")],
    hint="PPL = exp(-(1/T) * sum_t log p_t); math.log is the natural logarithm.",
    diagnose=_diagnose_perplexity,
))


def _bigram_counts(text: str) -> dict[str, int]:
    return dict(Counter(text[i:i + 2] for i in range(len(text) - 1)))


def _same_counts(got: Any, expected: dict[str, int]) -> bool:
    if not isinstance(got, dict):
        return False
    return {k: v for k, v in got.items() if v != 0} == expected


def _diagnose_bigrams(args: tuple, got: Any, expected: dict[str, int]) -> str | None:
    (text,) = args
    if not isinstance(got, dict):
        return f"return a dict (or collections.Counter), not a {type(got).__name__}."
    if any(isinstance(k, tuple) for k in got):
        return "use two-character strings such as 'ab' as keys, not tuples."
    if any(isinstance(k, str) and len(k) != 2 for k in got):
        return "every key should be exactly two characters: text[i:i+2] for i up to len(text) - 2."
    if dict(Counter(text[i:i + 2] for i in range(0, len(text) - 1, 2))) == got:
        return "bigrams overlap: 'aaaa' holds three 'aa' (positions 0, 1, 2). Step by 1, not by 2."
    if text and _bigram_counts(text + text[0]) == got:
        return "the last character has no successor; do not wrap around to the first one."
    if sum(got.values()) != max(len(text) - 1, 0):
        return f"a text of {len(text)} characters has {max(len(text) - 1, 0)} bigrams; yours sum to {sum(got.values())}."
    return None


register(Exercise(
    name="bigram_counts",
    signature="bigram_counts(text: str) -> dict[str, int], e.g. {'ab': 2, 'ba': 1} for 'abab'",
    reference=_bigram_counts,
    cases=[
        Case(("abab",), "a short text"),
        Case(("aaaa",), "overlapping bigrams"),
        Case(("a",), "a text too short to hold a bigram"),
        Case(("",), "an empty text"),
        Case(("to be, or not to be",), "a line of Hamlet"),
    ],
    hidden=lambda seed: [Case((_secret_text(seed),), "forty characters of a, b, c, d and spaces")],
    hint="slide a window of two characters along the text one step at a time and count what you see.",
    diagnose=_diagnose_bigrams,
    same=_same_counts,
))


def _bigram_prob(text: str, prev: str, nxt: str, k: float, V: int) -> float:
    pairs = Counter(text[i:i + 2] for i in range(len(text) - 1))
    as_context = sum(c for pair, c in pairs.items() if pair[0] == prev)
    return (pairs[prev + nxt] + k) / (as_context + k * V)


def _diagnose_bigram_prob(args: tuple, got: Any, expected: float) -> str | None:
    text, prev, nxt, k, V = args
    try:
        got = float(got)
    except (TypeError, ValueError):
        return "return one number (a float)."
    pair = sum(1 for i in range(len(text) - 1) if text[i:i + 2] == prev + nxt)
    followed = sum(1 for i in range(len(text) - 1) if text[i] == prev)
    if text.count(prev) + k * V > 0 and math.isclose(got, (pair + k) / (text.count(prev) + k * V), rel_tol=1e-9):
        return (f"the denominator counts {prev!r} as a *context*: occurrences followed by something. "
                f"The final character of the text is followed by nothing, so it does not count.")
    if followed + k > 0 and math.isclose(got, (pair + k) / (followed + k), rel_tol=1e-9):
        return "each of the V possible next symbols gets k pseudo-counts, so add k * V to the denominator."
    if followed > 0 and math.isclose(got, pair / followed, rel_tol=1e-9):
        return "you left out the smoothing: add k to the numerator and k * V to the denominator."
    return None


register(Exercise(
    name="bigram_prob",
    signature="bigram_prob(text: str, prev: str, nxt: str, k: float, V: int) -> float, "
              "the add-k estimate of p(nxt | prev)",
    reference=_bigram_prob,
    cases=[
        Case(("abab", "a", "b", 0.0, 2), "no smoothing, k = 0"),
        Case(("abab", "b", "a", 0.0, 2), "a context that also ends the text"),
        Case(("abab", "a", "a", 1.0, 2), "an unseen bigram with add-one"),
        Case(("abab", "b", "b", 0.5, 3), "add-k with a symbol the text never shows"),
        Case(("to be, or not to be", "o", " ", 1.0, 27), "a line of Hamlet, add-one"),
    ],
    hidden=lambda seed: [Case((_secret_text(seed), "a", "b", 0.5, 5), "add-k, k = 0.5, on a text of five symbols")],
    hint="p(nxt | prev) = (c(prev nxt) + k) / (sum over x of c(prev x) + k * V).",
    diagnose=_diagnose_bigram_prob,
))


# -- 4. predict, then measure: which model notices that the words were shuffled? -----------------------
SHUFFLE_CHOICES = ("unigram", "5-gram", "both", "neither")
def _changes(measured: dict[str, tuple[float, float]]) -> set[str]:
    """The models whose perplexity moved by more than 0.1 % when the words were shuffled."""
    return {name for name, (before, after) in measured.items() if abs(after - before) > 1e-3 * before}


def _which_model_notices() -> str:
    changed = _changes(measure_word_shuffle())
    return {frozenset(): "neither", frozenset({"unigram"}): "unigram", frozenset({"5-gram"}): "5-gram"}.get(
        frozenset(changed), "both")


def _diagnose_shuffle(args: tuple, got: Any, expected: str) -> str | None:
    if got not in SHUFFLE_CHOICES:
        return f"answer with one of {SHUFFLE_CHOICES}, as a string; got {got!r}."
    (uni_before, uni_after), (five_before, five_after) = (measure_word_shuffle()[m] for m in ("unigram", "5-gram"))
    measured = (f"measured: unigram {uni_before:.2f} -> {uni_after:.2f}, 5-gram {five_before:.2f} -> "
                f"{five_after:.2f}")
    if got in ("unigram", "both"):
        return (f"{measured}. The unigram model scores every character on its own, p(x_t); shuffling words "
                f"keeps every character, so the product of the p(x_t) cannot change.")
    if got == "neither":
        return (f"{measured}. The 5-gram model reads 4 characters back: across a word boundary it sees the end of "
                f"one word and the start of the next, and a shuffle makes those junctions unfamiliar.")
    return None


register(Exercise(
    name="predict_word_shuffle",
    signature="predict_word_shuffle() -> one of 'unigram', '5-gram', 'both', 'neither': which model's perplexity "
              "changes when the words of every line are shuffled (checked against a measurement)",
    reference=_which_model_notices,
    cases=[Case((), "50,000 validation characters, words shuffled within each line")],
    hint="a unigram model scores each character with no context at all; a 5-gram sees the 4 characters before it.",
    diagnose=_diagnose_shuffle,
))
