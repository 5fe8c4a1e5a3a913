r"""The encoder-decoder (sequence-to-sequence) model of Sutskever et al. (2014) and Cho et al. (2014).

An **encoder** RNN reads the source :math:`x_1 \dots x_S` and its final state becomes the
decoder's initial state, the one fixed-size vector through which everything about the source
must pass:

.. math::

    h_s = f(h_{s-1}, x_s), \qquad c = h_S

A **decoder** RNN, started from :math:`s_0 = c`, writes the target one token at a time, each
step reading the token before it (:math:`y_0` = ``<bos>``):

.. math::

    s_t = g(s_{t-1}, y_{t-1}), \qquad p(y_t \mid y_{<t}, x) = \mathrm{softmax}(W s_t + b)

and stops when it writes ``<eos>``. With ``attention=`` (notebook 8) the decoder also looks back at
every encoder state: it scores each :math:`h_j` against :math:`s_t`
(:class:`~seqlab.nn.attention.Attention`), reads their weighted sum :math:`c_t`, and predicts from
the *attentional state* :math:`\tilde s_t = \tanh(W_c [c_t; s_t])` instead of :math:`s_t` (Luong et
al., 2015; Bahdanau et al., 2015 score :math:`s_{t-1}` and feed :math:`c_t` into the RNN instead,
the same idea wired differently). Training feeds the *true* previous token (teacher forcing,
:class:`~seqlab.data.pairs.PairBatches`); decoding feeds its own choices, greedily
(:meth:`Seq2Seq.greedy`) or with :func:`~seqlab.decoding.beam_search` (:meth:`Seq2Seq.beam`).
``f`` and ``g`` are seqlab's own from-scratch GRU, LSTM or RNN layers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.data.batching import IGNORE_INDEX, pad_sequences
from seqlab.data.pairs import teacher_forcing
from seqlab.decoding import Hypothesis, State, beam_search
from seqlab.models._checks import check_ids
from seqlab.nn import recurrent_layer
from seqlab.nn.attention import Attention
from seqlab.nn.masks import padding_mask


@dataclass
class Seq2SeqConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    cell: str = "gru"            # 'gru', 'lstm' or 'rnn', for both encoder and decoder
    embed_size: int = 32
    hidden_size: int = 128
    num_layers: int = 1
    attention: str | None = None  # None: the fixed-vector model; else a score of seqlab.nn.attention.SCORES
    pad_id: int = 0              # the ids of seqlab.data.pairs.PAIR_SPECIALS
    bos_id: int = 1
    eos_id: int = 2

    def to_dict(self) -> dict:
        return asdict(self)


class Encoder(nn.Module):
    """Source ids ``(B, S)`` and lengths ``(B,)`` -> outputs ``(B, S, H)`` and the final state.

    The final state is taken after each sequence's *own* last token (padding never enters it).
    """

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        self.embed = nn.Embedding(config.src_vocab_size, config.embed_size, padding_idx=config.pad_id)
        self.rnn = recurrent_layer(config.cell, config.embed_size, config.hidden_size, config.num_layers)

    def forward(self, src: Tensor, lengths: Tensor | Sequence[int] | None = None) -> tuple[Tensor, State]:
        lengths = check_ids("Encoder", src, lengths)
        outputs, state = self.rnn(self.embed(src), lengths=lengths)     # (B, S, H); (L, B, H) or (h, c)
        return outputs, state


class Decoder(nn.Module):
    """Previous target ids ``(B, T)`` and a state -> next-token logits ``(B, T, V)`` and the new state.

    With attention, ``memory`` (the encoder outputs ``(B, S, H)``) and its ``mask`` ``(B, S)`` are
    needed too, and ``return_attention=True`` adds the weights ``(B, T, S)`` to what it returns.
    """

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        H = config.hidden_size
        self.embed = nn.Embedding(config.tgt_vocab_size, config.embed_size, padding_idx=config.pad_id)
        self.rnn = recurrent_layer(config.cell, config.embed_size, H, config.num_layers)
        self.attention = Attention(config.attention, H, H) if config.attention else None
        self.combine = nn.Linear(2 * H, H) if config.attention else None   # W_c of s~_t = tanh(W_c [c_t; s_t])
        self.head = nn.Linear(H, config.tgt_vocab_size)

    def forward(self, tgt_in: Tensor, state: State, memory: Tensor | None = None, mask: Tensor | None = None,
                *, return_attention: bool = False) -> tuple:
        check_ids("Decoder", tgt_in, None)
        outputs, state = self.rnn(self.embed(tgt_in), state)             # s_t: (B, T, H)
        weights = None
        if self.attention is not None:
            if memory is None:
                raise ValueError("this decoder attends: pass the encoder outputs (B, S, H) as memory")
            context, weights = self.attention(outputs, memory, mask)     # c_t (B, T, H), a_tj (B, T, S)
            outputs = torch.tanh(self.combine(torch.cat([context, outputs], dim=-1)))   # s~_t
        logits = self.head(outputs)                                       # (B, T, V)
        return (logits, state, weights) if return_attention else (logits, state)


class Seq2Seq(nn.Module):
    """Encoder-decoder: the encoder's final state starts the decoder (and, with ``config.attention``,
    the decoder also attends to every encoder output).

    ``forward(src, src_lengths, tgt_in)`` returns the logits ``(B, T, V)`` of teacher-forced
    decoding (for :func:`seq2seq_loss`); :meth:`greedy` and :meth:`beam` translate;
    :meth:`alignment` gives the attention weights of one translation.
    """

    def __init__(self, config: Seq2SeqConfig):
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)

    def encode(self, src: Tensor, src_lengths: Tensor | Sequence[int] | None) -> tuple[Tensor, Tensor | None, State]:
        """Encoder outputs ``(B, S, H)``, their mask ``(B, S)`` (None without lengths) and final state."""
        memory, context = self.encoder(src, src_lengths)                  # context = h_S: the bottleneck
        mask = None if src_lengths is None else padding_mask(src_lengths, src.shape[1], device=src.device)
        return memory, mask, context

    def forward(self, src: Tensor, src_lengths: Tensor | Sequence[int] | None, tgt_in: Tensor, *,
                return_attention: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        memory, mask, context = self.encode(src, src_lengths)
        check_ids("Seq2Seq", tgt_in, None)
        if tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"src and tgt_in must hold the same number of sequences, got {src.shape[0]} "
                             f"and {tgt_in.shape[0]}")
        logits, _, weights = self.decoder(tgt_in, context, memory, mask, return_attention=True)
        if return_attention:
            if weights is None:
                raise ValueError("this model has no attention (Seq2SeqConfig(attention=None)): no weights to return")
            return logits, weights
        return logits

    def _step(self, tokens: Tensor, state: State, memory: Tensor, mask: Tensor | None) -> tuple[Tensor, State]:
        """One decoder step for tokens ``(n,)``: log-probabilities ``(n, V)`` of the next token and the new state."""
        logits, state = self.decoder(tokens[:, None], state, memory, mask)
        return F.log_softmax(logits[:, 0].float(), dim=-1), state

    @torch.no_grad()
    def greedy(self, src: Tensor, src_lengths: Tensor | Sequence[int] | None = None, *,
               max_len: int = 50) -> list[Tensor]:
        """Translate a batch, taking the likeliest token at each step: one 1-D tensor of ids per
        source, without ``<eos>`` (and cut at ``max_len`` tokens if ``<eos>`` never comes)."""
        memory, mask, state = self.encode(src, src_lengths)
        batch = src.shape[0]
        tokens = torch.full((batch,), self.config.bos_id, dtype=torch.long, device=src.device)
        written = []
        done = torch.zeros(batch, dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            log_probs, state = self._step(tokens, state, memory, mask)
            tokens = log_probs.argmax(dim=-1)                              # (B,)
            written.append(tokens)
            done |= tokens == self.config.eos_id
            if done.all():                                                 # what follows an <eos> is cut below
                break
        outputs = []
        for row in torch.stack(written, dim=1).cpu():                     # (B, steps)
            ends = (row == self.config.eos_id).nonzero()
            outputs.append(row[: int(ends[0]) if len(ends) else len(row)])
        return outputs

    @torch.no_grad()
    def beam(self, src: Tensor, *, beam_size: int = 4, max_len: int = 50,
             length_penalty: float = 0.0) -> list[Hypothesis]:
        """The ``beam_size`` best translations of *one* source ``(S,)``, best first (see
        :func:`~seqlab.decoding.beam_search`)."""
        if not isinstance(src, Tensor) or src.dim() != 1:
            shape = tuple(src.shape) if isinstance(src, Tensor) else type(src).__name__
            raise ValueError(f"beam translates one source: expected ids of shape (S,), got {shape}")
        memory, _, state = self.encode(src[None], None)                   # memory (1, S, H)

        def step(tokens: Tensor, state: State) -> tuple[Tensor, State]:   # the same source for every hypothesis
            return self._step(tokens, state, memory.expand(len(tokens), -1, -1), None)

        return beam_search(step, state, bos_id=self.config.bos_id, eos_id=self.config.eos_id,
                           beam_size=beam_size, max_len=max_len, length_penalty=length_penalty)

    @torch.no_grad()
    def alignment(self, src: Tensor, output: Tensor) -> Tensor:
        """Attention weights ``(T+1, S)`` while writing ``output`` ``(T,)`` then ``<eos>`` for one source
        ``(S,)``: row ``t`` says where the decoder looked when it wrote output token ``t``."""
        tgt_in, _ = teacher_forcing(output, self.config.bos_id, self.config.eos_id)
        _, weights = self(src[None], None, tgt_in[None], return_attention=True)
        return weights[0]

    @torch.no_grad()
    def log_prob(self, src: Tensor, target: Tensor) -> float:
        """:math:`\\log p(y \\mid x)` of one target ``(T,)`` given one source ``(S,)``, ``<eos>`` included."""
        tgt_in, tgt_out = teacher_forcing(target, self.config.bos_id, self.config.eos_id)
        log_probs = F.log_softmax(self(src[None], None, tgt_in[None])[0].float(), dim=-1)     # (T+1, V)
        return float(log_probs.gather(1, tgt_out[:, None]).sum())


@torch.no_grad()
def translate(model: Seq2Seq, sources: Sequence[Tensor], *, batch_size: int = 500, max_len: int = 50) -> list[Tensor]:
    """Greedy translations of many sources (1-D id tensors), in their order, ``batch_size`` at a time."""
    device = next(model.parameters()).device
    outputs: list[Tensor] = []
    for start in range(0, len(sources), batch_size):
        src, lengths = pad_sequences(sources[start:start + batch_size], model.config.pad_id)
        outputs += model.greedy(src.to(device), lengths, max_len=max_len)
    return outputs


def seq2seq_loss(model: nn.Module, batch: tuple[Tensor, Tensor, Tensor, Tensor]) -> Tensor:
    """Mean cross-entropy of the next target token over the real (non-padded) target positions.

    ``batch`` is ``(src, src_lengths, tgt_in, tgt_out)`` from :class:`~seqlab.data.pairs.PairBatches`.
    """
    if not (isinstance(batch, (tuple, list)) and len(batch) == 4):
        raise ValueError("seq2seq_loss expects batches (src, src_lengths, tgt_in, tgt_out) from PairBatches, "
                         f"got {type(batch).__name__} of length {len(batch) if hasattr(batch, '__len__') else '?'}")
    src, src_lengths, tgt_in, tgt_out = batch
    logits = model(src, src_lengths, tgt_in)
    if logits.shape[:2] != tgt_out.shape:
        raise ValueError(f"seq2seq_loss expects logits of shape (B, T, V) = ({tgt_out.shape[0]}, {tgt_out.shape[1]}, V), "
                         f"got {tuple(logits.shape)}")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=IGNORE_INDEX)
