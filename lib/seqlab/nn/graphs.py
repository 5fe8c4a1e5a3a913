"""Replay a recurrent layer's scan as one CUDA graph, :func:`cuda_graphed`, saving the GPU's per-kernel
launches (same kernels, same numbers). Not taught; ``scripts/bench_rnn.py`` times it.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from seqlab.device import module_device


def _describe(t: Tensor) -> str:
    return f"shape {tuple(t.shape)}, {t.dtype}, {t.device}, requires_grad={t.requires_grad}"


def cuda_graphed(module: nn.Module, example_input: Tensor) -> nn.Module:
    """Capture the training-mode passes of a CUDA ``module`` as graphs, in place; later inputs must match
    ``example_input``'s shape, dtype and ``requires_grad``. Outputs are overwritten by the next call."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"cuda_graphed expected an nn.Module, got {type(module).__name__}")
    if not isinstance(example_input, Tensor):
        raise TypeError(f"cuda_graphed expected example_input to be a tensor, got {type(example_input).__name__}")
    device = module_device(module)
    if device.type != "cuda":
        raise RuntimeError(f"cuda_graphed needs a module on a CUDA device; {type(module).__name__} is on {device}. "
                           "On the CPU there are no kernel launches to save: call the module itself")
    if example_input.device != device:
        raise RuntimeError(f"cuda_graphed: example_input is on {example_input.device} but the module is on "
                           f"{device}; move it there, e.g. x.to({str(device)!r})")
    if not module.training:
        raise RuntimeError("cuda_graphed captures the training-mode forward and backward passes; call "
                           "module.train() first (in eval mode a graphed module runs its ordinary forward)")
    expected = (tuple(example_input.shape), example_input.dtype, example_input.device, example_input.requires_grad)
    graphed = torch.cuda.make_graphed_callables(module, (example_input,))
    replay = graphed.forward          # the training-mode graphs, or the module's own forward in eval mode

    @functools.wraps(replay)
    def forward(input: Tensor, *args: object, **kwargs: object) -> object:
        if not module.training:
            return replay(input, *args, **kwargs)
        if args or kwargs:
            raise TypeError(f"a CUDA-graphed {type(module).__name__} takes only its input in training mode "
                            f"(got {len(args)} more positional and {sorted(kwargs)} keyword argument(s)): "
                            "the graphs were captured for module(input) alone")
        if not isinstance(input, Tensor):
            raise TypeError(f"a CUDA-graphed {type(module).__name__} expected a tensor, got {type(input).__name__}")
        got = (tuple(input.shape), input.dtype, input.device, input.requires_grad)
        if got != expected:
            # without this check a (T, 1, I) batch would broadcast silently into the (T, B, I) buffer
            raise ValueError(f"a CUDA-graphed {type(module).__name__} replays only for input of "
                             f"shape {expected[0]}, {expected[1]}, {expected[2]}, requires_grad={expected[3]} "
                             f"(captured); got {_describe(input)}. Capture again with cuda_graphed for new sizes")
        return replay(input)

    module.forward = forward
    return module
