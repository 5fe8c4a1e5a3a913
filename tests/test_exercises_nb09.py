"""Notebook 09's exercises: typical wrong answers get the hint that names what is wrong."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.exercises import EXERCISES, check
from seqlab.nn.masks import causal_mask

from exercise_helpers import failure_message


@pytest.mark.parametrize("wrong, hint", [
    (lambda e, d: torch.softmax(e, -1), "divide the scores by sqrt(d_k)"),
    (lambda e, d: torch.softmax(e / d, -1), "not by d_k itself"),
    (lambda e, d: torch.softmax(e * math.sqrt(d), -1), "you multiplied"),
    (lambda e, d: torch.exp(e / math.sqrt(d)) / torch.exp(e / math.sqrt(d)).sum(-1, keepdim=True), "overflowed"),
    (lambda e, d: (e / math.sqrt(d)).tolist(), "return a torch.Tensor"),
])
def test_scaled_softmax_hints(wrong, hint):
    assert hint in failure_message("scaled_softmax", wrong)


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
