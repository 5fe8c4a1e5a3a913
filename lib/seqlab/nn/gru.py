r"""GRU twins of torch.nn's, in torch's form: ``gru_step``, ``GRUCell``, ``GRU``; notebook 5.

:math:`n_t = \tanh(W_{in} x_t + b_{in} + r_t \odot (W_{hn} h_{t-1} + b_{hn}))`,
:math:`h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}`; gates stacked r|z|n, so torch's weights load.
Unlike Cho et al. (2014), :math:`r_t` acts after :math:`W_{hn}` (one product serves all three gates), and
the lectures' :math:`z_t` is torch's :math:`1 - z_t`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence

from seqlab.nn.recurrent import CellBase, RecurrentBase, RecurrentTrace
from seqlab.nn.unroll import State

__all__ = ["GRU", "GRUCell", "gru_step"]


def gru_step(xw_t: Tensor, state: State, weight_hh: Tensor,
             bias_hh: Tensor | None = None) -> tuple[State, dict[str, Tensor]]:
    """One GRU step: ``xw_t = W_ih x_t + b_ih`` ``(B, 3H)``, ``(h_{t-1},)`` -> ``(h_t,)``, ``{r, z, n, hn}``."""
    (h_prev,) = state                                                    # (B, H)
    x_r, x_z, x_n = xw_t.chunk(3, dim=1)                                 # W_i* x_t + b_i*, each (B, H)
    gh = h_prev @ weight_hh.t() if bias_hh is None else torch.addmm(bias_hh, h_prev, weight_hh.t())
    h_r, h_z, h_n = gh.chunk(3, dim=1)                                   # W_h* h_{t-1} + b_h*, each (B, H)
    r_t = torch.sigmoid(x_r + h_r)                                       # (B, H)
    z_t = torch.sigmoid(x_z + h_z)                                       # (B, H)
    n_t = torch.tanh(x_n + r_t * h_n)                                    # (B, H)
    h_t = (1 - z_t) * n_t + z_t * h_prev                                 # (B, H)
    return (h_t,), {"r": r_t, "z": z_t, "n": n_t, "hn": h_n}


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

    ``forward(input (T, B, I), hx=h0 (L*D, B, H), *, lengths=None, return_trace=False)`` ->
    ``output (T, B, D*H), h_n`` (+ a trace of ``r, z, n, h``).
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

    def forward(self, input: Tensor | PackedSequence, hx: Tensor | None = None, *,
                lengths: Tensor | Sequence[int] | None = None, return_trace: bool = False
                ) -> tuple[Tensor, Tensor] | tuple[Tensor, Tensor, RecurrentTrace]:
        x, (h_0,), layout = self._time_major(input, hx, lengths)       # x (T, B, I); h_0 (L*D, B, H)
        # each layer, each direction: W_ih x_t + b_ih for all t at once, then gru_step at t = 0 .. T-1
        output, (h_n,), trace = self._layers(x, (h_0,), layout.lengths, return_trace)
        return layout.restore(output, (h_n,), trace)       # output (T, B, D*H), laid out as the input came
