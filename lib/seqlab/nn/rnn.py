r"""The vanilla (Elman) recurrent network: ``RNNCell`` and the multi-layer ``RNN``, twins of torch.nn's.

The lectures write one step as :math:`h_t = \tanh(W_h h_{t-1} + W_x x_t + b)`. torch names the
matrices by what they meet (``weight_ih`` is :math:`W_x`, ``weight_hh`` is :math:`W_h`) and keeps
two bias vectors whose sum is :math:`b`:

.. math::

    a_t &= W_{ih} x_t + b_{ih} + W_{hh} h_{t-1} + b_{hh}      && \text{pre-activation} \\
    h_t &= \tanh(a_t) \quad \text{or} \quad \max(0, a_t)      && \text{nonlinearity='tanh' or 'relu'}

The same weights are used at every step (weight sharing), so a sequence of any length needs
the same number of parameters. The output distribution of a language model,
:math:`\mathrm{softmax}(W_y h_t + b_y)`, is a separate ``nn.Linear`` on top.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence

from seqlab.nn._recurrent import CellBase, RecurrentBase, RecurrentTrace, State

__all__ = ["RNN", "RNNCell", "rnn_step", "rnn_step_backward", "rnn_backward_prepare"]

NONLINEARITIES = ("tanh", "relu")


def _check_nonlinearity(name: str, nonlinearity: str) -> None:
    if nonlinearity not in NONLINEARITIES:
        raise ValueError(f"{name} got unknown nonlinearity {nonlinearity!r}; expected 'tanh' or 'relu'")


def rnn_step(xw_t: Tensor, state: State, weight_hh: Tensor, bias_hh: Tensor | None = None,
             nonlinearity: str = "tanh") -> tuple[State, dict[str, Tensor]]:
    """One RNN time step.

    ``xw_t`` is ``W_ih x_t + b_ih``, shape ``(B, H)``; ``state`` is ``(h_{t-1},)``.
    Returns ``(h_t,)`` and the pre-activation ``{a}``.
    """
    (h_prev,) = state                                       # (B, H)
    a_t = torch.addmm(xw_t, h_prev, weight_hh.t())          # (B, H): xw_t + W_hh h_{t-1}, one fused call
    if bias_hh is not None:                                 # (layers add b_hh to xw_t once instead)
        a_t = a_t + bias_hh
    h_t = torch.tanh(a_t) if nonlinearity == "tanh" else torch.relu(a_t)
    return (h_t,), {"a": a_t}


def rnn_backward_prepare(cache: dict[str, Tensor], states: tuple[Tensor, ...],
                         nonlinearity: str = "tanh") -> dict[str, Tensor]:
    """The nonlinearity's derivative at every step, ``(T, B, H)``: tanh' = 1 - h^2, relu' = [a > 0]."""
    if nonlinearity == "tanh":
        h = states[0][1:]                                   # (T, B, H): h_1 ... h_T
        return {"deriv": 1 - h * h}
    return {"deriv": (cache["a"] > 0).to(cache["a"].dtype)}


def rnn_step_backward(grad_state: State, cache: dict[str, Tensor],
                      weight_hh: Tensor) -> tuple[Tensor, Tensor, State]:
    r"""Carry dL/dh_t one step back: returns dL/da_t ``(B, H)`` (twice) and ``(dL/dh_{t-1},)``.

    The same step as :func:`seqlab.gradients.bptt_step`, which notebook 03 writes out in the
    lectures' notation: ``grad_h`` is its :math:`\bar h_t`, ``grad_a`` its :math:`\delta_t`, and
    ``weight_hh`` its :math:`W_h`. Here the weight gradients are summed over all steps at once by
    the caller (``seqlab.nn._recurrent._FusedScan``) instead of step by step.
    """
    (grad_h,) = grad_state
    grad_a = grad_h * cache["deriv"]                        # (B, H)
    return grad_a, grad_a, (grad_a @ weight_hh,)            # a_t = ... + W_hh h_{t-1}


class RNNCell(CellBase):
    """One RNN step, a twin of ``torch.nn.RNNCell``: ``h_t = cell(x_t, h_{t-1})``.

    Shapes: ``x`` ``(B, input_size)`` or ``(input_size,)``; ``h`` ``(B, H)`` or ``(H,)``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        _check_nonlinearity(type(self).__name__, nonlinearity)
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, state, batched = self._prepare(input, hx)              # (B, I), ((B, H),)
        xw_t = F.linear(x, self.weight_ih, self.bias_ih)          # (B, H)
        (h_t,), _ = rnn_step(xw_t, state, self.weight_hh, self.bias_hh, self.nonlinearity)
        return h_t if batched else h_t.squeeze(0)


class RNN(RecurrentBase):
    """Multi-layer, optionally bidirectional Elman RNN; a twin of ``torch.nn.RNN``.

    ``forward(input, hx=None, *, lengths=None, return_trace=False)``:

    - ``input``: ``(T, B, input_size)`` (``(B, T, input_size)`` if ``batch_first``), ``(T, input_size)``
      unbatched, or a ``PackedSequence``.
    - ``hx``: optional ``h0`` of shape ``(num_layers * num_directions, B, H)``; zeros if omitted.
    - ``lengths``: optional ``(B,)`` real lengths of a padded batch (see ``seqlab.nn._recurrent``).
    - returns ``output, h_n`` -- ``output`` is ``(T, B, num_directions * H)`` -- and with
      ``return_trace=True`` also a ``RecurrentTrace`` with the pre-activation ``a`` and ``h``.
    """

    trace_names = ("a", "h")
    cache_names = ("a",)

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        _check_nonlinearity(type(self).__name__, nonlinearity)
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size,
                         num_layers, bias, batch_first, dropout, bidirectional, device=device, dtype=dtype)

    def _step(self):
        return partial(rnn_step, nonlinearity=self.nonlinearity)

    def _step_backward(self):
        return rnn_step_backward

    def _prepare_backward(self):
        return partial(rnn_backward_prepare, nonlinearity=self.nonlinearity)

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None, *,
                lengths: Tensor | Sequence[int] | None = None, return_trace: bool = False
                ) -> tuple[Tensor, Tensor] | tuple[Tensor, Tensor, RecurrentTrace]:
        return self._forward(input, hx, lengths, return_trace)
