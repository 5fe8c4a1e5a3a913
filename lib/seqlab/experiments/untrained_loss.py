"""Notebook 2's experiment: the loss of the character RNN before any training."""

from __future__ import annotations

from functools import lru_cache

import torch

@lru_cache(maxsize=1)
def measure_untrained_loss() -> tuple[float, int]:
    """The validation loss (nats per character) of notebook 2's character RNN straight after initialisation
    (CharLM, cell "rnn", embedding 64, 256 units, torch's default initialisation under seed 0) on the
    first of the course's fixed validation batches (32 windows of 64 characters), and the vocabulary size V."""
    from seqlab import pretrained
    from seqlab.data import char_lm_data
    from seqlab.models.charlm import CharLM, CharLMConfig
    from seqlab.train import evaluate

    V = len(char_lm_data().vocab)
    with torch.random.fork_rng(devices=[]):          # leave the student's generator where it was
        torch.manual_seed(0)
        model = CharLM(CharLMConfig(vocab_size=V, cell="rnn", embed_size=64, hidden_size=256))
    return evaluate(model, pretrained.validation_batches()[:1]).loss, V
