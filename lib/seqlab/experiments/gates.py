"""Notebook 5's experiment: the trained character GRU's gates at a space."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

SPACE_GATE_CHARS = 4000        # the first 4,000 characters of the validation text, as in notebooks 4 and 5


@lru_cache(maxsize=1)
def measure_space_gates() -> dict[str, Any]:
    """The ``charlm-gru`` unit whose update gate best tells spaces apart, and its mean gates at spaces and
    elsewhere: ``{"unit", "score", "r": (space, other), "z": (space, other)}``."""
    import numpy as np

    from seqlab.data import char_lm_data
    from seqlab.pretrained import load_pretrained
    from seqlab.widgets.gates import gate_record

    data = char_lm_data()
    with torch.random.fork_rng(devices=[]):      # building the model draws its initial weights: keep the student's
        model, _ = load_pretrained("charlm-gru")  # generator where it was
    record = gate_record(model, data.vocab, data.vocab.decode(data.val[:SPACE_GATE_CHARS]))
    at_space = np.array(record.chars) == " "
    z = record["z"]                                                           # (T, H)
    score = (z[at_space].mean(0) - z[~at_space].mean(0)) / (z.std(0) + 1e-6)
    unit = int(np.abs(score).argmax())
    means = {g: (float(record[g][at_space, unit].mean()), float(record[g][~at_space, unit].mean())) for g in "rz"}
    return {"unit": unit, "score": float(score[unit]), **means}
