"""Splits and batches: from one long id sequence (language modelling), or many short padded ones,
to (batch, time) tensors."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import torch

T = TypeVar("T")

IGNORE_INDEX = -100  # target value that losses and metrics skip (padding, the end of a line)


@dataclass(frozen=True)
class Splits(Generic[T]):
    """Train / validation / test parts of a dataset."""

    train: T
    val: T
    test: T


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"fractions must be three non-negative numbers (train, val, test) summing to 1, "
                         f"got {tuple(fractions)}")
    return tuple(fractions)  # type: ignore[return-value]


def split_text(text: str, fractions: Sequence[float] = (0.9, 0.05, 0.05)) -> Splits[str]:
    """Cut a text into three contiguous parts (shuffling would leak neighbouring text across splits)."""
    f_train, f_val, _ = _check_fractions(fractions)
    a = int(len(text) * f_train)
    b = int(len(text) * (f_train + f_val))
    return Splits(text[:a], text[a:b], text[b:])


def split_items(items: Sequence[T], fractions: Sequence[float] = (0.8, 0.1, 0.1), *, seed: int = 0) -> Splits[list[T]]:
    """Shuffle independent examples with a fixed seed, then cut them into three parts."""
    f_train, f_val, _ = _check_fractions(fractions)
    order = torch.randperm(len(items), generator=torch.Generator().manual_seed(seed)).tolist()
    shuffled = [items[i] for i in order]
    a = int(len(items) * f_train)
    b = int(len(items) * (f_train + f_val))
    return Splits(shuffled[:a], shuffled[a:b], shuffled[b:])


def _check_ids(ids: torch.Tensor, seq_len: int) -> None:
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype != torch.long:
        got = f"{type(ids).__name__}" if not isinstance(ids, torch.Tensor) else f"{ids.dtype} tensor of shape {tuple(ids.shape)}"
        raise TypeError(f"ids must be a 1-D torch.long tensor (e.g. Vocab.encode(text)), got {got}")
    if seq_len < 1:
        raise ValueError(f"seq_len must be at least 1, got {seq_len}")
    if len(ids) < seq_len + 1:
        raise ValueError(f"seq_len={seq_len} needs at least {seq_len + 1} ids (inputs plus the next-id "
                         f"target), but the data has only {len(ids)}; use a shorter seq_len or more data")


def lm_windows(ids: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All non-overlapping windows ``x, y`` ``(N, seq_len)`` of a 1-D id sequence, ``y`` shifted by one."""
    _check_ids(ids, seq_len)
    n = (len(ids) - 1) // seq_len
    x = ids[: n * seq_len].view(n, seq_len)
    y = ids[1 : n * seq_len + 1].view(n, seq_len)
    return x, y


def epoch_order(n: int, *, shuffle: bool, seed: int, epoch: int) -> torch.Tensor:
    """A batcher's order ``(n,)`` in ``epoch``: a permutation seeded ``seed + epoch``, or ``arange(n)``."""
    if shuffle:
        return torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))
    return torch.arange(n)


class LMBatches:
    """Batches of :func:`lm_windows` ``(x, y)``, each ``(batch_size, seq_len)``; one pass is one epoch."""

    def __init__(self, ids: torch.Tensor, batch_size: int, seq_len: int, *, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = True):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.x, self.y = lm_windows(ids, seq_len)
        if drop_last and len(self.x) < batch_size:
            raise ValueError(f"batch_size={batch_size} with seq_len={seq_len} needs at least "
                             f"{batch_size * seq_len + 1} ids for one full batch, but the data has {len(ids)}")
        self.batch_size, self.shuffle, self.seed, self.drop_last = batch_size, shuffle, seed, drop_last
        self.epoch = 0

    def __len__(self) -> int:
        full, rest = divmod(len(self.x), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = epoch_order(len(self.x), shuffle=self.shuffle, seed=self.seed, epoch=self.epoch)
        self.epoch += 1
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            index = order[start : start + self.batch_size]
            yield self.x[index], self.y[index]


def forever(batches) -> Iterator:
    """Cycle through an iterable of batches epoch after epoch."""
    while True:
        yielded = False
        for batch in batches:
            yielded = True
            yield batch
        if not yielded:
            raise ValueError("the batch iterable is empty, so it cannot be cycled")


def pad_sequences(seqs: Sequence[torch.Tensor], pad_id: int = 0, *, batch_first: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """1-D tensors -> ``(padded (B, T_max) or (T_max, B), lengths (B,))``, padded with ``pad_id``."""
    if len(seqs) == 0:
        raise ValueError("pad_sequences needs at least one sequence")
    for i, s in enumerate(seqs):
        if not isinstance(s, torch.Tensor) or s.dim() != 1:
            shape = tuple(s.shape) if isinstance(s, torch.Tensor) else type(s).__name__
            raise ValueError(f"sequence {i} must be a 1-D tensor, got {shape}")
        if len(s) == 0:
            raise ValueError(f"sequence {i} is empty; every sequence needs at least one element")
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    padded = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=seqs[0].dtype)
    for i, s in enumerate(seqs):
        padded[i, : len(s)] = s
    return (padded if batch_first else padded.t().contiguous()), lengths


class PaddedBatches:
    """Padded batches ``(ids (B, T_max), targets, lengths (B,))`` of ``(ids, tags or int label)`` examples.

    Tag targets are ``(B, T_max)`` padded with ``IGNORE_INDEX``; int labels give ``(B,)``.
    """

    def __init__(self, examples: Sequence, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, pad_id: int = 0):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if len(examples) == 0:
            raise ValueError("PaddedBatches needs at least one example")
        self.pairs = [self._pair(i, e) for i, e in enumerate(examples)]
        if drop_last and len(self.pairs) < batch_size:
            raise ValueError(f"batch_size={batch_size} with drop_last=True needs at least {batch_size} "
                             f"examples, got {len(self.pairs)}")
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.drop_last, self.pad_id = drop_last, pad_id
        self.epoch = 0

    @staticmethod
    def _pair(index: int, example) -> tuple[torch.Tensor, torch.Tensor | int]:
        if hasattr(example, "ids") and hasattr(example, "tags"):       # e.g. data.tagging.TaggedLine
            ids, target = example.ids, example.tags
        elif hasattr(example, "ids") and hasattr(example, "label"):    # e.g. data.tagging.LabelledLine
            ids, target = example.ids, example.label
        else:
            ids, target = example
        if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype != torch.long or len(ids) == 0:
            got = f"{ids.dtype} tensor of shape {tuple(ids.shape)}" if isinstance(ids, torch.Tensor) \
                else type(ids).__name__
            raise ValueError(f"example {index}: ids must be a non-empty 1-D torch.long tensor, got {got}")
        if isinstance(target, torch.Tensor) and target.dim() == 1:
            if target.shape != ids.shape:
                raise ValueError(f"example {index}: one tag per id expected, got {len(ids)} ids and "
                                 f"{len(target)} tags")
        elif isinstance(target, torch.Tensor) and target.dim() == 0:
            target = int(target)
        elif not isinstance(target, int):
            raise ValueError(f"example {index}: target must be a 1-D tensor of tags or an int label, "
                             f"got {type(target).__name__}")
        return ids, target

    def __len__(self) -> int:
        full, rest = divmod(len(self.pairs), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def collate(self, pairs: Sequence[tuple[torch.Tensor, torch.Tensor | int]]
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(ids, target)`` pairs -> one batch ``(ids, targets, lengths)``."""
        lengths = torch.tensor([len(ids) for ids, _ in pairs], dtype=torch.long)
        ids = torch.full((len(pairs), int(lengths.max())), self.pad_id, dtype=torch.long)
        for b, (seq, _) in enumerate(pairs):
            ids[b, :len(seq)] = seq
        if isinstance(pairs[0][1], int):
            targets = torch.tensor([t for _, t in pairs], dtype=torch.long)
        else:
            targets = torch.full_like(ids, IGNORE_INDEX)
            for b, (_, tags) in enumerate(pairs):
                targets[b, :len(tags)] = tags
        return ids, targets, lengths

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        order = epoch_order(len(self.pairs), shuffle=self.shuffle, seed=self.seed, epoch=self.epoch)
        self.epoch += 1
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            yield self.collate([self.pairs[i] for i in order[start:start + self.batch_size].tolist()])
