"""Task models built from seqlab's building blocks (:mod:`seqlab.nn`), one module each.

Recurrent: ``window_lm`` (``WindowLM``, the fixed-window model notebook 2 starts from), ``charlm``
(``CharLM``, the character language model, and ``continue_with_cell``, which runs one with a cell function
written elsewhere), ``readout`` (``SequenceTagger``, ``SequenceClassifier``),
``regressor`` (``SequenceRegressor``, the adding problem), ``seq2seq`` (``Seq2Seq``, optional attention).
Transformer: ``encoder`` (``EncoderModel``), ``transformer_seq2seq`` (``TransformerSeq2Seq``, with Seq2Seq's
batches, loss and decoding), ``gpt`` (``GPT``, and ``KVCache`` for generation; ``gpt_listing`` is its one-file teaching twin) and ``bert`` (``BertEncoder``,
which loads real BERT weights, and ``BertForMaskedLM``). A model's ``*Config``, where it has one, sits
beside it.
"""

from seqlab.models.bert import BertConfig, BertEncoder, BertForMaskedLM
from seqlab.models.charlm import CharLM, CharLMConfig, continue_with_cell
from seqlab.models.encoder import EncoderConfig, EncoderModel
from seqlab.models import gpt_listing
from seqlab.models.gpt import GPT, GPTConfig, KVCache
from seqlab.models.readout import SequenceClassifier, SequenceTagger
from seqlab.models.regressor import SequenceRegressor
from seqlab.models.seq2seq import Seq2Seq, Seq2SeqConfig
from seqlab.models.transformer_seq2seq import TransformerSeq2Seq, TransformerSeq2SeqConfig
from seqlab.models.window_lm import WindowLM, WindowLMConfig

__all__ = ["CharLM", "CharLMConfig", "Seq2Seq", "Seq2SeqConfig", "SequenceClassifier", "SequenceRegressor",
           "SequenceTagger", "continue_with_cell"]
__all__ += ["EncoderConfig", "EncoderModel"]
__all__ += ["BertConfig", "BertEncoder", "BertForMaskedLM"]
__all__ += ["TransformerSeq2Seq", "TransformerSeq2SeqConfig"]
__all__ += ["GPT", "GPTConfig", "KVCache"]
__all__ += ["WindowLM", "WindowLMConfig"]
