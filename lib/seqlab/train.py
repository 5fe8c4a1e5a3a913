"""The training loop the notebooks share: batch -> loss -> backward -> clip -> step, within a step or time budget.

Checkpoints are safetensors files (weights only) with a JSON metadata block.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, safe_open, save_file

from seqlab.checks import load_state_dict_strict
from seqlab.device import find_misplaced, module_device
from seqlab.modes import evaluating

Batch = Any  # a tensor, or a tuple/list/dict of tensors
LossFn = Callable[[torch.nn.Module, Batch], torch.Tensor]


# -- losses --------------------------------------------------------------------------------------
def lm_loss(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy (nats) for a language model that maps ids (B, T) to logits (B, T, V)."""
    x, y = batch
    logits = model(x)
    if isinstance(logits, tuple):  # models that also return their state
        logits = logits[0]
    if logits.dim() != 3 or logits.shape[:2] != y.shape:
        raise ValueError(f"lm_loss expects logits of shape (B, T, V) = ({y.shape[0]}, {y.shape[1]}, V) "
                         f"matching targets {tuple(y.shape)}, got {tuple(logits.shape)}")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def lm_loss_by_position(model: torch.nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Mean next-token cross-entropy (nats) at each position of the windows, over all ``batches``: shape (T,)."""
    total, count = None, 0
    with evaluating(model), torch.no_grad():
        for x, y in batches:
            logits = model(x)
            if isinstance(logits, tuple):
                logits = logits[0]
            if logits.dim() != 3 or logits.shape[:2] != y.shape:
                raise ValueError(f"lm_loss_by_position expects logits of shape (B, T, V) = ({y.shape[0]}, "
                                 f"{y.shape[1]}, V) matching targets {tuple(y.shape)}, got {tuple(logits.shape)}")
            nll = F.cross_entropy(logits.transpose(1, 2), y, reduction="none").double().sum(0)   # (T,)
            if total is not None and nll.shape != total.shape:
                raise ValueError(f"every batch must have windows of one length: {tuple(total.shape)} then "
                                 f"{tuple(nll.shape)}")
            total = nll if total is None else total + nll
            count += y.shape[0]
    if total is None:
        raise ValueError("lm_loss_by_position() got no batches")
    return total / count


# -- history -------------------------------------------------------------------------------------
@dataclass
class History:
    """What happened during :func:`train`: losses by step, evaluations, and why it stopped."""

    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    eval_seconds: list[float] = field(default_factory=list)   # training time before each evaluation (evals excluded)
    seconds: float = 0.0
    stopped_because: str = ""

    @property
    def final_eval_loss(self) -> float:
        if not self.eval_loss:
            raise ValueError("no evaluation was run: pass eval_batches= and eval_every= to train()")
        return self.eval_loss[-1]

    def plot(self, ax=None, *, label: str = "", smooth: int = 20):
        """Training loss (smoothed over ``smooth`` steps) and evaluation loss against step."""
        import matplotlib.pyplot as plt

        ax = ax if ax is not None else plt.gca()
        if self.train_loss:
            k = max(1, min(smooth, len(self.train_loss)))
            kernel = torch.ones(k) / k
            smoothed = F.conv1d(torch.tensor(self.train_loss)[None, None], kernel[None, None]).flatten()
            ax.plot(self.steps[k - 1:], smoothed.tolist(), label=f"{label} train".strip(), alpha=0.8)
        if self.eval_loss:
            ax.plot(self.eval_steps, self.eval_loss, "o-", label=f"{label} validation".strip())
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend()
        return ax


# -- device handling -----------------------------------------------------------------------------
def _tensors(batch: Batch) -> list[torch.Tensor]:
    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, dict):
        batch = list(batch.values())
    return [t for t in batch if isinstance(t, torch.Tensor)]


def to_device(batch: Batch, device: torch.device) -> Batch:
    """Move every tensor of a batch (tensor, tuple, list or dict) to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(t, device) for t in batch)
    return batch


def check_batch_device(model: torch.nn.Module, batch: Batch) -> None:
    """Raise a clear error if a batch tensor is not on the model's device."""
    misplaced = find_misplaced(model, _tensors(batch))
    if misplaced is not None:
        index, tensor, expected = misplaced
        raise RuntimeError(
            f"batch tensor {index} (shape {tuple(tensor.shape)}) is on {tensor.device}, but the model "
            f"{type(model).__name__} is on {expected}. Pass device={str(expected)!r} to train()/evaluate() "
            "to move batches there, or move the data yourself."
        )


# -- evaluation ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Evaluation:
    loss: float  # mean loss per batch (nats per token for lm_loss)
    perplexity: float  # exp(loss)
    batches: int


@torch.no_grad()
def evaluate(model: torch.nn.Module, batches: Iterable[Batch], loss_fn: LossFn = lm_loss, *,
             device: str | torch.device | None = None, max_batches: int | None = None) -> Evaluation:
    """Mean loss over ``batches`` (at most ``max_batches``) in eval mode, and its perplexity."""
    if device is not None:
        model.to(device)
    total, count = 0.0, 0
    with evaluating(model):
        for batch in batches:
            if max_batches is not None and count >= max_batches:
                break
            batch = to_device(batch, torch.device(device)) if device is not None else batch
            check_batch_device(model, batch)
            total += float(loss_fn(model, batch))
            count += 1
    if count == 0:
        raise ValueError("evaluate() got no batches")
    loss = total / count
    return Evaluation(loss=loss, perplexity=math.exp(min(loss, 700.0)), batches=count)


# -- learning-rate schedules ---------------------------------------------------------------------
LRSchedule = Callable[[int, float], float]   # (step, share of the budget spent) -> factor on the initial lr


def warmup_cosine(warmup_steps: int = 0, floor: float = 0.0) -> LRSchedule:
    r"""Linear warm-up over ``warmup_steps``, then cosine decay to ``floor``: a factor of the learning rate.

    After warm-up, :math:`\text{floor} + (1 - \text{floor}) \tfrac12 (1 + \cos \pi p)`, ``p`` the share of the budget spent.
    """
    if warmup_steps < 0 or not 0.0 <= floor <= 1.0:
        raise ValueError(f"warmup_steps must be >= 0 and floor in [0, 1], got {warmup_steps} and {floor}")

    def schedule(step: int, progress: float) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * min(max(progress, 0.0), 1.0)))

    return schedule


def set_lr_factor(optimizer: torch.optim.Optimizer, factor: float) -> None:
    """Set every parameter group's learning rate to ``factor`` times its initial one."""
    for group in optimizer.param_groups:
        group["lr"] = group.setdefault("initial_lr", group["lr"]) * factor


# -- training ------------------------------------------------------------------------------------
def train(model: torch.nn.Module, batches: Iterable[Batch], loss_fn: LossFn = lm_loss, *,
          optimizer: torch.optim.Optimizer | None = None, lr: float = 3e-3, max_steps: int | None = 1000,
          time_budget_s: float | None = None, clip_norm: float | None = 1.0,
          eval_batches: Iterable[Batch] | None = None, eval_every: int | None = None,
          eval_max_batches: int | None = 50, device: str | torch.device | None = None,
          seed: int | None = None, progress: bool = True, description: str = "training",
          lr_schedule: LRSchedule | None = None, clock: Callable[[], float] = time.perf_counter) -> History:
    """Train ``model`` for at most ``max_steps`` steps or ``time_budget_s`` seconds; returns a :class:`History`.

    ``max_steps=None`` needs ``time_budget_s``. ``batches`` restarts when exhausted. ``optimizer`` defaults
    to Adam at ``lr``; ``clip_norm`` clips the global gradient norm (None: no clipping). ``eval_batches`` are
    evaluated every ``eval_every`` steps and at the end. ``seed`` seeds torch during training (dropout), not
    model creation or data order. ``lr_schedule(step, progress)`` multiplies the initial rates, ``progress``
    being the share of the budget spent. ``clock`` measures the seconds (wall clock by default). With
    ``device=`` the model and each batch move there; without it, a batch on another device is an error.
    """
    from tqdm.auto import tqdm

    if max_steps is None and time_budget_s is None:
        raise ValueError("give max_steps, time_budget_s, or both: with neither, training would never stop")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    if seed is not None:
        torch.manual_seed(seed)
    if device is not None:
        device = torch.device(device)
        model.to(device)
    optimizer = optimizer if optimizer is not None else torch.optim.Adam(model.parameters(), lr=lr)
    history = History()
    model.train()
    start = clock()
    eval_time = 0.0
    batch_iter = iter(batches)
    bar = tqdm(total=max_steps, desc=description, disable=not progress, leave=False)

    def run_eval(step: int) -> None:
        nonlocal eval_time
        assert eval_batches is not None
        began = clock()
        history.eval_seconds.append(began - start - eval_time)
        result = evaluate(model, eval_batches, loss_fn, device=device, max_batches=eval_max_batches)
        history.eval_steps.append(step)
        history.eval_loss.append(result.loss)
        eval_time += clock() - began

    step = 0
    history.stopped_because = "max_steps"
    try:
        while max_steps is None or step < max_steps:
            if time_budget_s is not None and clock() - start >= time_budget_s:
                history.stopped_because = "time_budget_s"
                break
            try:
                batch = next(batch_iter)
            except StopIteration:
                batch_iter = iter(batches)
                try:
                    batch = next(batch_iter)
                except StopIteration:
                    raise ValueError("the batches iterable is empty") from None
            batch = to_device(batch, device) if device is not None else batch
            check_batch_device(model, batch)
            loss = loss_fn(model, batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"loss became {loss.item()} at step {step}; lower the learning rate "
                                         "or clip gradients (clip_norm)")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if lr_schedule is not None:
                progress = step / max_steps if max_steps is not None else 0.0
                if time_budget_s is not None:
                    progress = max(progress, (clock() - start) / time_budget_s)
                set_lr_factor(optimizer, lr_schedule(step, min(progress, 1.0)))
            if clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            optimizer.step()
            step += 1
            history.steps.append(step)
            history.train_loss.append(loss.item())
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
            if eval_batches is not None and eval_every and step % eval_every == 0:
                run_eval(step)
        if eval_batches is not None and (not history.eval_steps or history.eval_steps[-1] != step) and step > 0:
            run_eval(step)
    finally:
        bar.close()
        history.seconds = clock() - start
    return history


# -- checkpoints ---------------------------------------------------------------------------------
def save_checkpoint(path: str | Path, model: torch.nn.Module, metadata: dict[str, Any] | None = None) -> Path:
    """Write the model's weights and a JSON-serialisable ``metadata`` dict to a safetensors file, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().to("cpu").contiguous().clone() for name, t in model.state_dict().items()}
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata={"seqlab": json.dumps(metadata or {}, sort_keys=True)})
    tmp.replace(path)
    return path


def read_checkpoint_metadata(path: str | Path) -> dict[str, Any]:
    """The metadata dict stored by :func:`save_checkpoint`, without loading the weights."""
    with safe_open(str(path), framework="pt") as f:
        return json.loads((f.metadata() or {}).get("seqlab", "{}"))


def load_checkpoint(path: str | Path, model: torch.nn.Module) -> dict[str, Any]:
    """Load weights saved by :func:`save_checkpoint` into ``model`` strictly and return the metadata.

    Raises :class:`seqlab.checks.StateDictMismatch` on a missing, extra or reshaped key.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}; the script scripts/make_checkpoints.py makes the "
                                "course's checkpoints")
    state = load_file(str(path), device=str(module_device(model)))
    load_state_dict_strict(model, state, source=f"checkpoint {path.name}")
    return read_checkpoint_metadata(path)
