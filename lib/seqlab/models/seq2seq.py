r"""The RNN encoder-decoder ``Seq2Seq`` (Sutskever et al., 2014), optionally with Luong attention
:math:`\tanh(W_c [c_t; s_t])`; exposure bias tools (:func:`error_by_position`, :class:`ScheduledSampling`).
Notebooks 7 and 8.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.checks import check_ids
from seqlab.data.batching import IGNORE_INDEX, pad_sequences
from seqlab.data.pairs import PairBatches, teacher_forcing
from seqlab.decoding import Hypothesis, State, beam_search, cut_at_eos, target_log_prob
from seqlab.modes import evaluating
from seqlab.nn import recurrent_layer
from seqlab.nn.attention import Attention, OneQueryAttention
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
    """Source ids ``(B, S)`` and lengths ``(B,)`` -> outputs ``(B, S, H)`` and the state after each last real token."""

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

    Attention needs ``memory`` ``(B, S, H)`` and ``mask`` ``(B, S)`` (True = real); ``return_attention``
    adds the weights ``(B, T, S)``.
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
    """Encoder-decoder; ``forward(src, src_lengths, tgt_in)`` -> teacher-forced logits ``(B, T, V)``."""

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
        """Greedy translations: one 1-D id tensor per source, without ``<eos>``, at most ``max_len`` long."""
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
        return cut_at_eos(torch.stack(written, dim=1), self.config.eos_id)   # (B, steps)

    @torch.no_grad()
    def beam(self, src: Tensor, *, beam_size: int = 4, max_len: int = 50,
             length_penalty: float = 0.0, select=None) -> list[Hypothesis]:
        """The ``beam_size`` best translations of one source ``(S,)``, best first (see ``beam_search``)."""
        if not isinstance(src, Tensor) or src.dim() != 1:
            shape = tuple(src.shape) if isinstance(src, Tensor) else type(src).__name__
            raise ValueError(f"beam translates one source: expected ids of shape (S,), got {shape}")
        memory, _, state = self.encode(src[None], None)                   # memory (1, S, H)

        def step(tokens: Tensor, state: State) -> tuple[Tensor, State]:   # the same source for every hypothesis
            return self._step(tokens, state, memory.expand(len(tokens), -1, -1), None)

        return beam_search(step, state, bos_id=self.config.bos_id, eos_id=self.config.eos_id,
                           beam_size=beam_size, max_len=max_len, length_penalty=length_penalty, select=select)

    def stepper(self, src: Tensor) -> tuple[Callable[[int, State], tuple[Tensor, State]], State]:
        """``(step, state)`` for one source ``(S,)``: ``step(token, state) -> (log_probs (V,), new state)``."""
        if not isinstance(src, Tensor) or src.dim() != 1:
            shape = tuple(src.shape) if isinstance(src, Tensor) else type(src).__name__
            raise ValueError(f"stepper decodes one source: expected ids of shape (S,), got {shape}")
        with torch.no_grad():
            memory, _, state = self.encode(src[None], None)

        @torch.no_grad()
        def step(token: int, state: State) -> tuple[Tensor, State]:
            tokens = torch.tensor([int(token)], device=src.device)
            log_probs, state = self._step(tokens, state, memory, None)
            return log_probs[0], state

        return step, state

    @torch.no_grad()
    def alignment(self, src: Tensor, output: Tensor) -> Tensor:
        """Attention weights ``(T+1, S)`` while writing ``output`` ``(T,)`` then ``<eos>`` for one source ``(S,)``."""
        tgt_in, _ = teacher_forcing(output, self.config.bos_id, self.config.eos_id)
        _, weights = self(src[None], None, tgt_in[None], return_attention=True)
        return weights[0]

    def with_attend(self, attend_fn) -> Seq2Seq:
        """A copy attending with ``attend_fn(s (H,), memory (S, H)) -> (weights (S,), context (H,))``;
        ``attention="dot"`` only."""
        if self.config.attention != "dot":
            raise ValueError(f"with_attend replaces dot-product attention; this model's is {self.config.attention!r}")
        parameter = next(self.parameters())
        twin = Seq2Seq(self.config).to(device=parameter.device, dtype=parameter.dtype)
        twin.load_state_dict(self.state_dict())
        twin.decoder.attention = OneQueryAttention(attend_fn, self.config.hidden_size)
        return twin.train(self.training)

    @torch.no_grad()
    def log_prob(self, src: Tensor, target: Tensor) -> float:
        """:math:`\\log p(y \\mid x)` of one target ``(T,)`` given one source ``(S,)``, ``<eos>`` included."""
        return target_log_prob(self, src, target)


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



# -- exposure bias: measuring it, and scheduled sampling ---------------------------------------------
@torch.no_grad()
def wrong_by_position(model: Seq2Seq, pairs: Sequence[tuple[Tensor, Tensor]], *, free_running: bool,
                      batch_size: int = 500) -> tuple[Tensor, Tensor]:
    """Boolean ``(wrong, real)``, ``(N, T_max + 1)``, over target + ``<eos>`` positions of ``pairs``.

    ``free_running``: the decoder reads its own previous choices instead of the true tokens.
    """
    if not pairs:
        raise ValueError("wrong_by_position needs at least one (source, target) pair")
    device = next(model.parameters()).device
    steps = max(len(t) for _, t in pairs) + 1
    cfg = model.config
    wrong, real = [], []
    with evaluating(model):
        for src, src_lengths, tgt_in, tgt_out in PairBatches(pairs, batch_size, shuffle=False, pad_id=cfg.pad_id,
                                                             bos_id=cfg.bos_id, eos_id=cfg.eos_id):
            src, tgt_in, tgt_out = src.to(device), tgt_in.to(device), tgt_out.to(device)
            if free_running:
                logits = decode_feeding(model, src, src_lengths, tgt_in, feed_own=1.0)
            else:
                logits = model(src, src_lengths, tgt_in)                      # (B, T, V)
            is_real = tgt_out != IGNORE_INDEX                                  # (B, T)
            pad = steps - tgt_out.shape[1]
            wrong.append(F.pad((logits.argmax(dim=-1) != tgt_out) & is_real, (0, pad)).cpu())
            real.append(F.pad(is_real, (0, pad)).cpu())
    return torch.cat(wrong), torch.cat(real)


def error_by_position(model: Seq2Seq, pairs: Sequence[tuple[Tensor, Tensor]], *, free_running: bool,
                      batch_size: int = 500) -> Tensor:
    """Share of wrong tokens per output position, ``(T_max + 1,)``, over the pairs that reach it."""
    wrong, real = wrong_by_position(model, pairs, free_running=free_running, batch_size=batch_size)
    return wrong.sum(dim=0).float() / real.sum(dim=0).clamp(min=1).float()


def decode_feeding(model: Seq2Seq, src: Tensor, src_lengths: Tensor | Sequence[int] | None, tgt_in: Tensor, *,
                   feed_own: float, generator: torch.Generator | None = None) -> Tensor:
    """Logits ``(B, T, V)``, decoding ``tgt_in`` ``(B, T)`` step by step; each step reads the decoder's own
    previous argmax with probability ``feed_own`` (0: teacher forcing, 1: free running), else ``tgt_in``.
    """
    if not 0.0 <= feed_own <= 1.0:
        raise ValueError(f"feed_own is a probability, in [0, 1]; got {feed_own}")
    memory, mask, state = model.encode(src, src_lengths)
    check_ids("decode_feeding", tgt_in, None)
    if tgt_in.shape[0] != src.shape[0]:
        raise ValueError(f"src and tgt_in must hold the same number of sequences, got {src.shape[0]} "
                         f"and {tgt_in.shape[0]}")
    tokens = tgt_in[:, 0]                                                  # <bos>
    step_logits = []
    for t in range(tgt_in.shape[1]):
        if t > 0:
            own = step_logits[-1][:, 0].argmax(dim=-1).detach()            # the decoder's previous choice (B,)
            if feed_own >= 1.0:
                tokens = own
            elif feed_own > 0.0:
                draw = torch.rand(tokens.shape, generator=generator).to(own.device)   # one draw per sequence
                tokens = torch.where(draw < feed_own, own, tgt_in[:, t])
            else:
                tokens = tgt_in[:, t]
        logits, state = model.decoder(tokens[:, None], state, memory, mask)   # (B, 1, V)
        step_logits.append(logits)
    return torch.cat(step_logits, dim=1)


def linear_schedule(final: float, steps: int) -> Callable[[int], float]:
    """``step -> probability``: rises linearly from 0 at step 0 to ``final`` at ``steps`` and stays there."""
    if not 0.0 <= final <= 1.0:
        raise ValueError(f"final is a probability, in [0, 1]; got {final}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    return lambda step: final * min(step, steps) / steps


class ScheduledSampling:
    """Scheduled sampling loss (Bengio et al., 2015): :func:`seq2seq_loss` with :func:`decode_feeding` at
    ``feed_own=schedule(training calls so far)``, drawn from its own generator (``seed``).
    """

    def __init__(self, schedule: Callable[[int], float], *, seed: int = 0):
        self.schedule = schedule
        self.calls = 0
        self.generator = torch.Generator().manual_seed(seed)
        self.probabilities: list[float] = []        # the probability each call used

    def __call__(self, model: Seq2Seq, batch: tuple[Tensor, Tensor, Tensor, Tensor]) -> Tensor:
        if not (isinstance(batch, (tuple, list)) and len(batch) == 4):
            raise ValueError("ScheduledSampling expects batches (src, src_lengths, tgt_in, tgt_out) from PairBatches")
        src, src_lengths, tgt_in, tgt_out = batch
        p = float(self.schedule(self.calls)) if model.training else 0.0
        if model.training:
            self.calls += 1
            self.probabilities.append(p)
        logits = decode_feeding(model, src, src_lengths, tgt_in, feed_own=p, generator=self.generator)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=IGNORE_INDEX)
