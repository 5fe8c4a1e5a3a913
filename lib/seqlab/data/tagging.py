"""Tagging and classification data cut from the Shakespeare text (notebook 6): word boundaries
(:func:`word_boundary_data`, one tag per character) and question or statement (:func:`question_data`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import torch

from seqlab.data.batching import IGNORE_INDEX, split_items, split_text
from seqlab.data.corpora import load_corpus
from seqlab.data.vocab import PAD, Vocab

NO_SPACE, SPACE = 0, 1


# -- word boundaries ---------------------------------------------------------------------------
def remove_spaces(line: str) -> tuple[str, list[int]]:
    """Delete the spaces of ``line``; tag each remaining character 1 if a space followed it
    (the last one ``IGNORE_INDEX``).

    >>> remove_spaces("To be,  or not")
    ('Tobe,ornot', [0, 1, 0, 0, 1, 0, 1, 0, 0, -100])
    """
    if not isinstance(line, str):
        raise TypeError(f"remove_spaces expects a str, got {type(line).__name__}")
    words = line.split()
    if not words:
        raise ValueError(f"remove_spaces needs a line with at least one non-space character, got {line!r}")
    tags = [SPACE if i == len(w) - 1 else NO_SPACE for w in words for i in range(len(w))]
    tags[-1] = IGNORE_INDEX
    return "".join(words), tags


def restore_spaces(chars: str, tags: Sequence[int] | torch.Tensor) -> str:
    """Put a space after every character tagged 1 (the inverse of :func:`remove_spaces`)."""
    if isinstance(tags, torch.Tensor):
        tags = tags.tolist()
    if len(tags) != len(chars):
        raise ValueError(f"restore_spaces needs one tag per character: {len(chars)} characters, {len(tags)} tags")
    out = []
    for i, (char, tag) in enumerate(zip(chars, tags)):
        out.append(char)
        if tag == SPACE and i < len(chars) - 1:
            out.append(" ")
    return "".join(out)


class TaggedLine(NamedTuple):
    """One example of the word-boundary task."""

    line: str            # the line as read, whitespace runs collapsed to one space
    ids: torch.Tensor    # (T,) long: the characters without spaces
    tags: torch.Tensor   # (T,) long: 1 = a space follows, 0 = none, IGNORE_INDEX at the end


@dataclass(frozen=True)
class TaggingData:
    """Word-boundary lines: the character vocabulary (``<pad>`` is id 0) and three splits."""

    vocab: Vocab
    train: list[TaggedLine]
    val: list[TaggedLine]
    test: list[TaggedLine]

    def chars(self, example: TaggedLine) -> str:
        """The spaceless characters of an example, as text."""
        return self.vocab.decode(example.ids)


def _keep_line(words: list[str], min_words: int, max_chars: int) -> bool:
    return len(words) >= min_words and sum(len(w) for w in words) <= max_chars


def tag_lines(text: str, vocab: Vocab, *, min_words: int = 3, max_chars: int = 80) -> list[TaggedLine]:
    """Lines of ``text`` with at least ``min_words`` words and at most ``max_chars`` non-space characters,
    as :class:`TaggedLine`."""
    out = []
    for raw in text.split("\n"):
        words = raw.split()
        if not _keep_line(words, min_words, max_chars):
            continue
        chars, tags = remove_spaces(raw)
        out.append(TaggedLine(" ".join(words), vocab.encode(chars), torch.tensor(tags, dtype=torch.long)))
    return out


@lru_cache(maxsize=4)
def word_boundary_data(corpus: str = "shakespeare", fractions: Sequence[float] = (0.9, 0.05, 0.05), *,
                       min_words: int = 3, max_chars: int = 80) -> TaggingData:
    """The word-boundary task: :func:`tag_lines` of each contiguous part (``split_text``) of ``corpus``."""
    if min_words < 1 or max_chars < 1:
        raise ValueError(f"min_words and max_chars must be at least 1, got min_words={min_words}, "
                         f"max_chars={max_chars}")
    text = load_corpus(corpus)
    vocab = Vocab.chars("".join(text.split()), specials=(PAD,))
    parts = split_text(text, tuple(fractions))
    make = lambda part: tag_lines(part, vocab, min_words=min_words, max_chars=max_chars)  # noqa: E731
    return TaggingData(vocab, make(parts.train), make(parts.val), make(parts.test))


# -- question or statement? -------------------------------------------------------------------
class LabelledLine(NamedTuple):
    """One example of a many-to-one task."""

    line: str            # the text
    ids: torch.Tensor    # (T,) long character ids
    label: int           # index into ClassificationData.labels


@dataclass(frozen=True)
class ClassificationData:
    """Labelled texts: vocabulary (``<pad>`` is id 0), label names, three splits."""

    vocab: Vocab
    labels: tuple[str, ...]
    train: list[LabelledLine]
    val: list[LabelledLine]
    test: list[LabelledLine]


_SENTENCE_RE = re.compile(r"[A-Z][^.?!\[\]]*[.?!]")


def _is_heading(line: str) -> bool:
    letters = [c for c in line if c.isalpha()]
    return bool(letters) and all(c.isupper() for c in letters)


def sentences(text: str) -> list[str]:
    """The sentences of the speeches in ``text`` (speaker names, headings, stage directions dropped)."""
    kept = [line for line in text.split("\n")
            if not (_is_heading(line) or line.lstrip().startswith("[") or line.rstrip().endswith("]"))]
    return _SENTENCE_RE.findall(" ".join(" ".join(kept).split()))


@lru_cache(maxsize=4)
def question_data(corpus: str = "shakespeare", *, max_examples: int = 20_000, min_words: int = 4,
                  max_chars: int = 80, fractions: Sequence[float] = (0.8, 0.1, 0.1),
                  seed: int = 0) -> ClassificationData:
    """Sentences without their final mark, labelled 1 if it was "?", 0 if "." ("!" is left out);
    shuffled with ``seed``, at most ``max_examples``, split by :func:`seqlab.data.split_items`."""
    text = load_corpus(corpus)
    vocab = Vocab.chars(text, specials=(PAD,))
    pairs = [(s[:-1], int(s[-1] == "?")) for s in sentences(text)
             if s[-1] in ".?" and len(s.split()) >= min_words and len(s) - 1 <= max_chars]
    if not pairs:
        raise ValueError(f"no sentence of {corpus!r} has at least {min_words} words and at most {max_chars} characters")
    order = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(seed))[:max_examples]
    examples = [LabelledLine(pairs[i][0], vocab.encode(pairs[i][0]), pairs[i][1]) for i in order.tolist()]
    parts = split_items(examples, tuple(fractions), seed=seed)
    return ClassificationData(vocab, ("statement", "question"), parts.train, parts.val, parts.test)
