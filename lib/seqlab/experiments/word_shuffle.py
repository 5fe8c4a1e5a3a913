"""Notebook 1's experiment: which n-gram model notices that each line's words were shuffled?"""

from __future__ import annotations

import random
from functools import lru_cache

SHUFFLE_TEXT_CHARS = 50_000          # the first 50,000 characters of notebook 1's validation part


def shuffle_words(text: str, seed: int = 0) -> str:
    """``text`` with each line's words (split on single spaces) in a seeded random order."""
    rng = random.Random(seed)
    lines = []
    for line in text.split("\n"):
        words = line.split(" ")
        rng.shuffle(words)
        lines.append(" ".join(words))
    return "\n".join(lines)


@lru_cache(maxsize=1)
def measure_word_shuffle() -> dict[str, tuple[float, float]]:
    """Perplexities of notebook 1's unigram and 5-gram models on validation text, as written and shuffled."""
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
