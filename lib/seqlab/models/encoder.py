r"""A small encoder-only token model, :class:`EncoderModel`, with any positional encoding. Notebooks 10 and 11.

Embeddings are not scaled by :math:`\sqrt{d_{model}}`: ``nn.Embedding`` already starts at :math:`\mathcal N(0, 1)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from seqlab.checks import check_id_range, check_ids, check_lengths
from seqlab.nn.layer_norm import LayerNorm
from seqlab.nn.masks import padding_mask, to_additive
from seqlab.nn.positional import check_positional, positional_encoding
from seqlab.nn.transformer import TransformerEncoder, TransformerEncoderLayer
from seqlab.nn.transformer_checks import check_heads

READOUTS = ("token", "sequence")


@dataclass
class EncoderConfig:
    """The sizes of an :class:`EncoderModel`."""

    vocab_size: int
    d_model: int = 64
    nhead: int = 4
    num_layers: int = 2
    dim_feedforward: int = 256
    dropout: float = 0.0
    positional: str = "learned"          # one of seqlab.nn.positional.POSITIONAL_ENCODINGS
    max_len: int = 128                   # positions a learned table holds (others: precomputed length)
    causal: bool = False                 # position i attends to positions <= i only
    num_outputs: int | None = None       # None: vocab_size
    readout: str = "token"               # "token": (B, n, num_outputs); "sequence": (B, num_outputs)
    norm_first: bool = False             # post-norm (the paper) or pre-norm (then a final LayerNorm)
    activation: str = "relu"
    fused: bool = False                  # scaled_dot_product_attention when no weights are asked for

    def __post_init__(self) -> None:
        if self.vocab_size < 1:
            raise ValueError(f"vocab_size must be at least 1, got {self.vocab_size}")
        check_heads(self.d_model, self.nhead)
        check_positional(self.positional)
        if self.readout not in READOUTS:
            raise ValueError(f"readout must be one of {READOUTS}, got {self.readout!r}")
        if self.num_layers < 1 or self.max_len < 1:
            raise ValueError(f"num_layers and max_len must be at least 1, got num_layers={self.num_layers}, "
                             f"max_len={self.max_len}")

    @property
    def outputs(self) -> int:
        return self.vocab_size if self.num_outputs is None else self.num_outputs

    def to_dict(self) -> dict:
        return asdict(self)


def _drop_per_layer_tables(model: EncoderModel, state_dict: dict, prefix: str, *args) -> None:
    """Load hook: drops ``encoder.layers.N.positional.weight`` keys, checked to be copies of ``positional.weight``."""
    table = state_dict.get(prefix + "positional.weight")
    for key in [k for k in state_dict if k.startswith(prefix + "encoder.layers.") and k.endswith(".positional.weight")]:
        if table is None or not torch.equal(state_dict[key], table):
            raise ValueError(f"{key} is not a copy of {prefix}positional.weight: an EncoderModel keeps one learned "
                             f"position table, and this state_dict holds a different one per layer")
        del state_dict[key]


class EncoderModel(nn.Module):
    """Token ids ``(B, n)`` -> logits ``(B, n, num_outputs)`` (or ``(B, num_outputs)`` with ``readout="sequence"``).

    ``lengths`` ``(B,)`` hides padding; ``need_weights`` adds weights ``(num_layers, B, nhead, n, n)``.
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = c = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model)                                  # E
        self.positional = positional_encoding(c.positional, d_model=c.d_model, num_heads=c.nhead, max_len=c.max_len)
        layer = TransformerEncoderLayer(c.d_model, c.nhead, c.dim_feedforward, c.dropout, activation=c.activation,
                                        batch_first=True, norm_first=c.norm_first, fused=c.fused)
        # pre-norm leaves the residual stream unnormalised, so it ends with one LayerNorm (as GPT-2)
        final_norm = LayerNorm(c.d_model) if c.norm_first else None
        self.encoder = TransformerEncoder(layer, c.num_layers, norm=final_norm, enable_nested_tensor=False)
        self._register_load_state_dict_pre_hook(_drop_per_layer_tables, with_module=True)
        self.head = nn.Linear(c.d_model, c.outputs)                                         # U, b

    def forward(self, ids: Tensor, lengths: Tensor | Sequence[int] | None = None, *,
                need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        c = self.config
        lengths = self._check(ids, lengths)
        B, n = ids.shape
        x = self.positional(self.embed(ids))                                 # (B, n, d_model), positions added
        real = None if lengths is None else padding_mask(lengths.to(ids.device), n)        # (B, n), True = real
        # seqlab's meaning all the way down: an additive mask (0 = may attend, -inf at padding) means the
        # same at torch's boundary, and is_causal alone makes the layers build the causal mask
        key_mask = None if real is None else to_additive(real, x.dtype)                     # (B, n)
        out = self.encoder(x, src_key_padding_mask=key_mask, is_causal=c.causal,
                           need_weights=need_weights, **self.positional.attention_args(n, n, device=x.device,
                                                                                         dtype=x.dtype))
        h, weights = out if need_weights else (out, None)                    # (B, n, d_model), (L, B, H, n, n)
        if c.readout == "sequence":
            h = self._mean_over_real(h, real)                                # (B, d_model)
        logits = self.head(h)                                                # (B, n, outputs) or (B, outputs)
        return (logits, weights) if need_weights else logits

    @staticmethod
    def _mean_over_real(h: Tensor, real: Tensor | None) -> Tensor:
        if real is None:
            return h.mean(dim=1)
        real = real.to(h.dtype)[..., None]                                   # (B, n, 1)
        return (h * real).sum(dim=1) / real.sum(dim=1).clamp(min=1.0)        # an empty sequence gives zeros

    def _check(self, ids: Tensor, lengths: Tensor | Sequence[int] | None) -> Tensor | None:
        c, name = self.config, type(self).__name__
        lengths = check_ids(name, ids, lengths)
        check_id_range(name, ids, c.vocab_size)
        n = ids.shape[1]
        if c.positional == "learned" and n > c.max_len:
            raise ValueError(f"{name}: the learned position table holds max_len={c.max_len} "
                             f"positions, got a sequence of {n} tokens; build the model with a larger max_len")
        check_lengths(name, lengths, n)
        return lengths

    def extra_repr(self) -> str:
        c = self.config
        return (f"positional={c.positional!r}, causal={c.causal}, readout={c.readout!r}, "
                f"norm_first={c.norm_first}")
