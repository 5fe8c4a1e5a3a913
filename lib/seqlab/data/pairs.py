"""Source -> target pairs for encoder-decoder models (notebooks 7-8, 13): vocabularies and teacher-forced batches."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from seqlab.data.batching import IGNORE_INDEX, PaddedBatches
from seqlab.data.vocab import BOS, EOS, PAD, Vocab

PAIR_SPECIALS = (PAD, BOS, EOS)     # ids 0, 1, 2 in every vocabulary made by pair_vocabs


def pair_vocabs(pairs: Iterable[tuple[str, str]]) -> tuple[Vocab, Vocab]:
    """Character vocabularies of the sources and of the targets, ``<pad> <bos> <eos>`` first."""
    pairs = list(pairs)
    if not pairs:
        raise ValueError("pair_vocabs needs at least one (source, target) pair")
    source = Vocab.chars("".join(s for s, _ in pairs), specials=PAIR_SPECIALS)
    target = Vocab.chars("".join(t for _, t in pairs), specials=PAIR_SPECIALS)
    return source, target


def teacher_forcing(target: torch.Tensor, bos_id: int, eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(decoder input, decoder output)`` of one target ``(T,)``: ``[bos] + y`` and ``y + [eos]``, both ``(T+1,)``."""
    if not isinstance(target, torch.Tensor) or target.dim() != 1:
        shape = tuple(target.shape) if isinstance(target, torch.Tensor) else type(target).__name__
        raise ValueError(f"teacher_forcing expects a 1-D tensor of target ids, got {shape}")
    return (torch.cat([target.new_tensor([bos_id]), target]), torch.cat([target, target.new_tensor([eos_id])]))


class PairBatches(PaddedBatches):
    """Padded batches ``(src (B, S_max), src_lengths (B,), tgt_in, tgt_out)`` of ``(source, target)`` id pairs.

    ``tgt_in`` is ``<bos>`` + target, ``tgt_out`` target + ``<eos>`` padded with ``IGNORE_INDEX``, both
    ``(B, T_max + 1)``.
    """

    def __init__(self, pairs: Sequence[tuple[torch.Tensor, torch.Tensor]], batch_size: int, *,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                 pad_id: int = 0, bos_id: int = 1, eos_id: int = 2):
        self.bos_id, self.eos_id = bos_id, eos_id
        super().__init__(pairs, batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last, pad_id=pad_id)

    @staticmethod
    def _pair(index: int, example) -> tuple[torch.Tensor, torch.Tensor]:
        try:
            source, target = example
        except (TypeError, ValueError):
            raise ValueError(f"example {index}: expected a pair (source ids, target ids), "
                             f"got {type(example).__name__}") from None
        for name, ids in (("source", source), ("target", target)):
            if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype != torch.long or len(ids) == 0:
                got = (f"{ids.dtype} tensor of shape {tuple(ids.shape)}" if isinstance(ids, torch.Tensor)
                       else type(ids).__name__)
                raise ValueError(f"example {index}: {name} must be a non-empty 1-D torch.long tensor, got {got}")
        return source, target

    def collate(self, pairs: Sequence[tuple[torch.Tensor, torch.Tensor]]
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(source, target)`` pairs -> one batch."""
        src_lengths = torch.tensor([len(s) for s, _ in pairs], dtype=torch.long)
        src = torch.full((len(pairs), int(src_lengths.max())), self.pad_id, dtype=torch.long)
        steps = max(len(t) for _, t in pairs) + 1
        tgt_in = torch.full((len(pairs), steps), self.pad_id, dtype=torch.long)
        tgt_out = torch.full((len(pairs), steps), IGNORE_INDEX, dtype=torch.long)
        for b, (source, target) in enumerate(pairs):
            src[b, :len(source)] = source
            decoder_in, decoder_out = teacher_forcing(target, self.bos_id, self.eos_id)
            tgt_in[b, :len(decoder_in)] = decoder_in
            tgt_out[b, :len(decoder_out)] = decoder_out
        return src, src_lengths, tgt_in, tgt_out
