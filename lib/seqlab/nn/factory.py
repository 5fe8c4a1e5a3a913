"""``recurrent_layer``: build a batch-first RNN / LSTM / GRU by name, seqlab's or torch.nn's twin."""

from __future__ import annotations

from torch import nn

from seqlab.nn.gru import GRU
from seqlab.nn.lstm import LSTM
from seqlab.nn.rnn import RNN

CELLS = ("rnn", "lstm", "gru")


def recurrent_layer(cell: str, input_size: int, hidden_size: int, num_layers: int = 1, dropout: float = 0.0,
                    *, bidirectional: bool = False, reference: bool = False, **kwargs) -> nn.Module:
    """A batch-first seqlab ``RNN``/``LSTM``/``GRU`` by name (:data:`CELLS`); torch.nn's if ``reference``."""
    if cell not in CELLS:
        raise ValueError(f"cell must be one of {CELLS}, got {cell!r}")
    ours = {"rnn": RNN, "lstm": LSTM, "gru": GRU}
    theirs = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}
    module = (theirs if reference else ours)[cell]
    return module(input_size, hidden_size, num_layers=num_layers, dropout=dropout, batch_first=True,
                  bidirectional=bidirectional, **kwargs)
