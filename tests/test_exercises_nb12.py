"""Notebook 12's exercises: typical wrong answers get the hint that names what is wrong, in one-line summaries."""

from __future__ import annotations

import pytest
import torch

from seqlab.exercises import EXERCISES, check, exercises_of
from seqlab.nn.layer_norm import LayerNorm

from exercise_helpers import failure_message


def test_the_references_pass_and_the_messages_summarise_tensors():
    assert set(exercises_of("nb12")) == {"layer_norm", "sublayer_connection", "encoder_layer_parameters"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb12").items())
    text = failure_message("sublayer_connection", lambda x, F, LN, first: x)
    assert "<tensor of shape (2, 3, 4), float64>" in text and "<Sequential module>" in text
    assert len(text.splitlines()) == 3                                   # where / call and result / hint
    assert "tensor([[" not in text


def test_the_layer_norm_reference_is_nn_layer_norm():
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    torch_ln = torch.nn.LayerNorm(8).double()
    with torch.no_grad():
        torch_ln.weight.uniform_(0.5, 1.5)
        torch_ln.bias.uniform_(-1, 1)
    expected = torch_ln(x)
    got = EXERCISES["layer_norm"].reference(x, torch_ln.weight.detach(), torch_ln.bias.detach(), 1e-5)
    assert torch.allclose(got, expected.detach(), atol=1e-12)


def ln(variance="biased", eps="inside", dim=-1, affine=True):
    def f(x, gamma, beta, eps_value):
        mu = x.mean(dim, keepdim=True)
        var = x.var(dim, unbiased=(variance == "unbiased"), keepdim=True)
        if eps == "inside":
            x_hat = (x - mu) / torch.sqrt(var + eps_value)
        elif eps == "outside":
            x_hat = (x - mu) / (torch.sqrt(var) + eps_value)
        else:
            x_hat = (x - mu) / torch.sqrt(var)
        return gamma * x_hat + beta if affine else x_hat
    return f


@pytest.mark.parametrize("wrong, hint", [
    (ln(variance="unbiased"), "you used the unbiased variance"),
    (ln(eps="missing"), "eps is missing"),
    (ln(eps="outside"), "eps goes inside the square root"),
    (ln(variance="unbiased", eps="outside"), "the Annotated Transformer's version"),
    (ln(affine=False), "scale by gamma and shift by beta"),
    (ln(dim=0), "which is batch norm"),
    (lambda x, g, b, e: ln()(x, g, b, e).tolist(), "return a torch.Tensor"),
    (lambda x, g, b, e: ln()(x, g, b, e)[..., :-1], "should have shape"),
])
def test_layer_norm_hints(wrong, hint):
    text = failure_message("layer_norm", wrong)
    assert hint in text
    assert "tensor([[" not in text


def test_missing_eps_on_a_nearly_constant_row_is_named_too():
    # a student who guards the NaN of a constant row but still forgets eps is told so
    def no_eps_but_guarded(x, gamma, beta, eps):
        mu = x.mean(-1, keepdim=True)
        std = x.var(-1, unbiased=False, keepdim=True).sqrt().clamp_min(1e-12)
        return gamma * (x - mu) / std + beta
    text = failure_message("layer_norm", no_eps_but_guarded)
    assert "eps is missing" in text


def sub(kind):
    def f(x, F, LN, norm_first):
        return {"post": lambda: LN(x + F(x)), "pre": lambda: x + F(LN(x)), "swapped": lambda: (x + F(LN(x)))
                if not norm_first else LN(x + F(x)), "no_residual": lambda: F(LN(x)) if norm_first else LN(F(x)),
                "normed_residual": lambda: LN(x) + F(LN(x)) if norm_first else LN(x + F(x)),
                "double_norm": lambda: LN(x + F(LN(x))) if norm_first else LN(x + F(x)),
                "no_norm": lambda: x + F(LN(x)) if norm_first else x + F(x),
                "norm_output_only": lambda: x + F(LN(x)) if norm_first else x + LN(F(x))}[kind]()
    return f


@pytest.mark.parametrize("wrong, hint", [
    (sub("post"), "that is post-norm"),                  # always post-norm: fails the first pre-norm case
    (sub("pre"), "that is pre-norm"),
    (sub("swapped"), "that is pre-norm"),
    (sub("no_residual"), "the residual is missing"),
    (sub("normed_residual"), "add the *un*-normalised x"),
    (sub("double_norm"), "pre-norm does not normalise the sum"),
    (sub("no_norm"), "post-norm normalises the sum"),
    (sub("norm_output_only"), "not only the sublayer's output"),
])
def test_sublayer_hints(wrong, hint):
    assert hint in failure_message("sublayer_connection", wrong)


def count(attention=4, biases=True, ffn_matrices=2, norms=2, betas=True, cross=False):
    def f(d, d_ff):
        n = attention * d * d + (attention * d if biases else 0)
        n += ffn_matrices * d * d_ff + ((d_ff + d) if ffn_matrices == 2 else d_ff) * biases
        n += norms * d * (2 if betas else 1)
        if cross:
            n += 4 * d * d + 4 * d + 2 * d
        return n
    return f


def test_the_right_formula_passes_and_matches_the_papers_layer():
    assert check("encoder_layer_parameters", count())
    assert EXERCISES["encoder_layer_parameters"].reference(512, 2048) == 3_152_384
    # the layer inside torch.nn.Transformer() has the same count
    torch_layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, device="meta")
    assert sum(p.numel() for p in torch_layer.parameters()) == 3_152_384
    assert EXERCISES["encoder_layer_parameters"].reference(64, 256, 4) == EXERCISES["encoder_layer_parameters"].reference(64, 256)


@pytest.mark.parametrize("wrong, hint", [
    (count(norms=0), "you left out the two LayerNorms"),
    (count(betas=False), "gamma and beta (you counted one of them)"),
    (count(attention=3), "(you counted three)"),
    (count(biases=False), "the biases are missing"),
    (count(ffn_matrices=1), "the FFN has two matrices"),
    (count(cross=True), "cross-attention"),
    (lambda d, d_ff: float(count()(d, d_ff)), "return a whole number"),
    (lambda d, d_ff: 12 * d * d, "off by"),
])
def test_parameter_count_hints_name_the_missing_piece_and_both_numbers(wrong, hint):
    text = failure_message("encoder_layer_parameters", wrong)
    assert hint in text
    if "whole number" not in hint:
        assert "measured 3,152,384" in text                          # the first case is the paper's layer


def test_ffn_bias_hint():
    def no_ffn_biases(d, d_ff):
        return 4 * d * d + 4 * d + 2 * d * d_ff + 4 * d
    assert "the FFN has biases too" in failure_message("encoder_layer_parameters", no_ffn_biases)


def test_layer_norm_module_used_in_the_sublayer_cases_is_seqlabs():
    _, _, LN, _ = EXERCISES["sublayer_connection"].cases[0].args
    assert isinstance(LN, LayerNorm)
