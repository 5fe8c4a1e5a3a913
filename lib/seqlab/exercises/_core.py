"""Automatic feedback for the notebooks' exercises: ``check(name, your_function)``.

Each exercise is a reference solution plus a few cases, chosen so that the usual mistakes
fail one of them, and a ``diagnose`` function that recognises those mistakes and says what went
wrong. A student calls, as the last line of a cell::

    check("perplexity", perplexity)

and sees either that every case passes, or the first case that fails: the input, the expected
and the returned value, and a hint. An error in the student's code is reported, not raised, so a
notebook with unfinished exercises still runs top to bottom; the result is truthy only when every case passes.

Adding an exercise for another notebook: build an :class:`Exercise` and :func:`register` it in
that notebook's module, ``seqlab/exercises/nbNN_topic.py``; ``seqlab/exercises/__init__.py``
imports every ``nb*`` module it finds, so a new file is registered without further edits.

"Predict, then measure" exercises (named ``predict_*``) judge a prediction, ``check(name, lambda:
my_prediction)``, against a measurement; the checker only compares. A prediction not yet made (None, or
``raise NotImplementedError``) gets a message that holds neither the measurement nor a hint, and the
measurement is not computed: the answer is shown only after the student has committed to one. A fixed experiment lives in :mod:`seqlab.experiments` (run
once per process, cached), where the notebook reads it too. A run the notebook makes itself (with the
student's own settings and seeds) is passed to the check with the prediction::

    check("predict_reversal_24", lambda: my_prediction, measured=(fixed_acc[24], att_acc[24]))

The exercise's :class:`Measured` says what to pass and from which cell; its reference and ``diagnose``
read the measurement as their first argument.
"""

from __future__ import annotations

import ast
import copy
import inspect
import math
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises import _answers


@dataclass(frozen=True)
class Case:
    """One input to try; ``what`` says in words what the case tests (shown when it fails), and
    ``hint`` (optional) is the advice for a failure on this case that ``diagnose`` does not explain."""

    args: tuple
    what: str
    hint: str | None = None


@dataclass(frozen=True)
class Measured:
    """What a "predict, then measure" exercise needs from the notebook's own run, passed as ``measured=``.

    ``what`` is what to pass, in the notebook's names (``"(one_left, one_right), the one-head model's
    accuracies"``); ``where`` the cell that measures it; ``parse(value)`` returns the measurement as the
    reference reads it, or raises TypeError or ValueError saying what is wrong with ``value``.
    """

    what: str
    where: str
    parse: Callable[[Any], Any]


@dataclass(frozen=True)
class Exercise:
    """A named exercise: the function signature the student writes, a reference and its cases.

    ``diagnose(args, got, expected)`` returns a hint for a recognised mistake, else None;
    ``hint`` is the fallback. ``same(got, expected)`` decides equality (default: numbers within
    1e-6 relative, other values with ==). An exercise judged against the notebook's own run has a
    ``measured``: the reference and ``diagnose`` then get that measurement before the case's arguments.

    What the tools around the course read (the exercise's entry in the course as data): ``forbidden``, the
    library twins that would do a from-scratch exercise's work (the grader flags an answer that calls one; a
    name matches a dotted name by its last parts, and one starting with "." matches an attribute only);
    ``points`` in the gradebook; ``mistakes``, the diagnoses ``diagnose`` draws from a table rather than
    returning as literal text (:func:`catalogue` finds the literal ones itself); ``hidden``, a factory of
    hidden cases from an instructor's secret seed (``SEED`` in ``hidden_cases.py``; shapes unlike the public
    cases', or values where the inputs are numbers or text, so that an answer fitted to those fails). Its
    notebook is the module that registers it (``nb04_lstm``: notebook 04); its answer cell places it in the
    notebook's order.
    """

    name: str
    signature: str
    reference: Callable[..., Any]
    cases: Sequence[Case]
    hint: str
    diagnose: Callable[[tuple, Any, Any], str | None] | None = None
    same: Callable[[Any, Any], bool] | None = None
    measured: Measured | None = None
    forbidden: tuple[str, ...] = ()
    points: float = 1.0
    mistakes: tuple[str, ...] = ()
    hidden: Callable[[int], Sequence[Case]] | None = None

    @property
    def is_prediction(self) -> bool:
        """A "predict, then measure" exercise: its answer must never be shown before a prediction is made."""
        return self.name.startswith("predict_")

    @property
    def kind(self) -> str:
        """"predict" (a prediction judged against a measurement) or "build" (a function the student writes)."""
        return "predict" if self.is_prediction else "build"

    @property
    def notebook(self) -> int:
        """The number of the notebook that asks for it (its registering module is ``nbNN_topic``)."""
        number = notebook_number(self.name)
        if number is None:
            raise LookupError(f"{self.name} is registered by {REGISTERED_BY[self.name]}, not by a notebook's module "
                              "nbNN_topic")
        return number


@dataclass(frozen=True)
class CheckResult:
    """What :func:`check` found; truthy when every case passed. Its repr is the feedback text."""

    name: str
    passed: bool
    message: str
    failed_case: int | None = field(default=None)

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message


EXERCISES: dict[str, Exercise] = {}
PASSED: dict[str, Callable[..., Any]] = {}   # exercise name -> the student's function that check() last passed
REGISTERED_BY: dict[str, str] = {}      # exercise name -> the module that registered it (its notebook's)


def notebook_number(name: str) -> int | None:
    """The notebook of exercise ``name``, from the module that registered it (``nb10_multihead``: 10), or None."""
    module = REGISTERED_BY[name].rsplit(".", 1)[-1]
    return int(module[2:4]) if module[:2] == "nb" and module[2:4].isdigit() else None


def register(exercise: Exercise) -> Exercise:
    if exercise.name in EXERCISES:
        raise ValueError(f"an exercise named {exercise.name!r} is already registered")
    EXERCISES[exercise.name] = exercise
    # the caller, not the reference's module: a reference may live in the library (bptt_step's in seqlab.gradients)
    REGISTERED_BY[exercise.name] = sys._getframe(1).f_globals.get("__name__", "")
    return exercise


def catalogue(name: str) -> list[str]:
    """Every diagnosis the checker of ``name`` can give, for the instructor notes: the exercise's ``mistakes``,
    the texts its ``diagnose`` (and the module's helpers it calls) return literally (an f-string's fields shown as
    …), then the cases' own hints and the fallback hint."""
    ex = EXERCISES[name]
    found = list(dict.fromkeys(ex.mistakes))
    functions = [ex.diagnose] if ex.diagnose is not None else []
    seen = set()
    while functions:
        function = functions.pop(0)
        if function in seen:
            continue
        seen.add(function)
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Return) and node.value is not None:
                text = _literal_text(node.value)
                if text and text not in found:
                    found.append(text)
            elif function is ex.diagnose and isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                helper = getattr(function, "__globals__", {}).get(node.func.id)
                if inspect.isfunction(helper) and helper.__module__ == function.__module__:
                    functions.append(helper)
    for hint in [c.hint for c in ex.cases if c.hint] + [ex.hint]:
        if hint not in found:
            found.append(hint)
    return found


def _literal_text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal_text(node.left), _literal_text(node.right)
        return left + right if left is not None and right is not None else None
    return None


def _short(value: Any, limit: int = 70) -> str:
    if isinstance(value, Tensor):         # a summary, never torch's multi-line repr
        dtype = str(value.dtype).removeprefix("torch.")
        if value.dim() == 0:
            return f"tensor({value.item():.6g}, {dtype})"
        if value.numel() <= 6 and value.dim() == 1:
            return f"tensor({[round(v, 4) if isinstance(v, float) else v for v in value.tolist()]}, {dtype})"
        return f"<tensor of shape {tuple(value.shape)}, {dtype}>"
    if isinstance(value, torch.nn.Module):
        return f"<{type(value).__name__} module>"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)) and len(value) > 6:
        head = ", ".join(_short(v) for v in value[:3])
        return f"[{head}, ...] ({len(value)} items)"
    if isinstance(value, (list, tuple)) and any(isinstance(v, (Tensor, torch.nn.Module)) for v in value):
        inner = ", ".join(_short(v) for v in value)              # each tensor summarised, never its repr
        return f"({inner}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, dict):
        value = dict(sorted(value.items()))
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def _numbers_close(got: Any, expected: Any) -> bool:
    if isinstance(expected, float) or isinstance(got, float):
        try:
            got_f = float(got)
        except (TypeError, ValueError):
            return False
        return math.isfinite(got_f) and math.isclose(got_f, float(expected), rel_tol=1e-6, abs_tol=1e-12)
    return got == expected


def check(name: str, student_fn: Callable[..., Any], *, measured: Any = None) -> CheckResult:
    """Run ``student_fn`` on every case of exercise ``name`` and report the first failure, with a hint.

    ``measured``: the notebook's measurement, for an exercise judged against it (its :class:`Measured`
    says what to pass); a missing or malformed one raises TypeError or ValueError saying which cell to run.
    """
    if name not in EXERCISES:
        raise KeyError(f"no exercise named {name!r}; known: {sorted(EXERCISES)}")
    ex = EXERCISES[name]
    given = measurement_args(ex, measured)          # () or (the measurement,): what the reference reads first
    if not callable(student_fn):
        return CheckResult(name, False, f"❌ FAIL {name}: expected a function {ex.signature}, got {type(student_fn).__name__}")
    for number, case in enumerate(ex.cases, start=1):
        call = f"{getattr(student_fn, '__name__', name)}({', '.join(_short(a) for a in case.args)})"
        where = f"❌ FAIL {name}, check {number} of {len(ex.cases)} ({case.what})"
        try:                              # the student's answer first: the reference may be a long measurement
            got = student_fn(*copy.deepcopy(case.args))
        except NotImplementedError:
            return _not_yet(ex, number)
        except Exception as err:  # the student's code failed: say how, keep the notebook running
            return CheckResult(name, False, f"{where}:\n   {call} raised {type(err).__name__}: {err}\n"
                                            f"   Hint: {case.hint or ex.hint}", number)
        if got is None and ex.is_prediction:
            return _not_yet(ex, number)
        expected = expected_value(ex, given, case)
        verdict = judge(ex, given, case, got, expected)
        if not verdict.passed:
            return CheckResult(name, False, f"{where}:\n   {call} should be {_short(expected)}, "
                                            f"got {_short(got)}.\n   Hint: {verdict.hint}", number)
    if not ex.is_prediction:
        PASSED[name] = student_fn             # for later exercises that build on it (seqlab.exercises.pieces)
    return CheckResult(name, True, f"✅ PASS {name}: all {len(ex.cases)} checks pass.")


@dataclass(frozen=True)
class Verdict:
    """One case judged: ``passed``, and for a failure the ``hint``; ``diagnosed`` when ``diagnose`` recognised
    the mistake (the hint then names it), rather than the case's or the exercise's fallback hint."""

    passed: bool
    hint: str | None = None
    diagnosed: bool = False


def expected_value(ex: Exercise, given: tuple, case: Case) -> Any:
    """The reference's answer to ``case`` (``given``: () or (the measurement,)), on a copy of its arguments."""
    return ex.reference(*given, *copy.deepcopy(case.args))


def judge(ex: Exercise, given: tuple, case: Case, got: Any, expected: Any) -> Verdict:
    """Compare a student's ``got`` with ``expected`` by the exercise's own rule, and diagnose a failure.

    The one rule for :func:`check` in the student's notebook and for the grader (:mod:`seqlab.grading`),
    which calls it in its own process on values the student's code returned from a sandbox.
    """
    if (ex.same or _numbers_close)(got, expected):
        return Verdict(True)
    try:
        diagnosis = ex.diagnose((*given, *case.args), got, expected) if ex.diagnose else None
    except (ArithmeticError, TypeError, ValueError, IndexError, RuntimeError):   # an answer it did not foresee
        diagnosis = None
    return Verdict(False, diagnosis or case.hint or ex.hint, diagnosis is not None)


def _not_yet(ex: Exercise, number: int) -> CheckResult:
    """Unfinished work: what to write, and for a prediction nothing that gives the answer away."""
    if ex.is_prediction:
        return CheckResult(ex.name, False, f"… {ex.name}: no prediction yet. Decide, write it down ({ex.signature}), "
                                           "then run this check again: it compares your prediction with the "
                                           "measurement and only then shows the measured value.", number)
    return CheckResult(ex.name, False, f"… {ex.name}: not written yet. Replace `raise NotImplementedError` "
                                       f"with your code; it should be {ex.signature}.", number)


def measurement_args(ex: Exercise, measured: Any) -> tuple:
    """``(the parsed measurement,)`` for an exercise judged against one, ``()`` for the others; raises on a misfit."""
    if ex.measured is None:
        if measured is not None:
            raise TypeError(f"{ex.name} is checked without a measurement: call check({ex.name!r}, your_function)")
        return ()
    pass_it = f"run {ex.measured.where}, then pass measured={ex.measured.what}"
    if measured is None:
        raise TypeError(f"{ex.name} judges your prediction against the notebook's measurement: {pass_it}")
    try:
        return (ex.measured.parse(measured),)
    except (TypeError, ValueError) as err:
        raise type(err)(f"{ex.name}: the measurement does not fit ({err}); {pass_it}") from None


# -- predictions and measurements of two shares -----------------------------------------------------
def as_pair(got: Any) -> tuple[float, float] | None:
    """A student's prediction of two numbers as a pair of floats, or None if it is not two numbers (a bool is not)."""
    try:
        a, b = got
        if isinstance(a, bool) or isinstance(b, bool):
            return None
        return float(a), float(b)
    except (TypeError, ValueError):
        return None


def shares_pair(value: Any) -> tuple[float, float]:
    """A measurement of two shares (0..1) as a pair of floats, for :attr:`Measured.parse`."""
    pair = as_pair(value)
    if pair is None:
        raise TypeError(f"expected two numbers, got {_short(value)}")
    if not all(0 <= share <= 1 for share in pair):          # also refuses NaN
        raise ValueError(f"expected two shares between 0 and 1, got {_short(pair)}")
    return pair


def pair_within(tolerance: float) -> Callable[[Any, tuple[float, float]], bool]:
    """``same`` for a predicted pair against a measured pair: each within ``tolerance``."""
    def same(got: Any, expected: tuple[float, float]) -> bool:
        pair = as_pair(got)
        return pair is not None and all(abs(g - e) <= tolerance for g, e in zip(pair, expected))
    return same


# -- helpers for exercises on tensors ---------------------------------------------------------------
def randn64(*shape: int, seed: int) -> Tensor:
    """A float64 tensor of standard normal numbers, the same for a given seed on every machine."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def tensors_close(got: Any, expected: Tensor, *, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
    """``got`` is a tensor of ``expected``'s shape and within ``torch.allclose``'s tolerances of it."""
    return (isinstance(got, Tensor) and got.shape == expected.shape
            and bool(torch.allclose(got.to(expected.dtype), expected, rtol=rtol, atol=atol)))


def first_difference(got: Tensor, expected: Tensor, *, atol: float = 1e-9) -> str:
    """Where two same-shaped tensors first differ, in one line (never torch's multi-line repr)."""
    differs = ~torch.isclose(got.to(expected.dtype), expected, atol=atol)
    if not differs.any():
        return "the values agree"
    index = tuple(int(i) for i in torch.nonzero(differs)[0])
    return (f"the first difference is at index {index}: {got[index].item():.4g} instead of "
            f"{expected[index].item():.4g}")


def tensor_hint(got: Any, expected: Tensor) -> str | None:
    """The hint for a result that is not a tensor, or not of the expected shape (else None)."""
    if not isinstance(got, Tensor):
        return f"return a torch.Tensor, not a {type(got).__name__}."
    if got.shape != expected.shape:
        return f"the result should have shape {tuple(expected.shape)}, got {tuple(got.shape)}."
    return None


@dataclass(frozen=True)
class Plugged:
    """What a build-and-watch cell runs: ``fn``, whose ``label`` titles the run, and whether it is the student's."""

    fn: Callable[..., Any]
    label: str
    yours: bool
    passed: bool


def plug_in(name: str, student_fn: Callable[..., Any]) -> Plugged:
    """The student's function for a build-and-watch cell once it is written, else the exercise's reference.

    A build-and-watch exercise asks for a piece built from the equations, then runs it inside something
    real (a trained model, a training run) so that the student watches it work. A written answer is used
    even when :func:`check` fails it, so that the student watches what the mistake does; an unwritten one
    (``raise NotImplementedError``), one that is not a function, or one that raises on the first case is
    replaced by the reference, and ``label`` says so. The committed notebook, whose exercises are unwritten,
    therefore shows the reference's run.
    """
    if name not in EXERCISES:
        raise KeyError(f"no exercise named {name!r}; known: {sorted(EXERCISES)}")
    ex = EXERCISES[name]
    if ex.is_prediction or ex.measured is not None:
        raise ValueError(f"{name} is judged against a measurement; only a function exercise can be plugged in")
    reference = Plugged(ex.reference, f"the reference {name} (yours is not written yet)", False, False)
    if not callable(student_fn):
        return reference
    try:
        student_fn(*copy.deepcopy(ex.cases[0].args))
    except NotImplementedError:
        return reference
    except Exception as err:  # the student's code fails: the run shows the reference and says why
        return Plugged(ex.reference, f"the reference {name} (yours raised {type(err).__name__})", False, False)
    if check(name, student_fn):
        _answers.save(name, student_fn)        # kept for later notebooks: yours(name)
        return Plugged(student_fn, f"your {name}", True, True)
    return Plugged(student_fn, f"your {name} (check() finds a mistake: watch what it does)", True, False)


def yours(name: str) -> Plugged:
    """The student's answer to exercise ``name`` from an earlier notebook, for a later one to build on.

    :func:`plug_in` keeps an answer that passes its check (:mod:`seqlab.exercises._answers`); this loads it,
    checks it again, and returns it, or the reference with a ``label`` that says why (none kept yet, or the kept
    one no longer passes). Notebook 12 runs the student's ``multi_head_attention`` of notebook 10 this way.
    """
    if name not in EXERCISES:
        raise KeyError(f"no exercise named {name!r}; known: {sorted(EXERCISES)}")
    ex = EXERCISES[name]
    if ex.is_prediction or ex.measured is not None:
        raise ValueError(f"{name} is judged against a measurement; only a function exercise has an answer to reuse")
    number = notebook_number(name)
    where = f"notebook {number:02d}" if number is not None else REGISTERED_BY[name]
    fn = _answers.load(name)
    if fn is None:
        return Plugged(ex.reference, f"the reference {name} (none of yours is kept: {where} keeps it once it "
                                     "passes its check there)", False, False)
    if check(name, fn):
        return Plugged(fn, f"your {name} from {where}", True, True)
    return Plugged(ex.reference, f"the reference {name} (yours kept from {where} no longer passes its check)",
                   False, False)
