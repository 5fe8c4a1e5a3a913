r"""A GPT-style decoder-only language model: causal pre-norm blocks (GPT-2), a final LayerNorm, optionally
tied output :math:`U = E^\top`, any positional encoding by name. Notebooks 14 and 15.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
from torch import Tensor, nn

from seqlab.checks import check_id_range, check_ids
from seqlab.decoding import sample_next
from seqlab.modes import evaluating
from seqlab.nn.layer_norm import LayerNorm
from seqlab.nn.multihead import AttentionCache, KVCache
from seqlab.nn.positional import check_positional, positional_encoding
from seqlab.nn.transformer_checks import check_heads
from seqlab.nn.transformer_layers import ACTIVATIONS, TransformerEncoderLayer

__all__ = ["GPT", "GPTConfig", "KVCache", "AttentionCache"]


def gpt2_init_(model: nn.Module, blocks: nn.ModuleList) -> None:
    """GPT-2's initialisation, in place: weights N(0, 0.02), biases 0, W^O and W_2 N(0, 0.02 / sqrt(2 N)) for
    N ``blocks`` (seqlab's or torch's TransformerEncoderLayer), so the residual stream's variance stays flat."""
    residual_std = 0.02 / math.sqrt(2 * len(blocks))
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
    for block in blocks:
        nn.init.normal_(block.self_attn.in_proj_weight, std=0.02)
        if block.self_attn.in_proj_bias is not None:
            nn.init.zeros_(block.self_attn.in_proj_bias)
        nn.init.normal_(block.self_attn.out_proj.weight, std=residual_std)                # W^O writes to the stream
        nn.init.normal_(block.linear2.weight, std=residual_std)                           # so does W_2


# Other names for GPTConfig's fields (nanoGPT's, and context): not accepted, only named in the error.
OTHER_NAMES = {"n_layer": "num_layers", "n_head": "nhead", "n_embd": "d_model", "block_size": "max_len",
               "context": "max_len"}


@dataclass
class GPTConfig:
    """The sizes of a :class:`GPT`, in torch.nn's names."""

    vocab_size: int
    max_len: int = 64                    # the longest sequence the model reads (its context, or block size)
    d_model: int = 128
    num_layers: int = 4
    nhead: int = 4
    dim_feedforward: int | None = None   # None: 4 * d_model
    dropout: float = 0.0
    positional: str = "learned"          # one of seqlab.nn.positional.POSITIONAL_ENCODINGS
    norm_first: bool = True              # pre-norm (GPT-2) with a final LayerNorm; False: post-norm
    activation: str = "gelu"             # one of seqlab.nn.transformer_layers.ACTIVATIONS
    tie_weights: bool = True             # output matrix = token embedding
    bias: bool = True                    # biases in every Linear and LayerNorm
    fused: bool = False                  # attention by scaled_dot_product_attention when no weights are asked for

    def __new__(cls, *args, **kwargs) -> GPTConfig:
        # runs before the dataclass's __init__, whose own error for n_layer= would not say num_layers
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            renamed = "".join(f"; {name} is {OTHER_NAMES[name]} here" for name in unknown if name in OTHER_NAMES)
            raise TypeError(f"unknown GPTConfig fields {unknown}{renamed}; expected some of {sorted(known)}")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        if self.dim_feedforward is None:
            self.dim_feedforward = 4 * self.d_model
        for name in ("vocab_size", "max_len", "d_model", "num_layers", "nhead", "dim_feedforward"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GPTConfig.{name} must be an integer >= 1, got {value!r}")
        check_heads(self.d_model, self.nhead)
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1), got {self.dropout}")
        check_positional(self.positional)
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; expected one of {tuple(ACTIVATIONS)}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.nhead

    def num_parameters(self) -> int:
        """The parameter count from the sizes alone (a tied output matrix counted once)."""
        d, f, V, b = self.d_model, self.dim_feedforward, self.vocab_size, int(self.bias)
        norm = d * (1 + b)                                           # LayerNorm: gain (and bias)
        block = 4 * d * d + 2 * d * f + b * (4 * d + f + d) + 2 * norm
        total = V * d + self.num_layers * block
        total += self.max_len * d if self.positional == "learned" else 0
        total += norm if self.norm_first else 0                      # the final LayerNorm
        total += (0 if self.tie_weights else V * d) + b * V          # output matrix (unless tied), output bias
        return total

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> GPTConfig:
        """The config :meth:`to_dict` wrote; unknown keys raise TypeError."""
        return cls(**values)


class GPT(nn.Module):
    """Token ids ``(B, T)`` -> next-token logits ``(B, T, V)``; ``T <= max_len``.

    With a :class:`KVCache`, ``ids`` are the tokens after the ``cache.offset`` cached ones. ``need_weights``
    adds weights ``(num_layers, B, nhead, T, offset + T)``.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = c = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model)                                 # E
        self.positional = positional_encoding(c.positional, d_model=c.d_model, num_heads=c.nhead, max_len=c.max_len)
        self.dropout = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            TransformerEncoderLayer(c.d_model, c.nhead, c.dim_feedforward, c.dropout, activation=c.activation,
                                    batch_first=True, norm_first=c.norm_first, bias=c.bias, fused=c.fused)
            for _ in range(c.num_layers))
        # pre-norm leaves the residual stream unnormalised: one LayerNorm after the last block
        self.norm = LayerNorm(c.d_model, bias=c.bias) if c.norm_first else nn.Identity()
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=c.bias)                         # U (, b)
        self._init_weights()
        if c.tie_weights:
            self.head.weight = self.embed.weight                                          # U = E^T, one parameter

    def _init_weights(self) -> None:
        gpt2_init_(self, self.blocks)

    def num_parameters(self) -> int:
        """Parameters actually held (a tied matrix once)."""
        return sum(p.numel() for p in self.parameters())

    def new_cache(self) -> KVCache:
        """An empty KV cache, one :class:`AttentionCache` per block."""
        return KVCache.empty(self.config.num_layers)

    def forward(self, ids: Tensor, *, cache: KVCache | None = None,
                need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        check_ids(type(self).__name__, ids, None)
        offset = self._check(ids, cache)
        x = self.positional(self.embed(ids), offset)              # (B, T, d_model); learned/sinusoidal add P
        x = self.dropout(x)
        T = ids.shape[1]
        positions = self.positional.attention_args(T, offset + T, device=x.device, dtype=x.dtype)  # RoPE, ALiBi
        weights = []
        for layer, block in enumerate(self.blocks):
            x = block(x, is_causal=True, need_weights=need_weights, cache=None if cache is None else cache[layer],
                      **positions)
            if need_weights:
                x, w = x
                weights.append(w)                                 # (B, H, T, offset + T)
        logits = self.head(self.norm(x))                          # (B, T, V)
        return (logits, torch.stack(weights)) if need_weights else logits

    def _check(self, ids: Tensor, cache: KVCache | None) -> int:
        c, name = self.config, type(self).__name__
        if ids.numel() == 0:
            raise ValueError(f"{name} needs at least one sequence of at least one token, got ids of shape "
                             f"{tuple(ids.shape)}")
        check_id_range(name, ids, c.vocab_size)
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache (from {name}.new_cache()) or None, got {type(cache).__name__}")
        if cache is not None and len(cache) != c.num_layers:
            raise ValueError(f"the cache has {len(cache)} layers but the model has num_layers={c.num_layers}")
        offset = 0 if cache is None else cache.offset
        if offset + ids.shape[1] > c.max_len:
            where = f" after {offset} cached positions" if offset else ""
            raise ValueError(f"{name} reads at most max_len={c.max_len} tokens, got {ids.shape[1]}{where}; "
                             f"crop the input to its last {c.max_len - offset} tokens")
        return offset

    @torch.no_grad()
    def generate(self, prompt: Tensor, n: int, *, temperature: float = 1.0, top_k: int | None = None,
                 generator: torch.Generator | None = None, use_cache: bool = True) -> Tensor:
        """``prompt`` ``(T,)`` or ``(B, T)`` followed by ``n`` ids sampled by :func:`~seqlab.decoding.sample_next`.

        Past ``max_len`` each step re-reads the last ``max_len`` tokens uncached (a cache cannot slide).
        """
        c = self.config
        if not isinstance(prompt, Tensor) or prompt.dim() not in (1, 2):
            got = f"shape {tuple(prompt.shape)}" if isinstance(prompt, Tensor) else type(prompt).__name__
            raise ValueError(f"prompt must be a 1-D tensor of ids (T,) or a batch (B, T), got {got}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n (the number of tokens to generate) must be an integer >= 0, got {n!r}")
        if prompt.shape[-1] == 0:
            raise ValueError("the prompt is empty: give at least one token to continue")
        if prompt.shape[-1] > c.max_len:
            raise ValueError(f"the prompt has {prompt.shape[-1]} tokens but the model reads at most "
                             f"max_len={c.max_len}; pass its last {c.max_len} tokens (prompt[..., -{c.max_len}:])")
        if top_k is not None and not 1 <= top_k <= c.vocab_size:
            raise ValueError(f"top_k must be in 1..{c.vocab_size} (the vocabulary size), got {top_k}")
        single = prompt.dim() == 1
        seq = prompt.to(self.embed.weight.device)[None] if single else prompt.to(self.embed.weight.device)
        check_ids(type(self).__name__, seq, None)
        self._check(seq, None)                                    # id range, before any work
        cache = self.new_cache() if use_cache else None
        with evaluating(self):                                    # no dropout; the mode comes back after
            for _ in range(n):
                if cache is not None and seq.shape[1] <= c.max_len:
                    logits = self(seq[:, cache.offset:], cache=cache)   # only the tokens not cached yet
                else:                                              # no cache, or past the context: re-read
                    logits = self(seq[:, -c.max_len:])
                next_id = sample_next(logits[:, -1], temperature=temperature, top_k=top_k, generator=generator)
                seq = torch.cat([seq, next_id[:, None]], dim=1)
        return seq[0] if single else seq

    def extra_repr(self) -> str:
        c = self.config
        return (f"max_len={c.max_len}, positional={c.positional!r}, norm_first={c.norm_first}, "
                f"tie_weights={c.tie_weights}, fused={c.fused}")
