"""seqlab.long_range: the adding-problem experiment of notebooks 4-5 is fair, deterministic and checked."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from seqlab.data import adding_problem  # noqa: E402
from seqlab.long_range import (  # noqa: E402
    AddingBatches, AddingConfig, mse_loss, plot_runs, tolerance_accuracy, train_adding, trivial_baseline,
)
from seqlab.models import SequenceRegressor  # noqa: E402

TINY = AddingConfig(length=6, hidden_size=4, batch_size=8, steps=6, eval_size=32, eval_every=3)


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_regressor_reads_a_sequence_and_predicts_one_number(cell):
    torch.manual_seed(0)
    model = SequenceRegressor(cell, 2, 5)
    x, y = adding_problem(3, 7, seed=1)
    y_hat = model(x)
    assert y_hat.shape == (3,)
    y_hat2, trace = model(x, return_trace=True)
    assert torch.equal(y_hat, y_hat2)
    assert trace.get("h").shape == (3, 7, 5)
    # only the last hidden state is read: the prediction is the read-out of h_T
    assert torch.allclose(model.readout(trace.get("h")[:, -1]).squeeze(-1), y_hat, atol=1e-6)


def test_regressor_rejects_bad_input_with_the_expected_shape():
    model = SequenceRegressor("lstm", 2, 3)
    with pytest.raises(ValueError, match=r"expects x of shape \(B, T, 2\), got \(4, 2\)"):
        model(torch.zeros(4, 2))
    with pytest.raises(ValueError, match=r"\(B, T, 2\), got \(1, 5, 3\)"):
        model(torch.zeros(1, 5, 3))
    with pytest.raises(ValueError, match="cell must be one of"):
        SequenceRegressor("transformer")


def test_batches_are_the_same_on_every_pass_and_never_the_validation_set():
    data = AddingBatches(4, 10, seed=3)
    first = [b for _, b in zip(range(3), data)]
    again = [b for _, b in zip(range(3), data)]
    for (x1, y1), (x2, y2) in zip(first, again):
        assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(first[0][0], first[1][0]), "a fresh batch each step"
    x_val, _ = data.validation(4)
    assert all(not torch.equal(x_val, x) for x, _ in first)
    assert not torch.equal(AddingBatches(4, 10, seed=4).__iter__().__next__()[0], first[0][0])
    with pytest.raises(ValueError, match="length >= 2"):
        AddingBatches(4, 1)


def test_trivial_baseline_matches_the_theory():
    _, y = adding_problem(20000, 20, seed=0)
    base = trivial_baseline(y)
    assert base["mse"] == pytest.approx(1 / 6, abs=0.01)
    # y = u1 + u2 has a triangular density, 1 at y = 1: P(|y - 1| < 0.04) = 0.08 - 0.04^2 = 0.0784
    assert base["accuracy"] == pytest.approx(0.0784, abs=0.01)


def test_tolerance_accuracy_and_loss_check_shapes():
    assert tolerance_accuracy(torch.tensor([1.0, 1.5]), torch.tensor([1.03, 1.0])) == 0.5
    with pytest.raises(ValueError, match="same shape"):
        tolerance_accuracy(torch.zeros(2), torch.zeros(3))
    model = SequenceRegressor("rnn", 2, 3)
    x, y = adding_problem(4, 5)
    assert math.isfinite(mse_loss(model, (x, y)).item())
    with pytest.raises(ValueError, match=r"predictions of shape \(4, 1\)"):
        mse_loss(model, (x, y[:, None]))


def test_config_rejects_nonsense():
    with pytest.raises(ValueError, match="steps must be a positive int"):
        AddingConfig(steps=0)
    with pytest.raises(ValueError, match="length must be at least 2"):
        AddingConfig(length=1)
    with pytest.raises(ValueError, match="lr must be positive"):
        AddingConfig(lr=0.0)


def test_training_is_deterministic_and_reports_everything():
    a = train_adding("gru", TINY)
    b = train_adding("gru", TINY)
    assert a.history.train_loss == b.history.train_loss and a.mse == b.mse
    assert a.history.steps == list(range(1, 7)) and a.history.eval_steps == [3, 6]
    assert a.history.eval_loss[-1] == pytest.approx(a.mse, rel=1e-5)
    assert a.parameters == 3 * (4 * 2 + 4 * 4 + 2 * 4) + 4 + 1
    assert set(a.baseline) == {"mse", "accuracy"} and 0 <= a.accuracy <= 1
    assert "GRU" in a.summary() and a.to_dict()["config"]["steps"] == 6
    assert isinstance(a.model, SequenceRegressor) and not a.model.training
    c = train_adding("gru", TINY, seed=1)
    assert c.history.train_loss != a.history.train_loss
    with pytest.raises(ValueError, match="cell must be one of"):
        train_adding("cnn", TINY)


def test_every_cell_type_sees_the_same_data_and_baseline():
    runs = [train_adding(cell, TINY, steps=1) for cell in ("rnn", "lstm", "gru")]
    assert runs[0].baseline == runs[1].baseline == runs[2].baseline
    ax = plot_runs(runs)
    assert len(ax.lines) == 4 and "RNN" in ax.get_legend().get_texts()[0].get_text()
    plt.close("all")
    with pytest.raises(ValueError, match="at least one"):
        plot_runs([])


def test_training_runs_on_one_thread_and_restores_the_setting():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        a = train_adding("rnn", TINY)
        assert torch.get_num_threads() == 2
        b = train_adding("rnn", TINY, threads=None)
        assert torch.get_num_threads() == 2 and b.mse == pytest.approx(a.mse, rel=1e-4)
        with pytest.raises(ValueError, match="threads must be a positive int or None"):
            train_adding("rnn", TINY, threads=0)
    finally:
        torch.set_num_threads(before)
