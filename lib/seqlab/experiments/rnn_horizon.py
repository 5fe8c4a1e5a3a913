"""Notebook 4's experiment: does the vanilla RNN learn the adding problem at lengths below T = 50?"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

# One length learned and one not, each far enough from nb04_lstm.learned's line to hang on neither seed nor machine
HORIZON_LENGTHS = (10, 30)


@lru_cache(maxsize=1)
def measure_rnn_horizon() -> dict[int, Any]:
    """``{T: MemoryRun}``: notebook 4's RNN (``AddingConfig()``) trained at each of ``HORIZON_LENGTHS``."""
    from seqlab.long_range import AddingConfig, train_adding

    with torch.random.fork_rng(devices=[]):             # eval_every=100 only validates less often
        return {T: train_adding("rnn", AddingConfig(length=T, eval_every=100)) for T in HORIZON_LENGTHS}
