r"""Long short-term memory (LSTM): ``LSTMCell`` and the multi-layer ``LSTM``, twins of torch.nn's.

The lectures concatenate the previous hidden state and the input, :math:`z_t = [h_{t-1}; x_t]`,
and give every gate its own weight matrix acting on :math:`z_t`. Splitting each matrix into the
columns that meet :math:`x_t` and those that meet :math:`h_{t-1}`,
:math:`W_f z_t = W_{hf} h_{t-1} + W_{if} x_t`, gives the form torch uses, and the one coded here:

.. math::

    i_t &= \sigma(W_{ii} x_t + b_{ii} + W_{hi} h_{t-1} + b_{hi})          && \text{input gate} \\
    f_t &= \sigma(W_{if} x_t + b_{if} + W_{hf} h_{t-1} + b_{hf})          && \text{forget gate} \\
    g_t &= \tanh(W_{ig} x_t + b_{ig} + W_{hg} h_{t-1} + b_{hg})           && \text{candidate } \tilde{c}_t \\
    o_t &= \sigma(W_{io} x_t + b_{io} + W_{ho} h_{t-1} + b_{ho})          && \text{output gate} \\
    c_t &= f_t \odot c_{t-1} + i_t \odot g_t                               && \text{cell state} \\
    h_t &= o_t \odot \tanh(c_t)                                            && \text{hidden state}

Two biases per gate (``b_i*`` and ``b_h*``) are redundant -- only their sum matters -- but torch
keeps both, so we do too and its weights load unchanged.

Weight layout (as in torch): the four gate matrices are stacked in the order **i | f | g | o**,
so ``weight_ih_l0`` is ``(4H, input_size)``: rows ``0:H`` belong to ``i``, ``H:2H`` to ``f``,
``2H:3H`` to ``g`` and ``3H:4H`` to ``o``. One matrix product per step computes all four gates.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence

from seqlab.nn._recurrent import CellBase, RecurrentBase, RecurrentTrace, State

__all__ = ["LSTM", "LSTMCell", "lstm_step", "lstm_step_backward", "lstm_backward_prepare"]


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


def lstm_backward_prepare(cache: dict[str, Tensor], states: tuple[Tensor, ...]) -> dict[str, Tensor]:
    r"""The parts of the LSTM's derivative that need no later step, for all ``t`` at once.

    Write :math:`d_x` for :math:`\partial L / \partial` (the pre-activation of gate ``x``), and
    :math:`\delta h_t, \delta c_t` for the gradients arriving from step ``t+1`` (and from the output).
    Reading the forward step backwards, with :math:`\sigma' = \sigma(1-\sigma)` and :math:`\tanh' = 1-\tanh^2`:

    .. math::

        dc_t &= \delta c_t + \delta h_t \, o_t (1 - \tanh^2 c_t)      && h_t = o_t \tanh c_t \\
        d_i &= dc_t \; g_t \; i_t (1 - i_t)                          && c_t = f_t c_{t-1} + i_t g_t \\
        d_f &= dc_t \; c_{t-1} \; f_t (1 - f_t) \\
        d_g &= dc_t \; i_t \; (1 - g_t^2) \\
        d_o &= \delta h_t \; \tanh c_t \; o_t (1 - o_t) \\
        \delta h_{t-1} &= [d_i \, d_f \, d_g \, d_o] \, W_{hh}, \qquad \delta c_{t-1} = dc_t \, f_t

    Every factor after :math:`dc_t` or :math:`\delta h_t` is known once the forward pass is done, so it
    is computed here for all steps at once (a few large operations instead of many small ones):
    ``dh_dc`` and ``di_dc, df_dc, dg_dc, do_dh``, each ``(T, B, H)``, plus ``f``.
    ``cache`` holds ``i, f, g, o, c, tanh_c`` as ``(T, B, H)``; ``states`` is ``(h, c)``, each
    ``(T+1, B, H)`` with the initial state first.
    """
    i, f, g, o, tanh_c = (cache[k] for k in ("i", "f", "g", "o", "tanh_c"))   # (T, B, H) each
    c_prev = states[1][:-1]                                                    # (T, B, H): c_{t-1}
    return {"dh_dc": o * (1 - tanh_c * tanh_c),      # how c_t moves h_t
            "di_dc": g * i * (1 - i),                # how the input gate's pre-activation moves c_t
            "df_dc": c_prev * f * (1 - f),           # ... the forget gate's
            "dg_dc": i * (1 - g * g),                # ... the candidate's
            "do_dh": tanh_c * o * (1 - o),           # how the output gate's pre-activation moves h_t
            "f": f}


def lstm_step_backward(grad_state: State, cache: dict[str, Tensor],
                       weight_hh: Tensor) -> tuple[Tensor, Tensor, State]:
    """Carry the gradient one LSTM step back: the equations of ``lstm_backward_prepare``, at step ``t``.

    ``grad_state`` is ``(dL/dh_t, dL/dc_t)`` from later steps. Returns dL/d(pre-activation gates)
    ``(B, 4H)`` -- the gradient of both ``W_ih x_t + b_ih`` and ``W_hh h_{t-1} + b_hh``, which are
    added -- and ``(dL/dh_{t-1}, dL/dc_{t-1})``.
    """
    grad_h, grad_c = grad_state                                       # (B, H), (B, H)
    d_c = torch.addcmul(grad_c, grad_h, cache["dh_dc"])              # c_t reaches L directly and via h_t
    d_i = d_c * cache["di_dc"]                                        # (B, H) each
    d_f = d_c * cache["df_dc"]
    d_g = d_c * cache["dg_dc"]
    d_o = grad_h * cache["do_dh"]
    d_gates = torch.cat([d_i, d_f, d_g, d_o], dim=1)                  # (B, 4H), torch's order i|f|g|o
    grad_h_prev = d_gates @ weight_hh                                 # (B, H): back through W_hh h_{t-1}
    grad_c_prev = d_c * cache["f"]                                    # c_t = f_t c_{t-1} + ...
    return d_gates, d_gates, (grad_h_prev, grad_c_prev)


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
    """Multi-layer, optionally bidirectional LSTM; a twin of ``torch.nn.LSTM`` (``proj_size=0``).

    ``forward(input, hx=None, *, lengths=None, return_trace=False)``:

    - ``input``: ``(T, B, input_size)`` (``(B, T, input_size)`` if ``batch_first``), ``(T, input_size)``
      unbatched, or a ``PackedSequence``.
    - ``hx``: optional ``(h0, c0)``, each ``(num_layers * num_directions, B, H)``; zeros if omitted.
    - ``lengths``: optional ``(B,)`` real lengths of a padded batch (see ``seqlab.nn._recurrent``).
    - returns ``output, (h_n, c_n)`` -- ``output`` is ``(T, B, num_directions * H)`` -- and with
      ``return_trace=True`` also a ``RecurrentTrace`` with gates ``i, f, g, o`` and states ``c, h``.
    """

    gate_count = 4
    state_names = ("h", "c")
    trace_names = ("i", "f", "g", "o", "c", "h")
    cache_names = ("i", "f", "g", "o", "c", "tanh_c")

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        if proj_size != 0:
            raise NotImplementedError(f"LSTM proj_size={proj_size} is not implemented here; use proj_size=0 "
                                      "(or torch.nn.LSTM for projections)")
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)

    def _step(self):
        return lstm_step

    def _step_backward(self):
        return lstm_step_backward

    def _prepare_backward(self):
        return lstm_backward_prepare

    def forward(self, input: Tensor | PackedSequence, hx: tuple[Tensor, Tensor] | None = None, *,
                lengths: Tensor | Sequence[int] | None = None, return_trace: bool = False
                ) -> tuple[Tensor, tuple[Tensor, Tensor]] | tuple[Tensor, tuple[Tensor, Tensor], RecurrentTrace]:
        return self._forward(input, hx, lengths, return_trace)
