r"""Many-to-one regression :math:`\hat y = w^\top h_T + b`, for the adding problem of notebooks 4 and 5."""

from __future__ import annotations

from torch import Tensor, nn

from seqlab.nn import recurrent_layer


class SequenceRegressor(nn.Module):
    """``x`` ``(B, T, I)`` -> predictions ``(B,)``; ``return_trace`` adds the layer's ``RecurrentTrace``."""

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
