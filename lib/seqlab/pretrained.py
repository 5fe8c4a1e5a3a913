"""The course's trained models, for notebooks to load: character LMs, digit reversers, MiniLM.

A checkpoint is safetensors weights plus a JSON record, in :func:`checkpoint_dir`. The public names of
:mod:`seqlab.recipes` and :mod:`seqlab.minilm` are importable from here too, as the notebooks do.
"""

from __future__ import annotations

import json

import torch

from seqlab.checkpoints import checkpoint_dir
from seqlab.data import LMBatches, char_lm_data
from seqlab.minilm import MINILM_PACKAGE, SentenceEncoder, load_minilm, minilm_path
from seqlab.models.charlm import CharLM
from seqlab.models.gpt import GPT
from seqlab.recipes import BATCH_SIZE, CHECKPOINTS, SEQ_LEN, build_model
from seqlab.train import evaluate, lm_loss, load_checkpoint

__all__ = ["BATCH_SIZE", "CHECKPOINTS", "MINILM_PACKAGE", "SEQ_LEN", "VAL_BATCHES", "VAL_SEED", "SentenceEncoder",
           "build_model", "build_reverser", "checkpoint_dir", "load_minilm", "load_pretrained",
           "gpt_head_qkv", "load_reverser", "minilm_path", "validation_batches", "validation_loss"]

# 100 x 32 x 64 validation characters, windows drawn from all of the validation text with a
# fixed seed, so always the same ones
VAL_BATCHES, VAL_SEED = 100, 1234


def validation_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The fixed validation slice every recorded figure is measured on."""
    batches = LMBatches(char_lm_data().val, BATCH_SIZE, SEQ_LEN, seed=VAL_SEED)
    return [batch for _, batch in zip(range(VAL_BATCHES), batches)]


def validation_loss(model: torch.nn.Module) -> float:
    """Mean cross-entropy (nats per character) on :func:`validation_batches`."""
    return evaluate(model, validation_batches(), lm_loss).loss


def load_pretrained(name: str) -> tuple[CharLM | GPT, dict]:
    """The trained model (in eval mode, on the CPU, float32) and its JSON record."""
    model = build_model(name)
    folder = checkpoint_dir()
    load_checkpoint(folder / f"{name}.safetensors", model)
    record = json.loads((folder / f"{name}.json").read_text())
    return model.eval(), record


# --- The digit reversers of notebooks 7, 8 and 13 --------------------------------------------------

def build_reverser(model: str, config: dict) -> torch.nn.Module:
    """An untrained reverser from a record's ``model`` ("Seq2Seq" or "TransformerSeq2Seq") and ``config``."""
    from seqlab.models.seq2seq import Seq2Seq, Seq2SeqConfig
    from seqlab.models.transformer_seq2seq import TransformerSeq2Seq, TransformerSeq2SeqConfig

    if model == "TransformerSeq2Seq":
        return TransformerSeq2Seq(TransformerSeq2SeqConfig(**config))
    if model == "Seq2Seq":
        return Seq2Seq(Seq2SeqConfig(**config))
    raise ValueError(f"a reverser's model is 'Seq2Seq' or 'TransformerSeq2Seq', got {model!r}")


def load_reverser(name: str, *, into: torch.nn.Module | None = None,
                  recipe: dict | None = None) -> tuple[torch.nn.Module, dict]:
    """A trained digit reverser (``reverser-gru``, ...; eval mode, float32) and its JSON record.

    ``into``: a model built in a notebook, checked to have the checkpoint's config, loaded and returned.
    ``recipe``: what the notebook says the training was (e.g. ``{"steps": 800}``), checked key by key
    against the record's ``training`` (or ``data``) entry. A mismatch is a ValueError naming it.
    """
    folder = checkpoint_dir()
    path = folder / f"{name}.json"
    if not path.exists():
        known = sorted(p.stem for p in folder.glob("reverser-*.json"))
        raise FileNotFoundError(f"no reverser checkpoint {name!r} in {folder}; there are {known}")
    record = json.loads(path.read_text())
    for key, expected in (recipe or {}).items():
        where = "training" if key in record["training"] else "data"
        actual = record[where].get(key, "(not recorded)")
        if actual != expected:
            raise ValueError(f"checkpoint {name!r} was trained with {key}={actual!r} ({where} in its record), "
                             f"not {key}={expected!r}")
    if into is not None:
        config = into.config.to_dict() if hasattr(into, "config") else None
        if config != record["config"]:
            raise ValueError(f"checkpoint {name!r} holds a {record['model']} with config {record['config']}; "
                             f"the model given has config {config}")
    model = into if into is not None else build_reverser(record["model"], record["config"])
    load_checkpoint(folder / f"{name}.safetensors", model)
    return model.eval(), record


def gpt_head_qkv(text: str, *, layer: int = 0, head: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[str]]:
    """``charlm-gpt`` on ``text``: one head's queries, keys and values ``(n, d_k)``, float64, and the characters."""
    import torch.nn.functional as F

    gpt, _ = load_pretrained("charlm-gpt")
    config = gpt.config
    if not 0 <= layer < config.num_layers or not 0 <= head < config.nhead:
        raise ValueError(f"charlm-gpt has layers 0..{config.num_layers - 1} and heads 0..{config.nhead - 1}, "
                         f"got layer={layer!r}, head={head!r}")
    if not isinstance(text, str) or not 1 <= len(text) <= config.max_len:
        raise ValueError(f"text should be a string of 1 to {config.max_len} characters, got "
                         f"{len(text) if isinstance(text, str) else type(text).__name__}")
    ids = char_lm_data().vocab.encode(text)[None]                    # (1, n)
    with torch.no_grad():
        x = gpt.positional(gpt.embed(ids), 0)                        # (1, n, d_model)
        for block in gpt.blocks[:layer]:
            x = block(x, is_causal=True)
        block = gpt.blocks[layer]
        attention = block.self_attn
        h = block.norm1(x) if block.norm_first else x
        q, k, v = F.linear(h, attention.in_proj_weight, attention.in_proj_bias).chunk(3, dim=-1)   # (1, n, d_model)
        part = slice(head * attention.head_dim, (head + 1) * attention.head_dim)
        return q[0, :, part].double(), k[0, :, part].double(), v[0, :, part].double(), list(text)
