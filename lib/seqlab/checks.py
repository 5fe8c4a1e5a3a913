"""Input checks shared across seqlab: each written once, each message naming what was expected and got.

- :func:`check_ids`: token ids ``(B, T)`` of dtype long, and one length per sequence;
- :func:`check_id_range` (and :func:`first_id_outside`): ids inside a vocabulary, so that a bad id
  is reported here and not as an index error deep inside ``nn.Embedding``;
- :func:`check_lengths`: lengths of padded sequences inside ``minimum .. padded length``;
- :func:`load_state_dict_strict`: a state dict loaded with every missing, unexpected and misshapen
  key named at once.

The device check lives beside the device choice, in :mod:`seqlab.device`. The recurrent layers in
:mod:`seqlab.nn` still carry their own checks (torch's wording, for parity with ``torch.nn.LSTM``);
they may call these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn


def check_ids(name: str, ids: Tensor, lengths: Tensor | Sequence[int] | None) -> Tensor | None:
    """Raise a clear error unless ``ids`` is a ``(B, T)`` long tensor and ``lengths`` (if given) has
    shape ``(B,)``; return ``lengths`` as a tensor (None stays None). ``name`` is the caller, for the message."""
    if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.dtype != torch.long:
        got = f"{ids.dtype} tensor of shape {tuple(ids.shape)}" if isinstance(ids, Tensor) else type(ids).__name__
        raise ValueError(f"{name} expects ids of shape (B, T) and dtype torch.long, got {got}")
    if lengths is None:
        return None
    lengths = torch.as_tensor(lengths)
    if lengths.shape != (ids.shape[0],):
        raise ValueError(f"{name} expects lengths of shape ({ids.shape[0]},), one per sequence, "
                         f"got {tuple(lengths.shape)}")
    return lengths


def first_id_outside(ids: Tensor, size: int) -> int | None:
    """An id of ``ids`` (any shape) outside ``0 .. size - 1`` -- the lowest if one is negative, else the
    highest -- or None when every id fits (an empty tensor fits)."""
    if not ids.numel():
        return None
    low, high = int(ids.min()), int(ids.max())
    if low < 0:
        return low
    return high if high >= size else None


def check_id_range(owner: str, ids: Tensor, size: int, *, what: str = "ids", size_name: str = "vocab_size") -> None:
    """Raise ``ValueError`` unless every id lies in ``0 .. size - 1``; ``owner`` and ``what`` name the
    caller and the argument, ``size_name`` the setting that fixes the size."""
    bad = first_id_outside(ids, size)
    if bad is not None:
        raise ValueError(f"{owner}: {what} must lie in 0 .. {size - 1} ({size_name}={size}), got an id of {bad}")


def check_lengths(owner: str, lengths: Tensor | None, n: int, *, what: str = "lengths", minimum: int = 0) -> None:
    """Raise ``ValueError`` unless every length ``(B,)`` lies in ``minimum .. n``, ``n`` the padded length."""
    if lengths is not None and len(lengths) and (int(lengths.min()) < minimum or int(lengths.max()) > n):
        raise ValueError(f"{owner}: {what} must lie in {minimum} .. {n} (each between {minimum} and the padded "
                         f"length {n}), got {lengths.tolist()}")


class StateDictMismatch(KeyError, ValueError):
    """A state dict that does not fit its model: keys missing or left over (a ``KeyError``), or
    shapes that differ (a ``ValueError``); either ``except`` catches it."""

    __str__ = Exception.__str__      # the message as written, not KeyError's repr of it


def load_state_dict_strict(model: nn.Module, state_dict: Mapping[str, Tensor], source: str = "the checkpoint") -> None:
    """``model.load_state_dict(state_dict, strict=True)``, raising :class:`StateDictMismatch` that names
    every missing and unexpected key and every shape that differs, all at once. ``source`` names
    where the state dict came from, for the message."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(expected))
    shapes = [f"{k}: checkpoint {tuple(state_dict[k].shape)} vs model {tuple(expected[k].shape)}"
              for k in sorted(set(expected) & set(state_dict)) if expected[k].shape != state_dict[k].shape]
    problems = []
    if missing:
        problems.append(f"missing from {source} ({len(missing)}): {', '.join(missing)}")
    if unexpected:
        problems.append(f"in {source} but not in {type(model).__name__} ({len(unexpected)}): {', '.join(unexpected)}")
    if shapes:
        problems.append("wrong shapes: " + "; ".join(shapes))
    if problems:
        raise StateDictMismatch(f"cannot load {source} into {type(model).__name__}: " + ". ".join(problems))
    model.load_state_dict(state_dict, strict=True)
