"""Ready-made datasets that several notebooks and scripts share, so they agree to the character."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch

from seqlab.data.batching import split_text
from seqlab.data.corpora import load_corpus
from seqlab.data.vocab import Vocab


@dataclass(frozen=True)
class CharLMData:
    """A corpus as character ids: the vocabulary (built from the whole text) and three splits."""

    vocab: Vocab
    train: torch.Tensor  # (N_train,) long
    val: torch.Tensor  # (N_val,) long
    test: torch.Tensor  # (N_test,) long


@lru_cache(maxsize=4)
def char_lm_data(corpus: str = "shakespeare", fractions: Sequence[float] = (0.9, 0.1, 0.0)) -> CharLMData:
    """Character-level language-modelling data (default: the course's Shakespeare split)."""
    text = load_corpus(corpus)
    vocab = Vocab.chars(text)
    parts = split_text(text, tuple(fractions))
    return CharLMData(vocab, vocab.encode(parts.train), vocab.encode(parts.val), vocab.encode(parts.test))
