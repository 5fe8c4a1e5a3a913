"""seqlab.nn.self_attention and seqlab.nn.attention.attend against torch's scaled_dot_product_attention and nn.MultiheadAttention (one head)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from seqlab.nn.attention import attend
from seqlab.nn.masks import causal_mask
from seqlab.nn.self_attention import SelfAttention


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("causal", [False, True])
def test_matches_torch_functional(causal):
    q, k, v = randn(2, 5, 4, seed=1), randn(2, 5, 4, seed=2), randn(2, 5, 3, seed=3)
    z, weights = attend(q, k, v, causal_mask(5) if causal else None)
    assert torch.allclose(z, F.scaled_dot_product_attention(q, k, v, is_causal=causal), atol=1e-6)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 5))
    if causal:
        assert (weights.triu(1) == 0).all()


@pytest.mark.parametrize("causal", [False, True])
def test_one_head_matches_torch_multihead_attention(causal):
    torch.manual_seed(0)
    ours = SelfAttention(8, 8, causal=causal)
    reference = torch.nn.MultiheadAttention(8, num_heads=1, bias=False, batch_first=True)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        reference.out_proj.weight.copy_(torch.eye(8))                  # one head, no output projection
    x = randn(3, 6, 8, seed=4).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    z, weights = ours(x, return_weights=True)
    z_ref, weights_ref = reference(x_ref, x_ref, x_ref, attn_mask=~causal_mask(6) if causal else None)
    assert torch.allclose(z, z_ref, atol=1e-6) and torch.allclose(weights, weights_ref, atol=1e-6)
    z.pow(2).sum().backward()
    z_ref.pow(2).sum().backward()
    assert torch.allclose(x.grad, x_ref.grad, atol=1e-5)
    assert torch.allclose(ours.W_q.weight.grad, reference.in_proj_weight.grad[:8], atol=1e-5)


def test_causal_output_ignores_the_future_and_padding_gets_no_weight():
    torch.manual_seed(0)
    head = SelfAttention(4, 4, causal=True)
    x = randn(1, 6, 4, seed=5)
    changed = x.clone()
    changed[0, 4:] = randn(2, 4, seed=6)                                # change the last two tokens
    assert torch.allclose(head(x)[0, :4], head(changed)[0, :4], atol=1e-6)
    both = SelfAttention(4, 4)
    z, weights = both(randn(2, 5, 4, seed=7), key_mask=torch.tensor([[True] * 5, [True] * 3 + [False] * 2]),
                      return_weights=True)
    assert (weights[1, :, 3:] == 0).all()


def test_permuting_the_tokens_permutes_the_outputs():
    torch.manual_seed(0)
    head = SelfAttention(4, 3)
    x = randn(1, 5, 4, seed=8)
    order = torch.tensor([3, 0, 4, 1, 2])
    assert torch.allclose(head(x)[0, order], head(x[:, order])[0], atol=1e-6)


def test_errors_are_clear():
    head = SelfAttention(4, 3)
    with pytest.raises(ValueError, match=r"expects x of shape \(B, n, 4\), got \(5, 4\)"):
        head(torch.zeros(5, 4))
    with pytest.raises(TypeError, match=r"expects x of dtype torch.float32 \(the weights'\), got torch.int64"):
        head(torch.zeros(1, 5, 4, dtype=torch.long))
    with pytest.raises(RuntimeError, match=r"x is on meta but the weights are on cpu"):
        head(torch.zeros(1, 5, 4, device="meta"))
    with pytest.raises(ValueError, match=r"key_mask must have shape \(1, 5\) \(True = may attend\), got \(1, 4\)"):
        head(torch.zeros(1, 5, 4), key_mask=torch.ones(1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"one value per key: got 5 keys \(k \(5, 3\)\) and 4 values"):
        attend(torch.zeros(5, 3), torch.zeros(5, 3), torch.zeros(4, 3))
    with pytest.raises(ValueError, match=r"1 <= n <= m \(n queries, m keys\), got n=0, m=0"):
        causal_mask(0)


def test_attend_names_both_shapes_when_the_mask_does_not_fit_the_scores():
    q = torch.zeros(2, 3, 5, 4)                                          # (B, H, n, d_k): scores (2, 3, 5, 5)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) does not broadcast to the scores \(\.\.\., n, m\) "
                                         r"= \(2, 3, 5, 5\) of q \(2, 3, 5, 4\) against k \(2, 3, 5, 4\)"):
        attend(q, q, q, torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"mask of shape \(3, 5, 5\) does not broadcast"):
        attend(q[:, :, :4], q, q, torch.ones(3, 5, 5), fused=True)       # 4 queries: the fused path checks too
    out, weights = attend(q, q, q, torch.ones(2, 1, 1, 5, dtype=torch.bool))   # a padding mask broadcasts
    assert out.shape == (2, 3, 5, 4) and weights.shape == (2, 3, 5, 5)
