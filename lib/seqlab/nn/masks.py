r"""Attention masks in seqlab's convention, and the converter at torch's boundary; notebook 8 on.

A mask says where attending is *allowed*: boolean True, or additive :math:`M` (0, ``-inf`` where blocked),
broadcasting against the scores ``(..., n, m)``. ``torch.nn``'s boolean masks mean the opposite; seqlab's
twins convert them once, with :func:`from_torch`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def padding_mask(lengths: Tensor | Sequence[int], max_len: int | None = None, *,
                 device: torch.device | str | None = None) -> Tensor:
    """``(B, max_len)`` booleans, True at the first ``lengths[b]`` positions of row ``b`` (the real tokens)."""
    lengths = torch.as_tensor(lengths, device=device)
    if lengths.dim() != 1 or lengths.is_floating_point() or lengths.is_complex():
        raise ValueError(f"lengths must be a 1-D tensor of integers (one per sequence), "
                         f"got {lengths.dtype} of shape {tuple(lengths.shape)}")
    if len(lengths) and int(lengths.min()) < 0:
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    longest = int(lengths.max()) if len(lengths) else 0
    max_len = longest if max_len is None else max_len
    if longest > max_len:
        raise ValueError(f"a length of {longest} does not fit max_len={max_len}")
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def causal_mask(n: int, m: int | None = None, *, device: torch.device | str | None = None) -> Tensor:
    """``(n, m)`` booleans, True where query ``i`` may read key ``j``: ``j <= i + (m - n)`` (the last ``n`` of ``m``)."""
    m = n if m is None else m
    if n < 1 or m < n:
        raise ValueError(f"a causal mask needs 1 <= n <= m (n queries, m keys), got n={n}, m={m}")
    return torch.ones(n, m, dtype=torch.bool, device=device).tril(diagonal=m - n)


def band_mask(n: int, window: int, *, causal: bool = False, device: torch.device | str | None = None) -> Tensor:
    """``(n, n)`` booleans, True where ``|i - j| <= window`` (``causal``: ``i - window <= j <= i``)."""
    if n < 1 or window < 0:
        raise ValueError(f"a band mask needs n >= 1 and window >= 0, got n={n}, window={window}")
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    allowed = (j - i).abs() <= window
    return allowed & (j <= i) if causal else allowed


def merge_masks(*masks: Tensor | None) -> Tensor | None:
    """One mask allowing what every given one allows (AND; summed if any is additive); None if none given."""
    given = [m for m in masks if m is not None]
    if not given:
        return None
    floats = [m for m in given if m.is_floating_point()]
    if not floats:
        merged = given[0]
        for m in given[1:]:
            merged = merged & m
        return merged
    dtype = floats[0].dtype
    merged = to_additive(given[0], dtype)
    for m in given[1:]:
        merged = merged + to_additive(m, dtype)
    return merged


def to_additive(mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """A boolean "allowed" mask as 0 / -inf (an additive mask is returned as it is, in ``dtype``)."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
    return mask.to(dtype)


def allowed_anywhere(mask: Tensor) -> Tensor:
    """For each query row, whether the mask allows at least one key: ``mask.shape[:-1] + (1,)`` booleans."""
    if mask.dtype == torch.bool:
        return mask.any(dim=-1, keepdim=True)
    return (mask != float("-inf")).any(dim=-1, keepdim=True)


def check_mask(name: str, mask: Tensor, shapes: Sequence[tuple[int, ...]], *, what: str) -> None:
    """An error naming the expected shapes unless ``mask`` is boolean or float and has one of ``shapes``."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(f"{name} must be boolean or floating point ({what}), got {mask.dtype}")
    if tuple(mask.shape) not in [tuple(s) for s in shapes]:
        expected = " or ".join(str(tuple(s)) for s in shapes)
        raise ValueError(f"{name} must have shape {expected} ({what}), got {tuple(mask.shape)}")


def from_torch(mask: Tensor | None, dtype: torch.dtype = torch.float32) -> Tensor | None:
    """A torch.nn-style mask (boolean True = blocked, or additive) in seqlab's convention (float: in ``dtype``)."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return ~mask
    if not mask.is_floating_point():
        raise TypeError(f"a torch-style mask must be boolean (True = do not attend) or floating point "
                        f"(added to the scores), got {mask.dtype}")
    return mask.to(dtype)
