"""Notebook 5's experiment: what the trained character GRU's word-boundary unit does with its gates at a space.

The notebook shows the measurement; the ``predict_space_gates`` exercise judges a prediction of it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

SPACE_GATE_CHARS = 4000        # the first 4,000 characters of the validation text, as in notebooks 4 and 5


@lru_cache(maxsize=1)
def measure_space_gates() -> dict[str, Any]:
    """Notebook 5's measurement on the trained character GRU (``charlm-gru``): over the first 4,000 validation
    characters, the unit whose update gate separates spaces from other characters best (mean difference
    in standard deviations, notebook 4's recipe), and that unit's mean reset gate ``r`` and (torch's)
    update gate ``z`` at spaces and elsewhere:
    ``{"unit": int, "score": float, "r": (at spaces, elsewhere), "z": (at spaces, elsewhere)}``.
    Leaves torch's global generator alone; measured once per process."""
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
