"""The committed checkpoints load, are small, and still reach the validation loss recorded beside them."""

from __future__ import annotations

import json

import pytest
import torch

from seqlab import pretrained
from seqlab.train import read_checkpoint_metadata


@pytest.mark.parametrize("name", sorted(pretrained.CHECKPOINTS))
def test_checkpoint_reproduces_its_recorded_validation_loss(name, two_threads):
    folder = pretrained.checkpoint_dir()
    weights = folder / f"{name}.safetensors"
    assert weights.stat().st_size < 5 * 1024 * 1024, "checkpoints stay small (a few MB)"
    record = json.loads((folder / f"{name}.json").read_text())
    assert read_checkpoint_metadata(weights) == record, "the JSON beside the weights is the record inside them"
    model, _ = pretrained.load_pretrained(name)
    assert not model.training
    measured = pretrained.validation_loss(model)
    assert measured == pytest.approx(record["validation"]["loss"], abs=2e-4)
    # and a trained model is far better than guessing uniformly among 84 symbols (ln 84 = 4.43)
    assert measured < 2.0


def test_unknown_checkpoint_names_the_choices():
    with pytest.raises(KeyError, match=r"unknown checkpoint 'charlm-xl'; expected one of \['charlm-gru'"):
        pretrained.build_model("charlm-xl")
