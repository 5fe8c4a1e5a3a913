"""The committed checkpoints load, are small, and still reach the validation loss recorded beside them."""

from __future__ import annotations

import json

import pytest
import torch

from seqlab import pretrained
from seqlab.train import read_checkpoint_metadata


@pytest.mark.parametrize("name", sorted(pretrained.CHECKPOINTS))
def test_checkpoint_reproduces_its_recorded_validation_loss(name):
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
    with pytest.raises(KeyError, match=r"unknown checkpoint 'charlm-xl'; expected one of \['charlm-gpt', 'charlm-gru'"):
        pretrained.build_model("charlm-xl")


def test_gpt_checkpoint_says_how_it_was_made_and_records_its_curve():
    """charlm-gpt: the recipe in CHECKPOINTS is the one recorded, and the curve falls as the budget grows."""
    record = json.loads((pretrained.checkpoint_dir() / "charlm-gpt.json").read_text())
    spec = pretrained.CHECKPOINTS["charlm-gpt"]
    assert {k: record["config"][k] for k in spec["config"]} == spec["config"]
    assert record["parameters"] == pretrained.build_model("charlm-gpt").num_parameters()
    assert record["training"]["steps"] == spec["steps"] and record["made_by"].endswith(f"--steps {spec['steps']}")
    curve = record["curve"]
    assert len(curve["steps"]) == len(curve["cpu_seconds"]) == len(curve["val_loss"]) >= 8
    assert curve["steps"] == sorted(curve["steps"]) and curve["cpu_seconds"] == sorted(curve["cpu_seconds"])
    assert curve["val_loss"][-1] < curve["val_loss"][0] - 0.2           # it falls all the way (first point: 1/16 in)
    assert curve["val_loss"][-1] <= min(curve["val_loss"]) + 0.01        # and ends at (about) its lowest


def test_build_model_overrides_only_for_gpt():
    small = pretrained.build_model("charlm-gpt", num_layers=1)
    assert small.config.num_layers == 1
    with pytest.raises(ValueError, match="overrides apply to GPT checkpoints only"):
        pretrained.build_model("charlm-lstm", d_model=8)
