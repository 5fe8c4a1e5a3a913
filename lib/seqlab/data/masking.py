r"""BERT's masking recipe for MLM training (Devlin et al., 2019, section 3.1) and T5's span corruption counts.
Notebook 16 teaches both.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import torch

from seqlab.checks import check_id_range
from seqlab.data.batching import IGNORE_INDEX, LMBatches

__all__ = ["MaskedLMBatches", "MaskedTokens", "SpanLengths", "apply_masking", "count_runs", "mask_tokens", "sample_spans",
           "span_lengths"]


class MaskedTokens(NamedTuple):
    """What :func:`mask_tokens` returns (unpacks as ``inputs, labels``)."""

    inputs: torch.Tensor      # (..., n) long: the corrupted ids the model reads
    labels: torch.Tensor      # (..., n) long: the original id at chosen positions, IGNORE_INDEX elsewhere


def mask_tokens(ids: torch.Tensor, mask_id: int, vocab_size: int, generator: torch.Generator, p: float = 0.15, *,
                special_ids: Sequence[int] = (), mask_share: float = 0.8, random_share: float = 0.1) -> MaskedTokens:
    """BERT's corruption of ``ids`` ``(..., n)``: ``(inputs, labels)`` of the same shape.

    Non-special positions are chosen with probability ``p``; a chosen one becomes ``mask_id``
    (``mask_share``), a random ordinary token (``random_share``) or stays, and its label is its id;
    other labels are ``IGNORE_INDEX``. Every draw comes from ``generator`` (CPU).
    """
    specials = _check_mask_args(ids, mask_id, vocab_size, generator, p, special_ids, mask_share, random_share)
    shape = ids.shape
    # all draws have the full shape, so the generator advances the same way whatever the ids are
    choose_draw = torch.rand(shape, generator=generator)                          # which positions are chosen
    how_draw = torch.rand(shape, generator=generator)                             # [MASK] / random / unchanged
    ordinary = torch.tensor([t for t in range(vocab_size) if t != mask_id and t not in specials], dtype=torch.long)
    random_tokens = ordinary[torch.randint(len(ordinary), shape, generator=generator)]   # (..., n)
    eligible = None if not specials else ~torch.isin(ids.cpu(), torch.tensor(specials))
    return apply_masking(ids, choose_draw.to(ids.device), how_draw.to(ids.device), random_tokens.to(ids.device),
                         mask_id, p, eligible=None if eligible is None else eligible.to(ids.device),
                         mask_share=mask_share, random_share=random_share)


def apply_masking(ids: torch.Tensor, choose_draw: torch.Tensor, how_draw: torch.Tensor, random_tokens: torch.Tensor,
                  mask_id: int, p: float = 0.15, *, eligible: torch.Tensor | None = None, mask_share: float = 0.8,
                  random_share: float = 0.1) -> MaskedTokens:
    """The recipe given its random draws (all ``(..., n)`` like ``ids``); :func:`mask_tokens` draws them."""
    chosen = choose_draw < p                                                      # the positions the loss is on
    if eligible is not None:
        chosen = chosen & eligible                                                # special tokens never are
    to_mask = chosen & (how_draw < mask_share)                                    # 80%: [MASK]
    to_random = chosen & (how_draw >= mask_share) & (how_draw < mask_share + random_share)   # 10%: a random token
    #                                                                               the other 10%: unchanged
    inputs = torch.where(to_mask, torch.full_like(ids, mask_id), ids)
    inputs = torch.where(to_random, random_tokens, inputs)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
    return MaskedTokens(inputs, labels)


def _check_mask_args(ids, mask_id, vocab_size, generator, p, special_ids, mask_share, random_share) -> list[int]:
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long or ids.dim() < 1:
        got = (f"{ids.dtype} tensor of shape {tuple(ids.shape)}" if isinstance(ids, torch.Tensor)
               else type(ids).__name__)
        raise TypeError(f"mask_tokens: ids must be a torch.long tensor of shape (..., n), got {got}")
    if not isinstance(generator, torch.Generator) or generator.device.type != "cpu":
        raise TypeError(f"mask_tokens: generator must be a CPU torch.Generator (e.g. torch.Generator()."
                        f"manual_seed(0)), so that the global RNG is left alone; got {type(generator).__name__}"
                        + (f" on {generator.device}" if isinstance(generator, torch.Generator) else ""))
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 2:
        raise ValueError(f"mask_tokens: vocab_size must be an int >= 2 (ids 0 .. vocab_size - 1), got {vocab_size!r}")
    if not isinstance(mask_id, int) or isinstance(mask_id, bool) or not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_tokens: mask_id must be an id in 0 .. {vocab_size - 1} (vocab_size={vocab_size}), "
                         f"got {mask_id!r}")
    specials = sorted({int(t) for t in special_ids})
    if any(not 0 <= t < vocab_size for t in specials):
        raise ValueError(f"mask_tokens: special_ids must lie in 0 .. {vocab_size - 1}, got {specials}")
    if mask_id in specials:
        raise ValueError(f"mask_tokens: mask_id={mask_id} is also in special_ids; special_ids are the tokens never "
                         f"chosen (padding, [CLS], [SEP]), not [MASK] itself")
    if vocab_size - 1 - len(specials) < 1:
        raise ValueError(f"mask_tokens: no ordinary token is left to draw random replacements from (vocab_size="
                         f"{vocab_size}, mask_id and {len(specials)} special ids)")
    if not 0.0 < p <= 1.0:
        raise ValueError(f"mask_tokens: p (the share of positions chosen) must be in (0, 1], got {p}")
    if mask_share < 0 or random_share < 0 or mask_share + random_share > 1:
        raise ValueError(f"mask_tokens: mask_share and random_share must be >= 0 with a sum <= 1 (the rest stays "
                         f"unchanged), got {mask_share} and {random_share}")
    check_id_range("mask_tokens", ids, vocab_size)
    return specials


class MaskedLMBatches:
    """Batches ``(inputs, labels)`` ``(B, seq_len)`` for MLM training: :class:`seqlab.data.LMBatches`' windows,
    masked afresh each time they are drawn (one generator seeded with ``seed``)."""

    def __init__(self, ids: torch.Tensor, batch_size: int, seq_len: int, *, mask_id: int, vocab_size: int,
                 p: float = 0.15, seed: int = 0, shuffle: bool = True, special_ids: Sequence[int] = ()):
        self.windows = LMBatches(ids, batch_size, seq_len, shuffle=shuffle, seed=seed)
        self.mask_id, self.vocab_size, self.p, self.special_ids = mask_id, vocab_size, p, tuple(special_ids)
        self.generator = torch.Generator().manual_seed(seed)
        # fail now, not at the first batch
        _check_mask_args(self.windows.x[:1], mask_id, vocab_size, self.generator, p, special_ids, 0.8, 0.1)

    def __len__(self) -> int:
        return len(self.windows)

    def __iter__(self) -> Iterator[MaskedTokens]:
        for x, _ in self.windows:
            yield mask_tokens(x, self.mask_id, self.vocab_size, self.generator, self.p, special_ids=self.special_ids)


# --- T5's span corruption (notebook 16): its lengths, a sampler, and BERT's single tokens counted as runs ----------
class SpanLengths(NamedTuple):
    """Span corruption's counts: tokens dropped, spans (= sentinels), encoder input, decoder target."""

    corrupted: int
    spans: int
    source: int
    target: int


def span_lengths(n: int, rate: float = 0.15, mean_span: float = 3) -> SpanLengths:
    """T5's span corruption counts for ``n`` tokens (Raffel et al. 2020, section 3.3.4)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ValueError(f"n should be an int >= 2 (tokens to corrupt), got {n!r}")
    if not 0 < rate < 1 or mean_span < 1:
        raise ValueError(f"rate should be in (0, 1) and mean_span >= 1, got rate={rate!r}, mean_span={mean_span!r}")
    corrupted = max(1, round(n * rate))
    spans = max(1, round(corrupted / mean_span))
    return SpanLengths(corrupted, spans, n - corrupted + spans, corrupted + spans + 1)


def sample_spans(n: int, generator: torch.Generator, rate: float = 0.15, mean_span: float = 3) -> list[tuple[int, int]]:
    """Random spans ``[(start, end), ...]`` to drop from ``n`` tokens, with :func:`span_lengths`' counts."""
    corrupted, spans, _, _ = span_lengths(n, rate, mean_span)

    def cut(total: int, parts: int) -> list[int]:                 # ``parts`` positive lengths summing to ``total``
        edges = torch.randperm(total - 1, generator=generator)[: parts - 1].sort().values + 1
        return torch.diff(torch.cat([torch.tensor([0]), edges, torch.tensor([total])])).tolist()

    result, start = [], 0
    for kept, length in zip(cut(n - corrupted, spans), cut(corrupted, spans)):
        start += kept
        result.append((start, start + length))
        start += length
    return result


def count_runs(chosen: torch.Tensor) -> torch.Tensor:
    """Runs of consecutive True per row of bool ``chosen`` ``(..., n)``: ``(...,)``."""
    if not isinstance(chosen, torch.Tensor) or chosen.dtype != torch.bool or chosen.dim() < 1:
        got = f"{chosen.dtype} tensor" if isinstance(chosen, torch.Tensor) else type(chosen).__name__
        raise TypeError(f"count_runs expects a bool tensor of shape (..., n), got {got}")
    return (chosen[..., 1:] & ~chosen[..., :-1]).sum(-1) + chosen[..., 0]
