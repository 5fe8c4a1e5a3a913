r"""Elman RNN twins of torch.nn's: ``rnn_step``, ``RNNCell``, ``RNN``; notebook 2.

:math:`h_t = \tanh(W_h h_{t-1} + W_x x_t + b)` with ``weight_hh`` :math:`W_h`, ``weight_ih`` :math:`W_x` and
``bias_ih + bias_hh`` :math:`b`, so torch's weights load unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence

from seqlab.nn.recurrent import CellBase, RecurrentBase, RecurrentTrace
from seqlab.nn.unroll import State

__all__ = ["RNN", "RNNCell", "rnn_step"]

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

    ``forward(input (T, B, I), hx=h0 (L*D, B, H), *, lengths=None, return_trace=False)`` ->
    ``output (T, B, D*H), h_n`` (+ a trace of ``a``, ``h``).
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

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None, *,
                lengths: Tensor | Sequence[int] | None = None, return_trace: bool = False
                ) -> tuple[Tensor, Tensor] | tuple[Tensor, Tensor, RecurrentTrace]:
        x, (h_0,), layout = self._time_major(input, hx, lengths)       # x (T, B, I); h_0 (L*D, B, H)
        # each layer, each direction: a_t = W_ih x_t + b for all t at once, then rnn_step at t = 0 .. T-1
        output, (h_n,), trace = self._layers(x, (h_0,), layout.lengths, return_trace)
        return layout.restore(output, (h_n,), trace)       # output (T, B, D*H), laid out as the input came
