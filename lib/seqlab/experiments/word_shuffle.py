"""Notebook 1's experiment: which n-gram model notices that the words of each line were shuffled?

The notebook shows the perplexities; the ``predict_word_shuffle`` exercise judges a prediction of them.
"""

from __future__ import annotations

import random
from functools import lru_cache

SHUFFLE_TEXT_CHARS = 50_000          # the first 50,000 characters of notebook 1's validation part


def shuffle_words(text: str, seed: int = 0) -> str:
    """``text`` with the words of every line in a random order (own generator, seeded).

    Lines stay where they are and every character is kept (split on single spaces, so the
    indentation's spaces survive): only the order of the words within each line changes.
    """
    rng = random.Random(seed)
    lines = []
    for line in text.split("\n"):
        words = line.split(" ")
        rng.shuffle(words)
        lines.append(" ".join(words))
    return "\n".join(lines)


@lru_cache(maxsize=1)
def measure_word_shuffle() -> dict[str, tuple[float, float]]:
    """Perplexity of notebook 1's unigram and 5-gram models (interpolated Kneser-Ney, counted on the
    first 90 % of Shakespeare) on the first 50,000 validation characters, as written and with the words of
    every line shuffled: ``{"unigram": (original, shuffled), "5-gram": (original, shuffled)}``."""
    from seqlab.data import Vocab, load_corpus, split_text
    from seqlab.ngram import NGramLM

    text = load_corpus("shakespeare")
    splits = split_text(text, (0.9, 0.05, 0.05))
    vocab = Vocab.chars(text)
    original = splits.val[:SHUFFLE_TEXT_CHARS]
    shuffled = shuffle_words(original)
    result = {}
    for name, n in (("unigram", 1), ("5-gram", 5)):
        model = NGramLM(n, vocab=vocab.itos).fit(splits.train)
        result[name] = (model.perplexity(original), model.perplexity(shuffled))
    return result
