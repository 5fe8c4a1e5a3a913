"""Small models trained in advance by ``scripts/make_checkpoints.py``, for notebooks to load.

A notebook has about a minute to run on a laptop CPU; some ideas show best after more training
than that. Those notebooks load a checkpoint from ``data/checkpoints/`` (safetensors weights and a
JSON record: configuration, training steps and time, machine, and the validation loss reached).
``tests/test_checkpoints.py`` re-measures each recorded validation loss.

The course's reference set-up for character models on Shakespeare: embedding 64, one layer of
256 units, sequence length 64, batch 32, Adam (learning rate 3e-3), gradient clipping at 1.0,
the first 90% of the text for training and the last 10% for validation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from seqlab.data import LMBatches, char_lm_data
from seqlab.models.charlm import CharLM, CharLMConfig
from seqlab.train import evaluate, lm_loss, load_checkpoint

ENV_VAR = "SEQLAB_CHECKPOINTS"
SEQ_LEN, BATCH_SIZE = 64, 32
# 100 x 32 x 64 = 204,800 validation characters (40% of them), windows drawn from all of the
# validation text with a fixed seed, so always the same ones
VAL_BATCHES, VAL_SEED = 100, 1234

# name -> the cell type and the number of training steps the script uses by default. A step
# budget (not a time budget) makes a checkpoint independent of how busy the machine was; the
# JSON record says how long the steps took.
CHECKPOINTS: dict[str, dict] = {
    "charlm-rnn": {"cell": "rnn", "steps": 14_309},
    "charlm-lstm": {"cell": "lstm", "steps": 14_309},
    "charlm-gru": {"cell": "gru", "steps": 14_309},
}


def checkpoint_dir() -> Path:
    """``$SEQLAB_CHECKPOINTS`` if set, else ``data/checkpoints`` of the repository."""
    return Path(os.environ.get(ENV_VAR) or Path(__file__).resolve().parents[2] / "data" / "checkpoints")


def build_model(name: str) -> CharLM:
    """An untrained model with the architecture of checkpoint ``name``."""
    if name not in CHECKPOINTS:
        raise KeyError(f"unknown checkpoint {name!r}; expected one of {sorted(CHECKPOINTS)}")
    return CharLM(CharLMConfig(vocab_size=len(char_lm_data().vocab), cell=CHECKPOINTS[name]["cell"]))


def validation_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The fixed validation slice every recorded figure is measured on."""
    batches = LMBatches(char_lm_data().val, BATCH_SIZE, SEQ_LEN, seed=VAL_SEED)
    return [batch for _, batch in zip(range(VAL_BATCHES), batches)]


def validation_loss(model: torch.nn.Module) -> float:
    """Mean cross-entropy (nats per character) on :func:`validation_batches`."""
    return evaluate(model, validation_batches(), lm_loss).loss


def load_pretrained(name: str) -> tuple[CharLM, dict]:
    """The trained model (in eval mode, on the CPU) and its JSON record."""
    model = build_model(name)
    folder = checkpoint_dir()
    load_checkpoint(folder / f"{name}.safetensors", model)
    record = json.loads((folder / f"{name}.json").read_text())
    return model.eval(), record
