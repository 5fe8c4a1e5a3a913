"""Notebook 15's exercises: the references pass, and typical wrong answers get the hint that names the mistake."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.cost import attention_flops, count_flops
from seqlab.exercises import EXERCISES, check, exercises_of
from seqlab.exercises.nb15_cost import MEMORY_LENGTHS, SLOPE_KEYS, _measured_slopes, measure_memory_slopes
from seqlab.nn import MultiheadAttention
from seqlab.nn.attention import attend, sliding_window_attend
from seqlab.nn.masks import band_mask

from exercise_helpers import failure_message


def test_the_references_pass():
    assert set(exercises_of("nb15")) == {"attention_flops", "band_scores", "predict_memory_slopes"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb15").items())


def test_the_flops_reference_is_what_torchs_counter_sees_on_seqlabs_attention():
    torch.manual_seed(0)
    layer = MultiheadAttention(16, 4, batch_first=True)
    x = torch.randn(1, 40, 16)
    with torch.no_grad():
        assert count_flops(lambda: layer(x, x, x)) == EXERCISES["attention_flops"].reference(40, 16)
    assert EXERCISES["attention_flops"].reference(40, 16, 3) == attention_flops(40, 16, keys=7)


def flops(twice=True, projections=4, products=2, window_keys=lambda w: 2 * w + 1, d_squared_scores=False):
    def f(n, d, window=None):
        m = n if window is None else window_keys(window)
        scores = n * m * d * (d if d_squared_scores else 1)
        total = projections * n * d * d + products * scores
        return 2 * total if twice else total
    return f


@pytest.mark.parametrize("wrong, hint", [
    (flops(twice=False), "each multiply-add is 2 FLOPs"),
    (flops(projections=0), "the four projections are missing"),
    (flops(projections=3), "(you counted three)"),
    (flops(products=1), "(you counted one)"),
    (flops(d_squared_scores=True), "not n m d^2"),
    (flops(window_keys=lambda w: None), "raised TypeError"),
    (lambda n, d, window=None: flops()(n, d, None), "not all n"),
    (flops(window_keys=lambda w: w), "plus the query's own position"),
    (flops(window_keys=lambda w: w + 1), "that is a causal window"),
    (flops(window_keys=lambda w: 2 * w), "don't forget the query's own position"),
    (lambda n, d, window=None: float(flops()(n, d, window)), "return a whole number"),
    (lambda n, d, window=None: flops()(n, d, window) + 1, "expected"),
])
def test_attention_flops_hints(wrong, hint):
    assert hint in failure_message("attention_flops", wrong)


def test_the_band_scores_reference_is_sliding_window_attentions_scores():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(9, 4, generator=g, dtype=torch.float64), torch.randn(9, 4, generator=g, dtype=torch.float64)
    scores = EXERCISES["band_scores"].reference(q, k, 2)
    # its softmax is sliding_window_attend's weights, and those are full attention's under a band mask
    _, weights = sliding_window_attend(q, k, k, 2)
    assert torch.allclose(torch.softmax(scores, -1), weights, atol=1e-12)
    full = q @ k.T / 2
    assert torch.allclose(torch.softmax(full.masked_fill(~band_mask(9, 2), float("-inf")), -1),
                          attend(q, k, k, band_mask(9, 2))[1], atol=1e-12)


def band(scale="sqrt", off="-inf", reverse=False, full=False, causal=False, shift=0):
    def f(q, k, window):
        n, d = q.shape
        s = q @ k.T * {"sqrt": 1 / math.sqrt(d), "none": 1.0, "d": 1 / d}[scale]
        if full:
            return s.masked_fill(~band_mask(n, window), float("-inf"))
        offsets = range(-window, 1 if causal else window + 1)
        out = torch.full((n, len(offsets)), float("-inf") if off == "-inf" else 0.0, dtype=q.dtype)
        for c, o in enumerate(offsets):
            for i in range(n):
                j = i + o + shift
                if 0 <= j < n:
                    out[i, c] = s[i, j]
        return out.flip(-1) if reverse else out
    return f


@pytest.mark.parametrize("wrong, hint", [
    (band(scale="none"), "scale the dot products by 1 / sqrt(d)"),
    (band(scale="d"), "the scale is 1 / sqrt(d), not 1 / d"),
    (band(off="zero"), "must get -inf"),
    (band(reverse=True), "the columns are in reverse order"),
    (band(full=True), "that is the full (n, n) = (4, 4) matrix"),
    (band(causal=True), "is a causal window"),
    (band(shift=1), "should be -inf (no such key)"),
    (lambda q, k, w: band()(q, k, w).tolist(), "return a torch.Tensor"),
    (lambda q, k, w: band()(q, k, w) * float("nan"), "NaN"),
    (lambda q, k, w: band()(q, k, w) + 0.1, "the first difference is at index (0, 1)"),
])
def test_band_scores_hints(wrong, hint):
    assert hint in failure_message("band_scores", wrong)


def test_the_measured_slopes_and_the_judge():
    measured = measure_memory_slopes()
    assert MEMORY_LENGTHS == (256, 512, 1024)
    assert measured["gru"] == 1.0 and measured["fused"] == 1.0
    assert 0.95 <= measured["window"] <= 1.0 and 1.85 <= measured["explicit"] < 2.0
    right = {"gru": 1, "explicit": 2, "fused": 1, "window": 1}
    assert check("predict_memory_slopes", lambda: right)
    assert check("predict_memory_slopes", lambda: {**right, "explicit": 1.8})          # within the tolerance
    text = failure_message("predict_memory_slopes", lambda: {**right, "fused": 2})
    assert "fused: you predicted 2, measured 1" in text and "recomputes the weights" in text
    assert "explicit:" not in text
    text = failure_message("predict_memory_slopes", lambda: {**right, "explicit": 1, "window": 2})
    assert "explicit: you predicted 1, measured 1.94" in text and "window: you predicted 2" in text
    assert "return a dict with the keys" in failure_message("predict_memory_slopes", lambda: [1, 2, 1, 1])
    assert "return a dict with the keys" in failure_message("predict_memory_slopes", lambda: {"gru": 1})
    assert "should be a number" in failure_message("predict_memory_slopes", lambda: {k: "2" for k in SLOPE_KEYS})


def test_the_measurement_leaves_the_global_generator_alone():
    _measured_slopes.cache_clear()                         # measure for real, not from the cache
    state = torch.random.get_rng_state()
    measure_memory_slopes()
    assert torch.equal(state, torch.random.get_rng_state())
