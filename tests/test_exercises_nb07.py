"""Notebook 07's exercises: typical wrong answers get the hint that names what is wrong."""

from __future__ import annotations

import pytest
import torch

from seqlab.decoding import beam_search
from seqlab.exercises import EXERCISES, check

from exercise_helpers import failure_message, measurement_error


def _inputs_unshifted(tgt_in, predictions, use_own):
    return torch.where(use_own, predictions, tgt_in)


def _inputs_replacing_bos(tgt_in, predictions, use_own):
    inputs = EXERCISES["scheduled_inputs"].reference(tgt_in, predictions, use_own)
    inputs[:, 0] = torch.where(use_own[:, 0], predictions[:, 0], inputs[:, 0])
    return inputs


def _inputs_inverted(tgt_in, predictions, use_own):
    return EXERCISES["scheduled_inputs"].reference(tgt_in, predictions, ~use_own)


@pytest.mark.parametrize("wrong, hint", [
    (_inputs_unshifted, "off by one step"),
    (_inputs_replacing_bos, "column 0 must stay <bos>"),
    (_inputs_inverted, "you read the true token there"),
    (lambda tgt_in, predictions, use_own: tgt_in.clone(), "plain teacher forcing"),
    (lambda tgt_in, predictions, use_own: tgt_in[:, 1:], "should have shape"),
    (lambda tgt_in, predictions, use_own: tgt_in.tolist(), "return a torch.Tensor"),
])
def test_scheduled_inputs_hints(wrong, hint):
    assert hint in failure_message("scheduled_inputs", wrong)


def test_scheduled_inputs_reference_is_what_free_running_decoding_reads():
    """Free running, the decoder's logits are the teacher-forced logits of the inputs the exercise builds
    from its own choices (use_own everywhere): the exercise's shift is the library's."""
    from seqlab.data.pairs import PairBatches
    from seqlab.models.seq2seq import Seq2Seq, Seq2SeqConfig, decode_feeding

    g = torch.Generator().manual_seed(0)
    pairs = [(torch.randint(3, 9, (5,), generator=g), torch.randint(3, 9, (4,), generator=g)) for _ in range(6)]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Seq2Seq(Seq2SeqConfig(9, 9, hidden_size=8, embed_size=4)).eval()
    src, src_lengths, tgt_in, _ = next(iter(PairBatches(pairs, 6, shuffle=False)))
    with torch.no_grad():
        free = decode_feeding(model, src, src_lengths, tgt_in, feed_own=1.0)
        inputs = EXERCISES["scheduled_inputs"].reference(tgt_in, free.argmax(dim=-1), torch.ones_like(tgt_in, dtype=torch.bool))
        assert torch.allclose(model(src, src_lengths, inputs), free, atol=1e-6)


def exposure_errors(tens_teacher_forced=0.0205, units_teacher_forced=0.0210, units_free_running=0.0385):
    """Section 7's measurement as the notebook makes it: error rates at the 11 output positions, by mode."""
    teacher_forced, free_running = torch.zeros(11), torch.zeros(11)
    teacher_forced[8], teacher_forced[9], free_running[9] = tens_teacher_forced, units_teacher_forced, units_free_running
    return {"teacher-forced": teacher_forced, "free running": free_running}


@pytest.mark.parametrize("prediction, hint", [
    (0.021, "the teacher-forced rate"),
    (0.07, "fewer errors than you thought"),
    (0.002, "more errors than you thought"),
    (4.0, "not a percentage"),
])
def test_predict_day_error_judges_the_prediction_against_the_measurement(prediction, hint):
    message = failure_message("predict_day_error", lambda: prediction, measured=exposure_errors())
    assert hint in message
    assert "3.85%" in message or prediction == 4.0


def test_predict_day_error_accepts_within_one_point():
    measured = exposure_errors()
    assert check("predict_day_error", lambda: 0.045, measured=measured)
    assert check("predict_day_error", lambda: 0.03, measured=measured)
    assert check("predict_day_error", lambda: 0.0385, measured=measured)             # the solution: the measurement
    assert not check("predict_day_error", lambda: 0.0499, measured=measured)


@pytest.mark.parametrize("measured, error, says", [
    (None, TypeError, "judges your prediction against the notebook's measurement"),
    ({"teacher-forced": torch.zeros(11)}, ValueError, "it has no 'free running' error rates"),
    ({"teacher-forced": torch.zeros(11), "free running": torch.zeros(10)}, ValueError,
     "exposure_errors['free running'] should hold 11 error rates (yyyy-mm-dd and <eos>), got 10"),
    ({"teacher-forced": torch.zeros(11), "free running": 0.04}, TypeError,
     "exposure_errors['free running'] should hold one error rate per output position, got float"),
    ((0.02, 0.04), TypeError, "expected a dict of error rates by mode, got tuple"),
])
def test_predict_day_error_without_its_measurement_says_which_cell_to_run(measured, error, says):
    message = measurement_error("predict_day_error", measured, error)
    assert says in message
    assert "run section 7's cell that measures the errors free running, then pass measured=exposure_errors" in message


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


# -- Exercise 1: the encoder-decoder's forward pass ----------------------------------------------------
def _forward_from_zeros(encoder, decoder, src, src_lengths, tgt_in):
    _, c = encoder(src, src_lengths)
    zeros = tuple(torch.zeros_like(s) for s in c) if isinstance(c, tuple) else torch.zeros_like(c)
    return decoder(tgt_in, zeros)[0]


@pytest.mark.parametrize("wrong, hint", [
    (_forward_from_zeros, "the decoder starts from zeros"),
    (lambda encoder, decoder, src, src_lengths, tgt_in: decoder(tgt_in, encoder(src)[1])[0], "padding entered c"),
    (lambda encoder, decoder, src, src_lengths, tgt_in: decoder(tgt_in, encoder(src, src_lengths)[1]),
     "return only the logits"),
    (lambda encoder, decoder, src, src_lengths, tgt_in: encoder(src, src_lengths)[0], "should have shape"),
])
def test_encoder_decoder_hints(wrong, hint):
    assert hint in failure_message("encoder_decoder", wrong)


def test_encoder_decoder_reference_is_seq2seq_forward():
    from seqlab.models.seq2seq import Seq2Seq, Seq2SeqConfig

    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(9, 7, hidden_size=8, embed_size=4)).eval()
    src, lengths = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]]), torch.tensor([4, 2])
    tgt_in = torch.tensor([[1, 3, 4], [1, 5, 6]])
    with torch.no_grad():
        assert torch.equal(EXERCISES["encoder_decoder"].reference(model.encoder, model.decoder, src, lengths, tgt_in),
                           model(src, lengths, tgt_in))


# -- Exercise 2: greedy decoding -------------------------------------------------------------------------
def _greedy(*, keep_eos=False, stop=True, carry=True, feed=True):
    def decode(step, state, bos_id, eos_id, max_len):
        token, written, start = bos_id, [], state
        for _ in range(max_len):
            log_probs, new_state = step(token if feed else bos_id, state)
            state = new_state if carry else start
            token = int(log_probs.argmax())
            if token == eos_id and stop:
                written += [token] if keep_eos else []
                break
            written.append(token)
        return written
    return decode


def _greedy_one_short(step, state, bos_id, eos_id, max_len):
    return EXERCISES["greedy_decode"].reference(step, state, bos_id, eos_id, max_len)[:-1]


@pytest.mark.parametrize("wrong, hint", [
    (_greedy(keep_eos=True), "leave <eos> out"),
    (_greedy(stop=False), "stop at the first <eos>"),
    (_greedy(carry=False), "carry the state"),
    (_greedy(feed=False), "feed back the token just chosen"),
    (_greedy_one_short, "one token too few"),
    (lambda step, state, bos_id, eos_id, max_len: step(bos_id, state)[0], "return a list of token ids"),
])
def test_greedy_decode_hints(wrong, hint):
    assert hint in failure_message("greedy_decode", wrong)


def test_greedy_decode_reference_is_seq2seq_greedy_through_stepper():
    from seqlab.models.seq2seq import Seq2Seq, Seq2SeqConfig

    torch.manual_seed(1)
    model = Seq2Seq(Seq2SeqConfig(9, 7, hidden_size=8, embed_size=4)).eval()
    for src in (torch.tensor([3, 4, 5, 6]), torch.tensor([8, 7])):
        written = EXERCISES["greedy_decode"].reference(*model.stepper(src), model.config.bos_id, model.config.eos_id, 9)
        assert written == model.greedy(src[None], max_len=9)[0].tolist()
    with pytest.raises(ValueError, match="one source"):
        model.stepper(torch.tensor([[3, 4]]))


# -- Exercise 3 watched: beam_step inside beam_search ---------------------------------------------------------
def test_beam_search_with_the_reference_beam_step_is_the_library_beam():
    from seqlab.models.seq2seq import Seq2Seq, Seq2SeqConfig

    torch.manual_seed(2)
    model = Seq2Seq(Seq2SeqConfig(9, 7, hidden_size=8, embed_size=4)).eval()
    src = torch.tensor([3, 5, 7, 4])
    own = model.beam(src, beam_size=3, max_len=6)
    selected = model.beam(src, beam_size=3, max_len=6, select=EXERCISES["beam_step"].reference)
    assert [h.tokens for h in selected] == [h.tokens for h in own]
    assert [h.log_prob for h in selected] == pytest.approx([h.log_prob for h in own])
    with pytest.raises(ValueError, match="the beam holds rows"):
        model.beam(src, beam_size=3, max_len=6, select=lambda scores, log_probs, n: [(5, 0, 0.0)])
    with pytest.raises(ValueError, match="triples"):
        model.beam(src, beam_size=3, max_len=6, select=lambda scores, log_probs, n: 3)
