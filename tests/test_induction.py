"""seqlab.experiments.induction: the copying task's data, its masked loss, and a tiny run that learns.

The full margin (GPT copies, LSTM at chance) is asserted by notebook 14's final cell; here only what is fast.
"""

import math

import pytest
import torch

from seqlab.experiments.induction import (IGNORE, CopyConfig, copy_accuracy, copy_batch, copy_model,
                                          train_copy, uniform_loss)
from seqlab.train import lm_loss

CONFIG = CopyConfig(length=5, vocab=7)


def test_the_second_copy_repeats_the_first_after_a_separator():
    x, y = copy_batch(8, CONFIG, torch.Generator().manual_seed(0))
    L, V = CONFIG.length, CONFIG.vocab
    assert x.shape == y.shape == (8, 2 * L) and x.dtype == y.dtype == torch.long
    assert torch.equal(x[:, L], torch.full((8,), V))                         # the separator, its own id
    assert torch.equal(x[:, L + 1:], x[:, :L - 1])                           # input: the copy begins again
    assert int(x[:, :L].max()) < V and int(x[:, :L].min()) >= 0
    assert torch.equal(y[:, L:], x[:, :L])                                   # targets: the whole second copy
    assert torch.equal(y[:, L:-1], x[:, L + 1:])                             # ... which are the next inputs


def test_only_the_second_copy_is_scored():
    x, y = copy_batch(8, CONFIG, torch.Generator().manual_seed(1))
    assert (y[:, :CONFIG.length] == IGNORE).all() and (y[:, CONFIG.length:] != IGNORE).all()


class Oracle(torch.nn.Module):
    """Logits that put the right token first on the second copy; ``noise`` on the first copy's positions."""

    def __init__(self, y, noise):
        super().__init__()
        self.y, self.noise = y, noise

    def forward(self, x):
        logits = torch.zeros(*x.shape, CONFIG.vocab + 1)
        scored = self.y != IGNORE
        logits[scored] = 10 * torch.nn.functional.one_hot(self.y[scored], CONFIG.vocab + 1).float()
        logits[~scored] = self.noise * torch.randn(int((~scored).sum()), CONFIG.vocab + 1)
        return logits


def test_the_loss_and_the_accuracy_ignore_the_first_copy():
    x, y = copy_batch(16, CONFIG, torch.Generator().manual_seed(2))
    torch.manual_seed(0)
    quiet, loud = lm_loss(Oracle(y, 0.0), (x, y)), lm_loss(Oracle(y, 100.0), (x, y))
    assert torch.allclose(quiet, loud) and quiet.item() < 1e-3
    assert copy_accuracy(Oracle(y, 100.0), x, y) == 1.0
    wrong = y.clone()
    wrong[:, CONFIG.length:] = (wrong[:, CONFIG.length:] + 1) % CONFIG.vocab
    assert copy_accuracy(Oracle(wrong, 0.0), x, y) == 0.0


def test_the_two_models_have_about_the_same_size():
    config = CopyConfig()
    gpt, lstm = (sum(p.numel() for p in copy_model(kind, config).parameters()) for kind in ("gpt", "lstm"))
    assert abs(gpt - lstm) / gpt < 0.05
    with pytest.raises(ValueError, match="unknown model"):
        copy_model("gru", config)


@pytest.mark.parametrize("kind", ["gpt", "lstm"])
def test_a_tiny_run_learns_to_copy_a_short_string(kind):
    # length 4, 60 steps: about a second each on one thread. Both models lower the loss from ln 8; at this
    # length even the small LSTM can hold the string (the full experiment's length 24 is where it cannot).
    tiny = CopyConfig(length=4, vocab=8, steps=60, d_model=32, lstm_hidden=32, lstm_embed=16, eval_size=200)
    state = torch.random.get_rng_state()
    run = train_copy(kind, 0, tiny)
    assert torch.equal(torch.random.get_rng_state(), state)                  # the global generator is untouched
    assert len(run.train_loss) == tiny.steps and abs(run.train_loss[0] - uniform_loss(tiny)) < 0.2
    assert uniform_loss(tiny) == pytest.approx(math.log(8))
    assert sum(run.train_loss[-10:]) / 10 < run.train_loss[0] - 0.3
    assert run.accuracy > 2 * tiny.chance
