"""Notebook 12's exercises: typical wrong answers get the hint that names what is wrong, in one-line summaries."""

from __future__ import annotations

import pytest

from seqlab.exercises import EXERCISES, check, exercises_of
from seqlab.nn.layer_norm import LayerNorm

from exercise_helpers import failure_message


def test_the_references_pass_and_the_messages_summarise_tensors():
    assert set(exercises_of("nb12_transformer")) == {"sublayer_connection"}
    assert all(check(name, ex.reference) for name, ex in exercises_of("nb12_transformer").items())
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
