"""From-scratch torch.nn twins, one module per concept: ``rnn``, ``lstm``, ``gru`` (on ``recurrent``,
``unroll``, ``bptt``), ``attention``, ``self_attention``, ``multihead``, ``masks``, ``positional``,
``layer_norm``, ``transformer_layers``, ``transformer``. Task models are in :mod:`seqlab.models`.
"""

from seqlab.nn.factory import CELLS, recurrent_layer
from seqlab.nn.graphs import cuda_graphed
from seqlab.nn.gru import GRU, GRUCell
from seqlab.nn.layer_norm import LayerNorm
from seqlab.nn.lstm import LSTM, LSTMCell
from seqlab.nn.multihead import MultiheadAttention
from seqlab.nn.positional import (
    POSITIONAL_ENCODINGS,
    ALiBi,
    LearnedPositionalEncoding,
    NoPositionalEncoding,
    PositionalEncoding,
    RoPE,
    RotaryPositionalEncoding,
    SinusoidalPositionalEncoding,
    positional_encoding,
)
from seqlab.nn.recurrent import RecurrentTrace
from seqlab.nn.rnn import RNN, RNNCell
from seqlab.nn.transformer import Transformer, TransformerDecoder, TransformerEncoder
from seqlab.nn.transformer_layers import TransformerDecoderLayer, TransformerEncoderLayer

__all__ = ["RNN", "RNNCell", "LSTM", "LSTMCell", "GRU", "GRUCell", "RecurrentTrace", "CELLS", "recurrent_layer",
           "cuda_graphed", "MultiheadAttention", "LayerNorm", "TransformerEncoderLayer", "TransformerDecoderLayer",
           "TransformerEncoder", "TransformerDecoder", "Transformer"]
__all__ += ["PositionalEncoding", "NoPositionalEncoding", "SinusoidalPositionalEncoding", "LearnedPositionalEncoding",
            "RotaryPositionalEncoding", "RoPE", "ALiBi", "positional_encoding", "POSITIONAL_ENCODINGS"]
