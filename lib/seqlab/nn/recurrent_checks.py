"""Checks shared by the recurrent layers and cells; messages name the expected and the actual."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def shape_str(t: Tensor | Sequence[int]) -> str:
    """``(2, 3)`` for a tensor or a sequence of dims; ``(5,)`` for one dim, as Python writes tuples."""
    dims = tuple(t.shape) if isinstance(t, Tensor) else tuple(t)
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def check_sizes(name: str, input_size: int, hidden_size: int, bias: bool) -> None:
    """Constructor arguments of every layer and cell: positive int sizes, a bool bias."""
    for arg, value in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} {arg} should be an int, got {type(value).__name__}")
        if value <= 0:
            raise ValueError(f"{name} {arg} must be greater than zero, got {value}")
    if not isinstance(bias, bool):
        raise TypeError(f"{name} bias should be a bool, got {type(bias).__name__}")


def check_tensor_matches(name: str, what: str, tensor: Tensor, reference: Tensor) -> None:
    """Same device and dtype as the parameters, with a message that says how to fix it."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name} expected {what} to be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device != reference.device:
        raise RuntimeError(f"{name} {what} is on {tensor.device} but the parameters are on {reference.device}; "
                           f"move one of them, e.g. {what}.to({str(reference.device)!r})")
    if tensor.dtype != reference.dtype:
        hint = " (token ids? embed them first, e.g. with nn.Embedding)" if not tensor.is_floating_point() else ""
        raise TypeError(f"{name} expected {what} of dtype {reference.dtype} (the parameters' dtype), "
                        f"got {tensor.dtype}{hint}")


def check_lengths(name: str, lengths: Tensor | Sequence[int], batch: int, steps: int) -> Tensor:
    """Validate ``lengths`` and return it as a CPU int64 tensor of shape (B,)."""
    if isinstance(lengths, Tensor):
        if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
            raise TypeError(f"{name} expected integer lengths, got dtype {lengths.dtype}")
    else:
        lengths = torch.as_tensor(lengths)
        if lengths.is_floating_point():
            raise TypeError(f"{name} expected integer lengths, got floats {lengths.tolist()}")
    lengths = lengths.to("cpu", torch.int64)
    if lengths.dim() != 1:
        raise ValueError(f"{name} expected lengths of shape (B,) = ({batch},), got {shape_str(lengths)}")
    if lengths.shape[0] != batch:
        raise ValueError(f"{name} expected one length per batch element: {batch} lengths, got {lengths.shape[0]}")
    if batch and int(lengths.min()) < 1:
        b = int(lengths.argmin())
        raise ValueError(f"{name} expected every length >= 1, got lengths[{b}] = {int(lengths[b])}")
    if batch and int(lengths.max()) > steps:
        b = int(lengths.argmax())
        raise ValueError(f"{name} expected every length <= T = {steps} (the padded sequence length), "
                         f"got lengths[{b}] = {int(lengths[b])}")
    return lengths


def split_hx(name: str, hx: object, state_names: tuple[str, ...], suffix: str = "") -> tuple[Tensor, ...] | None:
    """``hx`` as ``(h,)`` or ``(h, c)``, type checked; ``suffix`` names them in messages (``"0"``: ``h0``)."""
    if hx is None:
        return None
    names = tuple(n + suffix for n in state_names)
    if len(state_names) == 1:
        if not isinstance(hx, Tensor):
            raise TypeError(f"{name} expected hx to be a tensor {names[0]}, got {type(hx).__name__}")
        return (hx,)
    if not isinstance(hx, (tuple, list)) or len(hx) != len(state_names):
        raise TypeError(f"{name} expected hx to be a tuple ({', '.join(names)}), got {type(hx).__name__}"
                        + (f" of length {len(hx)}" if isinstance(hx, (tuple, list)) else ""))
    return tuple(hx)
