"""Notebook 09's exercises: typical wrong answers get the hint that names what is wrong."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.exercises import EXERCISES, check
from seqlab.nn.masks import causal_mask

from exercise_helpers import failure_message


@pytest.mark.parametrize("wrong, hint", [
    (lambda Z, order: Z[order], "shuffles a second time"),
    (lambda Z, order: Z.clone(), "still in the shuffled order"),
    (lambda Z, order: Z.flip(0), "undoes only a reversal"),
    (lambda Z, order: Z[:, :1], "should have shape"),
    (lambda Z, order: Z.tolist(), "return a torch.Tensor"),
])
def test_unshuffle_hints(wrong, hint):
    assert hint in failure_message("unshuffle", wrong)


def test_unshuffle_reference_undoes_a_shuffle_of_self_attentions_inputs():
    """Shuffle the tokens, run a head, unshuffle its outputs: the head's outputs on the tokens in order."""
    from seqlab.nn.self_attention import SelfAttention

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        head, x = SelfAttention(4, 4).double(), torch.randn(1, 6, 4, dtype=torch.float64)
    order = torch.tensor([3, 5, 0, 1, 4, 2])
    with torch.no_grad():
        restored = EXERCISES["unshuffle"].reference(head(x[:, order])[0], order)
        assert torch.allclose(restored, head(x)[0], atol=1e-12)


@pytest.mark.parametrize("prediction, hint", [
    ((4, 4), "Not all the work is n^2"),
    ((4, 2), "the scores QK^T and the product A V"),
    ((2, 2.8), "twice the rows and twice the columns"),
    ((4, 8), "Add up the multiply-adds"),
    (3.0, "put two numbers"),
])
def test_predict_growth_explains_the_measurement(prediction, hint):
    message = failure_message("predict_growth", lambda: prediction)
    assert hint in message


def test_predict_growth_measures_the_cost_formulas():
    from seqlab.exercises.nb09_self_attention import measure_growth

    for d, n in ((64, 64), (16, 8)):
        weights, flops = measure_growth(d, n)
        cost = lambda m: 3 * m * d * d + 2 * m * m * d           # noqa: E731  multiply-adds of one head
        assert weights == 4.0 and flops == pytest.approx(cost(2 * n) / cost(n))
    assert check("predict_growth", lambda: (4, 2.8)) and check("predict_growth", lambda: [4.1, 2.7])


@pytest.mark.parametrize("wrong, hint", [
    (lambda n: torch.ones(n, n).tril(), "return booleans"),
    (lambda n: torch.ones(n, n, dtype=torch.bool).triu(), "the transpose"),
    (lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1), "the diagonal must be True"),
    (lambda n: ~torch.ones(n, n, dtype=torch.bool).tril(), "not what is hidden"),
])
def test_causal_mask_hints(wrong, hint):
    assert hint in failure_message("causal_mask", wrong)


def head(scale=lambda d: math.sqrt(d), dim=-1, values=True, transpose=False, weights_only=False):
    def f(X, W_q, W_k, W_v):
        Q, K, V = X @ W_q, X @ W_k, X @ W_v
        scores = (K @ Q.T) if transpose else (Q @ K.T)
        A = torch.softmax(scores / scale(K.shape[1]), dim=dim)
        return A if weights_only else A @ (V if values else X)
    return f


@pytest.mark.parametrize("wrong, hint", [
    (head(scale=lambda d: 1.0), "scale the scores by 1/sqrt(d_k)"),
    (head(scale=lambda d: d), "not 1/d_k"),
    (head(dim=0), "along each row"),
    (head(transpose=True), "not K Q^T"),
    (head(values=False), "not the inputs X"),
    (head(weights_only=True), "multiply it by V"),
])
def test_self_attention_hints(wrong, hint):
    assert hint in failure_message("self_attention", wrong)


def test_the_causal_mask_reference_is_seqlabs():
    assert all(torch.equal(EXERCISES["causal_mask"].reference(n), causal_mask(n)) for n in (1, 4, 7))
