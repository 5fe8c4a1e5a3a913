"""Turning a model's scores into tokens: sampling with temperature and top-k, greedy choice, beam search.

:func:`cut_at_eos` and :func:`target_log_prob` are what both translation models share around their decoding steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from seqlab.data.pairs import teacher_forcing

State = Any  # a tensor (L, n, H) or a tuple of them, e.g. an LSTM's (h, c)


def sample_next(logits: torch.Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """Draw one id per row of ``logits`` (B, V) -> (B,). ``temperature == 0`` means greedy."""
    if logits.dim() != 2:
        raise ValueError(f"sample_next expects logits of shape (B, V), got {tuple(logits.shape)}")
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy, 1 = the model's own "
                         f"distribution), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                              or not 1 <= top_k <= logits.shape[-1]):
        raise ValueError(f"top_k must be an integer in 1..{logits.shape[-1]} (the vocabulary size), got {top_k!r}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits.float() / temperature
    if top_k is not None:
        kth = scaled.topk(top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    # multinomial on the CPU with an explicit generator gives the same draws on every machine
    return torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(logits.device)


# -- beam search ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Hypothesis:
    """One output of :func:`beam_search`: the tokens (no ``<bos>``, no ``<eos>``) and their log-probability.

    ``log_prob`` includes the final ``<eos>`` when ``finished``; an unfinished one ran into ``max_len``.
    """

    tokens: tuple[int, ...]
    log_prob: float
    finished: bool

    def score(self, length_penalty: float = 0.0) -> float:
        """``log_prob / n ** length_penalty``, ``n`` the steps taken (``<eos>`` included); 1 ranks by mean log-probability."""
        steps = len(self.tokens) + (1 if self.finished else 0)
        return self.log_prob / max(steps, 1) ** length_penalty


def reorder_dim1(state: State, index: torch.Tensor) -> State:
    """Pick rows ``index`` of a recurrent state along dim 1 (torch's ``h_n`` layout), each element of a tuple ``(h, c)``."""
    if isinstance(state, tuple):
        return tuple(s.index_select(1, index) for s in state)
    return state.index_select(1, index)


def beam_search(step: Callable[[torch.Tensor, State], tuple[torch.Tensor, State]], state: State, *,
                bos_id: int, eos_id: int, beam_size: int = 4, max_len: int = 50, length_penalty: float = 0.0,
                reorder: Callable[[State, torch.Tensor], State] = reorder_dim1,
                select: Callable[[torch.Tensor, torch.Tensor, int], list] | None = None) -> list[Hypothesis]:
    """The ``beam_size`` most probable outputs of a decoder, best first, by :meth:`Hypothesis.score`.

    ``step(tokens (n,), state)`` returns next-token log-probabilities ``(n, V)`` and the new state;
    ``state`` is for one input (batch 1). Stops at ``max_len`` or, with ``length_penalty == 0``, once no
    live hypothesis can beat ``beam_size`` finished ones; finished ones rank first. ``beam_size=1`` is
    greedy. ``select(scores (n,), log_probs (n, V), count)`` replaces the built-in top-k, returning
    ``(row, token, new_score)`` triples.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be at least 1, got {beam_size}")
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    alive: list[tuple[int, ...]] = [()]
    alive_log_probs = torch.zeros(1)
    finished: list[Hypothesis] = []
    last = torch.tensor([bos_id])
    for _ in range(max_len):
        log_probs, state = step(last, state)                              # (n, V)
        if log_probs.dim() != 2 or log_probs.shape[0] != len(alive):
            raise ValueError(f"step must return log-probabilities of shape (n, V) = ({len(alive)}, V), "
                             f"got {tuple(log_probs.shape)}")
        vocab = log_probs.shape[1]
        # 2 * beam_size candidates always leave beam_size that do not end in <eos>
        count = min(2 * beam_size, len(alive) * vocab)
        if select is None:
            candidates = (alive_log_probs[:, None] + log_probs.detach().float().cpu()).flatten()   # (n * V,)
            top = candidates.topk(count)
            chosen = [(*divmod(flat, vocab), score) for score, flat in zip(top.values.tolist(), top.indices.tolist())]
        else:
            chosen = _selected(select(alive_log_probs.clone(), log_probs.detach().float().cpu(), count), len(alive), vocab)
        keep_rows, keep_tokens, keep_scores = [], [], []
        for row, token, score in chosen:
            if token == eos_id:
                finished.append(Hypothesis(alive[row], score, True))
            elif len(keep_rows) < beam_size:
                keep_rows.append(row)
                keep_tokens.append(token)
                keep_scores.append(score)
        alive = [alive[r] + (t,) for r, t in zip(keep_rows, keep_tokens)]
        alive_log_probs = torch.tensor(keep_scores)
        if not alive:
            break
        if len(finished) >= beam_size and length_penalty == 0:
            kth_best = sorted((h.log_prob for h in finished), reverse=True)[beam_size - 1]
            if max(keep_scores) <= kth_best:
                break                                                     # no live hypothesis can catch up
        index = torch.tensor(keep_rows, device=log_probs.device)
        state = reorder(state, index)
        last = torch.tensor(keep_tokens, device=log_probs.device)
    else:
        finished += [Hypothesis(tokens, score, False) for tokens, score in zip(alive, alive_log_probs.tolist())]
    ranked = sorted(finished, key=lambda h: (not h.finished, -h.score(length_penalty)))
    return ranked[:beam_size]


def _selected(chosen, rows: int, vocab: int) -> list[tuple[int, int, float]]:
    """A ``select`` function's answer as ``(row, token, score)`` triples; an error names a row or token that does not exist."""
    try:
        triples = [(int(row), int(token), float(score)) for row, token, score in chosen]
    except (TypeError, ValueError):
        raise ValueError(f"select must return (row, token, score) triples, got {type(chosen).__name__}") from None
    for row, token, _ in triples:
        if not (0 <= row < rows and 0 <= token < vocab):
            raise ValueError(f"select chose row {row}, token {token}: the beam holds rows 0..{rows - 1} and the "
                             f"vocabulary tokens 0..{vocab - 1}")
    return triples


def cut_at_eos(written: torch.Tensor, eos_id: int) -> list[torch.Tensor]:
    """Each row of ``written`` ``(B, steps)`` up to its first ``<eos>`` (left out), as 1-D CPU tensors."""
    outputs = []
    for row in written.cpu():
        ends = (row == eos_id).nonzero()
        outputs.append(row[: int(ends[0]) if len(ends) else len(row)])
    return outputs


def target_log_prob(model: torch.nn.Module, src: torch.Tensor, target: torch.Tensor) -> float:
    r""":math:`\log p(y \mid x)` of one target ``(T,)`` given one source ``(S,)``, ``<eos>`` included, by teacher forcing.

    ``model(src (1, S), None, tgt_in (1, T + 1))`` returns logits ``(1, T + 1, V)``; ``model.config`` has ``bos_id``, ``eos_id``.
    """
    tgt_in, tgt_out = teacher_forcing(target, model.config.bos_id, model.config.eos_id)
    log_probs = F.log_softmax(model(src[None], None, tgt_in[None])[0].float(), dim=-1)   # (T+1, V)
    return float(log_probs.gather(1, tgt_out[:, None]).sum())
