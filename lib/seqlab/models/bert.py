r"""BERT (Devlin et al., 2019) from seqlab's pieces, able to load real Hugging Face BERT weights. Notebook 16.

:math:`X^{(0)} = \mathrm{LN}(E_{word}[x] + P + E_{type}[t])` (learned positions), then post-norm encoder
layers with the erf GELU and LayerNorm :math:`\epsilon = 10^{-12}`, as BERT's weights need.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.checks import check_id_range, check_ids, check_lengths, load_state_dict_strict
from seqlab.nn.layer_norm import LayerNorm
from seqlab.nn.masks import padding_mask, to_additive
from seqlab.nn.transformer import TransformerEncoder, TransformerEncoderLayer
from seqlab.nn.transformer_checks import check_heads

__all__ = ["BertConfig", "BertEncoder", "BertForMaskedLM", "BertOutput", "convert_hf_state_dict", "load_hf_bert"]


@dataclass
class BertConfig:
    """The sizes of a :class:`BertEncoder` (defaults: BERT-base). :meth:`from_hf_config` reads a ``config.json``."""

    vocab_size: int = 30522
    d_model: int = 768                  # hidden_size
    nhead: int = 12                     # num_attention_heads
    num_layers: int = 12                # num_hidden_layers
    dim_feedforward: int = 3072         # intermediate_size
    max_len: int = 512                  # max_position_embeddings: rows of the learned position table
    type_vocab_size: int = 2            # token types (segments)
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1                # on embeddings, attention weights, sublayer outputs (training only)
    activation: str = "gelu"            # the exact erf GELU, as BERT's "gelu"
    pooler: bool = True                 # BERT's tanh dense layer on [CLS]
    causal: bool = False                # True: token i reads only tokens <= i (a left-to-right twin, for comparisons)

    def __post_init__(self) -> None:
        if min(self.vocab_size, self.d_model, self.nhead, self.num_layers, self.dim_feedforward, self.max_len,
               self.type_vocab_size) < 1:
            raise ValueError(f"every size must be at least 1, got {self}")
        check_heads(self.d_model, self.nhead)

    @classmethod
    def from_hf_config(cls, config: Mapping | str | Path) -> BertConfig:
        """From a Hugging Face BERT ``config.json`` (a path or its parsed dict); refuses what this model cannot be."""
        if not isinstance(config, Mapping):
            config = json.loads(Path(config).read_text())
        unsupported = {"model_type": ("bert", config.get("model_type", "bert")),
                       "hidden_act": ("gelu", config.get("hidden_act", "gelu")),
                       "position_embedding_type": ("absolute", config.get("position_embedding_type", "absolute"))}
        for key, (expected, got) in unsupported.items():
            if got != expected:
                raise ValueError(f"BertConfig.from_hf_config: only {key}={expected!r} is supported, got {got!r}")
        hidden_dropout = config.get("hidden_dropout_prob", 0.1)
        # seqlab's layer has one dropout rate for weights and sublayers; BERT's two are equal (0.1)
        return cls(vocab_size=config["vocab_size"], d_model=config["hidden_size"],
                   nhead=config["num_attention_heads"], num_layers=config["num_hidden_layers"],
                   dim_feedforward=config["intermediate_size"], max_len=config["max_position_embeddings"],
                   type_vocab_size=config.get("type_vocab_size", 2),
                   layer_norm_eps=config.get("layer_norm_eps", 1e-12), dropout=hidden_dropout)

    def to_dict(self) -> dict:
        return asdict(self)


class BertOutput(NamedTuple):
    """What :meth:`BertEncoder.forward` returns when asked for more than the last hidden state."""

    last_hidden_state: Tensor            # (B, n, d_model)
    hidden_states: Tensor | None         # (L + 1, B, n, d_model): the embeddings' output, then each layer's
    attentions: Tensor | None            # (L, B, H, n, n): per layer, per head, batch-first


class BertEncoder(nn.Module):
    """Token ids ``(B, n)`` -> hidden states ``(B, n, d_model)``.

    Padding is given by ``attention_mask`` ``(B, n)`` (1 / True = real token) or ``lengths`` ``(B,)``,
    not both. With ``need_weights`` or ``output_hidden_states`` it returns a :class:`BertOutput`.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = c = config
        self.word_embeddings = nn.Embedding(c.vocab_size, c.d_model)                  # E_word
        self.position_embeddings = nn.Embedding(c.max_len, c.d_model)                 # P (learned)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.d_model)       # E_type
        self.embeddings_norm = LayerNorm(c.d_model, eps=c.layer_norm_eps)             # LN_emb
        self.embeddings_dropout = nn.Dropout(c.dropout)
        layer = TransformerEncoderLayer(c.d_model, c.nhead, c.dim_feedforward, c.dropout, activation=c.activation,
                                        layer_norm_eps=c.layer_norm_eps, batch_first=True, norm_first=False)
        # post-norm already ends every layer with a LayerNorm: no final norm (unlike pre-norm stacks)
        self.encoder = TransformerEncoder(layer, c.num_layers, norm=None, enable_nested_tensor=False)
        self.pooler = nn.Linear(c.d_model, c.d_model) if c.pooler else None           # W_p, b_p

    def embed(self, input_ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        r""":math:`X^{(0)} = \mathrm{LN}(E_{word}[x] + P[0..n-1] + E_{type}[t])`, ``(B, n, d_model)``."""
        n = input_ids.shape[1]
        positions = torch.arange(n, device=input_ids.device)                          # (n,)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)[None]
             + self.token_type_embeddings(token_type_ids))                             # (B, n, d_model)
        return self.embeddings_dropout(self.embeddings_norm(x))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None,
                *, lengths: Tensor | Sequence[int] | None = None, need_weights: bool = False,
                output_hidden_states: bool = False) -> Tensor | BertOutput:
        real = self._check(input_ids, attention_mask, token_type_ids, lengths)         # (B, n) True = real, or None
        x = self.embed(input_ids, token_type_ids)                                     # X^(0): (B, n, d_model)
        # seqlab's meaning, additive (0 = may attend, -inf at padding): the same at the layers' torch boundary
        key_mask = None if real is None else to_additive(real, x.dtype)                 # (B, n)
        hidden, weights = [x], []
        for layer in self.encoder.layers:                                            # X^(r) = EncoderLayer_r(X^(r-1))
            out = layer(x, src_key_padding_mask=key_mask, is_causal=self.config.causal,
                        need_weights=need_weights)
            x, w = out if need_weights else (out, None)                               # w: (B, H, n, n)
            hidden.append(x)
            weights.append(w)
        if not (need_weights or output_hidden_states):
            return x
        return BertOutput(last_hidden_state=x,
                          hidden_states=torch.stack(hidden) if output_hidden_states else None,   # (L+1, B, n, d)
                          attentions=torch.stack(weights) if need_weights else None)             # (L, B, H, n, n)

    def pool(self, last_hidden_state: Tensor) -> Tensor:
        r"""BERT's pooled output :math:`\tanh(X^{(N)}_{[CLS]} W_p + b_p)`, ``(B, d_model)``: the first token's."""
        if self.pooler is None:
            raise ValueError("this BertEncoder was built with pooler=False, so it has no pooled output")
        return torch.tanh(self.pooler(last_hidden_state[:, 0]))

    def _check(self, input_ids: Tensor, attention_mask: Tensor | None, token_type_ids: Tensor | None,
               lengths: Tensor | Sequence[int] | None) -> Tensor | None:
        name, c = type(self).__name__, self.config
        lengths = check_ids(name, input_ids, lengths)
        B, n = input_ids.shape
        check_id_range(name, input_ids, c.vocab_size, what="input_ids")
        if n > c.max_len:
            raise ValueError(f"{name}: the learned position table holds max_len={c.max_len} positions, got a "
                             f"sequence of {n} tokens; shorten (truncate) the input")
        if token_type_ids is not None:
            if not isinstance(token_type_ids, Tensor) or token_type_ids.shape != (B, n) \
                    or token_type_ids.dtype != torch.long:
                got = (f"{token_type_ids.dtype} tensor of shape {tuple(token_type_ids.shape)}"
                       if isinstance(token_type_ids, Tensor) else type(token_type_ids).__name__)
                raise ValueError(f"{name}: token_type_ids must be a torch.long tensor of shape {(B, n)} like "
                                 f"input_ids, got {got}")
            check_id_range(name, token_type_ids, c.type_vocab_size, what="token_type_ids", size_name="type_vocab_size")
        if attention_mask is not None and lengths is not None:
            raise ValueError(f"{name}: give attention_mask or lengths, not both")
        if lengths is not None:
            check_lengths(name, lengths, n)
            return padding_mask(lengths.to(input_ids.device), n)                    # (B, n), True = real
        if attention_mask is None:
            return None
        if not isinstance(attention_mask, Tensor) or attention_mask.shape != (B, n) \
                or attention_mask.is_floating_point():
            got = (f"{attention_mask.dtype} tensor of shape {tuple(attention_mask.shape)}"
                   if isinstance(attention_mask, Tensor) else type(attention_mask).__name__)
            raise ValueError(f"{name}: attention_mask must be an integer or bool tensor of shape {(B, n)} like "
                             f"input_ids (1 / True at real tokens), got {got}")
        if attention_mask.dtype != torch.bool and not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
            raise ValueError(f"{name}: attention_mask must hold only 0 (padding) and 1 (real token)")
        return attention_mask.to(device=input_ids.device, dtype=torch.bool)

    def extra_repr(self) -> str:
        c = self.config
        causal = ", causal" if c.causal else ""
        return (f"layers={c.num_layers}, d_model={c.d_model}, nhead={c.nhead}, post-norm, "
                f"activation={c.activation!r}{causal}")


class BertForMaskedLM(nn.Module):
    r"""A :class:`BertEncoder` (no pooler) with BERT's masked-LM head: ids ``(B, n)`` -> logits ``(B, n, V)``.

    Head: :math:`\mathrm{LN}(\mathrm{GELU}(h W_t + b_t)) E_{word}^\top + b_{out}`, tied to the word embeddings.
    ``forward`` takes :class:`BertEncoder`'s arguments; with ``need_weights`` or ``output_hidden_states``
    it returns ``(logits, BertOutput)``.
    """

    def __init__(self, config: BertConfig, *, initializer_range: float = 0.02):
        super().__init__()
        config = replace(config, pooler=False)
        self.config = c = config
        self.bert = BertEncoder(config)
        self.transform = nn.Linear(c.d_model, c.d_model)                             # W_t, b_t
        self.transform_norm = LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.output_bias = nn.Parameter(torch.zeros(c.vocab_size))                   # b_out; the matrix is E_word
        self._init_weights(initializer_range)

    @property
    def output_weight(self) -> Tensor:
        """The read-out's ``(V, d_model)`` matrix: the encoder's word embeddings (the same tensor)."""
        return self.bert.word_embeddings.weight

    def _init_weights(self, std: float) -> None:
        for name, param in self.named_parameters():
            if param.dim() >= 2:                      # embeddings, linear and q/k/v projection matrices
                nn.init.normal_(param, mean=0.0, std=std)
            elif name.endswith("bias"):               # every bias, output_bias included
                nn.init.zeros_(param)
            else:                                     # LayerNorm gains
                nn.init.ones_(param)

    def head(self, hidden: Tensor) -> Tensor:
        """The MLM head on hidden states ``(..., d_model)`` -> logits ``(..., V)``."""
        h = self.transform_norm(F.gelu(self.transform(hidden)))                       # (..., d_model)
        return F.linear(h, self.output_weight, self.output_bias)                     # (..., V), tied to E_word

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None,
                *, lengths: Tensor | Sequence[int] | None = None, need_weights: bool = False,
                output_hidden_states: bool = False) -> Tensor | tuple[Tensor, BertOutput]:
        out = self.bert(input_ids, attention_mask, token_type_ids, lengths=lengths, need_weights=need_weights,
                        output_hidden_states=output_hidden_states)
        if isinstance(out, Tensor):
            return self.head(out)                                                     # (B, n, V)
        return self.head(out.last_hidden_state), out

    def extra_repr(self) -> str:
        return f"vocab_size={self.config.vocab_size}, head tied to the word embeddings"


# Hugging Face BertModel names -> ours, per layer ({} is the layer number). q, k, v are handled apart.
_LAYER_KEYS = {
    "attention.output.dense": "self_attn.out_proj",       # W^O
    "attention.output.LayerNorm": "norm1",                # LN after attention (post-norm)
    "intermediate.dense": "linear1",                      # W_1
    "output.dense": "linear2",                            # W_2
    "output.LayerNorm": "norm2",                          # LN after the FFN
}
_EMBEDDING_KEYS = {
    "embeddings.word_embeddings": "word_embeddings",
    "embeddings.position_embeddings": "position_embeddings",
    "embeddings.token_type_embeddings": "token_type_embeddings",
    "embeddings.LayerNorm": "embeddings_norm",
    "pooler.dense": "pooler",
}


def convert_hf_state_dict(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A Hugging Face ``BertModel`` state dict under :class:`BertEncoder`'s names.

    q, k, v stack into ``in_proj_weight`` ``(3 d, d)`` and ``in_proj_bias``; a ``bert.`` prefix and
    ``embeddings.position_ids`` (checked: ``0, 1, 2, ...``) are dropped; unknown keys pass through.
    """
    source = {(k[len("bert."):] if k.startswith("bert.") else k): v for k, v in state_dict.items()}
    source = {k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias"): v
              for k, v in source.items()}
    out: dict[str, Tensor] = {}
    qkv: dict[tuple[str, str], dict[str, Tensor]] = {}         # (layer, weight|bias) -> {query, key, value}
    for key, value in source.items():
        if key == "embeddings.position_ids":
            if not torch.equal(value.flatten(), torch.arange(value.numel(), dtype=value.dtype)):
                raise ValueError("embeddings.position_ids is not 0, 1, 2, ...: this checkpoint numbers positions "
                                 "in a way BertEncoder does not")
            continue
        module, _, param = key.rpartition(".")
        if module in _EMBEDDING_KEYS:
            out[f"{_EMBEDDING_KEYS[module]}.{param}"] = value
            continue
        parts = module.split(".")
        if len(parts) > 3 and parts[:2] == ["encoder", "layer"] and parts[2].isdigit():
            layer, rest = parts[2], ".".join(parts[3:])
            if rest in ("attention.self.query", "attention.self.key", "attention.self.value"):
                qkv.setdefault((layer, param), {})[rest.rsplit(".", 1)[1]] = value
                continue
            if rest in _LAYER_KEYS:
                out[f"encoder.layers.{layer}.{_LAYER_KEYS[rest]}.{param}"] = value
                continue
        out[key] = value                                           # unknown: left for strict loading to report
    for (layer, param), parts in qkv.items():
        missing = [p for p in ("query", "key", "value") if p not in parts]
        if missing:
            raise KeyError(f"encoder.layer.{layer}.attention.self has no {', '.join(missing)} {param}, so its "
                           f"in_proj_{param} cannot be built")
        out[f"encoder.layers.{layer}.self_attn.in_proj_{param}"] = torch.cat(
            [parts["query"], parts["key"], parts["value"]], dim=0)                     # (3 d, d) or (3 d,)
    return out


def load_hf_bert(folder: str | Path, *, pooler: bool = True) -> BertEncoder:
    """A :class:`BertEncoder` (eval mode, CPU) loaded strictly from a Hugging Face folder's ``config.json``
    and ``model.safetensors``; ``pooler=False`` builds none."""
    from safetensors.torch import load_file

    folder = Path(folder)
    for name in ("config.json", "model.safetensors"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"load_hf_bert: no {name} in {folder}")
    config = replace(BertConfig.from_hf_config(folder / "config.json"), pooler=pooler)
    state = convert_hf_state_dict(load_file(folder / "model.safetensors"))
    if not pooler:
        state = {k: v for k, v in state.items() if not k.startswith("pooler.")}
    model = BertEncoder(config)
    load_state_dict_strict(model, state, source=str(folder / "model.safetensors"))
    return model.eval()
