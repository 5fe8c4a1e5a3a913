"""Input checks shared by the task models: ids ``(B, T)`` of dtype long, and one length per sequence."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


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
