r"""Gated recurrent unit (GRU): ``GRUCell`` and the multi-layer ``GRU``, twins of torch.nn's.

A GRU keeps no separate cell state; a reset gate :math:`r_t` and an update gate :math:`z_t`
decide how much of the past enters the candidate :math:`n_t` and how much of it survives.
This module computes torch's form:

.. math::

    r_t &= \sigma(W_{ir} x_t + b_{ir} + W_{hr} h_{t-1} + b_{hr})              && \text{reset gate} \\
    z_t &= \sigma(W_{iz} x_t + b_{iz} + W_{hz} h_{t-1} + b_{hz})              && \text{update gate} \\
    n_t &= \tanh(W_{in} x_t + b_{in} + r_t \odot (W_{hn} h_{t-1} + b_{hn}))   && \text{candidate } \tilde{h}_t \\
    h_t &= (1 - z_t) \odot n_t + z_t \odot h_{t-1}

Two points where lectures differ from this, worth checking before comparing numbers:

1. **Where the reset gate acts.** Above (torch, cuDNN, and the Waterloo lecture), :math:`r_t`
   multiplies :math:`W_{hn} h_{t-1} + b_{hn}` *after* the matrix product. The original GRU
   paper (Cho et al., 2014) and the "RNN to Transformer" article gate the state *before* it:

   .. math:: \tilde{h}_t = \tanh(W_h [r_t \odot h_{t-1}; x_t] + b_h)
             = \tanh(W_{in} x_t + W_{hn} (r_t \odot h_{t-1}) + b_h)

   The two are different functions (equal only when :math:`r_t` is all ones or zeros with no
   bias), so weights trained in one form do not carry over to the other. We build torch's form,
   because its weights load unchanged and its matrix product :math:`W_{hh} h_{t-1}` for all three
   gates happens at once, before :math:`r_t` is known.

2. **Which way the update gate points.** Here :math:`z_t \to 1` *keeps* the old state; the
   lectures write :math:`h_t = (1 - z_t) \odot h_{t-1} + z_t \odot \tilde{h}_t`, where
   :math:`z_t \to 1` takes the new candidate. The lectures' :math:`z_t` is torch's
   :math:`1 - z_t`; the trace records torch's.

Weight layout (as in torch): gates stacked **r | z | n**, so ``weight_ih_l0`` is ``(3H, input_size)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence

from seqlab.nn._recurrent import CellBase, RecurrentBase, RecurrentTrace, State

__all__ = ["GRU", "GRUCell", "gru_step", "gru_step_backward", "gru_backward_prepare"]


def gru_step(xw_t: Tensor, state: State, weight_hh: Tensor,
             bias_hh: Tensor | None = None) -> tuple[State, dict[str, Tensor]]:
    """One GRU time step (torch's form, see the module docstring).

    ``xw_t`` is ``W_ih x_t + b_ih``, shape ``(B, 3H)``; ``state`` is ``(h_{t-1},)``.
    Returns ``(h_t,)`` and ``{r, z, n, hn}`` where ``hn = W_hn h_{t-1} + b_hn``.
    """
    (h_prev,) = state                                                    # (B, H)
    x_r, x_z, x_n = xw_t.chunk(3, dim=1)                                 # W_i* x_t + b_i*, each (B, H)
    gh = h_prev @ weight_hh.t() if bias_hh is None else torch.addmm(bias_hh, h_prev, weight_hh.t())
    h_r, h_z, h_n = gh.chunk(3, dim=1)                                   # W_h* h_{t-1} + b_h*, each (B, H)
    r_t = torch.sigmoid(x_r + h_r)                                       # (B, H)
    z_t = torch.sigmoid(x_z + h_z)                                       # (B, H)
    n_t = torch.tanh(x_n + r_t * h_n)                                    # (B, H)
    h_t = (1 - z_t) * n_t + z_t * h_prev                                 # (B, H)
    return (h_t,), {"r": r_t, "z": z_t, "n": n_t, "hn": h_n}


def gru_backward_prepare(cache: dict[str, Tensor], states: tuple[Tensor, ...]) -> dict[str, Tensor]:
    """The parts of the GRU's derivative that need no later step, for all ``t`` at once.

    Returns ``z``, ``local`` ``(T, B, 3H)`` with ``dL/d(pre-activations of r, z, n) = dL/dh_t *
    local``, and ``r_hh`` ``(T, B, 3H)`` = ``[1, 1, r]`` turning those into dL/d(W_hh h_{t-1} + b_hh).
    """
    r, z, n, hn = cache["r"], cache["z"], cache["n"], cache["hn"]   # (T, B, H) each
    h_prev = states[0][:-1]                                         # (T, B, H)
    d_n = (1 - z) * (1 - n * n)          # h_t = (1 - z) n + z h_{t-1}; tanh' = 1 - n^2
    d_z = (h_prev - n) * z * (1 - z)     # sigma' = z (1 - z)
    d_r = d_n * hn * r * (1 - r)         # n's pre-activation holds r * hn
    local = torch.cat([d_r, d_z, d_n], dim=-1)
    r_hh = torch.cat([torch.ones_like(r), torch.ones_like(r), r], dim=-1)
    return {"z": z, "local": local, "r_hh": r_hh}


def gru_step_backward(grad_state: State, cache: dict[str, Tensor],
                      weight_hh: Tensor) -> tuple[Tensor, Tensor, State]:
    """Carry dL/dh_t one GRU step back (derived by hand; see ``gru_backward_prepare``).

    Returns dL/d(W_ih x_t + b_ih) and dL/d(W_hh h_{t-1} + b_hh), each ``(B, 3H)``, and ``(dL/dh_{t-1},)``.
    """
    (grad_h,) = grad_state                                               # (B, H)
    grad_x = torch.cat([grad_h, grad_h, grad_h], dim=1) * cache["local"]  # (B, 3H)
    grad_hh = grad_x * cache["r_hh"]                                     # r_t gates W_hn h_{t-1} + b_hn
    grad_h_prev = grad_h * cache["z"] + grad_hh @ weight_hh              # direct path z h_{t-1}, and via W_hh
    return grad_x, grad_hh, (grad_h_prev,)


class GRUCell(CellBase):
    """One GRU step, a twin of ``torch.nn.GRUCell``: ``h_t = cell(x_t, h_{t-1})``.

    Shapes: ``x`` ``(B, input_size)`` or ``(input_size,)``; ``h`` ``(B, H)`` or ``(H,)``.
    """

    gate_count = 3

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, state, batched = self._prepare(input, hx)              # (B, I), ((B, H),)
        xw_t = F.linear(x, self.weight_ih, self.bias_ih)          # (B, 3H)
        (h_t,), _ = gru_step(xw_t, state, self.weight_hh, self.bias_hh)
        return h_t if batched else h_t.squeeze(0)


class GRU(RecurrentBase):
    """Multi-layer, optionally bidirectional GRU; a twin of ``torch.nn.GRU``.

    ``forward(input, hx=None, *, lengths=None, return_trace=False)``:

    - ``input``: ``(T, B, input_size)`` (``(B, T, input_size)`` if ``batch_first``), ``(T, input_size)``
      unbatched, or a ``PackedSequence``.
    - ``hx``: optional ``h0`` of shape ``(num_layers * num_directions, B, H)``; zeros if omitted.
    - ``lengths``: optional ``(B,)`` real lengths of a padded batch (see ``seqlab.nn._recurrent``).
    - returns ``output, h_n`` -- ``output`` is ``(T, B, num_directions * H)`` -- and with
      ``return_trace=True`` also a ``RecurrentTrace`` with gates ``r, z``, candidate ``n`` and ``h``.
    """

    gate_count = 3
    trace_names = ("r", "z", "n", "h")
    cache_names = ("r", "z", "n", "hn")
    fold_hh_bias = False      # b_hn sits inside r_t * (W_hn h + b_hn), so it cannot be folded into x's side

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)

    def _step(self):
        return gru_step

    def _step_backward(self):
        return gru_step_backward

    def _prepare_backward(self):
        return gru_backward_prepare

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None, *,
                lengths: Tensor | Sequence[int] | None = None, return_trace: bool = False
                ) -> tuple[Tensor, Tensor] | tuple[Tensor, Tensor, RecurrentTrace]:
        return self._forward(input, hx, lengths, return_trace)
