"""Notebook 07 — encoder-decoder: teacher forcing, the log-probability of an output, one beam step."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, register

BOS, EOS = 1, 2


def _log_probs(T: int, V: int, seed: int) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.log_softmax(2 * torch.randn(T, V, generator=g, dtype=torch.float64), dim=-1)


# -- 1. teacher forcing -----------------------------------------------------------------------------
def _teacher_forcing_pair(target: list[int], bos: int, eos: int) -> tuple[list[int], list[int]]:
    return [bos] + list(target), list(target) + [eos]


def _diagnose_pair(args: tuple, got: Any, expected: tuple) -> str | None:
    target, bos, eos = args
    if not (isinstance(got, tuple) and len(got) == 2):
        return "return a pair (decoder_input, decoder_output), two lists."
    decoder_in, decoder_out = (list(x) for x in got)
    if (decoder_in, decoder_out) == (expected[1], expected[0]):
        return "the two are swapped: the decoder *reads* <bos> + target and must *write* target + <eos>."
    if decoder_in == list(target):
        return "the decoder input needs <bos> in front: at the first step there is no previous target token."
    if decoder_out == list(target):
        return "the decoder output needs <eos> at the end, or the model never learns when to stop."
    if len(decoder_in) != len(decoder_out):
        return "input and output must have the same length, len(target) + 1: step t reads y_{t-1} and predicts y_t."
    return None


register(Exercise(
    name="teacher_forcing_pair",
    signature="teacher_forcing_pair(target: list[int], bos: int, eos: int) -> (decoder_input, decoder_output)",
    reference=_teacher_forcing_pair,
    cases=[Case(([7, 8, 9], BOS, EOS), "a target of three tokens"),
           Case(([5], BOS, EOS), "a target of one token"),
           Case(([4, 4, 6, 5], 10, 11), "other ids for <bos> and <eos>")],
    hint="decoder_input = [bos] + target, decoder_output = target + [eos].",
    diagnose=_diagnose_pair,
    same=lambda got, expected: isinstance(got, tuple) and len(got) == 2 and
    (list(got[0]), list(got[1])) == (list(expected[0]), list(expected[1])),
))


# -- 2. the log-probability of a whole output -----------------------------------------------------
def _sequence_log_prob(step_log_probs: Tensor, tokens: list[int]) -> float:
    return float(sum(step_log_probs[t, token] for t, token in enumerate(tokens)))


def _diagnose_log_prob(args: tuple, got: Any, expected: float) -> str | None:
    step_log_probs, tokens = args
    try:
        got = float(got)
    except (TypeError, ValueError):
        return "return one number (a float): the sum of log p(y_t | ...) over the steps."
    chosen = torch.stack([step_log_probs[t, token] for t, token in enumerate(tokens)])
    if abs(got - float(chosen.exp().prod())) < 1e-9:
        return "that is the probability itself; return its logarithm, a sum of log-probabilities (a product of " \
               "many small probabilities underflows)."
    if abs(got - float(chosen.mean())) < 1e-9:
        return "that is the mean log-probability per step; the log-probability of the output is the sum."
    if abs(got - float(step_log_probs.max(dim=1).values[: len(tokens)].sum())) < 1e-9:
        return "you summed each step's largest log-probability; take the one of the token actually written, " \
               "step_log_probs[t, tokens[t]]."
    if abs(got - float(step_log_probs[: len(tokens), tokens].sum())) < 1e-9:
        return "step_log_probs[:, tokens] picks every listed token at every step; pair step t with tokens[t]."
    return None


register(Exercise(
    name="sequence_log_prob",
    signature="sequence_log_prob(step_log_probs: Tensor (T, V), tokens: list[int] of length T) -> float",
    reference=_sequence_log_prob,
    cases=[Case((_log_probs(3, 5, seed=0), [1, 4, 2]), "three steps over five tokens"),
           Case((_log_probs(1, 4, seed=1), [0]), "one step"),
           Case((_log_probs(6, 7, seed=2), [3, 3, 0, 6, 1, 2]), "six steps, a token repeated")],
    hint="log p(y | x) = sum over t of log p(y_t | y_<t, x) = sum of step_log_probs[t, tokens[t]].",
    diagnose=_diagnose_log_prob,
))


# -- 3. one step of beam search -----------------------------------------------------------------------
def _beam_step(scores: Tensor, log_probs: Tensor, beam_size: int) -> list[tuple[int, int, float]]:
    total = scores[:, None] + log_probs                                    # (k, V)
    top = total.flatten().topk(beam_size)
    vocab = log_probs.shape[1]
    return [(i // vocab, i % vocab, float(s)) for s, i in zip(top.values.tolist(), top.indices.tolist())]


def _as_triples(got: Any) -> list[tuple[int, int, float]] | None:
    try:
        return [(int(r), int(t), float(s)) for r, t, s in got]
    except (TypeError, ValueError):
        return None


def _same_triples(got: Any, expected: list) -> bool:
    triples = _as_triples(got)
    return triples is not None and len(triples) == len(expected) and all(
        r == er and t == et and abs(s - es) < 1e-9 for (r, t, s), (er, et, es) in zip(triples, expected))


def _diagnose_beam(args: tuple, got: Any, expected: list) -> str | None:
    scores, log_probs, beam_size = args
    triples = _as_triples(got)
    if triples is None:
        return "return a list of (row, token, score) triples, best first."
    if len(triples) != beam_size:
        return f"keep exactly beam_size = {beam_size} extensions, got {len(triples)}."
    if _same_triples(got, _beam_step(torch.zeros_like(scores), log_probs, beam_size)):
        return "add each hypothesis's score so far: the score of an extension is scores[row] + log_probs[row, token]."
    per_row = [(r, int(log_probs[r].argmax()), float(scores[r] + log_probs[r].max())) for r in range(len(scores))]
    if sorted(triples) == sorted(per_row[:beam_size]):
        return "that keeps the best token of each hypothesis; beam search ranks all k x V extensions together."
    if sorted(s for _, _, s in triples) == sorted(s for _, _, s in expected):
        return "the scores are right but not the (row, token) pairs: in the flattened k x V array, index i is " \
               "row i // V, token i % V."
    return None


register(Exercise(
    name="beam_step",
    signature="beam_step(scores: Tensor (k,), log_probs: Tensor (k, V), beam_size: int) -> "
              "list of (row, token, new_score), best first",
    reference=_beam_step,
    cases=[Case((torch.tensor([-0.5, -1.0], dtype=torch.float64), _log_probs(2, 4, seed=3), 2),
                "two hypotheses, four tokens, keep two"),
           Case((torch.tensor([-0.1, -3.0, -2.0], dtype=torch.float64), _log_probs(3, 5, seed=4), 3),
                "three hypotheses of different scores, keep three"),
           Case((torch.tensor([0.0], dtype=torch.float64), _log_probs(1, 6, seed=5), 4),
                "the first step: one hypothesis (just <bos>), keep four")],
    hint="add scores[:, None] to log_probs, flatten the k x V array, take the beam_size largest "
         "(.topk), and turn each flat index i into (i // V, i % V).",
    diagnose=_diagnose_beam,
    same=_same_triples,
))
