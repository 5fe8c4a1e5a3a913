"""Notebook 07 — encoder-decoder: the model's forward pass and greedy decoding (both watched on the trained date
translator), one beam step (watched driving beam search), scheduled sampling's inputs, the log-probability of an
output, and a prediction about exposure bias (judged against the notebook's own measurement)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, Measured, first_difference, register, tensor_hint

BOS, EOS = 1, 2


# -- the encoder-decoder's forward pass ---------------------------------------------------------------
def _encoder_decoder(encoder, decoder, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
    _, c = encoder(src, src_lengths)                 # c: the encoder's final state, after each source's own end
    logits, _ = decoder(tgt_in, c)                   # s_0 = c, then one step per input token: (B, T, V)
    return logits


def _small_seq2seq(cell: str, num_layers: int, seed: int):
    from seqlab.models.seq2seq import Seq2Seq, Seq2SeqConfig     # here, not at import: models import the exercises' users
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Seq2Seq(Seq2SeqConfig(9, 7, cell=cell, embed_size=4, hidden_size=6, num_layers=num_layers)).eval()
    return model


def _forward_case(cell: str, num_layers: int, lengths: list[int], target_len: int, seed: int) -> tuple:
    model = _small_seq2seq(cell, num_layers, seed)
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 9, (len(lengths), max(lengths)), generator=g)
    for b, n in enumerate(lengths):
        src[b, n:] = 0                                                   # padding
    tgt_in = torch.randint(3, 7, (len(lengths), target_len), generator=g)
    tgt_in[:, 0] = BOS
    return model.encoder, model.decoder, src, torch.tensor(lengths), tgt_in


def _zeros_like_state(state):
    return tuple(torch.zeros_like(s) for s in state) if isinstance(state, tuple) else torch.zeros_like(state)


def _diagnose_forward(args: tuple, got: Any, expected: Tensor) -> str | None:
    encoder, decoder, src, src_lengths, tgt_in = args
    if isinstance(got, tuple) and got and isinstance(got[0], Tensor) and got[0].shape == expected.shape:
        return "return only the logits (B, T, V); the decoder also returns its last state, which forward drops."
    hint = tensor_hint(got, expected)
    if hint:
        return hint + " The decoder's logits have one row per input token of tgt_in: (B, T, V)."
    got = got.detach()
    with torch.no_grad():
        _, c = encoder(src, src_lengths)
        from_zeros, _ = decoder(tgt_in, _zeros_like_state(c))
        _, c_padded = encoder(src)
        with_padding, _ = decoder(tgt_in, c_padded)
    if torch.allclose(got, from_zeros, atol=1e-6):
        return ("the decoder starts from zeros, so it never hears the source: start it from the encoder's final "
                "state, s_0 = c (the second thing encoder(...) returns).")
    if torch.allclose(got, with_padding, atol=1e-6):
        return (f"padding entered c: without src_lengths the encoder reads the pad steps of the shorter sources "
                f"(lengths {src_lengths.tolist()}) before its final state. Pass src_lengths to the encoder.")
    return f"{first_difference(got, expected, atol=1e-6)}."


register(Exercise(
    name="encoder_decoder",
    signature="encoder_decoder(encoder, decoder, src: LongTensor (B, S), src_lengths: LongTensor (B,), tgt_in: "
              "LongTensor (B, T)) -> logits (B, T, V); encoder(src, lengths) -> (outputs, c), decoder(tgt_in, "
              "state) -> (logits, state)",
    reference=_encoder_decoder,
    cases=[Case(_forward_case("gru", 1, [5, 3, 2], 4, seed=0), "three sources of lengths 5, 3, 2 (padded), one GRU layer"),
           Case(_forward_case("gru", 2, [4, 4], 3, seed=1), "two sources of the same length, two GRU layers"),
           Case(_forward_case("lstm", 1, [2, 6], 5, seed=2),
                "an LSTM encoder-decoder, whose state is a pair (h, c): pass it on whole")],
    hint="encode the source with its lengths and keep the final state c; decode tgt_in starting from c; return the "
         "logits.",
    diagnose=_diagnose_forward,
    same=lambda got, expected: isinstance(got, Tensor) and got.shape == expected.shape
    and bool(torch.allclose(got.detach(), expected, atol=1e-6)),
))


# -- greedy decoding ------------------------------------------------------------------------------------
def _greedy_decode(step, state, bos_id: int, eos_id: int, max_len: int) -> list[int]:
    token, written = bos_id, []
    for _ in range(max_len):
        log_probs, state = step(token, state)        # p(. | y_<t, x): (V,)
        token = int(log_probs.argmax())              # the likeliest next token
        if token == eos_id:
            break
        written.append(token)                        # fed back at the next step
    return written


class _ToyDecoder:
    """A small fixed decoder for the greedy checker: s_t = tanh(W s_{t-1} + E[y_{t-1}]), log-softmax(U s_t)."""

    def __init__(self, vocab: int, hidden: int, seed: int, eos_bias: float):
        g = torch.Generator().manual_seed(seed)
        self.W = torch.randn(hidden, hidden, generator=g, dtype=torch.float64)
        self.E = 2 * torch.randn(vocab, hidden, generator=g, dtype=torch.float64)
        self.U = 3 * torch.randn(vocab, hidden, generator=g, dtype=torch.float64)
        self.bias = torch.zeros(vocab, dtype=torch.float64)
        self.bias[EOS] = eos_bias                                         # how soon <eos> tends to come
        self.bias[:EOS] = -30.0                                           # it never writes <pad> or <bos>
        self.start = torch.randn(hidden, generator=g, dtype=torch.float64)

    def __call__(self, token: int, state: Tensor) -> tuple[Tensor, Tensor]:
        state = torch.tanh(self.W @ state + self.E[int(token)])
        return torch.log_softmax(self.U @ state + self.bias, dim=-1), state

    def __repr__(self) -> str:
        return f"a decoder step over {len(self.E)} tokens"


def _greedy_case(vocab: int, seed: int, eos_bias: float, max_len: int) -> tuple:
    toy = _ToyDecoder(vocab, 5, seed, eos_bias)
    return toy, toy.start.clone(), BOS, EOS, max_len


def _greedy_variants(step, state, bos_id: int, eos_id: int, max_len: int) -> dict[str, list[int]]:
    """What the usual mistakes write, for the diagnosis."""
    def run(*, keep_eos=False, stop=True, carry=True, feed=True):
        token, written, s = bos_id, [], state
        for _ in range(max_len):
            log_probs, new_s = step(token if feed else bos_id, s)
            s = new_s if carry else state
            token = int(log_probs.argmax())
            if token == eos_id and stop:
                if keep_eos:
                    written.append(token)
                break
            written.append(token)
        return written
    return {"keeps <eos>": run(keep_eos=True), "never stops": run(stop=False),
            "state not carried": run(carry=False), "<bos> fed every step": run(feed=False)}


_GREEDY_HINTS = {
    "keeps <eos>": "leave <eos> out of the output: it only says where to stop (translate's outputs never hold it).",
    "never stops": "stop at the first <eos>: what the decoder writes after it is not part of the output.",
    "state not carried": "carry the state: each step returns a new state, and the next step must start from it, or "
                         "every step starts again from c.",
    "<bos> fed every step": "feed back the token just chosen: step t reads y_(t-1), the decoder's own previous "
                            "output; only the first step reads <bos>.",
}


def _diagnose_greedy(args: tuple, got: Any, expected: list[int]) -> str | None:
    if isinstance(got, Tensor):
        got = got.tolist()
    if not isinstance(got, (list, tuple)) or not all(isinstance(t, int) and not isinstance(t, bool) for t in got):
        return "return a list of token ids (ints), without <bos> and without <eos>."
    for mistake, written in _greedy_variants(*args).items():
        if list(got) == written and written != expected:
            return _GREEDY_HINTS[mistake]
    if list(got) == expected[:-1] or list(got) == expected[1:]:
        return "one token too few: every token up to (not including) <eos> belongs to the output."
    return None


register(Exercise(
    name="greedy_decode",
    signature="greedy_decode(step, state, bos_id: int, eos_id: int, max_len: int) -> list[int], the tokens written "
              "before <eos>; step(token: int, state) -> (log_probs (V,), new state)",
    reference=_greedy_decode,
    cases=[Case(_greedy_case(8, seed=38, eos_bias=0.0, max_len=10), "a decoder that writes five tokens, then <eos>"),
           Case(_greedy_case(7, seed=0, eos_bias=0.0, max_len=12), "another decoder: six tokens, then <eos>"),
           Case(_greedy_case(7, seed=5, eos_bias=-30.0, max_len=6),
                "a decoder that never writes <eos>: stop after max_len = 6 tokens")],
    hint="start from bos_id; at each step call step(token, state), take the argmax as the next token, stop at "
         "eos_id (left out) or after max_len tokens, and feed each token and state into the next step.",
    diagnose=_diagnose_greedy,
    same=lambda got, expected: isinstance(got, (list, tuple, Tensor))
    and list(got.tolist() if isinstance(got, Tensor) else got) == expected,
))


def _log_probs(T: int, V: int, seed: int) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.log_softmax(2 * torch.randn(T, V, generator=g, dtype=torch.float64), dim=-1)


# -- 1. the decoder's inputs under scheduled sampling ----------------------------------------------
def _scheduled_inputs(tgt_in: Tensor, predictions: Tensor, use_own: Tensor) -> Tensor:
    inputs = tgt_in.clone()
    inputs[:, 1:] = torch.where(use_own[:, 1:], predictions[:, :-1], tgt_in[:, 1:])   # step t reads choice t-1
    return inputs


def _diagnose_inputs(args: tuple, got: Any, expected: Tensor) -> str | None:
    tgt_in, predictions, use_own = args
    hint = tensor_hint(got, expected)
    if hint:
        return hint
    if torch.equal(got[:, 1:], expected[:, 1:]) and not torch.equal(got[:, 0], tgt_in[:, 0]):
        return "column 0 must stay <bos> whatever use_own says: at the first step there is no earlier choice to read."
    if torch.equal(got, torch.where(use_own, predictions, tgt_in)) or \
            torch.equal(got[:, 1:], torch.where(use_own[:, 1:], predictions[:, 1:], tgt_in[:, 1:])):
        return ("off by one step: predictions[:, t] is the choice made *at* step t, a guess at the token after "
                "tgt_in[:, t]; step t reads the choice made one step earlier, predictions[:, t - 1].")
    if torch.equal(got, tgt_in):
        return "that is plain teacher forcing: where use_own is True, put the model's own previous choice instead."
    if torch.equal(got[:, 1:], torch.where(~use_own[:, 1:], predictions[:, :-1], tgt_in[:, 1:])):
        return "use_own is True where the decoder reads its *own* choice; you read the true token there."
    return f"{first_difference(got, expected)}."


def _secret_schedule(seed: int) -> list[Case]:
    """Two targets of six tokens (<bos> = 1 first), the model's choices and a coin per step, from a secret seed."""
    g = torch.Generator().manual_seed(seed)
    tgt_in = torch.randint(2, 10, (2, 6), generator=g)
    tgt_in[:, 0] = 1
    predictions = torch.randint(2, 10, (2, 6), generator=g)
    return [Case((tgt_in, predictions, torch.rand(2, 6, generator=g) < 0.5), "two targets of six tokens")]


register(Exercise(
    name="scheduled_inputs",
    signature="scheduled_inputs(tgt_in: LongTensor (B, T), predictions: LongTensor (B, T), use_own: BoolTensor "
              "(B, T)) -> the decoder's input (B, T)",
    reference=_scheduled_inputs,
    cases=[Case((torch.tensor([[1, 5, 6, 7]]), torch.tensor([[5, 9, 4, 2]]), torch.tensor([[False, False, True, False]])),
                "one target, the model's own choice read at step 2 only"),
           Case((torch.tensor([[1, 5, 6, 7], [1, 8, 8, 9]]), torch.tensor([[4, 6, 3, 2], [8, 3, 9, 2]]),
                 torch.tensor([[True, True, True, True], [True, False, True, False]])),
                "two targets, use_own True at step 0 too (which must still read <bos>)"),
           Case((torch.tensor([[1, 3, 4, 5, 6]] * 3), torch.tensor([[3, 4, 4, 6, 2], [7, 7, 7, 7, 7], [3, 4, 5, 6, 2]]),
                 torch.tensor([[False] * 5, [False, True, False, True, True], [True] * 5])),
                "three rows: never, sometimes, always the model's own choice")],
    hidden=_secret_schedule,
    hint="keep column 0 (<bos>); for t >= 1 take predictions[:, t - 1] where use_own[:, t] is True, else "
         "tgt_in[:, t] (torch.where on the columns 1: and :-1).",
    diagnose=_diagnose_inputs,
    same=lambda got, expected: isinstance(got, Tensor) and got.shape == expected.shape and torch.equal(got, expected),
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
    hidden=lambda seed: [Case((_log_probs(4, 6, seed=seed),
                                torch.randint(6, (4,), generator=torch.Generator().manual_seed(seed + 1)).tolist()),
                               "four steps over six tokens")],
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
    hidden=lambda seed: [Case((-3 * torch.rand(3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64),
                                _log_probs(3, 6, seed=seed + 1), 3), "three hypotheses, six tokens, keep three")],
    hint="add scores[:, None] to log_probs, flatten the k x V array, take the beam_size largest "
         "(.topk), and turn each flat index i into (i // V, i % V).",
    diagnose=_diagnose_beam,
    same=_same_triples,
))


# -- 4. predict, then measure: the day's second digit, free running ----------------------------------
TOLERANCE = 0.01          # one percentage point
MODES = ("teacher-forced", "free running")
OUTPUT_POSITIONS = 11                       # yyyy-mm-dd and <eos>
DAY_TENS, DAY_UNITS = 8, 9                  # the day's two digits among them


def _day_errors(exposure_errors: Any) -> dict[str, float]:
    """Section 7's ``exposure_errors``, ``{mode: (11,) error rates by output position}`` for both ``MODES``, as the
    shares the checker reads: the day's two digits teacher-forced, and its second digit free running."""
    if not isinstance(exposure_errors, Mapping):
        raise TypeError(f"expected a dict of error rates by mode, got {type(exposure_errors).__name__}")
    missing = [mode for mode in MODES if mode not in exposure_errors]
    if missing:
        raise ValueError(f"it has no {' and no '.join(repr(mode) for mode in missing)} error rates")
    rates = {}
    for mode in MODES:
        try:
            rates[mode] = [float(rate) for rate in exposure_errors[mode]]
        except (TypeError, ValueError):
            raise TypeError(f"exposure_errors[{mode!r}] should hold one error rate per output position, "
                            f"got {type(exposure_errors[mode]).__name__}") from None
        if len(rates[mode]) != OUTPUT_POSITIONS:
            raise ValueError(f"exposure_errors[{mode!r}] should hold {OUTPUT_POSITIONS} error rates (yyyy-mm-dd and "
                             f"<eos>), got {len(rates[mode])}")
    return {"tens_teacher_forced": rates["teacher-forced"][DAY_TENS],
            "units_teacher_forced": rates["teacher-forced"][DAY_UNITS],
            "units_free_running": rates["free running"][DAY_UNITS]}


def _predict_units_free_running(measured: dict[str, float]) -> float:
    return measured["units_free_running"]


def _same_prediction(got: Any, expected: float) -> bool:
    return isinstance(got, (int, float)) and not isinstance(got, bool) and abs(float(got) - expected) <= TOLERANCE


def _diagnose_prediction(args: tuple, got: Any, expected: float) -> str | None:
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return f"put your prediction in my_prediction as a number (a share such as 0.03), not a {type(got).__name__}."
    (measured,), got = args, float(got)
    tens, units = measured["tens_teacher_forced"], measured["units_teacher_forced"]
    if got > 1:
        return f"give a share between 0 and 1 (0.03 for 3%), not a percentage: you wrote {got:g}."
    if abs(got - units) <= TOLERANCE / 2:
        return (f"measured {expected:.2%}, you predicted {got:.2%}, the teacher-forced rate. Free running, a wrong "
                f"first digit is fed back, and the second digit is written to fit it: most dates whose first digit "
                f"goes wrong ({tens:.2%}) get a wrong second digit too, on top of the {units:.2%} it gets wrong anyway.")
    direction = "more" if expected > got else "fewer"
    return (f"measured {expected:.2%}, you predicted {got:.2%}: {direction} errors than you thought. Teacher-forced "
            f"the digits are wrong {tens:.2%} and {units:.2%} of the time; free running, the second digit follows "
            f"the first one written, right or wrong, so the two error rates roughly add up.")


register(Exercise(
    name="predict_day_error",
    signature="a number: your prediction of the share of test dates whose day has a wrong second digit when the "
              "decoder reads its own outputs (checked against the notebook's measurement, +-0.01)",
    reference=_predict_units_free_running,
    cases=[Case((), "the date translator, free running: the error rate of the day's second digit")],
    hint="teacher-forced, each day digit is wrong a few percent of the time; free running, a wrong first digit drags "
         "the second one with it.",
    diagnose=_diagnose_prediction,
    same=_same_prediction,
    measured=Measured("exposure_errors (its error rates by output position, teacher-forced and free running)",
                      "section 7's cell that measures the errors free running", _day_errors),
))
