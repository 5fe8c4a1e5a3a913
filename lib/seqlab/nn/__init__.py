"""From-scratch sequence models with torch.nn-compatible APIs.

Recurrent models (one module per lecture concept): ``rnn`` (``RNN``, ``RNNCell``), ``lstm``
(``LSTM``, ``LSTMCell``), ``gru`` (``GRU``, ``GRUCell``). Their shared machinery -- layers,
directions, padded batches, input checks, the fused scan -- is in ``seqlab.nn._recurrent``.
"""

from seqlab.nn._recurrent import RecurrentTrace
from seqlab.nn.gru import GRU, GRUCell
from seqlab.nn.lstm import LSTM, LSTMCell
from seqlab.nn.rnn import RNN, RNNCell

__all__ = ["RNN", "RNNCell", "LSTM", "LSTMCell", "GRU", "GRUCell", "RecurrentTrace"]
