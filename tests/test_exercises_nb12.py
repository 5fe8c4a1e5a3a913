"""Notebook 12's exercises: typical wrong answers get the hint that names what is wrong, in one-line summaries."""

from __future__ import annotations

import pytest
import torch

from seqlab.exercises import EXERCISES, check, exercises_of
from seqlab.nn.layer_norm import LayerNorm

from exercise_helpers import failure_message


def test_the_references_pass_and_the_messages_summarise_tensors():
    assert set(exercises_of("nb12_transformer")) == {"sublayer_connection", "layer_norm", "transformer_block",
                                                     "predict_learns"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb12_transformer").items()
               if ex.measured is None)
    text = failure_message("sublayer_connection", lambda x, F, LN, first: x)
    assert "<tensor of shape (2, 3, 4), float64>" in text and "<Sequential module>" in text
    assert len(text.splitlines()) == 3                                   # where / call and result / hint
    assert "tensor([[" not in text


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


def test_layer_norm_module_used_in_the_sublayer_cases_is_seqlabs():
    _, _, LN, _ = EXERCISES["sublayer_connection"].cases[0].args
    assert isinstance(LN, LayerNorm)


# -- build: LayerNorm ---------------------------------------------------------------------------------------------
from seqlab.exercises.nb12_transformer import (BLOCK_MISTAKES, LN_MISTAKES, RUNS, block_with_mistake,  # noqa: E402
                                               layer_norm, ln_with_mistake, transformer_block)


@pytest.mark.parametrize("mistake", sorted(LN_MISTAKES))
def test_each_catalogued_layer_norm_mistake_gets_its_diagnosis(mistake):
    text = failure_message("layer_norm", ln_with_mistake(mistake))
    assert LN_MISTAKES[mistake][1] in text or (mistake == "no eps" and "NaN" in text)


def test_layer_norm_swapped_gain_and_shift_is_named():
    assert "gamma and beta are swapped" in failure_message("layer_norm", lambda x, g, b, eps=1e-5: layer_norm(x, b, g, eps))


def test_layer_norm_reference_is_torchs():
    x, gamma, beta = torch.randn(3, 7, 16, dtype=torch.float64), torch.rand(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    expected = torch.nn.functional.layer_norm(x, (16,), gamma, beta, eps=1e-5)
    assert torch.allclose(layer_norm(x, gamma, beta), expected, atol=1e-12)


# -- build: the pre-norm block ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mistake", sorted(BLOCK_MISTAKES))
def test_each_catalogued_block_mistake_gets_its_diagnosis(mistake):
    assert BLOCK_MISTAKES[mistake] in failure_message("transformer_block", block_with_mistake(mistake))


def test_the_block_is_seqlabs_pre_norm_layer_on_the_checkpoint():
    from seqlab.exercises.nb10_multihead import multi_head_attention
    from seqlab.pretrained import load_pretrained, validation_batches
    from seqlab.watch import block_params, causal_mask, gpt_logits, watched_loss

    gpt, _ = load_pretrained("charlm-gpt")
    ids, _ = validation_batches()[0]
    ids = ids[:4]
    x = gpt.positional(gpt.embed(ids), 0)
    block = gpt.blocks[0]
    with torch.no_grad():
        ours = transformer_block(x, block_params(block), gpt.config.nhead, causal_mask(ids.shape[1]),
                                 multi_head_attention, layer_norm, torch.nn.functional.gelu)
        assert torch.allclose(ours, block(x, is_causal=True), atol=1e-4)
        assert torch.allclose(gpt_logits(gpt, ids, block=transformer_block, attention=multi_head_attention,
                                         norm=layer_norm), gpt(ids), atol=1e-4)
    batches = validation_batches()[:1]
    right = watched_loss(gpt, batches, norm=layer_norm)
    assert watched_loss(gpt, batches, norm=ln_with_mistake("no shift")) > right + 0.3
    assert watched_loss(gpt, batches, block=block_with_mistake("post-norm")) > right + 1.0


# -- predict, then measure: which runs learn ----------------------------------------------------------------------
ENDS = {"post-norm": 2.28, "post-norm, 50 warm-up steps": 0.027, "pre-norm": 0.009, "post-norm at 1e-3": 0.007}


def test_the_prediction_is_judged_as_a_set_of_run_names():
    assert check("predict_learns", lambda: set(RUNS) - {"post-norm"}, measured=ENDS)
    assert check("predict_learns", lambda: ["pre-norm", "post-norm at 1e-3", "post-norm, 50 warm-up steps"], measured=ENDS)
    assert "no prediction yet" in repr(check("predict_learns", lambda: None, measured=ENDS))


@pytest.mark.parametrize("prediction, hint", [
    (set(RUNS), "post-norm from step 1 at 5e-3 stays near guessing"),
    ({"pre-norm"}, "post-norm at 1e-3, post-norm, 50 warm-up steps learned"),
    ({"prenorm"}, "unknown run names"),
    ("pre-norm", "put a set of run names"),
])
def test_prediction_hints(prediction, hint):
    assert hint in failure_message("predict_learns", lambda: prediction, measured=ENDS)
