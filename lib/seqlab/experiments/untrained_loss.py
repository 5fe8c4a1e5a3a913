"""Notebook 2's experiment: the loss of the character RNN before any training."""

from __future__ import annotations

from functools import lru_cache

import torch

@lru_cache(maxsize=1)
def measure_untrained_loss() -> tuple[float, int]:
    """Notebook 2's character RNN at initialisation (seed 0): its loss on the first validation batch, and V."""
    from seqlab import pretrained
    from seqlab.data import char_lm_data
    from seqlab.models.charlm import CharLM, CharLMConfig
    from seqlab.train import evaluate

    V = len(char_lm_data().vocab)
    with torch.random.fork_rng(devices=[]):          # leave the student's generator where it was
        torch.manual_seed(0)
        model = CharLM(CharLMConfig(vocab_size=V, cell="rnn", embed_size=64, hidden_size=256))
    return evaluate(model, pretrained.validation_batches()[:1]).loss, V
