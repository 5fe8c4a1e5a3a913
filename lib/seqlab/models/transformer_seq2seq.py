r"""The Transformer translator (Vaswani et al., 2017), with :class:`~seqlab.models.seq2seq.Seq2Seq`'s batches,
loss and decoding methods. Notebook 13.

``mark_source_end`` (as in fairseq): the encoder reads the source then ``<eos>``, so source attention has
``S + 1`` columns; self-attention over a padded batch cannot otherwise tell where the source ends.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.checks import check_ids, check_lengths, first_id_outside
from seqlab.data.pairs import teacher_forcing
from seqlab.decoding import Hypothesis, beam_search, cut_at_eos, target_log_prob
from seqlab.nn.masks import padding_mask, to_additive
from seqlab.nn.positional import SinusoidalPositionalEncoding
from seqlab.nn.transformer import Transformer
from seqlab.nn.transformer_checks import check_heads


@dataclass
class TransformerSeq2SeqConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 64
    nhead: int = 4
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    dim_feedforward: int = 256
    dropout: float = 0.0
    activation: str = "relu"          # 'relu' (the paper) or 'gelu'
    norm_first: bool = False          # False: post-norm, the paper's LN(x + Sublayer(x)); True: pre-norm
    tie_output: bool = True           # the output projection is the target embedding matrix (the paper's sharing)
    share_embeddings: bool = False    # one embedding matrix for source and target (needs equal vocabularies)
    mark_source_end: bool = True      # the encoder reads the source followed by <eos> (see the module docstring)
    max_len: int = 256                # positions precomputed in the sinusoidal table (longer ones are computed)
    pad_id: int = 0                   # the ids of seqlab.data.pairs.PAIR_SPECIALS
    bos_id: int = 1
    eos_id: int = 2

    def to_dict(self) -> dict:
        return asdict(self)


def _check_vocab(name: str, ids: Tensor, size: int) -> None:
    """Ids outside the vocabulary would fail deep inside nn.Embedding with an index error: say so here."""
    bad = first_id_outside(ids, size)
    if bad is not None:
        raise ValueError(f"{name} holds id {bad}, outside the vocabulary of {size} entries (ids 0 .. {size - 1})")


class TransformerSeq2Seq(nn.Module):
    """Source ids ``(B, S)`` and lengths ``(B,)``, decoder input ids ``(B, T)`` -> next-token logits ``(B, T, V)``."""

    def __init__(self, config: TransformerSeq2SeqConfig):
        super().__init__()
        c = config
        check_heads(c.d_model, c.nhead)
        if c.share_embeddings and c.src_vocab_size != c.tgt_vocab_size:
            raise ValueError(f"share_embeddings needs one vocabulary for both sides, got src_vocab_size="
                             f"{c.src_vocab_size} and tgt_vocab_size={c.tgt_vocab_size}")
        self.config = c
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = self.src_embed if c.share_embeddings else nn.Embedding(c.tgt_vocab_size, c.d_model,
                                                                                 padding_idx=c.pad_id)
        self.positional = SinusoidalPositionalEncoding(c.d_model, c.max_len)   # no parameters
        self.dropout = nn.Dropout(c.dropout)
        self.transformer = Transformer(c.d_model, c.nhead, c.num_encoder_layers, c.num_decoder_layers,
                                       c.dim_feedforward, c.dropout, c.activation, batch_first=True,
                                       norm_first=c.norm_first)
        self.head = nn.Linear(c.d_model, c.tgt_vocab_size)
        self._reset_embeddings()
        if c.tie_output:
            self.head.weight = self.tgt_embed.weight                       # W_out = E_tgt: one (V, d) matrix

    def _reset_embeddings(self) -> None:
        # std d^-1/2, so that sqrt(d) * E[x] has unit-variance features, the scale of the positions
        # (nn.Embedding's N(0, 1) times sqrt(d) would drown them) and, when tied, of sensible logits
        for embed in {self.src_embed, self.tgt_embed}:
            nn.init.normal_(embed.weight, std=self.config.d_model ** -0.5)
            with torch.no_grad():
                embed.weight[self.config.pad_id].zero_()

    # -- the pieces -------------------------------------------------------------------------------------
    def embed(self, ids: Tensor, table: nn.Embedding) -> Tensor:
        """``sqrt(d_model) * E[ids] + PE``, then dropout: ``(B, n)`` -> ``(B, n, d_model)``."""
        x = table(ids) * math.sqrt(self.config.d_model)                   # (B, n, d)
        return self.dropout(self.positional(x))

    def append_end(self, src: Tensor, lengths: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """``src`` ``(B, S)`` with ``<eos>`` written after each source's last real token: ``(B, S + 1)``, lengths + 1."""
        src = torch.cat([src, src.new_full((src.shape[0], 1), self.config.pad_id)], dim=1)
        ends = torch.full((src.shape[0],), src.shape[1] - 1, device=src.device) if lengths is None else lengths
        src[torch.arange(src.shape[0], device=src.device), ends] = self.config.eos_id
        return src, None if lengths is None else lengths + 1

    def encode(self, src: Tensor, src_lengths: Tensor | Sequence[int] | None, *,
               need_weights: bool = False) -> tuple:
        """Memory ``(B, S', d_model)``, source mask ``(B, S')`` (True = real; None without lengths) and, with
        ``need_weights``, weights ``(L, B, H, S', S')``. ``S' = S + 1`` with ``mark_source_end``."""
        lengths = check_ids("TransformerSeq2Seq", src, src_lengths)
        _check_vocab("src", src, self.config.src_vocab_size)
        if lengths is not None:
            check_lengths("TransformerSeq2Seq", lengths, src.shape[1], what="src_lengths", minimum=1)
            lengths = lengths.to(src.device)
        if self.config.mark_source_end:
            src, lengths = self.append_end(src, lengths)
        real = None if lengths is None else padding_mask(lengths, src.shape[1])   # (B, S), True = real
        x = self.embed(src, self.src_embed)
        key_mask = None if real is None else to_additive(real, x.dtype)    # 0 = may attend, -inf at padding
        out = self.transformer.encoder(x, src_key_padding_mask=key_mask,
                                       **({"need_weights": True} if need_weights else {}))
        if need_weights:
            memory, weights = out
            return memory, real, weights
        return out, real

    def decode(self, tgt_in: Tensor, memory: Tensor, memory_real: Tensor | None, *,
               need_weights: bool = False) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        """Logits ``(B, T, V)`` for ids ``(B, T)`` reading ``memory`` ``(B, S, d_model)`` (True = real in
        ``memory_real``);
        with ``need_weights``, also ``{"self": (L, B, H, T, T), "cross": (L, B, H, T, S)}``."""
        check_ids("TransformerSeq2Seq", tgt_in, None)
        _check_vocab("tgt_in", tgt_in, self.config.tgt_vocab_size)
        if tgt_in.shape[0] != memory.shape[0]:
            raise ValueError(f"src and tgt_in must hold the same number of sequences, got {memory.shape[0]} "
                             f"and {tgt_in.shape[0]}")
        y = self.embed(tgt_in, self.tgt_embed)
        # tgt_is_causal alone: seqlab's layers build the causal mask (no reading ahead) themselves
        key_mask = None if memory_real is None else to_additive(memory_real, y.dtype)
        out = self.transformer.decoder(y, memory, memory_key_padding_mask=key_mask, tgt_is_causal=True,
                                       **({"need_weights": True} if need_weights else {}))
        if need_weights:
            y, weights = out
            return self.head(y), weights
        return self.head(out)                                              # (B, T, V)

    def forward(self, src: Tensor, src_lengths: Tensor | Sequence[int] | None, tgt_in: Tensor, *,
                return_attention: bool = False) -> Tensor | tuple[Tensor, dict[str, Tensor]]:
        """Teacher-forced logits ``(B, T, V)`` (for :func:`~seqlab.models.seq2seq.seq2seq_loss`); with
        ``return_attention=True`` also every attention's per-head weights, batch-first:
        ``{"encoder": (L, B, H, S', S'), "decoder_self": (L, B, H, T, T), "cross": (L, B, H, T, S')}``
        (``S' = S + 1``, the source's ``<eos>`` last, with ``mark_source_end``)."""
        if not return_attention:
            memory, real = self.encode(src, src_lengths)
            return self.decode(tgt_in, memory, real)
        memory, real, encoder_weights = self.encode(src, src_lengths, need_weights=True)
        logits, decoder_weights = self.decode(tgt_in, memory, real, need_weights=True)
        return logits, {"encoder": encoder_weights, "decoder_self": decoder_weights["self"],
                        "cross": decoder_weights["cross"]}

    # -- decoding ---------------------------------------------------------------------------------------
    @torch.no_grad()
    def greedy(self, src: Tensor, src_lengths: Tensor | Sequence[int] | None = None, *,
               max_len: int = 50) -> list[Tensor]:
        """Greedy translations: one 1-D id tensor per source, without ``<eos>``, at most ``max_len`` long.
        Each step reruns the whole prefix (no key/value cache)."""
        if max_len < 1:
            raise ValueError(f"max_len must be at least 1, got {max_len}")
        memory, real = self.encode(src, src_lengths)
        c = self.config
        written = torch.full((src.shape[0], 1), c.bos_id, dtype=torch.long, device=src.device)   # (B, 1 + t)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            logits = self.decode(written, memory, real)[:, -1]             # (B, V): the next token's scores
            tokens = logits.argmax(dim=-1)                                 # (B,)
            written = torch.cat([written, tokens[:, None]], dim=1)
            done |= tokens == c.eos_id
            if done.all():
                break
        return cut_at_eos(written[:, 1:], c.eos_id)                        # drop <bos>

    @torch.no_grad()
    def beam(self, src: Tensor, *, beam_size: int = 4, max_len: int = 50,
             length_penalty: float = 0.0) -> list[Hypothesis]:
        """The ``beam_size`` best translations of one source ``(S,)``, best first; a state is a prefix of ids."""
        if not isinstance(src, Tensor) or src.dim() != 1:
            shape = tuple(src.shape) if isinstance(src, Tensor) else type(src).__name__
            raise ValueError(f"beam translates one source: expected ids of shape (S,), got {shape}")
        memory, _ = self.encode(src[None], None)                           # (1, S, d)

        def step(tokens: Tensor, prefix: Tensor) -> tuple[Tensor, Tensor]:
            prefix = torch.cat([prefix, tokens[:, None]], dim=1)          # (n, t + 1)
            logits = self.decode(prefix, memory.expand(len(prefix), -1, -1), None)[:, -1]
            return F.log_softmax(logits.float(), dim=-1), prefix

        empty = torch.empty(1, 0, dtype=torch.long, device=src.device)    # the prefix before <bos>
        return beam_search(step, empty, bos_id=self.config.bos_id, eos_id=self.config.eos_id, beam_size=beam_size,
                           max_len=max_len, length_penalty=length_penalty,
                           reorder=lambda prefix, index: prefix.index_select(0, index))

    @torch.no_grad()
    def attention(self, src: Tensor, output: Tensor) -> dict[str, Tensor]:
        """Per-head weights writing ``output`` ``(T,)`` + ``<eos>`` for one source ``(S,)``: ``{"encoder":
        (L, H, S', S'), "decoder_self": (L, H, T+1, T+1), "cross": (L, H, T+1, S')}``."""
        tgt_in, _ = teacher_forcing(output, self.config.bos_id, self.config.eos_id)
        _, weights = self(src[None], None, tgt_in[None], return_attention=True)
        return {name: w[:, 0] for name, w in weights.items()}

    @torch.no_grad()
    def alignment(self, src: Tensor, output: Tensor, *, layer: int = -1) -> Tensor:
        """Head-averaged cross-attention ``(T+1, S')`` of decoder layer ``layer``, as :meth:`Seq2Seq.alignment`."""
        return self.attention(src, output)["cross"][layer].mean(dim=0)

    @torch.no_grad()
    def log_prob(self, src: Tensor, target: Tensor) -> float:
        """:math:`\\log p(y \\mid x)` of one target ``(T,)`` given one source ``(S,)``, ``<eos>`` included."""
        return target_log_prob(self, src, target)
