"""Notebook 10's exercises: typical wrong answers get the hint that names what is wrong."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.exercises import EXERCISES, check, exercises_of
from seqlab.exercises.nb10_multihead import measure_costs
from seqlab.nn.multihead import MultiheadAttention

from exercise_helpers import failure_message


def test_the_references_pass():
    assert set(exercises_of("nb10")) == {"split_heads", "concat_heads", "multi_head_attention", "predict_costs"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb10").items())


@pytest.mark.parametrize("wrong, hint", [
    (lambda X, h: X.reshape(X.shape[0], h, X.shape[1], X.shape[2] // h), "reads the memory in order"),
    (lambda X, h: X.view(X.shape[0], X.shape[1], h, X.shape[2] // h), "now swap the token and head axes"),
    (lambda X, h: X.view(X.shape[0], X.shape[1], X.shape[2] // h, h).permute(0, 3, 1, 2), "every h-th feature"),
    (lambda X, h: X.view(X.shape[0], X.shape[1], h, -1).transpose(1, 2).tolist(), "return a torch.Tensor"),
    (lambda X, h: X.view(X.shape[0], X.shape[1], h, -1).transpose(1, 2) + 1, "the first difference is at index"),
])
def test_split_heads_hints(wrong, hint):
    assert hint in failure_message("split_heads", wrong)


@pytest.mark.parametrize("wrong, hint", [
    (lambda Z: Z.reshape(Z.shape[0], Z.shape[2], -1), "without a transpose"),
    (lambda Z: Z.transpose(1, 2), "merge the last two"),
    (lambda Z: Z.permute(0, 2, 3, 1).reshape(Z.shape[0], Z.shape[2], -1), "interleave the heads"),
])
def test_concat_heads_hints(wrong, hint):
    assert hint in failure_message("concat_heads", wrong)


def mha(scale=None, dim=-1, out=True, split_view=True, merge_transpose=True, weights_only=False, one_head=False):
    def f(X, W_Q, W_K, W_V, W_O, h):
        n, E = X.shape
        h = 1 if one_head else h
        d_k = E // h

        def split(M):
            return M.view(n, h, d_k).transpose(0, 1) if split_view else M.reshape(h, n, d_k)
        Q, K, V = split(X @ W_Q), split(X @ W_K), split(X @ W_V)
        A = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(scale(E) if scale else d_k), dim=dim)
        if weights_only:
            return A
        Z = A @ V
        Z = Z.transpose(0, 1).reshape(n, E) if merge_transpose else Z.reshape(n, E)
        return Z @ W_O if out else Z
    return f


@pytest.mark.parametrize("wrong, hint", [
    (mha(out=False), "W_O is missing"),
    (mha(scale=lambda E: E), "not 1/sqrt(E)"),
    (mha(dim=-2), "runs over the keys"),
    (mha(split_view=False), "no transpose, which mixes tokens into heads"),
    (mha(merge_transpose=False), "concatenated with a reshape"),
    (mha(weights_only=True), "those are the attention weights A"),
    (mha(one_head=True), "one wide head"),
])
def test_multi_head_attention_hints(wrong, hint):
    assert hint in failure_message("multi_head_attention", wrong)


def test_multi_head_attention_reference_is_torchs():
    """The exercise's reference, in the lectures' orientation, equals torch.nn.MultiheadAttention with the same weights."""
    torch.manual_seed(0)
    E, h, n = 6, 3, 5
    torch_mha = torch.nn.MultiheadAttention(E, h, bias=False).double()
    W_Q, W_K, W_V = (w.T for w in torch_mha.in_proj_weight.detach().chunk(3))
    W_O = torch_mha.out_proj.weight.detach().T
    X = torch.randn(n, E, dtype=torch.float64)
    expected, _ = torch_mha(X, X, X)
    assert torch.allclose(EXERCISES["multi_head_attention"].reference(X, W_Q, W_K, W_V, W_O, h), expected, atol=1e-12)


def test_costs_are_measured_and_match_the_formulas():
    for E, n, h in [(64, 32, 1), (64, 32, 8), (48, 10, 3)]:
        costs = measure_costs(E, n, h)
        assert costs == {"parameters": 4 * E * E + 4 * E, "flops": 2 * (4 * n * E * E + 2 * n * n * E),
                         "weights": h * n * n}
    assert sum(p.numel() for p in MultiheadAttention(64, 8).parameters()) == measure_costs(64, 5, 8)["parameters"]


def formula(parameters=lambda E, h: 4 * E * E + 4 * E, flops=lambda E, n, h: 8 * n * E * E + 4 * n * n * E,
            weights=lambda n, h: h * n * n):
    return lambda E, n, h: {"parameters": parameters(E, h), "flops": flops(E, n, h), "weights": weights(n, h)}


@pytest.mark.parametrize("wrong, hint", [
    (formula(parameters=lambda E, h: h * (4 * E * E + 4 * E)), "split E into h slices"),
    (formula(parameters=lambda E, h: 4 * E * E), "count the biases too"),
    (formula(flops=lambda E, n, h: h * (8 * n * E * E + 4 * n * n * E)), "do the work of one head of size E"),
    (formula(weights=lambda n, h: n * n), "the one cost that grows with h"),
    (lambda E, n, h: [1, 2, 3], "return a dict with the keys"),
])
def test_predict_costs_hints(wrong, hint):
    text = failure_message("predict_costs", wrong)
    assert hint in text and ("measured" in text or "return a dict" in text)
