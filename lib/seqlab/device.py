"""Where tensors live (CUDA when available, else CPU; ``$SEQLAB_DEVICE`` overrides), and repeatable runs."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch

ENV_VAR = "SEQLAB_DEVICE"


def get_device(preferred: str | torch.device | None = None) -> torch.device:
    """The device to compute on: ``preferred``, else ``$SEQLAB_DEVICE``, else CUDA if available, else CPU.

    Asking for CUDA where there is none raises rather than falling back.
    """
    choice = preferred if preferred is not None else os.environ.get(ENV_VAR, "").strip() or None
    if choice is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(choice)
    except RuntimeError as err:
        source = "argument" if preferred is not None else f"${ENV_VAR}"
        raise ValueError(f"{source} names an unknown device {choice!r}; expected 'cpu', 'cuda' or 'cuda:N'") from err
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"device {choice!r} was asked for, but torch sees no CUDA device "
                               f"(torch {torch.__version__}); use 'cpu' or unset ${ENV_VAR}")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise RuntimeError(f"device {choice!r} was asked for, but only {torch.cuda.device_count()} "
                               "CUDA device(s) exist")
    elif device.type != "cpu":
        raise ValueError(f"unsupported device {choice!r}; expected 'cpu', 'cuda' or 'cuda:N'")
    return device


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch, and return a torch Generator seeded alike (for data order, apart from initialisation)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return torch.Generator().manual_seed(seed)


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch CPU threads (None: leave the setting), restoring it afterwards, also on error."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def module_device(module: torch.nn.Module) -> torch.device:
    """The device of a module's first parameter or buffer (CPU for a module with neither)."""
    for tensor in module.parameters():
        return tensor.device
    for tensor in module.buffers():
        return tensor.device
    return torch.device("cpu")


def find_misplaced(module: torch.nn.Module,
                   tensors: Sequence[torch.Tensor]) -> tuple[int, torch.Tensor, torch.device] | None:
    """The first tensor not on the module's device, as ``(index, tensor, module's device)``; None when all are."""
    expected = module_device(module)
    for index, tensor in enumerate(tensors):
        if tensor.device != expected:
            return index, tensor, expected
    return None


def check_same_device(module: torch.nn.Module, *tensors: torch.Tensor, names: tuple[str, ...] = ()) -> None:
    """Raise a clear error when a tensor is not on the module's device; ``names`` label the tensors."""
    misplaced = find_misplaced(module, tensors)
    if misplaced is not None:
        index, tensor, expected = misplaced
        name = names[index] if index < len(names) else f"input {index}"
        raise RuntimeError(
            f"{name} is on {tensor.device} but the model {type(module).__name__} is on {expected}; "
            f"move one of them, e.g. tensor.to({str(expected)!r}) or model.to({str(tensor.device)!r})"
        )
