"""Data for the course: offline corpora, vocabularies, splits, batching, BERT-style masking, synthetic tasks, downloads."""

from seqlab.data.batching import (IGNORE_INDEX, LMBatches, PaddedBatches, Splits, forever, lm_windows, pad_sequences,
                                  split_items, split_text)
from seqlab.data.corpora import CorpusError, list_corpora, load_corpus, manifest, sha256_text
from seqlab.data.prepared import CharLMData, char_lm_data
from seqlab.data.masking import MaskedLMBatches, MaskedTokens, mask_tokens
from seqlab.data.download import DownloadError, cache_dir, download_corpus, fetch
from seqlab.data.synthetic import (DATE_FORMATS, DatePair, adding_problem, copy_task, make_dates, make_reversals,
                                   reverse_task)
from seqlab.data.vocab import BOS, EOS, PAD, UNK, Vocab, word_tokenize

__all__ = [
    "BOS", "DATE_FORMATS", "EOS", "IGNORE_INDEX", "PAD", "UNK",
    "CharLMData", "CorpusError", "DatePair", "DownloadError", "LMBatches", "MaskedLMBatches", "MaskedTokens",
    "PaddedBatches", "Splits", "Vocab",
    "adding_problem", "cache_dir", "char_lm_data", "copy_task", "download_corpus", "fetch", "forever", "list_corpora",
    "lm_windows", "load_corpus", "make_dates", "mask_tokens", "make_reversals", "manifest", "pad_sequences", "reverse_task", "sha256_text",
    "split_items", "split_text", "word_tokenize",
]
