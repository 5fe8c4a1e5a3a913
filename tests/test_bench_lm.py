"""scripts/bench_lm.py cannot rot: a two-step run of every recipe writes a complete record, and the recorded
run under data/bench/ is the one notebook 15 draws (its fields are there and consistent)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_lm", ROOT / "scripts" / "bench_lm.py")
bench_lm = importlib.util.module_from_spec(_spec)
sys.modules["bench_lm"] = bench_lm                   # its dataclass looks its module up while being defined
_spec.loader.exec_module(bench_lm)


def test_a_step_budget_run_of_every_recipe_writes_the_curves(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench_lm.main(["--steps", "2", "--points", "2", "--subset", "1", "--full", "2", "--recipes",
                          *bench_lm.ALL_RECIPES, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "nanogpt-baby - charlm-gpt (nats/char)" in printed and "val loss" in printed
    record = json.loads(out.read_text())
    assert [r["recipe"] for r in record["results"]] == list(bench_lm.ALL_RECIPES)
    for result in record["results"]:
        curve = result["curve"]
        assert result["steps"] == 2 and curve["steps"] == [0, 1, 2]
        assert len(curve["seconds"]) == len(curve["val_loss"]) == 3
        assert curve["val_loss"][0] == pytest.approx(math.log(84), abs=0.3), "an untrained model guesses uniformly"
    assert record["budget"]["steps"] == 2 and record["machine"]["threads"] == 1
    assert record["command"].startswith("python scripts/bench_lm.py --steps 2")


def test_nanogpt_baby_is_built_from_torch_nn_with_nanogpts_schedule():
    recipe = bench_lm.make_recipe("nanogpt-baby", 84)
    model = recipe.model
    assert all(isinstance(b, torch.nn.TransformerEncoderLayer) for b in model.blocks) and len(model.blocks) == 4
    assert model.lm_head.weight is model.wte.weight
    assert recipe.description["parameters"] == sum(p.numel() for p in model.parameters())
    schedule = bench_lm.nanogpt_schedule()
    assert schedule(0, 0.0) == pytest.approx(1 / 101) and schedule(100, 0.0) == pytest.approx(1.0)
    assert schedule(2000, 0.0) == pytest.approx(0.1) and schedule(5000, 0.0) == pytest.approx(0.1)
    x = torch.randint(0, 84, (2, 64))
    logits = model.eval()(x)
    changed = x.clone()
    changed[:, 40] = (changed[:, 40] + 1) % 84
    assert torch.allclose(model(changed)[:, :40], logits[:, :40], atol=1e-5), "causal: no position reads ahead"


def test_recurrent_overrides_change_the_model_and_its_training_and_can_use_torchs_kernel():
    recipe = bench_lm.make_recipe("lstm", 84, recurrent_overrides={"hidden_size": 32, "num_layers": 2, "dropout": 0.1},
                                  recurrent_train={"batch_size": 4, "seq_len": 16, "lr": 1e-3}, recurrent_kernel="torch")
    assert isinstance(recipe.model.rnn, torch.nn.LSTM)                  # torch.nn's kernel, not seqlab's scan
    assert (recipe.model.rnn.hidden_size, recipe.model.rnn.num_layers) == (32, 2)
    assert (recipe.batch_size, recipe.seq_len) == (4, 16) and recipe.optimizer.param_groups[0]["lr"] == 1e-3
    assert "torch.nn" in recipe.description["built_from"] and recipe.description["config"]["hidden_size"] == 32
    default = bench_lm.make_recipe("gru", 84)
    assert not isinstance(default.model.rnn, torch.nn.GRU) and (default.batch_size, default.seq_len) == (32, 64)
    with pytest.raises(ValueError, match="batch_size.*got \\['epochs'\\]"):
        bench_lm.make_recipe("lstm", 84, recurrent_train={"epochs": 3})


def test_a_gpu_run_needs_the_wall_clock_and_a_gpu(capsys):
    with pytest.raises(SystemExit):
        bench_lm.main(["--device", "cuda", "--clock", "cpu", "--steps", "1"])
    assert "needs the wall clock" in capsys.readouterr().err
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            bench_lm.main(["--device", "cuda", "--steps", "1"])
        assert "no CUDA device" in capsys.readouterr().err


def test_gpt_overrides_are_parsed_with_their_types():
    assert bench_lm.parse_overrides(["d_model=96", "positional=rope", "fused=false", "dropout=0.1"]) == {
        "d_model": 96, "positional": "rope", "fused": False, "dropout": 0.1}
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        bench_lm.parse_overrides(["d_model"])


@pytest.mark.parametrize("name, recipes, seconds", [("lm-60s.json", {"nanogpt-baby", "charlm-gpt", "lstm"}, 60),
                                                    ("lm-lstm-1200s.json", {"lstm"}, 1200),
                                                    ("lm-gru-rnn-1200s.json", {"gru", "rnn"}, 1200),
                                                    ("budget-steps/lstm-300s.json", {"lstm"}, None),
                                                    ("budget-steps/gru-300s.json", {"gru"}, None),
                                                    ("budget-steps/rnn-300s.json", {"rnn"}, None),
                                                    ("budget-steps/gpt-300s.json", {"charlm-gpt"}, None),
                                                    ("budget-steps/lstm-1200s.json", {"lstm"}, None),
                                                    ("budget-steps/gru-1200s.json", {"gru"}, None)])
def test_the_recorded_runs_are_complete(name, recipes, seconds):
    """data/bench/ holds the runs notebook 15 draws: one minute of each recipe, 20 minutes of each recurrent one,
    and five minutes' worth of steps of each with the same (decaying) schedule."""
    record = json.loads((ROOT / "data" / "bench" / name).read_text())
    by = {r["recipe"]: r for r in record["results"]}
    assert recipes <= set(by) and record["budget"]["seconds"] == seconds
    assert record["budget"]["clock"] in ("cpu", "wall") and record["machine"]["date"]
    for result in by.values():
        curve = result["curve"]
        assert len(curve["seconds"]) == len(curve["steps"]) == len(curve["val_loss"])
        assert curve["seconds"] == sorted(curve["seconds"]) and curve["steps"] == sorted(curve["steps"])
        if seconds is None:                                     # a budget in steps, the rate decayed to its end
            assert result["steps"] == record["budget"]["steps"] == curve["steps"][-1]
            assert result["setup"]["schedule"] != "constant"
        else:
            assert result["seconds"] >= 0.95 * seconds
    if "nanogpt-baby" not in by:
        return
    key = "nanogpt-baby - charlm-gpt (nats/char)"
    assert record["comparisons"][key] == pytest.approx(by["nanogpt-baby"]["val_loss"] - by["charlm-gpt"]["val_loss"],
                                                       abs=1e-4)
