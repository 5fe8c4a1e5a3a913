r"""Scores for generated sequences: BLEU (Papineni et al., 2002).

BLEU compares candidate outputs with references by their n-grams. For each order
:math:`n = 1 \dots N` the **modified precision** counts the candidate's n-grams that occur in the
reference, each at most as often as it occurs there (so "the the the the" earns no more than
the reference's "the"s):

.. math::

    p_n = \frac{\sum_{\text{cand.}} \sum_{g \in \text{n-grams}} \min\big(\mathrm{count}_{\text{cand}}(g),\,
          \max_{\text{ref}} \mathrm{count}_{\text{ref}}(g)\big)}
          {\sum_{\text{cand.}} \sum_{g} \mathrm{count}_{\text{cand}}(g)}

Precision alone rewards short outputs, so a **brevity penalty** multiplies the geometric mean,
with :math:`c` the total candidate length and :math:`r` the total length of the references
closest in length to each candidate:

.. math::

    \mathrm{BLEU} = \mathrm{BP} \cdot \exp\Big(\sum_{n=1}^{N} \tfrac{1}{N} \log p_n\Big), \qquad
    \mathrm{BP} = \begin{cases} 1 & c > r \\ e^{1 - r/c} & c \le r \end{cases}

Corpus BLEU sums the counts over all candidates before dividing (it is *not* the mean of
sentence scores). Tokens are whatever the sequences hold: words (split a string first) or
characters (pass the string itself).
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
    """Corpus BLEU of ``candidates`` against ``references`` (one list of references per candidate).

    ``smooth=True`` adds one to the numerator and denominator of every ``p_n`` with ``n > 1``
    (Lin & Och, 2004), so that a single sentence without, say, any matching 4-gram does not
    score exactly 0; the standard corpus score is unsmoothed.
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
