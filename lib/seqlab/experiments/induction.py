"""Notebook 14's experiment: in-context copying ``s, SEP, s`` (scored on the second copy), where a small GPT
beats an LSTM of its size."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import Tensor

IGNORE = -100          # F.cross_entropy's default ignore_index: lm_loss skips the first copy and the separator


@dataclass(frozen=True)
class CopyConfig:
    """The task and budget for both models, chosen so that the outcome hangs on neither seed nor machine."""

    length: int = 24            # L: tokens in each copy
    vocab: int = 16             # random symbols; the separator is one more token, id ``vocab``
    steps: int = 150
    batch_size: int = 32
    lr: float = 3e-3            # Adam, gradients clipped at norm 1.0
    eval_size: int = 1000       # held-out sequences for the accuracy
    d_model: int = 64           # GPT: 2 blocks, 4 heads, learned positions
    lstm_hidden: int = 144      # LSTM: one layer, embedding 32; about the GPT's parameter count
    lstm_embed: int = 32

    @property
    def chance(self) -> float:
        """The accuracy of a uniform guess."""
        return 1.0 / self.vocab


@dataclass
class CopyRun:
    """One model trained on the copying task."""

    model: str
    seed: int
    parameters: int
    accuracy: float                 # on the second copy of ``eval_size`` held-out sequences
    train_loss: list[float] = field(default_factory=list)   # second-copy loss (nats) per step
    seconds: float = 0.0


def copy_batch(n: int, config: CopyConfig, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``n`` sequences ``s, SEP, s``: inputs and targets ``(n, 2 L)``, targets ``IGNORE`` on the first copy."""
    L, V = config.length, config.vocab
    s = torch.randint(0, V, (n, L), generator=generator)                        # (n, L) random strings
    sequence = torch.cat([s, torch.full((n, 1), V), s], dim=1)                   # (n, 2L + 1)
    x, y = sequence[:, :-1], sequence[:, 1:].clone()
    y[:, :L] = IGNORE
    return x, y


@torch.no_grad()
def copy_accuracy(model: torch.nn.Module, x: Tensor, y: Tensor) -> float:
    """Argmax accuracy on the second copy."""
    from seqlab.modes import evaluating

    with evaluating(model):
        logits = model(x)
    logits = logits[0] if isinstance(logits, tuple) else logits
    scored = y != IGNORE
    return (logits.argmax(-1)[scored] == y[scored]).double().mean().item()


class _Batches:
    """Endless seeded training batches."""

    def __init__(self, config: CopyConfig, seed: int):
        self.config, self.generator = config, torch.Generator().manual_seed(seed)

    def __iter__(self):
        while True:
            yield copy_batch(self.config.batch_size, self.config, self.generator)


def copy_model(kind: str, config: CopyConfig) -> torch.nn.Module:
    """``"gpt"`` (2 blocks, 4 heads) or ``"lstm"`` (a one-layer CharLM)."""
    if kind == "gpt":
        from seqlab.models.gpt import GPT, GPTConfig

        return GPT(GPTConfig(vocab_size=config.vocab + 1, max_len=2 * config.length, d_model=config.d_model,
                             num_layers=2, nhead=4))
    if kind == "lstm":
        from seqlab.models.charlm import CharLM, CharLMConfig

        return CharLM(CharLMConfig(vocab_size=config.vocab + 1, cell="lstm", embed_size=config.lstm_embed,
                                   hidden_size=config.lstm_hidden))
    raise ValueError(f"unknown model {kind!r}; expected 'gpt' or 'lstm'")


def train_copy(kind: str, seed: int, config: CopyConfig = CopyConfig()) -> CopyRun:
    """One :class:`CopyRun`, everything seeded by ``seed``; torch's generator is left alone."""
    from seqlab.train import lm_loss, train

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = copy_model(kind, config)
        history = train(model, _Batches(config, seed), lm_loss, lr=config.lr, max_steps=config.steps,
                        clip_norm=1.0, progress=False)
        x, y = copy_batch(config.eval_size, config, torch.Generator().manual_seed(10_000 + seed))
        accuracy = copy_accuracy(model, x, y)
    return CopyRun(model=kind, seed=seed, parameters=sum(p.numel() for p in model.parameters()),
                   accuracy=accuracy, train_loss=list(history.train_loss), seconds=history.seconds)


@lru_cache(maxsize=2)
def measure_induction(seeds: tuple[int, ...] = (0, 1),
                      config: CopyConfig = CopyConfig()) -> dict[tuple[str, int], CopyRun]:
    """``{(kind, seed): CopyRun}`` for both models and every seed."""
    return {(kind, seed): train_copy(kind, seed, config) for seed in seeds for kind in ("gpt", "lstm")}


def uniform_loss(config: CopyConfig = CopyConfig()) -> float:
    """``ln vocab``: the second-copy loss of a uniform guess."""
    return math.log(config.vocab)
