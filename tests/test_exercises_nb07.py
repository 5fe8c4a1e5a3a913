"""Notebook 07's exercises: typical wrong answers get the hint that names what is wrong."""

from __future__ import annotations

import pytest
import torch

from seqlab.decoding import beam_search
from seqlab.exercises import EXERCISES, check

from exercise_helpers import failure_message


@pytest.mark.parametrize("wrong, hint", [
    (lambda y, bos, eos: (list(y) + [eos], [bos] + list(y)), "the two are swapped"),
    (lambda y, bos, eos: (list(y), list(y) + [eos]), "needs <bos> in front"),
    (lambda y, bos, eos: ([bos] + list(y), list(y)), "needs <eos> at the end"),
    (lambda y, bos, eos: ([bos] + list(y) + [eos], list(y) + [eos]), "the same length"),
    (lambda y, bos, eos: [bos] + list(y), "return a pair"),
])
def test_teacher_forcing_pair_hints(wrong, hint):
    assert hint in failure_message("teacher_forcing_pair", wrong)


@pytest.mark.parametrize("wrong, hint", [
    (lambda lp, tokens: float(torch.stack([lp[t, k] for t, k in enumerate(tokens)]).exp().prod()), "its logarithm"),
    (lambda lp, tokens: float(torch.stack([lp[t, k] for t, k in enumerate(tokens)]).mean()), "the mean log-probability"),
    (lambda lp, tokens: float(lp.max(dim=1).values.sum()), "largest log-probability"),
    (lambda lp, tokens: float(lp[:, tokens].sum()), "pair step t with tokens[t]"),
    (lambda lp, tokens: "a number", "return one number"),
])
def test_sequence_log_prob_hints(wrong, hint):
    assert hint in failure_message("sequence_log_prob", wrong)


def _beam_step_no_history(scores, log_probs, k):
    top = log_probs.flatten().topk(k)
    V = log_probs.shape[1]
    return [(i // V, i % V, float(s)) for s, i in zip(top.values.tolist(), top.indices.tolist())]


def _beam_step_per_row(scores, log_probs, k):
    return [(r, int(log_probs[r].argmax()), float(scores[r] + log_probs[r].max())) for r in range(k)]


def _beam_step_swapped_index(scores, log_probs, k):
    total = scores[:, None] + log_probs
    top = total.flatten().topk(k)
    K = log_probs.shape[0]
    return [(i % K, i // K, float(s)) for s, i in zip(top.values.tolist(), top.indices.tolist())]


@pytest.mark.parametrize("wrong, hint", [
    (_beam_step_no_history, "add each hypothesis's score so far"),
    (_beam_step_per_row, "ranks all k x V extensions together"),
    (_beam_step_swapped_index, "index i is row i // V"),
    (lambda scores, log_probs, k: [(0, 0, 0.0)], "keep exactly beam_size"),
])
def test_beam_step_hints(wrong, hint):
    assert hint in failure_message("beam_step", wrong)


def test_beam_step_reference_is_the_step_inside_seqlabs_beam_search():
    """One step of seqlab's beam_search keeps the same extensions as the exercise's reference."""
    g = torch.Generator().manual_seed(0)
    log_probs = torch.log_softmax(torch.randn(1, 9, generator=g), dim=-1)
    expected = EXERCISES["beam_step"].reference(torch.zeros(1), log_probs, 3)
    kept = beam_search(lambda tokens, state: (log_probs.expand(len(tokens), -1), state), torch.zeros(1, 1, 1),
                       bos_id=0, eos_id=99, beam_size=3, max_len=1)
    assert [h.tokens[0] for h in kept] == [token for _, token, _ in expected]
    assert [h.log_prob for h in kept] == pytest.approx([score for _, _, score in expected])
