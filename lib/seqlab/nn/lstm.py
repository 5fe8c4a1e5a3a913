r"""LSTM twins of torch.nn's: ``lstm_step``, ``LSTMCell``, ``LSTM``; notebook 4.

:math:`i, f, o = \sigma(W_{i\cdot} x_t + W_{h\cdot} h_{t-1} + b)`, :math:`g = \tanh(\dots)`,
:math:`c_t = f \odot c_{t-1} + i \odot g`, :math:`h_t = o \odot \tanh c_t`; gates stacked i|f|g|o
(``weight_ih_l0`` ``(4H, input_size)``) with torch's two biases, so torch's weights load unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence

from seqlab.nn.recurrent import CellBase, RecurrentBase, RecurrentTrace
from seqlab.nn.unroll import State

__all__ = ["LSTM", "LSTMCell", "lstm_step", "lstm_peephole_step", "lstm_projected_step"]


def lstm_step(xw_t: Tensor, state: State, weight_hh: Tensor,
              bias_hh: Tensor | None = None) -> tuple[State, dict[str, Tensor]]:
    """One LSTM time step.

    ``xw_t`` is the input's share of all four gates, ``W_ih x_t + b_ih``, shape ``(B, 4H)``;
    ``state`` is ``(h_{t-1}, c_{t-1})``. Returns ``(h_t, c_t)`` and ``{i, f, g, o, c, tanh_c}``.
    """
    h_prev, c_prev = state                                 # (B, H), (B, H)
    gates = torch.addmm(xw_t, h_prev, weight_hh.t())       # (B, 4H): xw_t + W_hh h_{t-1}, one fused call
    if bias_hh is not None:                                # (layers add b_hh to xw_t once instead)
        gates = gates + bias_hh
    # sigma of all four quarters in one call (three of them are gates); the candidate's quarter is
    # recomputed with tanh. Torch's order i|f|g|o.
    i_t, f_t, _, o_t = torch.sigmoid(gates).chunk(4, dim=1)  # each (B, H)
    g_t = torch.tanh(gates.chunk(4, dim=1)[2])             # the candidate c~_t, in (-1, 1)
    # i: how much of the candidate to write; f: how much of the old cell to keep; o: how much to show
    c_t = torch.addcmul(f_t * c_prev, i_t, g_t)            # (B, H): f * c_{t-1} + i * g
    tanh_c = torch.tanh(c_t)                               # kept: the backward pass needs it too
    h_t = o_t * tanh_c                                     # (B, H)
    return (h_t, c_t), {"i": i_t, "f": f_t, "g": g_t, "o": o_t, "c": c_t, "tanh_c": tanh_c}


def lstm_peephole_step(xw_t: Tensor, state: State, weight_hh: Tensor, bias_hh: Tensor | None = None, *,
                       weight_ci: Tensor, weight_cf: Tensor, weight_co: Tensor) -> tuple[State, dict[str, Tensor]]:
    r""":func:`lstm_step` with peepholes ``(H,)``: :math:`i_t, f_t = \sigma(\dots + w_{c\cdot} \odot c_{t-1})`,
    :math:`o_t = \sigma(\dots + w_{co} \odot c_t)`."""
    h_prev, c_prev = state                                 # (B, H), (B, H)
    gates = torch.addmm(xw_t, h_prev, weight_hh.t())       # (B, 4H)
    if bias_hh is not None:
        gates = gates + bias_hh
    a_i, a_f, a_g, a_o = gates.chunk(4, dim=1)             # each (B, H), torch's order i|f|g|o
    i_t = torch.sigmoid(torch.addcmul(a_i, weight_ci, c_prev))
    f_t = torch.sigmoid(torch.addcmul(a_f, weight_cf, c_prev))
    g_t = torch.tanh(a_g)
    c_t = torch.addcmul(f_t * c_prev, i_t, g_t)            # (B, H): f * c_{t-1} + i * g
    o_t = torch.sigmoid(torch.addcmul(a_o, weight_co, c_t))   # after c_t: it peeks at the new cell
    tanh_c = torch.tanh(c_t)
    h_t = o_t * tanh_c
    return (h_t, c_t), {"i": i_t, "f": f_t, "g": g_t, "o": o_t, "c": c_t, "tanh_c": tanh_c}


def lstm_projected_step(xw_t: Tensor, state: State, weight_hh: Tensor, bias_hh: Tensor | None = None, *,
                        weight_hr: Tensor, **peephole: Tensor) -> tuple[State, dict[str, Tensor]]:
    """:func:`lstm_step` (peephole step if given), then ``h_t = W_hr (o_t * tanh c_t)`` ``(B, P)``."""
    step = lstm_peephole_step if peephole else lstm_step
    (h_t, c_t), cache = step(xw_t, state, weight_hh, bias_hh, **peephole)   # h_t here is o_t * tanh c_t, (B, H)
    return (h_t @ weight_hr.t(), c_t), cache                               # (B, P), (B, H)


class LSTMCell(CellBase):
    """One LSTM step, a twin of ``torch.nn.LSTMCell``: ``(h_t, c_t) = cell(x_t, (h_{t-1}, c_{t-1}))``.

    Shapes: ``x`` ``(B, input_size)`` or ``(input_size,)``; ``h``, ``c`` ``(B, H)`` or ``(H,)``.
    Parameters ``weight_ih (4H, input_size)``, ``weight_hh (4H, H)``, ``bias_ih``, ``bias_hh (4H,)``.
    """

    gate_count = 4
    state_names = ("h", "c")

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        x, state, batched = self._prepare(input, hx)                 # (B, I), ((B, H), (B, H))
        xw_t = F.linear(x, self.weight_ih, self.bias_ih)             # (B, 4H)
        (h_t, c_t), _ = lstm_step(xw_t, state, self.weight_hh, self.bias_hh)
        return (h_t, c_t) if batched else (h_t.squeeze(0), c_t.squeeze(0))


class LSTM(RecurrentBase):
    """Multi-layer, optionally bidirectional LSTM; a twin of ``torch.nn.LSTM``.

    ``forward(input (T, B, I), hx=(h0, c0) (L*D, B, H), *, lengths=None, return_trace=False)`` ->
    ``output (T, B, D*H), (h_n, c_n)`` (+ a trace of ``i, f, g, o, c, h``). ``proj_size=P`` adds torch's
    ``weight_hr_l{k}`` ``(P, H)`` (``h`` has ``P`` units; plain path only); ``peephole=True`` (not in
    torch) adds ``weight_ci/cf/co_l{k}`` ``(H,)``.
    """

    gate_count = 4
    state_names = ("h", "c")
    trace_names = ("i", "f", "g", "o", "c", "h")
    cache_names = ("i", "f", "g", "o", "c", "tanh_c")

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, peephole: bool = False, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        if not isinstance(peephole, bool):
            raise TypeError(f"LSTM peephole must be True or False, got {peephole!r}")
        self.peephole = peephole                   # before the base class registers the cell weights
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device=device, dtype=dtype)

    def _step(self):
        if self.proj_size:
            return lstm_projected_step
        return lstm_peephole_step if self.peephole else lstm_step

    def cell_weight_shapes(self) -> dict[str, tuple[int, ...]]:
        shapes = {"weight_hr": (self.proj_size, self.hidden_size)} if self.proj_size else {}
        if self.peephole:
            shapes |= {name: (self.hidden_size,) for name in ("weight_ci", "weight_cf", "weight_co")}
        return shapes

    def extra_repr(self) -> str:
        return super().extra_repr() + (", peephole=True" if self.peephole else "")

    def forward(self, input: Tensor | PackedSequence, hx: tuple[Tensor, Tensor] | None = None, *,
                lengths: Tensor | Sequence[int] | None = None, return_trace: bool = False
                ) -> tuple[Tensor, tuple[Tensor, Tensor]] | tuple[Tensor, tuple[Tensor, Tensor], RecurrentTrace]:
        x, (h_0, c_0), layout = self._time_major(input, hx, lengths)   # x (T, B, I); h_0 (L*D, B, P or H), c_0 (L*D, B, H)
        # each layer, each direction: W_ih x_t + b for all t at once, then lstm_step at t = 0 .. T-1
        output, (h_n, c_n), trace = self._layers(x, (h_0, c_0), layout.lengths, return_trace)
        return layout.restore(output, (h_n, c_n), trace)   # output (T, B, D*H), laid out as the input came
