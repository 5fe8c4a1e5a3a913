"""Task models built from seqlab's building blocks.

``seqlab.nn`` holds the torch.nn twins and building blocks (RNN / LSTM / GRU, attention, masks,
positional encodings ...); ``seqlab.models`` holds the task models built from them, one module
each: ``charlm`` (``CharLM``, the character language model), ``seq2seq`` (``Seq2Seq``, the
encoder-decoder with optional attention), ``readout`` (``SequenceTagger``, ``SequenceClassifier``)
and ``regressor`` (``SequenceRegressor``, the many-to-one model of the adding problem);
``encoder`` (``EncoderModel``, ``EncoderConfig``: a small encoder-only Transformer over tokens);
``bert`` (``BertEncoder``, ``BertConfig``: BERT's layout, loads real BERT weights; ``BertForMaskedLM``,
the encoder with its masked-token head);
``window_lm`` (``WindowLM``, ``WindowLMConfig``: the fixed-window language model that notebook 2 starts from);
``transformer_seq2seq`` (``TransformerSeq2Seq``, ``TransformerSeq2SeqConfig``: the paper's
encoder-decoder, with Seq2Seq's batches, loss and decoding);
``gpt`` (``GPT``, ``GPTConfig``, ``KVCache``: a decoder-only language model with a KV cache for generation).
"""

from seqlab.models.bert import BertConfig, BertEncoder, BertForMaskedLM
from seqlab.models.charlm import CharLM, CharLMConfig
from seqlab.models.encoder import EncoderConfig, EncoderModel
from seqlab.models.gpt import GPT, GPTConfig, KVCache
from seqlab.models.readout import SequenceClassifier, SequenceTagger
from seqlab.models.regressor import SequenceRegressor
from seqlab.models.seq2seq import Seq2Seq, Seq2SeqConfig
from seqlab.models.transformer_seq2seq import TransformerSeq2Seq, TransformerSeq2SeqConfig
from seqlab.models.window_lm import WindowLM, WindowLMConfig

__all__ = ["CharLM", "CharLMConfig", "Seq2Seq", "Seq2SeqConfig", "SequenceClassifier", "SequenceRegressor",
           "SequenceTagger"]
__all__ += ["EncoderConfig", "EncoderModel"]
__all__ += ["BertConfig", "BertEncoder", "BertForMaskedLM"]
__all__ += ["TransformerSeq2Seq", "TransformerSeq2SeqConfig"]
__all__ += ["GPT", "GPTConfig", "KVCache"]
__all__ += ["WindowLM", "WindowLMConfig"]
