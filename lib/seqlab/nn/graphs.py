"""Replay a recurrent layer's whole scan as one CUDA graph, :func:`cuda_graphed`: the GPU's launch overhead.

On a GPU the scan runs each time step as a few tiny kernels, and launching one from Python costs more than
its arithmetic; a CUDA graph records every launch of one forward and one backward pass once and replays
each pass as a single launch. The kernels are the same, so the numbers are the eager path's.
A graph fixes the input's shape, dtype, device and ``requires_grad`` at capture (checked on every call) and
takes only ``model(input)``; in eval mode the module runs its ordinary forward (torch's rule for graphed
modules), and on the CPU there is nothing to gain. Built on :func:`torch.cuda.make_graphed_callables`.
Not taught in a notebook; ``scripts/bench_rnn.py`` times it on a GPU.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from seqlab.device import module_device


def _describe(t: Tensor) -> str:
    return f"shape {tuple(t.shape)}, {t.dtype}, {t.device}, requires_grad={t.requires_grad}"


def cuda_graphed(module: nn.Module, example_input: Tensor) -> nn.Module:
    """Capture ``module``'s forward and backward passes on ``example_input`` as CUDA graphs; return ``module``.

    ``module`` must be on a CUDA device and in training mode (the graphs replay in that mode only);
    ``example_input`` is a tensor of exactly the shape, dtype and ``requires_grad`` every later call
    will pass, e.g. ``(T, B, input_size)``. The module is changed in place: in training mode its
    ``forward(input)`` copies ``input`` into the captured buffer and replays. Its outputs are the
    graph's own buffers, overwritten by the next call: clone one to keep it past the next step.
    """
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
