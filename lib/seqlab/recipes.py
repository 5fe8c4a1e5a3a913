"""The character-model checkpoints of ``data/checkpoints``: what each one is and how it is trained.

``scripts/make_checkpoints.py`` trains them from :data:`CHECKPOINTS`; ``scripts/bench_lm.py``
re-runs the GPT's recipe; :func:`seqlab.pretrained.load_pretrained` loads the result.

The course's reference set-up for character models on Shakespeare: embedding 64, one layer of
256 units, sequence length 64, batch 32, Adam (learning rate 3e-3), gradient clipping at 1.0,
the first 90% of the text for training and the last 10% for validation.
"""

from __future__ import annotations

import torch

from seqlab.data import char_lm_data
from seqlab.models.charlm import CharLM, CharLMConfig
from seqlab.models.gpt import GPT, GPTConfig
from seqlab.train import LRSchedule, warmup_cosine

SEQ_LEN, BATCH_SIZE = 64, 32

# name -> the model and the number of training steps the script uses by default. A step
# budget (not a time budget) makes a checkpoint independent of how busy the machine was; the
# JSON record says how long the steps took. The recurrent ones name their cell and use the
# reference set-up above; the GPT names its GPTConfig (vocab_size comes from the data) and its
# own training set-up (AdamW, a warm-up, then a cosine decay to the end of the budget), the recipe
# scripts/bench_lm.py compares with nanoGPT's on the same CPU-seconds. Its 28,618 steps of 16 x 64
# characters read the same 29.3M characters as the recurrent ones' 14,309 steps of 32 x 64.
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
    """The optimizer and learning-rate schedule of a GPT checkpoint's ``training`` set-up.

    AdamW with ``lr``, ``betas`` and ``weight_decay`` (on the matrices only, as GPT-2 and nanoGPT),
    a linear warm-up over ``warmup_steps`` steps, then a cosine decay to ``floor`` x ``lr`` at the end
    of the budget (:func:`seqlab.train.warmup_cosine`).
    """
    params = list({id(p): p for p in model.parameters()}.values())               # a tied matrix once
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": setup["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=setup["lr"], betas=tuple(setup["betas"]))
    return optimizer, warmup_cosine(setup["warmup_steps"], setup["floor"])
