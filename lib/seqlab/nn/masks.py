r"""Attention masks: one convention for all of seqlab, and converters at torch's boundary.

Inside seqlab a mask says where attending is *allowed*: a boolean mask is True where query ``i`` may attend
to key ``j``; an additive (float) mask is added to the scores, 0 where allowed and ``-inf`` where blocked
(the lectures' :math:`M`, and the meaning of ``scaled_dot_product_attention``'s ``attn_mask``).
``torch.nn``'s attention and Transformer classes mean the opposite (boolean True = blocked, or padding):
seqlab's twins of them take torch's meaning and convert once, with :func:`from_torch`; nothing else uses
it, and models built on the twins hand them additive masks (:func:`to_additive`), which mean the same on
both sides, so no mask is inverted only to be inverted back. Masks broadcast against the scores
``(..., n, m)``; a row with no allowed key gives zero weights and output. Used from notebook 8 on.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def padding_mask(lengths: Tensor | Sequence[int], max_len: int | None = None, *,
                 device: torch.device | str | None = None) -> Tensor:
    """``(B, max_len)`` booleans, True at the first ``lengths[b]`` positions of row ``b`` (the real tokens).

    >>> padding_mask([3, 1], 4).int().tolist()
    [[1, 1, 1, 0], [1, 0, 0, 0]]
    """
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
    """``(n, m)`` booleans, True where query ``i`` may attend to key ``j``: ``j <= i + (m - n)``.

    With ``m = n`` (the default) that is the lower triangle, ``j <= i``: no token reads a later one.
    With ``m > n`` the ``n`` queries are the *last* ``n`` positions of ``m`` (generation with a
    cache of ``m - n`` earlier keys): each still sees every key up to its own position.
    """
    m = n if m is None else m
    if n < 1 or m < n:
        raise ValueError(f"a causal mask needs 1 <= n <= m (n queries, m keys), got n={n}, m={m}")
    return torch.ones(n, m, dtype=torch.bool, device=device).tril(diagonal=m - n)


def band_mask(n: int, window: int, *, causal: bool = False, device: torch.device | str | None = None) -> Tensor:
    """``(n, n)`` booleans, True where ``|i - j| <= window`` (sliding-window attention; Longformer's local part).

    ``causal=True`` keeps only the keys behind: ``i - window <= j <= i``.
    """
    if n < 1 or window < 0:
        raise ValueError(f"a band mask needs n >= 1 and window >= 0, got n={n}, window={window}")
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    allowed = (j - i).abs() <= window
    return allowed & (j <= i) if causal else allowed


def merge_masks(*masks: Tensor | None) -> Tensor | None:
    """One mask allowing what *every* given mask allows (None entries are skipped; all None -> None).

    Boolean masks combine with AND; if any mask is additive, all are turned additive and summed
    (the dtype is the additive masks'). Shapes broadcast.
    """
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
    """Raise a ValueError naming the expected shapes and dtype unless ``mask`` has one of ``shapes``
    and is boolean or floating point. ``what`` says what the mask means, for the message."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool and not mask.is_floating_point():
        raise TypeError(f"{name} must be boolean or floating point ({what}), got {mask.dtype}")
    if tuple(mask.shape) not in [tuple(s) for s in shapes]:
        expected = " or ".join(str(tuple(s)) for s in shapes)
        raise ValueError(f"{name} must have shape {expected} ({what}), got {tuple(mask.shape)}")


def from_torch(mask: Tensor | None, dtype: torch.dtype = torch.float32) -> Tensor | None:
    """A torch.nn-style mask (boolean True = blocked, or additive float) in seqlab's convention.

    Boolean masks are inverted (True = allowed); float masks are already additive and are cast
    to ``dtype``. Use it for ``attn_mask`` and ``key_padding_mask`` of torch's twins.
    """
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return ~mask
    if not mask.is_floating_point():
        raise TypeError(f"a torch-style mask must be boolean (True = do not attend) or floating point "
                        f"(added to the scores), got {mask.dtype}")
    return mask.to(dtype)
