"""Task models built from :mod:`seqlab.nn`, one module each (``gpt_listing``: GPT's one-file teaching twin)."""

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
