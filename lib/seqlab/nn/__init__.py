"""From-scratch sequence models with torch.nn-compatible APIs.

Recurrent models (one module per lecture concept): ``rnn`` (``RNN``, ``RNNCell``), ``lstm``
(``LSTM``, ``LSTMCell``), ``gru`` (``GRU``, ``GRUCell``), each with its equations, its step and a forward over time. What they
share: ``recurrent`` (the torch.nn-compatible layer and cell: parameters, layers, directions,
input layouts, the trace), ``unroll`` (one layer and direction over time, padding, reversal),
``bptt`` (the default fused scan with the hand-derived backward passes), ``recurrent_checks``
(input checks); ``factory.recurrent_layer(cell, ...)`` builds one of them by name (``cell`` in ``CELLS``).

``seqlab.nn`` holds the torch.nn twins and their building blocks; the task models built from
them (CharLM, Seq2Seq, the taggers, the regressor) are in :mod:`seqlab.models`.

Attention: ``multihead`` (``MultiheadAttention``, torch.nn.MultiheadAttention's twin).

The Transformer: ``layer_norm`` (``LayerNorm``), ``transformer_layers`` (``TransformerEncoderLayer``,
``TransformerDecoderLayer``, and the sublayers and residual wrapping they share), ``transformer`` (the stacks
``TransformerEncoder``, ``TransformerDecoder`` and the encoder-decoder ``Transformer``; the layers import from
it too), ``transformer_checks`` (their input checks).

Positions: ``positional`` (``SinusoidalPositionalEncoding``, ``LearnedPositionalEncoding``,
``RotaryPositionalEncoding`` / ``RoPE``, ``ALiBi``, ``NoPositionalEncoding``, and
``positional_encoding(name, ...)`` over ``POSITIONAL_ENCODINGS``).

On a GPU: ``graphs`` (``cuda_graphed``) replays a recurrent layer's whole scan as one CUDA graph.
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
