"""Notebook 11's exercises: typical wrong answers get the hint that names what is wrong."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.exercises import EXERCISES, check
from seqlab.exercises import nb11_positional as nb11
from seqlab.exercises.nb11_positional import ROPE_MISTAKES, _rope_head_variant, measure_alibi_self_weight
from seqlab.nn.attention import attend
from seqlab.nn.positional import POSITIONAL_ENCODINGS, ALiBi, RotaryPositionalEncoding, rotate_pairs, frequencies, sinusoidal_table

from exercise_helpers import failure_message, measurement_error

# section 9's measurement, accuracy_at_64; an encoding added to the registry later gets a stand-in below 0.9
# (these tests are about the checker's verdicts and hints, not about the encodings)
ACCURACY_AT_64 = {name: 0.30 for name in POSITIONAL_ENCODINGS} | {"none": 0.43, "sinusoidal": 0.32, "learned": 0.31,
                                                                 "rope": 0.65, "alibi": 0.98}


def test_references_pass_and_agree_with_seqlab():
    for name in ("sinusoidal_encoding", "rope_head", "predict_slowest_wavelength", "predict_alibi_self_weight"):
        assert check(name, EXERCISES[name].reference)
    assert check("predict_extrapolation", lambda: {"alibi"}, measured=ACCURACY_AT_64)   # the solution: alibi alone
    # rope_head is seqlab's RoPE inside seqlab's attention
    x, W_Q, W_K, W_V, start = EXERCISES["rope_head"].cases[1].args
    q, k, v = x @ W_Q, x @ W_K, x @ W_V
    positions = torch.arange(start, start + x.shape[0])
    theta = frequencies(W_Q.shape[1])
    z, _ = attend(rotate_pairs(q, positions, theta), rotate_pairs(k, positions, theta), v)
    assert torch.allclose(EXERCISES["rope_head"].reference(x, W_Q, W_K, W_V), z, atol=1e-12)
    rope = RotaryPositionalEncoding(W_Q.shape[1])
    q_rot, k_rot = rope.rotate(q[None, None], k[None, None])
    assert torch.allclose(q_rot[0, 0], rotate_pairs(q, positions, theta), atol=1e-12)


def test_rope_head_depends_on_offsets_only():
    """The property the exercise is about: the same tokens moved 1000 positions on give the same output."""
    x, W_Q, W_K, W_V, _ = EXERCISES["rope_head"].cases[1].args
    ref = EXERCISES["rope_head"].reference
    assert torch.allclose(ref(x, W_Q, W_K, W_V, 0), ref(x, W_Q, W_K, W_V, 1000), atol=1e-10)
    # sinusoids added to x do not have it
    moved = _rope_head_variant(x, W_Q, W_K, W_V, 1000, add_positions=True, rotate=())
    assert not torch.allclose(_rope_head_variant(x, W_Q, W_K, W_V, 0, add_positions=True, rotate=()), moved, atol=1e-3)


def _variant(options):
    return lambda x, W_Q, W_K, W_V, start=0: _rope_head_variant(x, W_Q, W_K, W_V, start, **options)


@pytest.mark.parametrize("options, hint", [
    (dict(rotate=()), "no rotation at all"),
    (dict(rotate=("q", "k", "v")), "you rotated v too"),
    (dict(rotate=("q",)), "you rotated q only"),
    (dict(rotate=("k",)), "you rotated k only"),
    (dict(sign=-1.0), "the angle has the wrong sign"),
    (dict(layout="halves"), "with l + d_k/2"),
    (dict(layout="neighbours"), "with l + 1"),
    (dict(layout="neighbours-in-place"), "with l + 1"),
    (dict(exponent=lambda l, d: 10000.0 ** (2 * l / d)), "the base is on the wrong side"),
    (dict(exponent=lambda l, d: l / (10000.0 ** 2 * d)), "check the brackets"),
    (dict(exponent=lambda l, d: 1 / (10000.0 ** (2 * l) * d)), "divides by d_k outside the power"),
    (dict(exponent=lambda l, d: 10000.0 ** (-l / d)), "you left out the 2"),
    (dict(exponent=lambda l, d: 10000.0 ** (-4 * l / d)), "the dimension index 2l"),
    (dict(scale=False), "divide the scores by sqrt(d_k)"),
    (dict(add_positions=True, rotate=()), "you added sinusoidal positions to x"),
])
def test_rope_head_hints(options, hint):
    assert hint in failure_message("rope_head", _variant(options))


def test_every_rope_mistake_is_told_apart_from_the_others_and_from_the_reference():
    x, W_Q, W_K, W_V, start = EXERCISES["rope_head"].cases[0].args
    outputs = [_rope_head_variant(x, W_Q, W_K, W_V, start, **options) for options, _ in ROPE_MISTAKES]
    reference = EXERCISES["rope_head"].reference(x, W_Q, W_K, W_V, start)
    for i, (out, (_, message)) in enumerate(zip(outputs, ROPE_MISTAKES)):
        assert not torch.allclose(out, reference, atol=1e-6), message
        for j in range(i):
            if ROPE_MISTAKES[j][1] != message:
                assert not torch.allclose(out, outputs[j], atol=1e-6), (message, ROPE_MISTAKES[j][1])


def test_rope_head_other_wrong_answers():
    def weights_only(x, W_Q, W_K, W_V, start=0):
        q, k = x @ W_Q, x @ W_K
        return torch.softmax(q @ k.T, dim=-1)
    assert "you returned the attention weights" in failure_message("rope_head", weights_only)
    assert "return a torch.Tensor" in failure_message("rope_head", lambda *a, **k: [0.0])
    assert "should have shape (5, 4)" in failure_message("rope_head", lambda x, *a, **k: torch.zeros(5, 3))
    assert "first difference" in failure_message("rope_head", lambda x, W_Q, W_K, W_V, start=0: _variant({})(x, W_Q, W_K, W_V) + 1)


def test_wavelength_is_measured_on_the_table():
    measured = nb11.measure_slowest_wavelength()
    assert measured == pytest.approx(2 * math.pi * 100 ** (62 / 64), rel=1e-6)
    assert nb11.measure_slowest_wavelength(base=10000.0, length=200_000) == pytest.approx(
        2 * math.pi / frequencies(64)[-1].item(), rel=1e-6)


@pytest.mark.parametrize("prediction, hint", [
    (2 * math.pi * 10000 ** (62 / 64), "slowest wavelength with base 10000"),
    (2 * math.pi * 100, "which does not exist"),
    (100 ** (62 / 64), "a wavelength is 2 pi / omega"),
    (2 * math.pi * 100 ** (31 / 64), "not i/d_model"),
    (2 * math.pi * 10000 ** (62 / 64) / 100, "do not shrink in proportion to the base"),
    (2000.0, "measured 544.1 positions, you predicted 2000.0"),
    ("544", "as a number of positions"),
    (True, "as a number of positions"),
])
def test_wavelength_prediction_hints(prediction, hint):
    assert hint in failure_message("predict_slowest_wavelength", lambda: prediction)


def test_wavelength_prediction_accepts_three_percent():
    assert check("predict_slowest_wavelength", lambda: 544) and check("predict_slowest_wavelength", lambda: 530.0)
    assert not check("predict_slowest_wavelength", lambda: 520.0)


def test_the_prediction_is_judged_against_the_measurement():
    measured = measure_alibi_self_weight()
    # the measurement is what ALiBi's slopes say: weights ~ e^(-d/2) over d = 0..7
    assert measured == pytest.approx(1 / sum(math.exp(-d / 2) for d in range(8)), abs=1e-12)
    assert ALiBi(8).slopes[0].item() == 0.5
    assert check("predict_alibi_self_weight", lambda: measured + 0.04)
    assert check("predict_alibi_self_weight", lambda: 0.4)
    assert "without ALiBi" in failure_message("predict_alibi_self_weight", lambda: 1 / 8)
    assert "gentle" in failure_message("predict_alibi_self_weight", lambda: 0.9)
    assert "most local head" in failure_message("predict_alibi_self_weight", lambda: 0.25)
    assert "between 0 and 1" in failure_message("predict_alibi_self_weight", lambda: 1.5)
    assert "as a number" in failure_message("predict_alibi_self_weight", lambda: "0.4")
    assert "as a number" in failure_message("predict_alibi_self_weight", lambda: True)


def test_the_exercise_names_the_encodings_the_model_builds():
    assert nb11.ENCODING_NAMES is POSITIONAL_ENCODINGS


def test_extrapolation_accepts_the_measured_set():
    assert check("predict_extrapolation", lambda: {"alibi"}, measured=ACCURACY_AT_64)
    assert check("predict_extrapolation", lambda: ["ALiBi"], measured=ACCURACY_AT_64)
    assert check("predict_extrapolation", lambda: set(), measured=ACCURACY_AT_64 | {"alibi": 0.85})


@pytest.mark.parametrize("prediction, hints", [
    ({"alibi", "rope"}, ["rope falls below 0.9 (measured 0.65)", "four times the largest offset"]),
    ({"alibi", "sinusoidal"}, ["sinusoidal falls below 0.9 (measured 0.32)", "section 3.5"]),
    ({"alibi", "learned"}, ["learned falls below", "never received a gradient"]),
    ({"alibi", "none"}, ["none falls below", "1/(i+1)"]),
    (set(), ["alibi stays above 0.9 (measured 0.98)", "the same at every position"]),
    ({"rope", "sinusoidal"}, ["sinusoidal falls below", "rope falls below", "alibi stays above"]),
    ({"alibi", "nope"}, ["unknown name(s) ['nope']"]),
    ("alibi", ["put a set of names"]),
])
def test_extrapolation_hints(prediction, hints):
    message = failure_message("predict_extrapolation", lambda: prediction, measured=ACCURACY_AT_64)
    for hint in hints:
        assert hint in message


@pytest.mark.parametrize("measured, error, says", [
    (None, TypeError, "judges your prediction against the notebook's measurement"),
    ({"rope": 0.5}, ValueError,
     f"expected one accuracy per encoding, {', '.join(POSITIONAL_ENCODINGS)}; got the keys rope"),
    ([0.43, 0.32, 0.31, 0.65, 0.98], TypeError, "expected a dict of accuracies by encoding, got list"),
    (ACCURACY_AT_64 | {"alibi": 98.0}, ValueError, "expected accuracies between 0 and 1"),
])
def test_extrapolation_without_its_measurement_says_which_cell_to_run(measured, error, says):
    message = measurement_error("predict_extrapolation", measured, error)
    assert says in message
    assert "run section 9's training cell, then pass measured=accuracy_at_64" in message

# -- sinusoidal_encoding (build, then watch) ------------------------------------------------------------------
def test_sinusoidal_reference_is_seqlabs_table():
    reference = EXERCISES["sinusoidal_encoding"].reference
    for n, d in ((6, 8), (50, 16), (200, 64)):
        assert torch.allclose(reference(n, d), sinusoidal_table(n, d, dtype=torch.float64), atol=1e-12)
    assert check("sinusoidal_encoding", lambda n, d: sinusoidal_table(n, d))          # float32 is accepted


def _pe(swap=False, halves=False, per_column=False, exponent=2.0, multiply=False, precedence=False, first=0,
        transpose=False, numpy=False, sines_only=False):
    def f(n_positions, d_model):
        pos = torch.arange(first, first + n_positions, dtype=torch.float64)[:, None]
        if per_column:
            j = torch.arange(d_model, dtype=torch.float64)
            angle = pos / 10000.0 ** (j / d_model)
            table = torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle))
        else:
            i = torch.arange(d_model // 2, dtype=torch.float64)
            if precedence:
                angle = pos / 10000.0 ** (2 * i) / d_model
            elif multiply:
                angle = pos * 10000.0 ** (exponent * i / d_model)
            else:
                angle = pos / 10000.0 ** (exponent * i / d_model)
            a, b = (torch.cos(angle), torch.sin(angle)) if swap else (torch.sin(angle), torch.cos(angle))
            if sines_only:
                return a
            table = torch.cat((a, b), 1) if halves else torch.stack((a, b), -1).reshape(n_positions, d_model)
        table = table.T if transpose else table
        return table.numpy() if numpy else table
    return f


@pytest.mark.parametrize("wrong, says", [
    (_pe(swap=True), "sine and cosine are swapped"),
    (_pe(halves=True), "not interleaved"),
    (_pe(per_column=True), "every column its own frequency"),
    (_pe(exponent=1.0), "you left out the 2"),
    (_pe(exponent=4.0), "you used the column 2i in place of i"),
    (_pe(multiply=True), "divided by 10000^(2i/d_model), not multiplied"),
    (_pe(precedence=True), "operator precedence"),
    (_pe(first=1), "the positions start at 1"),
    (_pe(transpose=True), "transposed, (8, 6)"),
    (_pe(numpy=True), "return a torch.Tensor"),
    (_pe(sines_only=True), "should have shape (6, 8), got (6, 4)"),
])
def test_sinusoidal_hints(wrong, says):
    assert says in failure_message("sinusoidal_encoding", wrong)


def test_a_square_table_transposed_is_named():
    reference = EXERCISES["sinusoidal_encoding"].reference

    def transposed_only_when_square(n, d):
        return reference(n, d).T if n == d else reference(n, d)
    text = failure_message("sinusoidal_encoding", transposed_only_when_square)
    assert "check 3 of 3" in text and "transposed" in text
