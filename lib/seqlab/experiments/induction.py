"""Notebook 14's experiment: in-context copying, a task where a small GPT beats an LSTM of its size.

Each sequence is a random string of ``length`` tokens from ``vocab`` symbols, a separator, then the same
string again. Only the second copy is scored: its tokens cannot be guessed (every symbol is equally likely),
but each one was seen exactly ``length + 1`` positions earlier. Attention can read that position directly;
an LSTM must carry all ``length`` random tokens in its fixed-size state until they are needed. A two-layer
model of attention that completes repeated text this way is what Olsson et al. (2022), *In-context Learning
and Induction Heads*, study; here the positions are learned, so the model may also look a fixed distance
back.

The "Why the Transformer won" section of notebook 14 shows the runs; its final cell asserts the margin.
"""

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
    """The task and the training budget, the same for both models.

    Chosen so that the outcome does not hang on the seed or the machine's arithmetic: at 150 steps the GPT copies
    every held-out token (accuracy 1.000, seeds 0-5) while the LSTM stays at chance (0.061-0.064, 1/16 = 0.0625),
    on a 2-core CPU with one thread, natively and under the "baseline" profile (seeds 0-2). The GPT already
    copies perfectly at 100 steps (seeds 0-5). The same LSTM does copy short strings: 0.95 of the second copy
    at length 4 and 0.60 at length 8 (seed 0, 150 steps); at length 24 it is still at chance after 1,000 steps.
    """

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
        """The accuracy of a uniform guess, ``1 / vocab``."""
        return 1.0 / self.vocab


@dataclass
class CopyRun:
    """One model trained on the copying task: what the notebook prints and plots."""

    model: str
    seed: int
    parameters: int
    accuracy: float                 # on the second copy of ``eval_size`` held-out sequences
    train_loss: list[float] = field(default_factory=list)   # second-copy loss (nats) per step
    seconds: float = 0.0


def copy_batch(n: int, config: CopyConfig, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``n`` sequences ``s, SEP, s`` as inputs and next-token targets, each ``(n, 2 L)``.

    The input is the whole sequence but its last token; the target at position ``t`` is the token at ``t + 1``,
    set to ``IGNORE`` for the first ``L`` positions (their targets are the rest of the first copy and the
    separator, which no model can know). So only the ``L`` tokens of the second copy count.
    """
    L, V = config.length, config.vocab
    s = torch.randint(0, V, (n, L), generator=generator)                        # (n, L) random strings
    sequence = torch.cat([s, torch.full((n, 1), V), s], dim=1)                   # (n, 2L + 1)
    x, y = sequence[:, :-1], sequence[:, 1:].clone()
    y[:, :L] = IGNORE
    return x, y


@torch.no_grad()
def copy_accuracy(model: torch.nn.Module, x: Tensor, y: Tensor) -> float:
    """Share of the second copy's tokens that the model's most likely next token gets right."""
    from seqlab.modes import evaluating

    with evaluating(model):
        logits = model(x)
    logits = logits[0] if isinstance(logits, tuple) else logits
    scored = y != IGNORE
    return (logits.argmax(-1)[scored] == y[scored]).double().mean().item()


class _Batches:
    """An endless stream of fresh training batches from one seeded generator."""

    def __init__(self, config: CopyConfig, seed: int):
        self.config, self.generator = config, torch.Generator().manual_seed(seed)

    def __iter__(self):
        while True:
            yield copy_batch(self.config.batch_size, self.config, self.generator)


def copy_model(kind: str, config: CopyConfig) -> torch.nn.Module:
    """``"gpt"``: seqlab's GPT, 2 blocks of width ``d_model``, 4 heads, causal; ``"lstm"``: a one-layer CharLM."""
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
    """Train one model on the copying task: weights from ``torch.manual_seed(seed)``, batches from a generator
    seeded with ``seed``, then its accuracy on held-out sequences (another generator, seeded ``10_000 + seed``).
    Runs inside ``fork_rng``, so torch's global generator is left as it was."""
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
    """The GPT and the LSTM of :func:`copy_model`, each trained with :func:`train_copy` for every seed:
    ``{(kind, seed): CopyRun}``. About 6 s per seed for both models on one CPU thread."""
    return {(kind, seed): train_copy(kind, seed, config) for seed in seeds for kind in ("gpt", "lstm")}


def uniform_loss(config: CopyConfig = CopyConfig()) -> float:
    """``ln vocab``: the second-copy loss of a model that has learned nothing but the symbols' frequencies."""
    return math.log(config.vocab)
