"""seqlab.nn.masks (one convention: True / 0 = may attend) and seqlab.nn.attention.attend on top of it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from seqlab.nn.attention import attend, masked_softmax
from seqlab.nn.masks import (allowed_anywhere, band_mask, causal_mask, check_mask, from_torch, merge_masks,
                             padding_mask, to_additive)


def randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_padding_and_causal_masks():
    assert padding_mask([3, 1], 4).int().tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]
    assert padding_mask(torch.tensor([2, 0])).int().tolist() == [[1, 1], [0, 0]]
    assert causal_mask(3).int().tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    # two new queries after a cache of three keys: each sees the cache and itself
    assert causal_mask(2, 5).int().tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert torch.equal(causal_mask(4, 4), causal_mask(4))


def test_band_mask_is_the_diagonal_band():
    assert band_mask(4, 1).int().tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]
    assert torch.equal(band_mask(5, 1, causal=True), band_mask(5, 1) & causal_mask(5))
    assert torch.equal(band_mask(5, 4), torch.ones(5, 5, dtype=torch.bool))


def test_merge_and_convert():
    causal, real = causal_mask(3), padding_mask([2], 3)[:, None, :]          # (3, 3) and (1, 1, 3)
    merged = merge_masks(causal, None, real)
    assert merged.shape == (1, 3, 3) and merged[0].int().tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 0]]
    assert merge_masks(None, None) is None
    additive = merge_masks(causal, torch.full((3, 3), -1.0))
    assert additive.dtype == torch.float32 and additive[0].tolist() == [-1.0, float("-inf"), float("-inf")]
    assert torch.equal(to_additive(causal) == 0, causal)
    assert torch.equal(from_torch(~causal), causal) and from_torch(None) is None
    assert torch.equal(from_torch(to_additive(causal, torch.float64), torch.float32), to_additive(causal))
    assert allowed_anywhere(padding_mask([2, 0], 3)).flatten().tolist() == [True, False]
    assert allowed_anywhere(to_additive(padding_mask([2, 0], 3))).flatten().tolist() == [True, False]


def test_mask_errors_name_what_was_expected():
    with pytest.raises(ValueError, match=r"lengths must be a 1-D tensor of integers .* got torch.float32 of shape \(2,\)"):
        padding_mask(torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="a length of 5 does not fit max_len=3"):
        padding_mask([5], 3)
    with pytest.raises(ValueError, match=r"1 <= n <= m .* got n=4, m=2"):
        causal_mask(4, 2)
    with pytest.raises(TypeError, match="must be boolean or floating point .* got torch.int64"):
        check_mask("attn_mask", torch.zeros(3, 3, dtype=torch.long), [(3, 3)], what="True = blocked")
    with pytest.raises(ValueError, match=r"attn_mask must have shape \(3, 3\) or \(8, 3, 3\) \(True = blocked\), got \(3, 4\)"):
        check_mask("attn_mask", torch.zeros(3, 4, dtype=torch.bool), [(3, 3), (8, 3, 3)], what="True = blocked")
    with pytest.raises(TypeError, match="a torch-style mask must be boolean"):
        from_torch(torch.zeros(3, 3, dtype=torch.long))


@pytest.mark.parametrize("kind", ["none", "causal", "padding", "additive"])
@pytest.mark.parametrize("fused", [False, True])
def test_attend_matches_torchs_scaled_dot_product_attention(kind, fused):
    q, k, v = randn(2, 3, 5, 4, seed=1), randn(2, 3, 6, 4, seed=2), randn(2, 3, 6, 7, seed=3)
    mask = {"none": None, "causal": causal_mask(5, 6), "padding": padding_mask([6, 4], 6)[:, None, None, :],
            "additive": randn(5, 6, seed=4)}[kind]
    out, weights = attend(q, k, v, mask, fused=fused)
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(out, reference, atol=1e-6)
    assert (weights is None) == fused
    if not fused:
        assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 5), atol=1e-6)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("n", [7, 3, 1], ids=["n=m", "n<m", "one-query"])
def test_attend_is_causal_reads_up_to_each_querys_own_position(n, fused):
    """is_causal with n of m queries (the last n positions, as with a KV cache) is the bottom-right aligned
    triangle j <= i + (m - n), written out here rather than taken from causal_mask. torch's own is_causal
    flag aligns the triangle top-left when n < m, so the fused path may hand the kernel the flag only when
    n == m; its output must still be the tail of a full causal pass."""
    m = 7
    q, k, v = randn(2, 3, m, 4, seed=11), randn(2, 3, m, 4, seed=12), randn(2, 3, m, 5, seed=13)
    allowed = torch.ones(n, m, dtype=torch.bool).tril(diagonal=m - n)
    out, _ = attend(q[..., m - n:, :], k, v, is_causal=True, fused=fused)
    reference = F.scaled_dot_product_attention(q[..., m - n:, :], k, v, attn_mask=allowed)
    assert torch.allclose(out, reference, atol=1e-6), \
        f"is_causal with {n} queries of {m} keys (fused={fused}) is not softmax over keys j <= i + {m - n}"
    full, _ = attend(q, k, v, is_causal=True, fused=fused)
    assert torch.allclose(out, full[..., m - n:, :], atol=1e-6), "the last n queries differ from a full causal pass"


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("additive", [False, True])
def test_a_row_with_nothing_to_attend_to_gives_zeros_forward_and_backward(fused, additive):
    """Zero weights, a zero output and zero gradients (the naive softmax gives 0/0 = NaN here; torch 2.13's
    CPU scaled_dot_product_attention kernel gives zeros too, its math path NaN)."""
    q, k, v = (randn(2, 4, 3, seed=s).requires_grad_() for s in (5, 6, 7))
    mask = padding_mask([4, 0], 4)[:, None, :]                               # sequence 1 is all padding
    mask = to_additive(mask) if additive else mask
    out, weights = attend(q, k, v, mask, fused=fused)
    naive = torch.softmax(q @ k.transpose(-2, -1) / 2 + to_additive(padding_mask([4, 0], 4)[:, None, :]), -1)
    assert torch.isnan(naive[1]).all()                                      # what masked_softmax avoids
    assert (out[1] == 0).all() and torch.isfinite(out).all()
    if not fused:
        assert (weights[1] == 0).all() and torch.allclose(weights[0].sum(-1), torch.ones(4))
    out.pow(2).sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all() and (t.grad[1] == 0).all()


def test_masked_softmax_is_torchs_softmax_where_rows_allow_something():
    scores, mask = randn(3, 4, seed=8), causal_mask(3, 4)
    assert torch.allclose(masked_softmax(scores, mask), torch.softmax(scores.masked_fill(~mask, float("-inf")), -1))
    assert torch.equal(masked_softmax(scores), torch.softmax(scores, -1))


def test_attend_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"same size d_k, got q \(2, 3\) and k \(4, 5\)"):
        attend(torch.zeros(2, 3), torch.zeros(4, 5), torch.zeros(4, 5))
