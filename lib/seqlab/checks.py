"""Input checks shared across seqlab, each message naming what was expected and what came."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn


def check_ids(name: str, ids: Tensor, lengths: Tensor | Sequence[int] | None) -> Tensor | None:
    """Raise unless ``ids`` is a ``(B, T)`` long tensor and ``lengths`` (if given) ``(B,)``; ``lengths`` as a tensor."""
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
    """An id outside ``0 .. size - 1`` (the lowest if one is negative, else the highest), or None."""
    if not ids.numel():
        return None
    low, high = int(ids.min()), int(ids.max())
    if low < 0:
        return low
    return high if high >= size else None


def check_id_range(owner: str, ids: Tensor, size: int, *, what: str = "ids", size_name: str = "vocab_size") -> None:
    """Raise ``ValueError`` unless every id lies in ``0 .. size - 1``; the names are for the message."""
    bad = first_id_outside(ids, size)
    if bad is not None:
        raise ValueError(f"{owner}: {what} must lie in 0 .. {size - 1} ({size_name}={size}), got an id of {bad}")


def check_lengths(owner: str, lengths: Tensor | None, n: int, *, what: str = "lengths", minimum: int = 0) -> None:
    """Raise ``ValueError`` unless every length ``(B,)`` lies in ``minimum .. n``, ``n`` the padded length."""
    if lengths is not None and len(lengths) and (int(lengths.min()) < minimum or int(lengths.max()) > n):
        raise ValueError(f"{owner}: {what} must lie in {minimum} .. {n} (each between {minimum} and the padded "
                         f"length {n}), got {lengths.tolist()}")


class StateDictMismatch(KeyError, ValueError):
    """A state dict that does not fit its model: a ``KeyError`` (keys) and a ``ValueError`` (shapes) alike."""

    __str__ = Exception.__str__      # the message as written, not KeyError's repr of it


def load_state_dict_strict(model: nn.Module, state_dict: Mapping[str, Tensor], source: str = "the checkpoint") -> None:
    """``model.load_state_dict(state_dict, strict=True)``, raising :class:`StateDictMismatch` naming every bad key at once."""
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
