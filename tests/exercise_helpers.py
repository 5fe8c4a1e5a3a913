"""What the per-notebook exercise tests share: the feedback a wrong answer gets, checked for form.

pytest puts tests/ on ``sys.path`` (rootdir-relative "prepend" imports), so the test files
import this module as ``from exercise_helpers import failure_message``.
"""

from __future__ import annotations

from seqlab.exercises import check


def failure_message(name: str, fn) -> str:
    """The checker's text for a wrong ``fn``; fails the test if ``fn`` passes or the hint is not one short line.

    A hint summarises tensors (shape, dtype, first differing entry) and never prints a tensor's
    repr, which would run over several lines in a notebook.
    """
    result = check(name, fn)
    assert not result, f"{name}: the wrong answer passed the checker"
    text = repr(result)
    assert "FAIL" in text, f"{name}: a failure must say FAIL in words (❌ is a blank box without an emoji font)"
    if "Hint: " in text:
        hint = text.split("Hint: ", 1)[1]
        assert "\n" not in hint and "tensor(" not in hint, f"{name}: the hint prints a tensor or runs over lines: {hint!r}"
    return text
