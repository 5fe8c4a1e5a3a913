"""seqlab.train and seqlab.device: the shared loop, evaluation, checkpoints, device choice."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.data import LMBatches
from seqlab.device import check_same_device, get_device, seed_everything
from seqlab.train import (
    History, evaluate, evaluating, lm_loss, load_checkpoint, read_checkpoint_metadata, save_checkpoint, train,
)


class BigramLM(torch.nn.Module):
    """The smallest language model: next-id logits from the current id alone."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.table = torch.nn.Embedding(vocab_size, vocab_size)

    def forward(self, x):  # (B, T) -> (B, T, V)
        return self.table(x)


def _cyclic_ids(n=2000, period=7):
    return torch.arange(n) % period  # perfectly predictable from the previous id


def _run(seed, **kwargs):
    seed_everything(seed)
    model = BigramLM(7)
    batches = LMBatches(_cyclic_ids(), batch_size=8, seq_len=16, seed=seed)
    history = train(model, batches, lm_loss, lr=0.1, progress=False, **kwargs)
    return model, history


def test_training_learns_a_predictable_sequence():
    model, history = _run(0, max_steps=150)
    assert history.stopped_because == "max_steps" and len(history.train_loss) == 150
    assert history.train_loss[0] > 1.5 and history.train_loss[-1] < 0.05
    result = evaluate(model, LMBatches(_cyclic_ids(), 8, 16, shuffle=False))
    assert result.perplexity == pytest.approx(math.exp(result.loss))
    assert result.perplexity < 1.1  # almost certain of every next id


def test_training_is_deterministic_under_a_seed():
    _, a = _run(3, max_steps=20)
    _, b = _run(3, max_steps=20)
    assert a.train_loss == b.train_loss


def test_time_budget_stops_early():
    _, history = _run(0, max_steps=None, time_budget_s=0.3)
    assert history.stopped_because == "time_budget_s"
    assert 0.3 <= history.seconds < 5.0
    assert len(history.steps) > 0
    with pytest.raises(ValueError, match="would never stop"):
        _run(0, max_steps=None)


def test_periodic_and_final_evaluation():
    batches = LMBatches(_cyclic_ids(), 8, 16, shuffle=False)
    _, history = _run(0, max_steps=25, eval_batches=batches, eval_every=10)
    assert history.eval_steps == [10, 20, 25]
    assert history.final_eval_loss == history.eval_loss[-1] < history.eval_loss[0]
    with pytest.raises(ValueError, match="no evaluation was run"):
        History().final_eval_loss


def test_gradient_clipping_bounds_the_update():
    seed_everything(0)
    model = BigramLM(7)
    before = model.table.weight.detach().clone()
    batches = [(torch.tensor([[0, 1]]), torch.tensor([[1, 2]]))]
    train(model, batches, optimizer=torch.optim.SGD(model.parameters(), lr=1.0), max_steps=1,
          clip_norm=1e-3, progress=False)
    assert (model.table.weight - before).norm().item() == pytest.approx(1e-3, rel=1e-3)


def test_gradient_clipping_uses_the_global_norm_over_all_parameters():
    """clip_norm bounds the norm of the whole gradient, every parameter tensor together (as
    torch.nn.utils.clip_grad_norm_ does), and keeps its direction. Clipping each tensor by its own
    norm (notebook 3's typical mistake) lets the step grow with the number of tensors and turns it;
    a model with one parameter tensor, like BigramLM above, cannot tell the two apart."""
    model = torch.nn.Module()
    model.a = torch.nn.Parameter(torch.zeros(3))
    model.b = torch.nn.Parameter(torch.zeros(2))
    gradient = torch.tensor([3.0, 3.0, 3.0, 40.0, 40.0])                # dL/da, then dL/db

    def loss_fn(m, batch):
        return 3.0 * m.a.sum() + 40.0 * m.b.sum()

    train(model, [torch.zeros(1)], loss_fn, optimizer=torch.optim.SGD(model.parameters(), lr=1.0), max_steps=1,
          clip_norm=1.0, progress=False)
    step = -torch.cat([model.a.detach(), model.b.detach()])             # SGD from zero: minus the clipped gradient
    assert step.norm().item() == pytest.approx(1.0, rel=1e-5), \
        f"the update's global norm is {step.norm().item():.4f}, not clip_norm = 1 (each tensor clipped on its own?)"
    assert torch.allclose(step, gradient / gradient.norm(), atol=1e-6), \
        f"clipping turned the gradient: step {step.tolist()}, expected {(gradient / gradient.norm()).tolist()}"


def test_non_finite_loss_stops_with_advice():
    def bad_loss(model, batch):
        return model(batch[0]).sum() * float("nan")

    with pytest.raises(FloatingPointError, match="lower the learning rate"):
        train(BigramLM(3), [(torch.tensor([[0]]), torch.tensor([[1]]))], bad_loss, max_steps=2, progress=False)


def test_model_and_data_on_different_devices_is_a_clear_error():
    model = BigramLM(5)  # on the CPU
    elsewhere = (torch.zeros(2, 3, dtype=torch.long, device="meta"), torch.zeros(2, 3, dtype=torch.long, device="meta"))
    with pytest.raises(RuntimeError, match=r"batch tensor 0 \(shape \(2, 3\)\) is on meta, but the model BigramLM is on cpu"):
        train(model, [elsewhere], max_steps=1, progress=False)
    with pytest.raises(RuntimeError, match="is on meta, but the model BigramLM is on cpu"):
        evaluate(model, [elsewhere])
    with pytest.raises(RuntimeError, match=r"h0 is on meta but the model BigramLM is on cpu"):
        check_same_device(model, elsewhere[0], names=("h0",))


def test_lm_loss_checks_shapes():
    with pytest.raises(ValueError, match=r"logits of shape \(B, T, V\) = \(2, 5, V\)"):
        lm_loss(lambda x: torch.zeros(2, 4), (None, torch.zeros(2, 5, dtype=torch.long)))


def test_checkpoint_round_trip_with_metadata(tmp_path):
    model, _ = _run(0, max_steps=5)
    path = save_checkpoint(tmp_path / "bigram.safetensors", model, {"val_loss": 1.25, "steps": 5})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bigram.safetensors"]  # no temporary left
    fresh = BigramLM(7)
    meta = load_checkpoint(path, fresh)
    assert meta == {"val_loss": 1.25, "steps": 5} == read_checkpoint_metadata(path)
    assert torch.equal(fresh.table.weight, model.table.weight)


def test_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="scripts/make_checkpoints.py"):
        load_checkpoint(tmp_path / "nope.safetensors", BigramLM(3))
    path = save_checkpoint(tmp_path / "small.safetensors", BigramLM(3))
    with pytest.raises(ValueError, match=r"table.weight: checkpoint \(3, 3\) vs model \(4, 4\)"):
        load_checkpoint(path, BigramLM(4))


# -- device --------------------------------------------------------------------------------------
def test_device_override_by_environment(monkeypatch):
    monkeypatch.setenv("SEQLAB_DEVICE", "cpu")
    assert get_device() == torch.device("cpu")
    monkeypatch.setenv("SEQLAB_DEVICE", "tpu")
    with pytest.raises(ValueError, match=r"\$SEQLAB_DEVICE names an unknown device 'tpu'"):
        get_device()
    monkeypatch.delenv("SEQLAB_DEVICE")
    assert get_device().type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_asking_for_missing_cuda_is_an_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)      # a machine without CUDA, on any machine
    with pytest.raises(RuntimeError, match="torch sees no CUDA device"):
        get_device("cuda")


def test_seed_everything_repeats_random_streams():
    seed_everything(5)
    a = torch.rand(3)
    g = seed_everything(5)
    assert torch.equal(a, torch.rand(3))
    assert torch.equal(torch.rand(2, generator=g), torch.rand(2, generator=torch.Generator().manual_seed(5)))


@pytest.mark.parametrize("training", [True, False])
def test_evaluating_turns_dropout_off_and_restores_each_submodules_mode(training):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 2))
    model.train(training)
    model[2].eval()                                         # a part kept in eval mode stays so
    before = [m.training for m in model.modules()]
    x = torch.ones(3, 4)
    with evaluating(model) as m:
        assert m is model and not any(sub.training for sub in model.modules())
        assert torch.equal(model(x), model(x))              # no dropout inside
    assert [m.training for m in model.modules()] == before


def test_evaluating_restores_the_mode_when_the_block_raises():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.1)).train()
    with pytest.raises(RuntimeError, match="inside"):
        with evaluating(model):
            raise RuntimeError("inside")
    assert all(m.training for m in model.modules())


def test_charlm_generate_samples_in_eval_mode_and_gives_the_mode_back():
    from seqlab.models import CharLM, CharLMConfig

    torch.manual_seed(0)
    model = CharLM(CharLMConfig(vocab_size=5, embed_size=4, hidden_size=6, num_layers=2, dropout=0.5)).train()
    prompt = torch.tensor([1, 2])
    runs = [model.generate(prompt, 8, generator=torch.Generator().manual_seed(3)) for _ in range(2)]
    assert torch.equal(runs[0], runs[1])                    # dropout off: the same seed, the same text
    assert all(m.training for m in model.modules())
    with pytest.raises(ValueError, match="prompt must be a non-empty 1-D tensor"):
        model.generate(torch.tensor([], dtype=torch.long), 3)
    assert model.training


def test_warmup_cosine_schedule_and_its_use_in_train():
    from seqlab.train import warmup_cosine

    schedule = warmup_cosine(warmup_steps=4, floor=0.1)
    assert [schedule(step, 0.0) for step in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert schedule(10, 0.0) == 1.0 and schedule(10, 1.0) == pytest.approx(0.1)
    assert schedule(10, 0.5) == pytest.approx(0.55)
    with pytest.raises(ValueError, match="floor in"):
        warmup_cosine(floor=2.0)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    seen = []
    original_step = optimizer.step

    def step_and_record(*args, **kwargs):
        seen.append(optimizer.param_groups[0]["lr"])
        return original_step(*args, **kwargs)

    optimizer.step = step_and_record
    batches = [(torch.randn(4, 3), torch.randn(4, 1))]
    train(model, batches, lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), optimizer=optimizer, max_steps=10,
          progress=False, lr_schedule=warmup_cosine(warmup_steps=2, floor=0.0))
    assert seen[:2] == [0.25, 0.5]                                    # warm-up: (step + 1) / 2 of 0.5
    assert seen[2] == pytest.approx(0.5 * 0.5 * (1 + math.cos(math.pi * 0.2)))
    assert seen[-1] == pytest.approx(0.5 * 0.5 * (1 + math.cos(math.pi * 0.9)))


def test_eval_seconds_exclude_the_evaluations_and_the_clock_is_pluggable():
    ticks = iter(range(1000))
    model = torch.nn.Linear(3, 1)
    batches = [(torch.randn(4, 3), torch.randn(4, 1))]
    loss_fn = lambda m, b: ((m(b[0]) - b[1]) ** 2).mean()                     # noqa: E731
    history = train(model, batches, loss_fn, max_steps=4, progress=False, eval_batches=batches, eval_every=2,
                    clock=lambda: float(next(ticks)))
    # a fake clock that ticks once per reading: start 0; evaluation 1 reads 1 and 2, evaluation 2 reads 3 and 4,
    # so training before them took 1 and 3 - 1 (the first evaluation's tick excluded) = 2 ticks; the end reads 5
    assert history.eval_steps == [2, 4] and history.eval_seconds == [1.0, 2.0] and history.seconds == 5.0


def test_notebook_show_puts_the_alt_text_on_the_figure(monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import IPython.display

    from seqlab.notebook import show

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, metadata=None: shown.append((obj, metadata)))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    show(fig, "A line falling from 1 at x = 0 to 0 at x = 1: the loss halves twice.")
    assert shown == [(fig, {"image/png": {"alt": "A line falling from 1 at x = 0 to 0 at x = 1: the loss halves twice."}})]
    assert not plt.fignum_exists(fig.number)          # closed: not drawn a second time at the cell's end
    untitled = plt.figure()
    with pytest.raises(ValueError, match="alt text of a sentence or more"):
        show(untitled, "a plot")
    plt.close(untitled)   # other tests in this process check that no figure is left open


def test_torch_threads_sets_the_count_for_the_block_and_restores_it_on_error():
    from seqlab.device import torch_threads

    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="inside"):
        with torch_threads(1):
            assert torch.get_num_threads() == 1
            raise RuntimeError("inside")
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before
