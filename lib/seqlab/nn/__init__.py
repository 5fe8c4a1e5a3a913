"""From-scratch sequence models with torch.nn-compatible APIs.

Recurrent models (one module per lecture concept): ``rnn`` (``RNN``, ``RNNCell``), ``lstm``
(``LSTM``, ``LSTMCell``), ``gru`` (``GRU``, ``GRUCell``). Their shared machinery -- layers,
directions, padded batches, input checks, the fused scan -- is in ``seqlab.nn._recurrent``;
``recurrent_layer(cell, ...)`` builds one of them by name (``cell`` in ``CELLS``).

``seqlab.nn`` holds the torch.nn twins and their building blocks; the task models built from
them (CharLM, Seq2Seq, the taggers, the regressor) are in :mod:`seqlab.models`.

Attention: ``multihead`` (``MultiheadAttention``, torch.nn.MultiheadAttention's twin).

The Transformer: ``layer_norm`` (``LayerNorm``), ``transformer`` (``TransformerEncoderLayer``,
``TransformerDecoderLayer``, ``TransformerEncoder``, ``TransformerDecoder``, ``Transformer``).

Positions: ``positional`` (``SinusoidalPositionalEncoding``, ``LearnedPositionalEncoding``,
``RotaryPositionalEncoding`` / ``RoPE``, ``ALiBi``, ``NoPositionalEncoding``, and
``positional_encoding(name, ...)`` over ``POSITIONAL_ENCODINGS``).

On a GPU: ``graphs`` (``cuda_graphed``) replays a recurrent layer's whole scan as one CUDA graph.
"""

from seqlab.nn._recurrent import CELLS, RecurrentTrace, recurrent_layer
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
from seqlab.nn.rnn import RNN, RNNCell
from seqlab.nn.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = ["RNN", "RNNCell", "LSTM", "LSTMCell", "GRU", "GRUCell", "RecurrentTrace", "CELLS", "recurrent_layer",
           "cuda_graphed", "MultiheadAttention", "LayerNorm", "TransformerEncoderLayer", "TransformerDecoderLayer",
           "TransformerEncoder", "TransformerDecoder", "Transformer"]
__all__ += ["PositionalEncoding", "NoPositionalEncoding", "SinusoidalPositionalEncoding", "LearnedPositionalEncoding",
            "RotaryPositionalEncoding", "RoPE", "ALiBi", "positional_encoding", "POSITIONAL_ENCODINGS"]
