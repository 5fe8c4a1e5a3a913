"""Checks shared by the Transformer's layers and stacks; masks in torch's meaning (True = blocked / padding)."""

from __future__ import annotations

from torch import Tensor

from seqlab.nn.masks import check_mask


def check_heads(d_model: int, nhead: int, *, names: tuple[str, str] = ("d_model", "nhead")) -> None:
    """A ValueError unless ``nhead`` divides ``d_model``; ``names`` are the caller's names for the two."""
    if nhead < 1 or d_model % nhead:
        width, heads = names
        divisors = [h for h in range(1, d_model + 1) if d_model % h == 0]
        raise ValueError(f"{width} must be divisible by {heads} (each head gets {width} / {heads} features), "
                         f"got {width}={d_model}, {heads}={nhead}; {heads} could be one of {divisors}")


def check_sequence(owner: str, name: str, x: Tensor, d_model: int, batch_first: bool) -> tuple[int | None, int]:
    """Check ``x``'s shape against ``d_model``; return (batch size or None if unbatched, length)."""
    layout = "(N, L, E)" if batch_first else "(L, N, E)"
    if not isinstance(x, Tensor) or x.dim() not in (2, 3) or x.shape[-1] != d_model:
        got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{owner} expects {name} of shape {layout} (batch_first={batch_first}) or (L, E) unbatched, "
                         f"with E = d_model = {d_model}; got {got}")
    if x.dim() == 2:
        return None, x.shape[0]
    return (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])


def check_attn_mask(name: str, mask: Tensor | None, batch: int | None, nhead: int, n: int, m: int) -> None:
    """An attention mask for ``n`` queries over ``m`` keys: ``(n, m)``, or one per batch element and head."""
    if mask is not None:
        stacked = (nhead if batch is None else batch * nhead, n, m)
        check_mask(name, mask, [(n, m), stacked],
                   what="torch's meaning: True or -inf where attending is not allowed")


def check_padding_mask(name: str, mask: Tensor | None, batch: int | None, m: int) -> None:
    """A key padding mask: ``(N, m)``, or ``(m,)`` unbatched."""
    if mask is not None:
        check_mask(name, mask, [(m,) if batch is None else (batch, m)], what="torch's meaning: True at padding")
