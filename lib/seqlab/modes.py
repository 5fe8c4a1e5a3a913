"""A module's train/eval mode, switched for a block and restored after.

Models, the training loop, gradients and widgets all run a model in eval mode for a while (sampling,
evaluation, tracing) and must hand it back as it was; this small module sits below all of them so
that a model need not import the training loop to do so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run the block with ``model`` in eval mode (dropout off), then give every submodule back the
    mode it had -- also when the block raises.

    >>> with evaluating(model):
    ...     logits = model(x)          # no dropout; model.training is what it was afterwards

    Each submodule's own flag is restored, so a part kept in eval mode inside a training model
    (a frozen embedding, say) stays so; ``model.train(was_training)`` would switch it back on.
    """
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, mode in modes:
            module.training = mode
