"""The character-model checkpoints of ``data/checkpoints``: what each one is and how it is trained.

``scripts/make_checkpoints.py`` trains them from :data:`CHECKPOINTS`; :func:`seqlab.pretrained.load_pretrained` loads them.
"""

from __future__ import annotations

import torch

from seqlab.data import char_lm_data
from seqlab.models.charlm import CharLM, CharLMConfig
from seqlab.models.gpt import GPT, GPTConfig
from seqlab.train import LRSchedule, warmup_cosine

SEQ_LEN, BATCH_SIZE = 64, 32

# name -> the model and its default training steps (a step budget, so that a checkpoint does not
# depend on how busy the machine was). The recurrent ones name their cell (CharLMConfig's sizes,
# scripts/make_checkpoints.py's Adam set-up); the GPT names its GPTConfig (vocab_size from the data)
# and its own training set-up: twice the steps of half the batch, as many characters read.
CHECKPOINTS: dict[str, dict] = {
    "charlm-rnn": {"cell": "rnn", "steps": 14_309},
    "charlm-lstm": {"cell": "lstm", "steps": 14_309},
    "charlm-gru": {"cell": "gru", "steps": 14_309},
    "charlm-gpt": {"model": "GPT", "steps": 28_618, "store_dtype": "float32",
                   "config": {"max_len": 64, "d_model": 128, "num_layers": 2, "nhead": 4, "dim_feedforward": 512,
                              "dropout": 0.0, "positional": "learned", "norm_first": True, "activation": "gelu",
                              "tie_weights": True, "bias": True, "fused": True},
                   "training": {"batch_size": 16, "seq_len": 64, "optimizer": "AdamW", "lr": 3e-3,
                                "betas": [0.9, 0.99], "weight_decay": 0.0, "warmup_steps": 50, "floor": 0.1,
                                "clip_norm": 1.0, "seed": 0}},
}


def build_model(name: str, **overrides) -> CharLM | GPT:
    """An untrained model with the architecture of checkpoint ``name`` (``overrides``: GPTConfig fields, GPT only)."""
    if name not in CHECKPOINTS:
        raise KeyError(f"unknown checkpoint {name!r}; expected one of {sorted(CHECKPOINTS)}")
    spec = CHECKPOINTS[name]
    vocab_size = len(char_lm_data().vocab)
    if spec.get("model") == "GPT":
        return GPT(GPTConfig(vocab_size=vocab_size, **{**spec["config"], **overrides}))
    if overrides:
        raise ValueError(f"overrides apply to GPT checkpoints only; {name} is a CharLM")
    return CharLM(CharLMConfig(vocab_size=vocab_size, cell=spec["cell"]))


def gpt_optimizer(model: GPT, setup: dict) -> tuple[torch.optim.Optimizer, LRSchedule]:
    """AdamW (weight decay on matrices only) and :func:`seqlab.train.warmup_cosine` for a GPT's ``training`` set-up."""
    params = list({id(p): p for p in model.parameters()}.values())               # a tied matrix once
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": setup["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=setup["lr"], betas=tuple(setup["betas"]))
    return optimizer, warmup_cosine(setup["warmup_steps"], setup["floor"])
