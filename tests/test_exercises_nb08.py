"""Notebook 08's exercises: typical wrong answers get the hint that names what is wrong."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from seqlab.exercises import EXERCISES, check
from seqlab.metrics import modified_precision
from seqlab.nn.attention import Attention

from exercise_helpers import failure_message, measurement_error


@pytest.mark.parametrize("wrong, hint", [
    (lambda s, H: (H @ s, torch.softmax(H @ s, 0) @ H), "those are the scores"),
    (lambda s, H: ((H @ s) / (H @ s).sum(), torch.softmax(H @ s, 0) @ H), "divide the *exponentials*"),
    (lambda s, H: (torch.softmax(H @ s, 0), (H @ s) @ H), "not by the raw scores"),
    (lambda s, H: (torch.softmax(H @ s, 0), H.mean(0)), "plain mean"),
    (lambda s, H: torch.softmax(H @ s, 0), "return a pair of tensors"),
])
def test_attend_hints(wrong, hint):
    assert hint in failure_message("attend", wrong)


@pytest.mark.parametrize("wrong, hint", [
    (lambda e, m: torch.softmax(e.masked_fill(~m, 0.0), -1), "Use -inf"),
    (lambda e, m: torch.softmax(e.masked_fill(m, float("-inf")), -1), "blank out where it is False"),
    (lambda e, m: torch.softmax(e, -1) * m, "mask the scores before it"),
    (lambda e, m: torch.softmax(e.masked_fill(~m, float("-inf")), 0), "the last dimension"),
])
def test_masked_softmax_hints(wrong, hint):
    assert hint in failure_message("masked_softmax", wrong)


def unclipped(candidate, reference, n):
    grams = lambda t: Counter(tuple(t[i:i + n]) for i in range(len(t) - n + 1))
    c, r = grams(candidate), grams(reference)
    return sum(v for g, v in c.items() if g in r), sum(c.values())


def distinct(candidate, reference, n):
    grams = lambda t: {tuple(t[i:i + n]) for i in range(len(t) - n + 1)}
    return len(grams(candidate) & grams(reference)), len(grams(candidate))


@pytest.mark.parametrize("wrong, hint", [
    (unclipped, "clip each n-gram's count"),
    (distinct, "count every occurrence"),
    (lambda c, r, n: (modified_precision(c, [r], n)[0], len(c)), "n-grams of order n"),
])
def test_modified_precision_hints(wrong, hint):
    assert hint in failure_message("modified_precision", wrong)


def test_references_agree_with_the_library():
    s, H = torch.randn(5, dtype=torch.float64), torch.randn(7, 5, dtype=torch.float64)
    weights, context = EXERCISES["attend"].reference(s, H)
    lib_context, lib_weights = Attention("dot", 5, 5).double()(s[None, None], H[None])
    assert torch.allclose(weights, lib_weights[0, 0]) and torch.allclose(context, lib_context[0, 0])
    candidate, reference = "a a b a a b".split(), "a a b b".split()
    for n in (1, 2, 3):
        assert EXERCISES["modified_precision"].reference(candidate, reference, n) == \
            modified_precision(candidate, [reference], n)


MEASURED = (0.27, 0.84)                 # section 5's (fixed_acc[24], att_acc[24])


@pytest.mark.parametrize("prediction, hint", [
    ((0.1, 0.84), "well above guessing"),
    ((0.6, 0.84), "cannot carry 24 digits"),
    ((0.27, 1.0), "still degrades at the longest lengths"),
    ((0.27, 0.5), "reads every encoder state directly"),
    ((27, 84), "not percentages"),
    (0.5, "put two shares"),
])
def test_predict_reversal_24_judges_against_the_measurement(prediction, hint):
    message = failure_message("predict_reversal_24", lambda: prediction, measured=MEASURED)
    assert hint in message and ("measured 27% without attention and 84% with" in message or not isinstance(prediction, tuple)
                                or max(prediction) > 1)


def test_predict_reversal_24_accepts_within_ten_points():
    assert check("predict_reversal_24", lambda: MEASURED, measured=MEASURED)          # the solution: the measurement
    assert check("predict_reversal_24", lambda: (0.3, 0.9), measured=MEASURED)
    assert check("predict_reversal_24", lambda: [0.2, 0.8], measured=list(MEASURED))
    assert not check("predict_reversal_24", lambda: (0.3, 0.95), measured=MEASURED)


@pytest.mark.parametrize("measured, error, says", [
    (None, TypeError, "judges your prediction against the notebook's measurement"),
    (0.84, TypeError, "expected two numbers, got 0.84"),
    ((0.27, 0.84, 0.5), TypeError, "expected two numbers"),
    ((27.0, 84.0), ValueError, "expected two shares between 0 and 1, got (27.0, 84.0)"),
])
def test_predict_reversal_24_without_its_measurement_says_which_cell_to_run(measured, error, says):
    message = measurement_error("predict_reversal_24", measured, error)
    assert says in message
    assert ("run section 5's cell that prints the table by length, then pass measured=(fixed_acc[24], att_acc[24])"
            in message)
