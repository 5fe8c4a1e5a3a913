"""One recurrent layer, one direction, over time: :func:`unroll` and the autograd path :func:`scan_plain`.

Padded steps keep the state and output zero; the reverse direction flips each sequence within its length
(:func:`flip`), as ``torch.nn`` does for a packed sequence. Notebooks 2 and 6.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence

# The state is a tuple: (h,) for RNN and GRU, (h, c) for LSTM. The cache holds the quantities
# the backward step needs and the trace shows (gates, pre-activations), each (B, H).
State = tuple[Tensor, ...]
# A step maps (x-projection of step t, previous state, W_hh, b_hh) to (new state, cache).
Step = Callable[[Tensor, State, Tensor, Tensor | None], tuple[State, dict[str, Tensor]]]


def unroll(step: Step, xw: Tensor, state: State, weight_hh: Tensor, bias_hh: Tensor | None,
           mask: Tensor | None) -> tuple[list[Tensor], list[State], list[dict[str, Tensor]]]:
    """``step`` at t = 0 .. T-1 over ``xw`` ``(T, B, G*H)``, ``mask`` ``(T, B, 1)`` or None: per step the
    outputs ``(B, H)``, the states (initial first) and the caches."""
    outputs, states, caches = [], [state], []
    for t in range(xw.shape[0]):
        new_state, cache = step(xw[t], state, weight_hh, bias_hh)
        if mask is None:
            state, h_t = new_state, new_state[0]
        else:  # padded step: keep the old state, output zero
            state = tuple(torch.where(mask[t], new, old) for new, old in zip(new_state, state))
            h_t = torch.where(mask[t], new_state[0], 0.0)
        outputs.append(h_t)
        states.append(state)
        caches.append(cache)
    return outputs, states, caches


def scan_plain(step: Step, xw: Tensor, state: State, weight_hh: Tensor, bias_hh: Tensor | None,
               mask: Tensor | None) -> tuple[Tensor, State, dict[str, Tensor]]:
    """:func:`unroll` under autograd: outputs ``(T, B, H)``, final state, caches ``{name: (T, B, H)}``."""
    outputs, states, caches = unroll(step, xw, state, weight_hh, bias_hh, mask)
    stacked = {name: torch.stack([c[name] for c in caches]) for name in caches[0]}
    return torch.stack(outputs), states[-1], stacked


def padding_mask(lengths: Tensor | None, steps: int, device: torch.device) -> Tensor | None:
    """``(T, B, 1)``, True where ``t < lengths[b]`` (a real step); None when every sequence is T long."""
    if lengths is None:
        return None
    return (torch.arange(steps).unsqueeze(1) < lengths.unsqueeze(0)).to(device).unsqueeze(-1)


def reverse_index(lengths: Tensor | None, steps: int, device: torch.device) -> Tensor | None:
    """Index ``(T, B)`` that reverses each sequence within its own length (padding stays put)."""
    if lengths is None:
        return None
    t = torch.arange(steps, device=device).unsqueeze(1)            # (T, 1)
    last = lengths.to(device).unsqueeze(0) - 1                     # (1, B)
    return torch.where(t <= last, last - t, t)                     # (T, B)


def flip(x: Tensor, index: Tensor | None) -> Tensor:
    """Reverse time in ``x`` (T, B, F): whole sequences, or each within its length."""
    if index is None:
        return x.flip(0)
    return x.gather(0, index.unsqueeze(-1).expand_as(x))


def repack(output: Tensor, packed: PackedSequence) -> PackedSequence:
    """Pack the padded ``output`` (T, B, F) with the same layout as the input ``packed``."""
    batch_sizes = packed.batch_sizes
    order = packed.sorted_indices
    if order is None:
        order = torch.arange(int(batch_sizes[0]), device=output.device)
    time_index = torch.repeat_interleave(torch.arange(len(batch_sizes)), batch_sizes).to(output.device)
    batch_index = torch.cat([order[:int(n)] for n in batch_sizes])
    return PackedSequence(output[time_index, batch_index], batch_sizes, packed.sorted_indices,
                          packed.unsorted_indices)
