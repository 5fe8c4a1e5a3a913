"""seqlab.nn.layer_norm.LayerNorm against torch.nn.LayerNorm: same parameters, outputs and gradients."""

from __future__ import annotations

import pytest
import torch

from seqlab.nn.layer_norm import LayerNorm

TOL = 1e-5


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def twins(normalized_shape, **kwargs):
    """torch's LayerNorm with random (not 1/0) gamma and beta, and ours loaded from its state_dict."""
    reference = torch.nn.LayerNorm(normalized_shape, **kwargs)
    with torch.no_grad():
        for i, p in enumerate(reference.parameters()):
            p.copy_(randn(*p.shape, seed=100 + i))
    ours = LayerNorm(normalized_shape, **kwargs)
    ours.load_state_dict(reference.state_dict(), strict=True)
    return ours, reference


@pytest.mark.parametrize("kwargs", [{}, {"bias": False}, {"elementwise_affine": False}, {"eps": 1e-2}],
                         ids=["affine", "no-bias", "no-affine", "eps"])
@pytest.mark.parametrize("normalized_shape,shape", [(8, (3, 5, 8)), ((4, 6), (2, 4, 6)), (7, (7,))],
                         ids=["last", "last-two", "one-vector"])
def test_outputs_and_gradients_match_torch(normalized_shape, shape, kwargs):
    ours, reference = twins(normalized_shape, **kwargs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in reference.named_parameters()]
    assert (ours.weight is None, ours.bias is None) == (reference.weight is None, reference.bias is None)
    x = (3 * randn(*shape, seed=1) + 2).requires_grad_()                # far from mean 0, variance 1
    x_ref = x.detach().clone().requires_grad_()
    y, y_ref = ours(x), reference(x_ref)
    assert (y - y_ref).abs().max() <= TOL
    upstream = randn(*shape, seed=2)
    (y * upstream).sum().backward()
    (y_ref * upstream).sum().backward()
    assert (x.grad - x_ref.grad).abs().max() <= TOL
    for (name, p), p_ref in zip(ours.named_parameters(), reference.parameters(), strict=True):
        assert (p.grad - p_ref.grad).abs().max() <= TOL, name


def test_float64_and_bfloat16_match_torch():
    ours, reference = twins(16)
    x = randn(4, 16, seed=3, dtype=torch.float64)
    assert (ours.double()(x) - reference.double()(x)).abs().max() <= 1e-12
    y, y_ref = ours.bfloat16()(x.bfloat16()), reference.bfloat16()(x.bfloat16())
    assert y.dtype == torch.bfloat16
    assert (y.float() - y_ref.float()).abs().max() <= 2e-2                # one bfloat16 rounding of values ~ 3


def test_the_variance_is_the_biased_one_unlike_the_annotated_transformer():
    d = 4
    x = randn(10, d, seed=4)
    y = LayerNorm(d, eps=0.0)(x)
    assert torch.allclose(y.mean(-1), torch.zeros(10), atol=1e-6)
    assert torch.allclose(y.var(-1, unbiased=False), torch.ones(10), atol=1e-5)   # 1/d: variance exactly 1
    # The Annotated Transformer's version: (x - mean) / (std + eps) with the unbiased std (1/(d-1))
    annotated = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 0.0)
    assert torch.allclose(y, annotated * (d / (d - 1)) ** 0.5, atol=1e-5)           # they differ by sqrt(d/(d-1))
    assert not torch.allclose(y, annotated, atol=1e-2)


def test_a_constant_vector_gives_beta_not_nan():
    ours, _ = twins(5)
    x = torch.full((2, 5), 3.0, requires_grad=True)
    y = ours(x)
    assert torch.allclose(y, ours.bias.detach().expand(2, 5))              # sigma = 0: x_hat = 0, output beta
    y.sum().backward()
    assert torch.isfinite(x.grad).all()


def test_wrong_trailing_shape_names_expected_and_actual():
    with pytest.raises(ValueError, match=r"expects input of shape \(\*, 8\).*got \(3, 5, 6\)"):
        LayerNorm(8)(randn(3, 5, 6))
    with pytest.raises(ValueError, match=r"expects input of shape \(\*, 4, 6\).*last 2 dimensions.*got \(2, 6, 4\)"):
        LayerNorm((4, 6))(randn(2, 6, 4))
    with pytest.raises(ValueError, match=r"got \(6,\)"):
        LayerNorm((4, 6))(randn(6))
    with pytest.raises(TypeError, match=r"floating-point input, got torch.int64"):
        LayerNorm(3)(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"normalized_shape must be"):
        LayerNorm(0)


def test_repr_and_reset_match_torch():
    ours, reference = twins(6, bias=False)
    assert repr(ours) == repr(reference)
    ours.reset_parameters()
    assert (ours.weight == 1).all()
    meta = LayerNorm(512, device="meta")
    assert meta.weight.device.type == "meta" and meta.bias.shape == (512,)
