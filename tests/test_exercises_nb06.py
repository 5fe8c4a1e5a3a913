"""Notebook 06's exercise checkers: typical wrong answers get the specific hint."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from seqlab.exercises import check
from seqlab.exercises.nb06_deep import _reverse_within


def _hint(result) -> str:
    assert not result
    return repr(result)


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
    assert expected_hint in _hint(check("filter_step", wrong))


def test_filter_step_accepts_equivalent_forms():
    def row_form(belief, A, B, evidence):
        v = (belief @ A) * B[:, evidence]
        return torch.tensor(v / v.sum())
    assert check("filter_step", row_form)


# -- h_n_shape ----------------------------------------------------------------------------------
@pytest.mark.parametrize("wrong, expected_hint", [
    (lambda L, bi, B, H: (L, B, H), "keeps a final state per direction"),
    (lambda L, bi, B, H: (L, B, H * (2 if bi else 1)), "the directions are not concatenated in h_n"),
    (lambda L, bi, B, H: (2 if bi else 1, B, H), "not only the top one"),
    (lambda L, bi, B, H: (B, L * (2 if bi else 1), H), "batch second"),
    (lambda L, bi, B, H: (L + (2 if bi else 1), B, H), "a product"),
    (lambda L, bi, B, H: (L, B), "three dimensions"),
    (lambda L, bi, B, H: None, "a tuple of three ints"),
])
def test_h_n_shape_mistakes_are_named(wrong, expected_hint):
    assert expected_hint in _hint(check("h_n_shape", wrong))


def test_h_n_shape_accepts_torch_size():
    assert check("h_n_shape", lambda L, bi, B, H: torch.Size([L * (1 + bi), B, H]))


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
    assert expected_hint in _hint(check("bidirectional", wrong))


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
