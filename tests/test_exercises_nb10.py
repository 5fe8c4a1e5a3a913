"""Notebook 10's exercises: typical wrong answers get the hint that names what is wrong."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.exercises import EXERCISES, check, exercises_of
from seqlab.exercises.nb10_multihead import measure_costs
from seqlab.nn.multihead import MultiheadAttention

from exercise_helpers import failure_message, measurement_error


MEASURED = (1.0, 0.99)                  # section 5's (one_left, one_right)


def test_the_references_pass():
    assert set(exercises_of("nb10")) == {"multi_head_attention", "predict_one_head", "cross_attention", "predict_costs"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb10").items() if name != "predict_one_head")
    assert check("predict_one_head", lambda: MEASURED, measured=MEASURED)          # the solution: the measurement


# -- predict, then measure: one head ------------------------------------------------------------------------
@pytest.mark.parametrize("measured, error, says", [
    (None, TypeError, "judges your prediction against the notebook's measurement"),
    (0.99, TypeError, "expected two numbers, got 0.99"),
    ((100.0, 99.0), ValueError, "expected two shares between 0 and 1"),
])
def test_one_head_without_its_measurement_says_which_cell_to_run(measured, error, says):
    message = measurement_error("predict_one_head", measured, error)
    assert says in message
    assert "run section 5's cell that trains one head, then pass measured=(one_left, one_right)" in message


@pytest.mark.parametrize("prediction, hint", [
    ((50, 50), "not percentages"),
    ((0.125, 0.125), "not stuck at chance"),
    ((0.5, 0.5), "unequal weights"),
    ((1.0, 0.7), "unequal weights"),
    ("high", "put two shares in my_prediction"),
])
def test_one_head_hints(prediction, hint):
    text = failure_message("predict_one_head", lambda: prediction, measured=MEASURED)
    assert hint in text
    if isinstance(prediction, tuple) and max(prediction) <= 1:
        assert "measured 100% (left) and 99% (right)" in text


def test_one_head_prediction_within_ten_points_passes():
    assert check("predict_one_head", lambda: (0.95, 0.92), measured=MEASURED)
    assert not check("predict_one_head", lambda: (0.95, 0.85), measured=MEASURED)


def test_one_head_too_high_is_told_so():
    assert "cannot beat two heads" in failure_message("predict_one_head", lambda: (1.0, 1.0), measured=(0.6, 0.55))


# -- cross-attention ----------------------------------------------------------------------------------------
def cross(scale=None, dim=-1, out=True, split_view=True, merge_transpose=True, weights_only=False, one_head=False,
          kv_from_queries=False, swap_roles=False, query_length_for_keys=False):
    def f(X_q, X_kv, W_Q, W_K, W_V, W_O, h):
        if swap_roles:
            X_q, X_kv = X_kv, X_q
        if kv_from_queries:
            X_kv = X_q
        n, d_model = X_q.shape
        m = n if query_length_for_keys else X_kv.shape[0]
        h = 1 if one_head else h
        d_k = d_model // h

        def split(M, length):
            return M.view(length, h, d_k).transpose(0, 1) if split_view else M.reshape(h, length, d_k)
        Q, K, V = split(X_q @ W_Q, n), split(X_kv @ W_K, m), split(X_kv @ W_V, m)
        A = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(scale(d_model) if scale else d_k), dim=dim)
        if weights_only:
            return A
        Z = A @ V
        Z = Z.transpose(0, 1).reshape(n, d_model) if merge_transpose else Z.reshape(n, d_model)
        return Z @ W_O if out else Z
    return f


@pytest.mark.parametrize("wrong, hint", [
    (cross(scale=lambda d_model: 1.0), "scale the scores by 1/sqrt(d_k) before the softmax"),
    (cross(scale=lambda d_model: d_model), "not 1/sqrt(d_model)"),
    (cross(dim=-2), "runs over the keys"),
    (cross(out=False), "W_O is missing"),
    (cross(split_view=False), "no transpose, which mixes tokens into heads"),
    (cross(merge_transpose=False), "concatenated with a reshape"),
    (cross(weights_only=True), "those are the attention weights A"),
    (cross(one_head=True), "one wide head"),
    (cross(kv_from_queries=True), "that is self-attention on X_q"),
    (cross(swap_roles=True), "the roles are swapped"),
    (cross(query_length_for_keys=True), "not the queries' n"),
])
def test_cross_attention_hints(wrong, hint):
    assert hint in failure_message("cross_attention", wrong)


def test_cross_attention_reference_is_torchs_and_seqlabs():
    """The exercise's reference, in the lectures' orientation, equals torch's and seqlab's MultiheadAttention
    with the same weights, queries from one sequence and keys/values from another of another length."""
    torch.manual_seed(0)
    d_model, h, n, m = 6, 3, 4, 7
    torch_mha = torch.nn.MultiheadAttention(d_model, h, bias=False).double()
    ours = MultiheadAttention(d_model, h, bias=False).double()
    ours.load_state_dict(torch_mha.state_dict(), strict=True)
    W_Q, W_K, W_V = (w.T for w in torch_mha.in_proj_weight.detach().chunk(3))
    W_O = torch_mha.out_proj.weight.detach().T
    X_q, X_kv = torch.randn(n, d_model, dtype=torch.float64), torch.randn(m, d_model, dtype=torch.float64)
    mine = EXERCISES["cross_attention"].reference(X_q, X_kv, W_Q, W_K, W_V, W_O, h)
    assert mine.shape == (n, d_model)
    assert torch.allclose(mine, torch_mha(X_q, X_kv, X_kv)[0], atol=1e-12)
    assert torch.allclose(mine, ours(X_q, X_kv, X_kv)[0], atol=1e-12)


def test_costs_are_measured_and_match_the_formulas():
    for d, n, h in [(64, 32, 1), (64, 32, 8), (48, 10, 3)]:
        costs = measure_costs(d, n, h)
        assert costs == {"parameters": 4 * d * d + 4 * d, "flops": 2 * (4 * n * d * d + 2 * n * n * d),
                         "weights": h * n * n}
    assert sum(p.numel() for p in MultiheadAttention(64, 8).parameters()) == measure_costs(64, 5, 8)["parameters"]


def formula(parameters=lambda d, h: 4 * d * d + 4 * d, flops=lambda d, n, h: 8 * n * d * d + 4 * n * n * d,
            weights=lambda n, h: h * n * n):
    return lambda d, n, h: {"parameters": parameters(d, h), "flops": flops(d, n, h), "weights": weights(n, h)}


@pytest.mark.parametrize("wrong, hint", [
    (formula(parameters=lambda d, h: h * (4 * d * d + 4 * d)), "split d_model into h slices"),
    (formula(parameters=lambda d, h: 4 * d * d), "count the biases too"),
    (formula(flops=lambda d, n, h: h * (8 * n * d * d + 4 * n * n * d)), "do the work of one head of size d_model"),
    (formula(weights=lambda n, h: n * n), "the one cost that grows with h"),
    (formula(flops=lambda d, n, h: 4 * n * d * d + 2 * n * n * d), "a multiply-add is 2 FLOPs"),
    (lambda d, n, h: [1, 2, 3], "return a dict with the keys"),
])
def test_predict_costs_hints(wrong, hint):
    text = failure_message("predict_costs", wrong)
    assert hint in text and ("measured" in text or "return a dict" in text)


# -- build: multi-head attention ---------------------------------------------------------------------------------
from seqlab.exercises.nb10_multihead import MHA_MISTAKES, mha_with_mistake, multi_head_attention  # noqa: E402


@pytest.mark.parametrize("mistake", sorted(MHA_MISTAKES))
def test_each_catalogued_attention_mistake_gets_its_diagnosis(mistake):
    assert MHA_MISTAKES[mistake][1] in failure_message("multi_head_attention", mha_with_mistake(mistake))


def test_attention_one_wide_head_and_missing_biases_are_named():
    assert "one wide head" in failure_message("multi_head_attention", lambda X, p, h, mask=None:
                                              multi_head_attention(X, p, 1, mask))
    no_bias = lambda X, p, h, mask=None: multi_head_attention(  # noqa: E731
        X, {**p, "b_Q": 0 * p["b_Q"], "b_K": 0 * p["b_K"], "b_V": 0 * p["b_V"]}, h, mask)
    assert "biases of the projections are missing" in failure_message("multi_head_attention", no_bias)


def test_attention_reference_is_torchs_multihead_attention():
    torch.manual_seed(0)
    layer = MultiheadAttention(12, 3, batch_first=True).double()
    X = torch.randn(2, 5, 12, dtype=torch.float64)
    W_q, W_k, W_v = (w.T for w in layer.in_proj_weight.detach().chunk(3))
    b_q, b_k, b_v = layer.in_proj_bias.detach().chunk(3)
    p = {"W_Q": W_q, "b_Q": b_q, "W_K": W_k, "b_K": b_k, "W_V": W_v, "b_V": b_v,
         "W_O": layer.out_proj.weight.detach().T, "b_O": layer.out_proj.bias.detach()}
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    expected = layer(X, X, X, is_causal=True, need_weights=False)[0]
    assert torch.allclose(multi_head_attention(X, p, 3, causal), expected, atol=1e-12)


def test_the_watch_runs_the_checkpoint_with_the_reference_as_the_library_does():
    from seqlab.pretrained import load_pretrained, validation_batches
    from seqlab.watch import gpt_logits, watched_loss

    gpt, _ = load_pretrained("charlm-gpt")
    ids, _ = validation_batches()[0]
    with torch.no_grad():
        assert torch.allclose(gpt_logits(gpt, ids[:4], attention=multi_head_attention), gpt(ids[:4]), atol=1e-4)
    batches = validation_batches()[:1]
    right = watched_loss(gpt, batches, attention=multi_head_attention)
    assert watched_loss(gpt, batches, attention=mha_with_mistake("no W_O")) > right + 1.0
