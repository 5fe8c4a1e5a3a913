"""Notebook 06's exercise checkers: typical wrong answers get the specific hint."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from exercise_helpers import failure_message

from seqlab.exercises import EXERCISES, check
from seqlab.exercises.nb06_deep import _reverse_within, measure_error_ratio
from seqlab.experiments.word_boundaries import TAGGER_CONFIGS, space_taggers
from seqlab.nn import GRU


# -- filter_step --------------------------------------------------------------------------------
def _normalise(v):
    return v / v.sum()


@pytest.mark.parametrize("wrong, expected_hint", [
    (lambda f, A, B, e: B[:, e] * (A.T @ f), "do not sum to 1"),
    (lambda f, A, B, e: _normalise(B[:, e] * (A @ f)), "you used A instead of A^T"),
    # both mistakes: the symmetric umbrella world comes first, where only the missing normalisation shows
    (lambda f, A, B, e: B[:, e] * (A @ f), "do not sum to 1"),
    (lambda f, A, B, e: _normalise(A.T @ (B[:, e] * f)), "evidence was applied before the transition"),
    (lambda f, A, B, e: _normalise(B[:, e] * f), "the transition is missing"),
    (lambda f, A, B, e: _normalise(A.T @ f), "the evidence is missing"),
    (lambda f, A, B, e: _normalise(B[e, :] * (A.T @ f)), "took a row of B"),
    (lambda f, A, B, e: [0.5, 0.5, 0.5], "return a vector of 2 probabilities"),
])
def test_filter_step_mistakes_are_named(wrong, expected_hint):
    assert expected_hint in failure_message("filter_step", wrong)


def test_filter_step_accepts_equivalent_forms():
    def row_form(belief, A, B, evidence):
        v = (belief @ A) * B[:, evidence]
        return torch.tensor(v / v.sum())
    assert check("filter_step", row_form)


# -- final_states --------------------------------------------------------------------------------
def _halves(output):
    return output.shape[-1] // 2


def test_final_states_are_h_n_of_a_real_bidirectional_gru():
    torch.manual_seed(0)
    gru = GRU(3, 4, bidirectional=True, batch_first=True)
    xs, lengths = torch.randn(3, 6, 3), torch.tensor([6, 2, 4])
    with torch.no_grad():
        output, h_n = gru(xs, lengths=lengths)
    from seqlab.exercises.nb06_deep import _final_states
    assert torch.allclose(_final_states(output, lengths), torch.cat([h_n[0], h_n[1]], dim=-1), atol=1e-6)


@pytest.mark.parametrize("wrong, expected_hint", [
    (lambda o, n: o[:, -1], "output[:, -1] is a pad step"),
    (lambda o, n: torch.cat([o[torch.arange(len(n)), n - 1, :_halves(o)], o[:, -1, _halves(o):]], -1),
     "ends at t = 0, not at the last (padded) step"),
    (lambda o, n: o[torch.arange(len(n)), n - 1], "where the backward pass *starts*"),
    (lambda o, n: torch.cat([o[:, 0, _halves(o):], o[torch.arange(len(n)), n - 1, :_halves(o)]], -1), "halves are swapped"),
    (lambda o, n: torch.stack([o[torch.arange(len(n)), n - 1, :_halves(o)], o[:, 0, _halves(o):]]), "h_n's layout"),
    (lambda o, n: torch.cat([o[:, -1, :_halves(o)], o[:, 0, _halves(o):]], -1), "output[:, -1] is a pad step"),
    (lambda o, n: o[torch.arange(len(n)), n], "raised IndexError"),
    (lambda o, n: o[:, 0], "the backward half is right"),
    (lambda o, n: [1, 2], "not a list"),
])
def test_final_states_mistakes_are_named(wrong, expected_hint):
    assert expected_hint in failure_message("final_states", wrong)


def test_final_states_accepts_an_equivalent_form():
    def gather_form(output, lengths):
        H = output.shape[-1] // 2
        index = (lengths - 1).view(-1, 1, 1).expand(-1, 1, H)
        return torch.cat([output[..., :H].gather(1, index).squeeze(1), output[:, 0, H:]], dim=1)
    assert check("final_states", gather_form)


# -- bidirectional ------------------------------------------------------------------------------
@pytest.mark.parametrize("wrong, expected_hint", [
    (lambda xs, l, f, b: torch.cat([f(xs), b(xs.flip(0)).flip(0)], -1), "the backward direction read the padding"),
    (lambda xs, l, f, b: torch.cat([f(xs), b(_reverse_within(xs, l))], -1), "still in reading order"),
    (lambda xs, l, f, b: torch.cat([f(xs), b(xs)], -1), "must read the input reversed"),
    (lambda xs, l, f, b: torch.cat([_reverse_within(b(_reverse_within(xs, l)), l), f(xs)], -1), "wrong order"),
    (lambda xs, l, f, b: torch.cat([f(xs), f(xs)], -1), "you ran forward_rnn twice"),
    (lambda xs, l, f, b: f(xs), "both directions side by side"),
    (lambda xs, l, f, b: torch.cat([f(xs), _reverse_within(b(_reverse_within(xs, l)), l)], 0), "feature dimension"),
    (lambda xs, l, f, b: xs.tolist(), "return a tensor of shape (T, B, 2H)"),
])
def test_bidirectional_mistakes_are_named(wrong, expected_hint):
    assert expected_hint in failure_message("bidirectional", wrong)


def test_bidirectional_padding_steps_are_not_checked():
    def nonzero_padding(xs, lengths, forward_rnn, backward_rnn):
        out_b = _reverse_within(backward_rnn(_reverse_within(xs, lengths)), lengths)
        return torch.cat([forward_rnn(xs), out_b], dim=-1) + 0.0   # padded steps keep whatever the RNNs gave
    assert check("bidirectional", nonzero_padding)


def test_bidirectional_with_a_real_seqlab_gru_matches_lengths():
    # the reference construction agrees with seqlab's own bidirectional layer
    from seqlab.nn import GRU
    torch.manual_seed(0)
    gru = GRU(2, 3, bidirectional=True)
    fwd, bwd = GRU(2, 3), GRU(2, 3)
    with torch.no_grad():
        for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(fwd, f"{n}_l0").copy_(getattr(gru, f"{n}_l0"))
            getattr(bwd, f"{n}_l0").copy_(getattr(gru, f"{n}_l0_reverse"))
    xs = torch.randn(5, 2, 2)
    lengths = torch.tensor([5, 2])
    xs[2:, 1] = 0
    from seqlab.exercises import EXERCISES
    with torch.no_grad():
        ours = EXERCISES["bidirectional"].reference(xs, lengths, lambda x: fwd(x)[0], lambda x: bwd(x)[0])
        expected, _ = gru(xs, lengths=lengths)
    assert torch.allclose(ours, expected, atol=1e-6)
    assert np.isfinite(ours.numpy()).all()


# -- predict, then measure: how much right-hand context cuts the errors ------------------------------
def test_the_taggers_are_trained_once_as_section_3_2_says_leaving_the_generator_alone():
    before = torch.random.get_rng_state()
    taggers = space_taggers()                        # trained here, the first time in this process
    assert torch.equal(torch.random.get_rng_state(), before)
    assert list(taggers) == list(TAGGER_CONFIGS) == ["uni-1", "uni-2", "bi-1"] and space_taggers() is taggers
    for name, (model, history) in taggers.items():
        assert len(history.train_loss) == 200 and model.rnn.bidirectional == (name == "bi-1")
        assert model.rnn.num_layers == (2 if name == "uni-2" else 1) and model.rnn.hidden_size == 64


def test_error_ratio_measurement():
    measured = measure_error_ratio()
    assert measured["ratio"] == pytest.approx(measured["uni-1"] / measured["bi-1"])
    assert 2.5 < measured["ratio"] < 4.5 and measured["bi-1"] < 0.05, measured


def test_predictions_near_the_measurement_pass_and_far_ones_are_told_why():
    ratio = measure_error_ratio()["ratio"]
    assert check("predict_error_ratio", lambda: ratio) and check("predict_error_ratio", lambda: round(ratio))
    assert check("predict_error_ratio", lambda: 1.4 * ratio)
    low = failure_message("predict_error_ratio", lambda: 1.2)
    assert "you predicted 1.2" in low and "Right-hand context is worth more" in low and "measured: uni-1 tags" in low
    high = failure_message("predict_error_ratio", lambda: 20)
    assert "Less than that" in high
    assert "answer with a positive number" in failure_message("predict_error_ratio", lambda: "3x")
    assert "answer with a positive number" in failure_message("predict_error_ratio", lambda: -3.0)


def test_through_bidirectional_with_the_reference_is_the_taggers_own_layer():
    """The watch cell's plumbing: the reference bidirectional(), fed the layer's two directions as one-way GRUs,
    gives the tagger's own tags and P(space) on a padded batch; the whole-batch flip does not."""
    from types import SimpleNamespace

    from seqlab.experiments.word_boundaries import through_bidirectional
    from seqlab.models.readout import SequenceTagger

    torch.manual_seed(0)
    tagger = SequenceTagger(12, 2, cell="gru", embed_size=5, hidden_size=4, bidirectional=True)
    g = torch.Generator().manual_seed(1)
    lines = [SimpleNamespace(ids=torch.randint(1, 12, (n,), generator=g)) for n in (7, 3, 5)]
    own_tags, own_p = through_bidirectional(tagger, lines)
    tags, p = through_bidirectional(tagger, lines, EXERCISES["bidirectional"].reference)
    assert all(torch.equal(a, b) for a, b in zip(tags, own_tags))
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(p, own_p))
    _, leaked = through_bidirectional(tagger, lines, lambda xs, lengths, f, b: torch.cat([f(xs), b(xs.flip(0)).flip(0)], -1))
    assert torch.allclose(leaked[0], own_p[0], atol=1e-6) and not torch.allclose(leaked[1], own_p[1], atol=1e-6)
    with pytest.raises(ValueError, match="bidirectional tagger"):
        through_bidirectional(SequenceTagger(12, 2, cell="gru", embed_size=5, hidden_size=4), lines)
