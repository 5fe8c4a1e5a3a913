r"""BLEU (Papineni et al., 2002): clipped n-gram precisions, their geometric mean, a brevity penalty.

:math:`\mathrm{BLEU} = \mathrm{BP} \exp(\frac1N \sum_n \log p_n)`, :math:`\mathrm{BP} = \min(1, e^{1 - r/c})`.
Counts are summed over the corpus before dividing. Tokens are words (split first) or characters (a string).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

Tokens = Sequence[Hashable]   # a list of words, or a string of characters


def ngrams(tokens: Tokens, n: int) -> Counter:
    """How often each n-gram (a tuple of ``n`` tokens) occurs in ``tokens``."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def modified_precision(candidate: Tokens, references: Sequence[Tokens], n: int) -> tuple[int, int]:
    """``(clipped matches, candidate n-grams)`` of order ``n`` for one candidate against its references."""
    counts = ngrams(candidate, n)
    most = Counter()
    for reference in references:
        most |= ngrams(reference, n)                  # | keeps the larger count of each n-gram
    return sum(min(c, most[g]) for g, c in counts.items()), sum(counts.values())


@dataclass(frozen=True)
class BLEU:
    """A BLEU score with its parts: ``score`` in [0, 1], the precisions ``p_n``, BP, and the lengths."""

    score: float
    precisions: tuple[float, ...]
    brevity_penalty: float
    candidate_length: int
    reference_length: int

    def __float__(self) -> float:
        return self.score

    def __str__(self) -> str:
        ps = "/".join(f"{100 * p:.1f}" for p in self.precisions)
        return (f"BLEU = {100 * self.score:.2f} ({ps}; BP = {self.brevity_penalty:.3f}, "
                f"c = {self.candidate_length}, r = {self.reference_length})")


def bleu(candidates: Sequence[Tokens], references: Sequence[Sequence[Tokens]], *, max_n: int = 4,
         smooth: bool = False) -> BLEU:
    """Corpus BLEU of ``candidates`` against ``references`` (a list of references per candidate).

    ``smooth=True`` adds one to both counts of every ``p_n`` with ``n > 1`` (Lin & Och, 2004).
    """
    if len(candidates) != len(references):
        raise ValueError(f"one list of references per candidate: got {len(candidates)} candidates and "
                         f"{len(references)} reference lists")
    if not candidates:
        raise ValueError("bleu needs at least one candidate")
    if any(len(refs) == 0 for refs in references):
        raise ValueError("every candidate needs at least one reference")
    if any(isinstance(refs, str) for refs in references):
        raise ValueError("references must be a list of references per candidate, e.g. [[ref]] for one each; "
                         "got a bare string")
    matches, totals = [0] * max_n, [0] * max_n
    c = r = 0
    for candidate, refs in zip(candidates, references):
        c += len(candidate)
        r += min((len(ref) for ref in refs), key=lambda length: (abs(length - len(candidate)), length))
        for n in range(1, max_n + 1):
            m, t = modified_precision(candidate, refs, n)
            matches[n - 1] += m
            totals[n - 1] += t
    precisions = []
    for n, (m, t) in enumerate(zip(matches, totals), start=1):
        if smooth and n > 1:
            m, t = m + 1, t + 1
        precisions.append(m / t if t else 0.0)
    bp = 1.0 if c > r else (math.exp(1 - r / c) if c else 0.0)
    score = bp * math.exp(sum(math.log(p) for p in precisions) / max_n) if min(precisions) > 0 else 0.0
    return BLEU(score, tuple(precisions), bp, c, r)
