"""From-scratch sequence models with torch.nn-compatible APIs: the torch.nn twins and their building blocks.

Recurrent: ``rnn``, ``lstm``, ``gru`` (one module per lecture concept: its step, cell and layer),
sharing ``recurrent`` (the torch.nn-compatible layer and cell), ``unroll`` (the plain autograd scan),
``bptt`` (the default fused scan, with hand-written backward passes) and ``recurrent_checks``;
``factory.recurrent_layer(cell, ...)`` builds one by name; on a GPU, ``graphs.cuda_graphed``.
Attention: ``attention``, ``self_attention``, ``multihead``, ``masks``. Positions: ``positional``.
The Transformer: ``layer_norm``, ``transformer_layers``, ``transformer`` (the stacks), ``transformer_checks``.
The task models built from them (CharLM, Seq2Seq, the taggers, GPT, BERT ...) are in :mod:`seqlab.models`.
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
