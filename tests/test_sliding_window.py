"""seqlab.nn.attention.sliding_window_attend: full attention under a band mask, in O(n w) memory."""

from __future__ import annotations

import pytest
import torch

from seqlab.cost import SavedTensorMeter, attention_matrix_bytes
from seqlab.nn.attention import attend, sliding_window_attend, window_offsets, window_to_dense
from seqlab.nn.masks import band_mask


def qkv(*shape, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=g, dtype=dtype).requires_grad_() for _ in range(3))


def test_window_offsets_are_the_bands_diagonals():
    assert window_offsets(2) == [-2, -1, 0, 1, 2]
    assert window_offsets(2, causal=True) == [-2, -1, 0]
    assert window_offsets(0) == [0] == window_offsets(0, causal=True)
    for window in (0, 1, 3):
        for causal in (False, True):
            band = band_mask(9, window, causal=causal)
            rows, cols = torch.nonzero(band, as_tuple=True)
            assert set((cols - rows).tolist()) == set(window_offsets(window, causal=causal))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [0, 1, 3, 8, 20])
def test_equals_full_attention_with_a_band_mask_outputs_weights_and_gradients(window, causal):
    q, k, v = qkv(2, 3, 11, 5, seed=window)
    out, weights = sliding_window_attend(q, k, v, window, causal=causal)
    ref_out, ref_weights = attend(q, k, v, band_mask(11, window, causal=causal))
    assert weights.shape == (2, 3, 11, len(window_offsets(window, causal=causal)))
    assert torch.allclose(out, ref_out, atol=1e-12)
    assert torch.allclose(window_to_dense(weights, window, causal=causal), ref_weights, atol=1e-12)
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    grads = torch.autograd.grad((out * upstream).sum(), (q, k, v))
    ref_grads = torch.autograd.grad((ref_out * upstream).sum(), (q, k, v))
    for got, expected in zip(grads, ref_grads):
        assert torch.allclose(got, expected, atol=1e-12)


def test_a_window_as_wide_as_the_sequence_is_full_attention():
    q, k, v = qkv(1, 6, 4, seed=3)
    out, _ = sliding_window_attend(q, k, v, 5)
    assert torch.allclose(out, attend(q, k, v)[0], atol=1e-12)
    causal_out, _ = sliding_window_attend(q, k, v, 5, causal=True)
    assert torch.allclose(causal_out, attend(q, k, v, torch.ones(6, 6, dtype=torch.bool).tril())[0], atol=1e-12)


def test_weights_rows_sum_to_one_and_columns_off_the_ends_get_nothing():
    q, k, v = qkv(7, 4, seed=4)
    _, weights = sliding_window_attend(q, k, v, 2)
    assert torch.allclose(weights.sum(-1), torch.ones(7, dtype=torch.float64))
    assert (weights[0, :2] == 0).all() and (weights[1, 0] == 0) and (weights[-1, -2:] == 0).all()


def test_key_mask_and_the_empty_window_convention():
    q, k, v = qkv(2, 8, 3, seed=5)
    key_mask = torch.tensor([[True] * 8, [True, True, True, False, False, False, False, False]])
    out, weights = sliding_window_attend(q, k, v, 1, key_mask=key_mask)
    full_mask = band_mask(8, 1) & key_mask[:, None, :]                  # (2, 8, 8)
    ref_out, ref_weights = attend(q, k, v, full_mask)
    assert torch.allclose(out, ref_out, atol=1e-12)
    assert torch.allclose(window_to_dense(weights, 1), ref_weights, atol=1e-12)
    # queries 5..7 of row 1 see only padding in their window: zero weights, zero output, zero gradient
    assert (weights[1, 5:] == 0).all() and (out[1, 5:] == 0).all()
    grad_q, = torch.autograd.grad(out.sum(), q)
    assert torch.isfinite(grad_q).all() and (grad_q[1, 5:] == 0).all()
    # a key mask broadcast over heads
    q4, k4, v4 = qkv(2, 3, 8, 3, seed=6)
    out4, _ = sliding_window_attend(q4, k4, v4, 2, causal=True, key_mask=key_mask[:, None, :])
    ref4, _ = attend(q4, k4, v4, band_mask(8, 2, causal=True) & key_mask[:, None, None, :])
    assert torch.allclose(out4, ref4, atol=1e-12)


def test_scale_and_float32():
    q, k, v = qkv(1, 9, 6, seed=7, dtype=torch.float32)
    out, _ = sliding_window_attend(q, k, v, 2, scale=0.3)
    ref, _ = attend(q, k, v, band_mask(9, 2), scale=0.3)
    assert out.dtype == torch.float32 and torch.allclose(out, ref, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_memory_kept_for_backward_is_linear_in_n(causal):
    """Exactly: zero-padded k and v, the (n, W) weights, and the (n, W) boolean mask of keys that exist."""
    window, heads, d = 4, 2, 16
    W = len(window_offsets(window, causal=causal))
    pad = window if causal else 2 * window
    measured = {}
    for n in (64, 128, 256):
        q, k, v = qkv(1, heads, n, d, dtype=torch.float32)
        with SavedTensorMeter(exclude=[q, k, v]) as meter:
            sliding_window_attend(q, k, v, window, causal=causal)
        measured[n] = meter.bytes
        padded_kv = 2 * heads * (n + pad) * d * 4
        assert meter.bytes == padded_kv + attention_matrix_bytes(n, heads=heads, keys=W) + n * W
    # doubling n roughly doubles it (the padding is fixed), where full attention's n^2 weights quadruple
    assert 1.9 < measured[256] / measured[128] < 2.0
    q, k, v = qkv(1, heads, 256, d, dtype=torch.float32)
    with SavedTensorMeter(exclude=[q, k, v]) as full:
        attend(q, k, v, band_mask(256, window, causal=causal))
    assert full.bytes == attention_matrix_bytes(256, heads=heads) + 256 * 256     # (h, n, n) weights, (n, n) mask
    assert full.bytes > 5 * measured[256]


def test_bad_input_is_named():
    q, k, v = qkv(2, 5, 4, seed=8)
    with pytest.raises(ValueError, match="window must be >= 0.*got -1"):
        sliding_window_attend(q, k, v, -1)
    with pytest.raises(TypeError, match="window must be an int.*float"):
        sliding_window_attend(q, k, v, 2.0)
    with pytest.raises(TypeError, match="window must be an int.*bool"):
        sliding_window_attend(q, k, v, True)
    with pytest.raises(ValueError, match=r"same size d_k, got q \(2, 5, 4\) and k \(2, 5, 3\)"):
        sliding_window_attend(q, k[..., :3], v, 1)
    with pytest.raises(ValueError, match=r"one key and one value per query.*k \(2, 4, 4\)"):
        sliding_window_attend(q, k[:, :4], v, 1)
    with pytest.raises(ValueError, match=r"v \(2, 6, 4\)"):
        sliding_window_attend(q, k, torch.zeros(2, 6, 4, dtype=torch.float64), 1)
    with pytest.raises(ValueError, match=r"shape \(\.\.\., n, d\), got \(5,\)"):
        sliding_window_attend(q[0, :, 0], k, v, 1)
    with pytest.raises(TypeError, match="key_mask must be boolean.*torch.int64"):
        sliding_window_attend(q, k, v, 1, key_mask=torch.ones(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"key_mask must broadcast to \(2, 5\).*got \(2, 4\)"):
        sliding_window_attend(q, k, v, 1, key_mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(\.\.\., n, 3\) for window=1, causal=False, got \(2, 5, 4\)"):
        window_to_dense(torch.zeros(2, 5, 4), 1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch sees none)")
def test_on_cuda_it_matches_the_cpu():
    q, k, v = qkv(2, 2, 40, 8, seed=9, dtype=torch.float32)
    out, _ = sliding_window_attend(q, k, v, 3, causal=True)
    on_gpu, _ = sliding_window_attend(q.cuda(), k.cuda(), v.cuda(), 3, causal=True)
    assert torch.allclose(on_gpu.cpu(), out, atol=1e-5)
