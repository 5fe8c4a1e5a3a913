"""The long-range memory experiment of notebooks 4 and 5: RNN, LSTM and GRU on the adding problem.

Every cell type gets the same batches (:func:`seqlab.data.adding_problem`), seed, optimiser and step count.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.colours import MODEL_STYLES
from seqlab.data.synthetic import adding_problem
from seqlab.device import torch_threads
from seqlab.models.regressor import SequenceRegressor
from seqlab.nn import CELLS
from seqlab.train import History, train

__all__ = ["AddingBatches", "AddingConfig", "MemoryRun", "TOLERANCE",
           "mse_loss", "plot_runs", "tolerance_accuracy", "train_adding", "trivial_baseline"]

TOLERANCE = 0.04            # on the raw sum (range 2): twice as strict as 1997's 0.04 on a range of 1
_TRAIN_SEED_STRIDE = 1_000_003   # batch k of seed s is drawn with seed s * stride + k
_EVAL_SEED = 2**31 - 1           # the validation set: never one of the training batches


@dataclass(frozen=True)
class AddingConfig:
    """One setting of the experiment; every model in a comparison gets the same one."""

    length: int = 50            # T, time steps per sequence
    hidden_size: int = 32       # H, units of the recurrent layer
    batch_size: int = 64
    steps: int = 1000           # optimiser steps (fixed: the result does not depend on the machine)
    lr: float = 1e-2            # Adam
    clip_norm: float = 1.0      # global gradient-norm clipping
    eval_size: int = 1000       # validation sequences
    eval_every: int = 25        # steps between validation measurements
    seed: int = 0               # model initialisation and training data

    def __post_init__(self) -> None:
        for name in ("length", "hidden_size", "batch_size", "steps", "eval_size", "eval_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"AddingConfig.{name} must be a positive int, got {value!r}")
        if self.length < 2:
            raise ValueError(f"AddingConfig.length must be at least 2 (one marker per half), got {self.length}")
        if not self.lr > 0:
            raise ValueError(f"AddingConfig.lr must be positive, got {self.lr}")


class AddingBatches:
    """Training batches ``(x (B, T, 2), y (B,))`` of the adding problem; each iteration starts from the same first batch.

    :meth:`validation` draws with a seed no training batch uses.
    """

    def __init__(self, batch_size: int, length: int, *, seed: int = 0):
        if batch_size < 1 or length < 2:
            raise ValueError(f"need batch_size >= 1 and length >= 2, got batch_size={batch_size}, length={length}")
        self.batch_size, self.length, self.seed = batch_size, length, seed

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        k = 0
        while True:
            yield adding_problem(self.batch_size, self.length, seed=self.seed * _TRAIN_SEED_STRIDE + k)
            k += 1

    def validation(self, n: int) -> tuple[Tensor, Tensor]:
        return adding_problem(n, self.length, seed=_EVAL_SEED)


def mse_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    """Mean squared error of ``model(x)`` against ``y``: the training loss of the adding problem."""
    x, y = batch
    y_hat = model(x)
    if y_hat.shape != y.shape:
        raise ValueError(f"mse_loss expects predictions of shape {tuple(y.shape)} (one per sequence), "
                         f"got {tuple(y_hat.shape)}")
    return F.mse_loss(y_hat, y)


def tolerance_accuracy(y_hat: Tensor, y: Tensor, tol: float = TOLERANCE) -> float:
    """Fraction of sequences whose prediction is within ``tol`` of the target."""
    if y_hat.shape != y.shape:
        raise ValueError(f"y_hat and y must have the same shape, got {tuple(y_hat.shape)} and {tuple(y.shape)}")
    return float(((y_hat - y).abs() < tol).float().mean())


def trivial_baseline(y: Tensor) -> dict[str, float]:
    """``{'mse': ..., 'accuracy': ...}`` on ``y`` of always predicting 1.0, the expected sum, whatever the input."""
    guess = torch.ones_like(y)
    return {"mse": float(F.mse_loss(guess, y)), "accuracy": tolerance_accuracy(guess, y)}


@dataclass
class MemoryRun:
    """The outcome of :func:`train_adding` for one cell type."""

    cell: str
    config: AddingConfig
    history: History                      # train loss per step; eval_loss = validation MSE
    mse: float                            # final validation MSE
    accuracy: float                       # final fraction within TOLERANCE
    parameters: int
    baseline: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return {"rnn": "RNN", "lstm": "LSTM", "gru": "GRU"}[self.cell]

    @property
    def seconds(self) -> float:
        return self.history.seconds

    def summary(self) -> str:
        return (f"{self.label:>4}: {self.parameters:5d} parameters, validation MSE {self.mse:.4f} "
                f"(baseline {self.baseline['mse']:.3f}), within ±{TOLERANCE}: {self.accuracy:.1%} "
                f"(baseline {self.baseline['accuracy']:.1%})")

    def to_dict(self) -> dict:
        return {"cell": self.cell, "config": asdict(self.config), "mse": self.mse, "accuracy": self.accuracy,
                "parameters": self.parameters, "baseline": dict(self.baseline)}


def train_adding(cell: str, config: AddingConfig | None = None, *, progress: bool = False,
                 threads: int | None = 1, **overrides) -> MemoryRun:
    """Train a :class:`SequenceRegressor` of type ``cell`` on the adding problem; returns a :class:`MemoryRun`.

    ``config`` (default :class:`AddingConfig`) with fields replaced by ``overrides``, e.g.
    ``train_adding("lstm", steps=300)``. Adam, MSE loss and clipping on :class:`AddingBatches`; validation
    MSE every ``eval_every`` steps on ``eval_size`` sequences. ``threads=1`` (default) trains on one CPU
    thread, restored afterwards, so results do not depend on the machine's thread count; ``None`` leaves
    torch's setting alone.
    """
    if cell not in CELLS:
        raise ValueError(f"cell must be one of {CELLS}, got {cell!r}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive int or None, got {threads!r}")
    config = replace(config or AddingConfig(), **overrides)
    torch.manual_seed(config.seed)
    model = SequenceRegressor(cell, 2, config.hidden_size)
    data = AddingBatches(config.batch_size, config.length, seed=config.seed)
    x_val, y_val = data.validation(config.eval_size)
    with torch_threads(threads):
        history = train(model, data, mse_loss, lr=config.lr, max_steps=config.steps, clip_norm=config.clip_norm,
                        eval_batches=[(x_val, y_val)], eval_every=config.eval_every, seed=config.seed,
                        progress=progress, description=f"{cell} on the adding problem")
        model.eval()
        with torch.no_grad():
            y_hat = model(x_val)
    run = MemoryRun(cell=cell, config=config, history=history, mse=float(F.mse_loss(y_hat, y_val)),
                    accuracy=tolerance_accuracy(y_hat, y_val),
                    parameters=sum(p.numel() for p in model.parameters()), baseline=trivial_baseline(y_val))
    run.model = model  # type: ignore[attr-defined]
    return run


def plot_runs(runs: Sequence[MemoryRun], ax=None, *, title: str | None = None):
    """Validation MSE against training step for each run (log scale), with the trivial baseline."""
    import matplotlib.pyplot as plt

    if not runs:
        raise ValueError("plot_runs needs at least one MemoryRun")
    ax = ax if ax is not None else plt.subplots(figsize=(7, 3.6))[1]
    for run in runs:
        h = run.history
        colour, marker = MODEL_STYLES[run.cell]
        ax.plot(h.eval_steps, h.eval_loss, "-", marker=marker, ms=3, color=colour,
                label=f"{run.label} (final MSE {run.mse:.3g})")
    baseline = runs[0].baseline["mse"]
    ax.axhline(baseline, color="tab:red", linestyle=":", label=f"always predict 1.0 (MSE {baseline:.3f})")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("validation MSE (log scale)")
    config = runs[0].config
    ax.set_title(title or f"Adding problem, T = {config.length}: {config.hidden_size} units, Adam lr {config.lr:g}, "
                          f"batch {config.batch_size}", fontsize=10)
    ax.legend(fontsize=9)
    return ax
