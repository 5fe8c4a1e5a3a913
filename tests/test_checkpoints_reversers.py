"""Notebook 13's digit reversers: the committed checkpoints load, are small, and still score what their records say."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from seqlab import pretrained
from seqlab.data import make_reversals
from seqlab.train import load_checkpoint, read_checkpoint_metadata

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("make_checkpoints", ROOT / "scripts" / "make_checkpoints.py")
make_checkpoints = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_checkpoints)


@pytest.mark.parametrize("name", sorted(make_checkpoints.REVERSERS))
def test_reverser_checkpoint_reproduces_its_record(name):
    folder = pretrained.checkpoint_dir()
    weights = folder / f"{name}.safetensors"
    assert weights.stat().st_size < 1024 * 1024, "each reverser stays under 1 MB"
    record = json.loads((folder / f"{name}.json").read_text())
    assert read_checkpoint_metadata(weights) == record, "the JSON beside the weights is the record inside them"
    setup = make_checkpoints.REVERSAL
    assert record["data"]["train"] == setup["train"] and record["data"]["test"] == setup["test"]
    assert {k: record["training"][k] for k in ("steps", "batch_size", "lr", "clip_norm")} == \
           {k: setup[k] for k in ("steps", "batch_size", "lr", "clip_norm")}      # one budget for all three
    model = make_checkpoints.build_reverser(record["model"], record["config"])
    load_checkpoint(weights, model)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert sum(p.numel() for p in model.parameters()) == record["parameters"]
    vocab, _ = make_checkpoints.pair_vocabs(make_reversals(**setup["train"]))
    assert vocab.itos == record["data"]["vocab"]
    measured = make_checkpoints.reversal_accuracy(model, vocab, make_reversals(**setup["test"])[:500])
    recorded = {int(n): a for n, a in record["test"]["first_500_by_length"].items()}
    assert measured.keys() == recorded.keys()
    assert all(measured[n] == pytest.approx(recorded[n], abs=0.02) for n in measured)
    # short strings are reversed by all three
    assert min(record["test"]["accuracy_by_length"][str(n)] for n in (2, 3)) > 0.9


def test_load_reverser_loads_into_the_notebooks_model_after_checking_model_and_recipe():
    from seqlab.models.seq2seq import Seq2Seq, Seq2SeqConfig

    record = json.loads((pretrained.checkpoint_dir() / "reverser-gru.json").read_text())
    built = Seq2Seq(Seq2SeqConfig(**record["config"]))
    model, loaded_record = pretrained.load_reverser("reverser-gru", into=built,
                                                    recipe={"steps": 800, "lr": 5e-3, "train": record["data"]["train"]})
    assert model is built and not model.training and loaded_record == record
    fresh, _ = pretrained.load_reverser("reverser-gru")
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), model.state_dict().values()))
    with pytest.raises(ValueError, match=r"trained with lr=0.005 .*not lr=0.01"):
        pretrained.load_reverser("reverser-gru", recipe={"lr": 1e-2})
    with pytest.raises(ValueError, match="hidden_size"):
        pretrained.load_reverser("reverser-gru", into=Seq2Seq(Seq2SeqConfig(**{**record["config"], "hidden_size": 32})))
    with pytest.raises(FileNotFoundError, match="reverser-gru-dot"):
        pretrained.load_reverser("reverser-lstm")
