r"""Many-to-one regression: a recurrent layer reads a sequence of vectors, a linear map of its last
hidden state predicts one number,

.. math::

    h_t = \mathrm{RNN / LSTM / GRU}(x_t, h_{t-1}), \qquad \hat y = w^\top h_T + b .

The model of the long-range memory experiment of notebooks 4 and 5 (the adding problem,
:mod:`seqlab.long_range`), where the answer is needed only after the last step.
"""

from __future__ import annotations

from torch import Tensor, nn

from seqlab.nn import recurrent_layer


class SequenceRegressor(nn.Module):
    """Many-to-one: a recurrent layer reads ``x`` (B, T, I); a linear map of ``h_T`` predicts one number.

    ``cell`` is ``'rnn'``, ``'lstm'`` or ``'gru'`` (seqlab's from-scratch layers, batch first).
    ``forward`` returns predictions of shape (B,); ``forward(x, return_trace=True)`` also returns
    the recurrent layer's :class:`~seqlab.nn.RecurrentTrace` (gates and states per step).
    """

    def __init__(self, cell: str, input_size: int = 2, hidden_size: int = 32):
        super().__init__()
        self.cell = cell
        self.rnn = recurrent_layer(cell, input_size, hidden_size)
        self.readout = nn.Linear(hidden_size, 1)

    def forward(self, x: Tensor, *, return_trace: bool = False):
        if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[-1] != self.rnn.input_size:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"SequenceRegressor expects x of shape (B, T, {self.rnn.input_size}), got {shape}")
        out = self.rnn(x, return_trace=return_trace)
        output = out[0]                                      # (B, T, H)
        y_hat = self.readout(output[:, -1]).squeeze(-1)      # (B,): read h_T only
        return (y_hat, out[2]) if return_trace else y_hat
