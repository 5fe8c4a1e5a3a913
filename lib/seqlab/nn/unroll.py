"""One recurrent layer, one direction, over time: :func:`unroll`, the plain path :func:`scan_plain`, padding.

A step function (``rnn_step``, ``lstm_step``, ``gru_step``) maps ``xw_t = W_ih x_t + b_ih`` and the previous
state to the new state and a cache of its internals; :func:`unroll` applies it at t = 0 .. T-1 (the lectures'
unrolled network) and :func:`scan_plain` does so under autograd (``model.fused = False``; the fused default is
:mod:`seqlab.nn.bptt`). With ``lengths`` (or a PackedSequence) the state stops changing after a sequence's
last real step, padded outputs are zero, and the reverse direction reverses each sequence within its own
length (:func:`flip`), runs the same forward scan and reverses the outputs back: exactly what ``torch.nn``
computes for a packed sequence. Taught in notebooks 2 (unrolling) and 6 (padding, both directions).
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
    """Apply ``step`` at t = 0 .. T-1: the unrolled network, one step per time step.

    ``xw`` is ``(T, B, G*H)``, ``mask`` is ``(T, B, 1)`` (True at real steps) or None. Returns
    per step the outputs h_t ``(B, H)``, the states (initial state first) and the caches.
    """
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
    """Unroll with autograd recording every operation (the plain path).

    Returns outputs ``(T, B, H)``, the final state, and the stacked caches ``{name: (T, B, H)}``.
    """
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
