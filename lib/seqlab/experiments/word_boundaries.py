"""Notebook 6's experiment: restoring Shakespeare's spaces with three GRU taggers."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from seqlab.device import torch_threads

#: the three taggers of section 3.2: GRU, embedding 32, hidden 64 per direction, linear read-out to 2 tags
TAGGER_CONFIGS: dict[str, dict] = {"uni-1": dict(num_layers=1, bidirectional=False),
                                   "uni-2": dict(num_layers=2, bidirectional=False),
                                   "bi-1": dict(num_layers=1, bidirectional=True)}
TAGGER_STEPS, TAGGER_BATCH = 200, 32


@lru_cache(maxsize=1)
def space_taggers() -> dict[str, tuple[torch.nn.Module, Any]]:
    """The taggers of ``TAGGER_CONFIGS``, trained on the same batches from seed 0: ``{name: (model, history)}``."""
    from seqlab.data import PaddedBatches
    from seqlab.data.tagging import word_boundary_data
    from seqlab.models.readout import SequenceTagger
    from seqlab.tagging import tagging_loss
    from seqlab.train import train

    data = word_boundary_data()
    trained = {}
    # one thread, as in the notebook: the same numbers wherever this runs
    with torch_threads(1), torch.random.fork_rng(devices=[]):
        for name, config in TAGGER_CONFIGS.items():
            torch.manual_seed(0)
            model = SequenceTagger(len(data.vocab), 2, cell="gru", embed_size=32, hidden_size=64, **config)
            history = train(model, PaddedBatches(data.train, TAGGER_BATCH, seed=0), tagging_loss,
                            max_steps=TAGGER_STEPS, lr=1e-2, seed=0, progress=False)
            trained[name] = (model, history)
    return trained


@lru_cache(maxsize=1)
def measure_error_ratio() -> dict[str, float]:
    """Test errors of ``uni-1`` and ``bi-1``, and their ``"ratio"``."""
    from seqlab.data import PaddedBatches
    from seqlab.data.tagging import word_boundary_data
    from seqlab.tagging import evaluate_tagger

    test = PaddedBatches(word_boundary_data().test, 512, shuffle=False)
    errors = {name: 1 - evaluate_tagger(space_taggers()[name][0], test).accuracy for name in ("uni-1", "bi-1")}
    return errors | {"ratio": errors["uni-1"] / errors["bi-1"]}


def through_bidirectional(model: torch.nn.Module, examples: list, bidirectional=None) -> tuple[list, list]:
    """Tags and ``P(space)`` per example from ``bi-1``, its layer run by ``bidirectional(xs (T, B, F), lengths,
    fwd, bwd)`` (Exercise 1) or, if None, by the model."""
    from seqlab.nn import GRU

    rnn = model.rnn
    if not rnn.bidirectional or rnn.num_layers != 1:
        raise ValueError("through_bidirectional needs a one-layer bidirectional tagger such as bi-1")

    def one_way(suffix: str):                 # one direction of the layer, run from index 0 up: (T, B, F) -> (T, B, H)
        gru = GRU(rnn.input_size, rnn.hidden_size)
        gru.load_state_dict({f"{name}_l0": getattr(rnn, f"{name}_l0{suffix}")
                             for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")})
        return lambda xs: gru(xs)[0]

    lengths = torch.tensor([len(e.ids) for e in examples])
    ids = torch.zeros(int(lengths.max()), len(examples), dtype=torch.long)     # (T, B): time first, 0 = padding
    for b, e in enumerate(examples):
        ids[:len(e.ids), b] = e.ids
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            if bidirectional is None:
                logits = model(ids.T, lengths).transpose(0, 1)                     # (T, B, 2)
            else:
                logits = model.head(bidirectional(model.embed(ids), lengths, one_way(""), one_way("_reverse")))
    finally:
        model.train(was_training)
    tags, p_space = logits.argmax(-1), logits.softmax(-1)[..., 1]
    return [tags[:n, b] for b, n in enumerate(lengths.tolist())], [p_space[:n, b] for b, n in enumerate(lengths.tolist())]
