"""Notebook 17's exercises: the references pass, and typical wrong answers get the hint that names the mistake."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.cost import count_flops
from seqlab.exercises import EXERCISES, check, exercises_of
from seqlab.exercises.nb17_cost import (MEMORY_LENGTHS, SLOPE_KEYS, _measured_slopes, measure_block_flops,
                                        measure_memory_slopes)
from seqlab.nn import TransformerEncoderLayer
from seqlab.nn.attention import attend, sliding_window_attend
from seqlab.nn.masks import band_mask

from exercise_helpers import failure_message


def test_the_references_pass():
    assert set(exercises_of("nb17")) == {"block_crossover", "band_scores", "predict_memory_slopes"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb17").items())


def test_the_crossover_reference_is_measured_and_matches_the_formula():
    for d_model, d_ff in ((96, 256), (128, 512), (512, 2048), (64, 64)):
        per_token, per_pair = measure_block_flops(d_model, d_ff)
        assert per_token == 2 * (4 * d_model ** 2 + 2 * d_model * d_ff) and per_pair == 2 * 2 * d_model
        assert EXERCISES["block_crossover"].reference(d_model, d_ff) == 2 * d_model + d_ff
    # at that length a block's counted FLOPs are half per-token work, half n^2 products
    torch.manual_seed(0)
    layer = TransformerEncoderLayer(96, 4, 256, dropout=0.0).eval()
    n, (per_token, _) = 448, measure_block_flops(96, 256)
    with torch.no_grad():
        assert count_flops(lambda: layer(torch.randn(n, 96))) == 2 * n * per_token


@pytest.mark.parametrize("wrong, hint", [
    (lambda d, f: 2 * d, "that is the attention layer alone"),
    (lambda d, f: f, "the four projections W_Q, W_K, W_V, W_O are per-token work too"),
    (lambda d, f: 2 * d + f // 2, "the FFN has two products"),
    (lambda d, f: 3 * d // 2 + f, "there are four projections (W_O too)"),
    (lambda d, f: 2 * (2 * d + f), "(you counted one)"),
    (lambda d, f: (2 * d + f) // 2, "(you counted twice that)"),
    (lambda d, f: 6 * d, "6 d_model holds only when d_ff = 4 d_model; here d_ff = 256"),
    (lambda d, f: 2 * d + f + 1, "per pair: 2 d_model (Q K^T and A V); measured on seqlab's"),
    (lambda d, f: str(2 * d + f), "return a number of tokens"),
    (lambda d, f: None, "return a number of tokens"),
])
def test_block_crossover_hints(wrong, hint):
    text = failure_message("block_crossover", wrong)
    assert hint in text
    assert "measured on seqlab's TransformerEncoderLayer(96, 4, 256)" in text or "return a number" in hint


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
    (band(scale="none"), "scale the dot products by 1 / sqrt(d_k)"),
    (band(scale="d"), "the scale is 1 / sqrt(d_k), not 1 / d_k"),
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


def test_the_watch_cells_queries_and_keys_are_the_trained_heads_own():
    """gpt_head_qkv reads charlm-gpt's q, k, v of one head: under a causal mask they give the model's own weights."""
    from seqlab.data import char_lm_data
    from seqlab.pretrained import gpt_head_qkv
    from seqlab.nn.attention import attend
    from seqlab.nn.masks import causal_mask
    from seqlab.pretrained import load_pretrained

    text = "To be, or not to be, that is the question:"
    gpt, _ = load_pretrained("charlm-gpt")
    with torch.no_grad():
        _, weights = gpt(char_lm_data().vocab.encode(text)[None], need_weights=True)   # (layers, 1, heads, n, n)
    for layer, head in ((0, 0), (1, 3)):
        q, k, v, chars = gpt_head_qkv(text, layer=layer, head=head)
        assert q.shape == k.shape == v.shape == (len(text), gpt.config.d_model // gpt.config.nhead)
        assert q.dtype == torch.float64 and chars == list(text)
        _, mine = attend(q, k, v, causal_mask(len(text)))
        assert torch.allclose(mine, weights[layer, 0, head].double(), atol=1e-5)
    with pytest.raises(ValueError, match="heads 0..3, got layer=0, head=4"):
        gpt_head_qkv(text, head=4)
    with pytest.raises(ValueError, match="1 to 64 characters, got 65"):
        gpt_head_qkv("x" * 65)


def test_the_watched_band_slips_are_caught_with_their_diagnosis():
    from seqlab.exercises.nb17_cost import BAND_MISTAKES

    hints = {"sqrt": "scale the dot products by 1 / sqrt(d_k)", "off the ends": "must get -inf"}
    for label, band in BAND_MISTAKES.items():
        (key,) = [k for k in hints if k in label]
        assert hints[key] in failure_message("band_scores", band), label
