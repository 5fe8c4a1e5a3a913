"""What the per-notebook exercise tests share: the feedback a wrong answer gets, checked for form, and the
error a missing or malformed measurement raises.

The pytest ini's ``pythonpath`` puts tests/ on ``sys.path`` (pyproject.toml), so the test files
import this module as ``from exercise_helpers import failure_message``.
"""

from __future__ import annotations

import copy
import json

import pytest

from seqlab.exercises import EXERCISES, check, expected_value, judge, measurement_args
from seqlab.grading import codec


def failure_message(name: str, fn, *, measured=None) -> str:
    """The checker's text for a wrong ``fn``; fails the test if ``fn`` passes or the hint is not one short line.

    A hint summarises tensors (shape, dtype, first differing entry) and never prints a tensor's
    repr, which would run over several lines in a notebook. ``measured`` goes to :func:`check`.
    """
    result = check(name, fn, measured=measured)
    assert not result, f"{name}: the wrong answer passed the checker"
    assert_the_grader_agrees(name, fn, measured)
    text = repr(result)
    assert "FAIL" in text, f"{name}: a failure must say FAIL in words (❌ is a blank box without an emoji font)"
    if "Hint: " in text:
        hint = text.split("Hint: ", 1)[1]
        assert "\n" not in hint and "tensor(" not in hint, f"{name}: the hint prints a tensor or runs over lines: {hint!r}"
    return text


def measurement_error(name: str, measured, error: type[Exception]) -> str:
    """The text of the ``error`` that checking a prediction against the malformed ``measured`` (or None) raises."""
    with pytest.raises(error) as raised:
        check(name, lambda: None, measured=measured)
    return str(raised.value)


def assert_the_grader_agrees(name: str, fn, measured=None) -> None:
    """The grader (``course.py grade``) judges a value after it has crossed from its sandbox as plain data
    (:mod:`seqlab.grading.codec`); every catalogued mistake must get the same verdict and hint that way."""
    ex = EXERCISES[name]
    given = measurement_args(ex, measured)
    for case in ex.cases:
        try:
            got = fn(*copy.deepcopy(case.args))
        except Exception:                       # a raise is reported alike by both
            continue
        if got is None and ex.is_prediction:
            continue
        expected = expected_value(ex, given, case)
        direct = judge(ex, given, case, got, expected)
        try:
            carried = codec.decode(json.loads(json.dumps(codec.encode(got))))
        except codec.Unreadable as err:
            pytest.fail(f"{name}: the grader cannot read what this answer returns ({err})")
        through = judge(ex, given, case, carried, expected)
        assert (through.passed, through.hint) == (direct.passed, direct.hint), (name, case.what)
