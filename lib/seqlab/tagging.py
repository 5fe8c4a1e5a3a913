"""Training and scoring helpers for sequence tagging and classification (notebook 6).

Batches are ``(ids, targets, lengths)`` from :class:`seqlab.data.batching.PaddedBatches`; targets equal
to ``IGNORE_INDEX`` count in no loss and no score. Losses take ``loss_fn(model, batch)``, as
:func:`seqlab.train.train` expects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from seqlab.data.batching import IGNORE_INDEX
from seqlab.data.tagging import TaggedLine
from seqlab.modes import evaluating

Batch = tuple[Tensor, Tensor, Tensor]


def _unpack(name: str, batch: Batch) -> Batch:
    if not isinstance(batch, (tuple, list)) or len(batch) != 3:
        raise ValueError(f"{name} expects a batch (ids, targets, lengths), got "
                         f"{type(batch).__name__}" + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else ""))
    return tuple(batch)  # type: ignore[return-value]


def tagging_loss(model: torch.nn.Module, batch: Batch) -> Tensor:
    """Mean cross-entropy over the counted positions; ``model(ids, lengths)`` returns logits ``(B, T, C)``."""
    ids, tags, lengths = _unpack("tagging_loss", batch)
    logits = model(ids, lengths)
    if logits.dim() != 3 or logits.shape[:2] != tags.shape:
        raise ValueError(f"tagging_loss expects logits of shape (B, T, C) = ({tags.shape[0]}, {tags.shape[1]}, C) "
                         f"matching the tags {tuple(tags.shape)}, got {tuple(logits.shape)}")
    if not (tags != IGNORE_INDEX).any():
        raise ValueError(f"every tag in this batch is IGNORE_INDEX ({IGNORE_INDEX}): nothing to learn from")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tags.reshape(-1), ignore_index=IGNORE_INDEX)


def classification_loss(model: torch.nn.Module, batch: Batch) -> Tensor:
    """Mean cross-entropy of a many-to-one batch; ``model(ids, lengths)`` returns logits ``(B, C)``."""
    ids, labels, lengths = _unpack("classification_loss", batch)
    logits = model(ids, lengths)
    if logits.dim() != 2 or logits.shape[0] != labels.shape[0] or labels.dim() != 1:
        raise ValueError(f"classification_loss expects logits (B, C) and labels (B,) with B = {ids.shape[0]}, "
                         f"got logits {tuple(logits.shape)} and labels {tuple(labels.shape)}")
    return F.cross_entropy(logits, labels)


@dataclass(frozen=True)
class TagScores:
    """Accuracy over the counted positions, and precision / recall / F1 of tag 1."""

    accuracy: float
    precision: float
    recall: float
    f1: float
    counted: int      # positions scored (targets != IGNORE_INDEX)
    positives: int    # of which tag 1


def scores(predicted: Tensor, target: Tensor) -> TagScores:
    """Scores of ``predicted`` tags against ``target`` (same shape; IGNORE_INDEX targets skipped)."""
    if predicted.shape != target.shape:
        raise ValueError(f"scores needs predictions and targets of the same shape, got {tuple(predicted.shape)} "
                         f"and {tuple(target.shape)}")
    keep = target != IGNORE_INDEX
    p, t = predicted[keep], target[keep]
    counted = int(keep.sum())
    if counted == 0:
        raise ValueError("scores: no position to count (every target is IGNORE_INDEX)")
    tp = int(((p == 1) & (t == 1)).sum())
    fp = int(((p == 1) & (t != 1)).sum())
    fn = int(((p != 1) & (t == 1)).sum())
    return TagScores(accuracy=float((p == t).float().mean()),
                     precision=tp / (tp + fp) if tp + fp else 0.0,
                     recall=tp / (tp + fn) if tp + fn else 0.0,
                     f1=2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0,
                     counted=counted, positives=int((t == 1).sum()))


@torch.no_grad()
def predict(model: torch.nn.Module, batches: Iterable[Batch]) -> tuple[Tensor, Tensor]:
    """Arg-max predictions and targets of every batch, flattened (eval mode); logits ``(B, T, C)`` or ``(B, C)``."""
    preds, targets = [], []
    with evaluating(model):
        for batch in batches:
            ids, target, lengths = _unpack("predict", batch)
            preds.append(model(ids, lengths).argmax(-1).reshape(-1))
            targets.append(target.reshape(-1))
    if not preds:
        raise ValueError("predict() got no batches")
    return torch.cat(preds), torch.cat(targets)


def evaluate_tagger(model: torch.nn.Module, batches: Iterable[Batch]) -> TagScores:
    """:func:`scores` of a model's arg-max predictions over ``batches``."""
    return scores(*predict(model, batches))


@torch.no_grad()
def tag_line(model: torch.nn.Module, ids: Tensor) -> Tensor:
    """Predicted tags ``(T,)`` of one sequence of ids ``(T,)``."""
    if ids.dim() != 1:
        raise ValueError(f"tag_line expects one sequence of ids, shape (T,), got {tuple(ids.shape)}")
    with evaluating(model):
        return model(ids[None], torch.tensor([len(ids)]))[0].argmax(-1)


class CountTagger:
    """A baseline without training: each position's most frequent tag for its window of characters, by counting.

    The window is ``left`` characters, the character, ``right`` characters (a boundary symbol beyond a line's
    ends); an unseen window gets the most frequent tag overall.
    """

    def __init__(self, left: int = 1, right: int = 0):
        if left < 0 or right < 0:
            raise ValueError(f"left and right must be >= 0, got left={left}, right={right}")
        self.left, self.right = left, right
        self.keys: Tensor | None = None     # sorted window codes seen in training
        self.best: Tensor | None = None     # the most frequent tag of each
        self.default = 0
        self.base = 0

    @property
    def n_windows(self) -> int:
        """How many distinct windows training showed."""
        return 0 if self.keys is None else len(self.keys)

    def _codes(self, lines: Sequence[Tensor]) -> Tensor:
        """One int64 code per position of every line (concatenated), its window in base ``self.base`` (0 = beyond the line)."""
        ids = torch.cat(list(lines))                                           # (N,)
        if len(ids) and (int(ids.max()) + 2 > self.base or int(ids.min()) < 0):
            raise ValueError(f"ids must lie in 0..{self.base - 2} (the ids seen in fit), got "
                             f"{int(ids.min())}..{int(ids.max())}")
        lengths = torch.tensor([len(line) for line in lines])
        gap = max(self.left, self.right)
        line_of = torch.repeat_interleave(torch.arange(len(lines)), lengths)  # (N,) which line
        stream = torch.zeros(len(ids) + gap * (len(lines) + 1), dtype=torch.long)
        stream[torch.arange(len(ids)) + gap * (line_of + 1)] = ids + 1
        width = self.left + 1 + self.right
        windows = stream.unfold(0, width, 1)                                   # (len - w + 1, w)
        powers = self.base ** torch.arange(width, dtype=torch.long)
        codes = (windows * powers).sum(1)
        centre = stream[self.left:len(stream) - self.right]                    # the position of each window
        return codes[centre != 0]

    def fit(self, examples: Sequence[TaggedLine]) -> CountTagger:
        if len(examples) == 0:
            raise ValueError("CountTagger.fit got no examples")
        self.base = int(torch.cat([e.ids for e in examples]).max()) + 2
        if self.base ** (self.left + 1 + self.right) >= 2 ** 62:
            raise ValueError(f"a window of {self.left + 1 + self.right} characters over {self.base - 1} symbols "
                             "is too large to code in 64 bits; use a smaller window")
        codes = self._codes([e.ids for e in examples])                          # (N,)
        tags = torch.cat([e.tags for e in examples])                            # (N,)
        keep = tags != IGNORE_INDEX
        codes, tags = codes[keep], tags[keep]
        if len(tags) == 0:
            raise ValueError("CountTagger.fit got no tagged position")
        keys, inverse = torch.unique(codes, return_inverse=True)               # sorted
        counts = torch.zeros(len(keys), int(tags.max()) + 1, dtype=torch.long)
        counts.index_put_((inverse, tags), torch.ones_like(tags), accumulate=True)
        self.keys, self.best = keys, counts.argmax(1)
        self.default = int(torch.bincount(tags).argmax())
        return self

    def predict(self, ids: Tensor) -> Tensor:
        """Predicted tags ``(T,)`` of one line of ids ``(T,)``."""
        if ids.dim() != 1:
            raise ValueError(f"CountTagger.predict expects one line of ids, shape (T,), got {tuple(ids.shape)}")
        return self.predict_many([ids])

    def predict_many(self, lines: Sequence[Tensor]) -> Tensor:
        """Predicted tags of several lines, concatenated."""
        if self.keys is None or self.best is None:
            raise RuntimeError("CountTagger: call fit(examples) before predict")
        codes = self._codes(lines)
        where = torch.searchsorted(self.keys, codes).clamp(max=len(self.keys) - 1)
        seen = self.keys[where] == codes
        return torch.where(seen, self.best[where], torch.full_like(codes, self.default))

    def evaluate(self, examples: Sequence[TaggedLine]) -> TagScores:
        return scores(self.predict_many([e.ids for e in examples]), torch.cat([e.tags for e in examples]))


def marked_spaces(chars: str, predicted: Sequence[int], truth: Sequence[int]) -> tuple[str, str]:
    """The line with the tagger's spaces, and a line with ``^`` under each wrong space and each letter missing one.

    ``predicted``, ``truth``: one tag per character, 1 = a space follows (the last one is not read).
    """
    text, marks = "", ""
    for i, ch in enumerate(chars):
        text, marks = text + ch, marks + " "
        if i == len(chars) - 1:
            break
        if predicted[i] == 1:
            text, marks = text + " ", marks + ("^" if truth[i] != 1 else " ")
        elif truth[i] == 1:
            marks = marks[:-1] + "^"
    return text, marks
