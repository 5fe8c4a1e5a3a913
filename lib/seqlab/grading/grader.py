"""The trusted side of grading: the answer key, one submission graded, and the flags for a human look.

:class:`Key` is built once per notebook: its exercises and points (from a release's manifest, or from the
course notebook), each case's expected value (the reference, run here), the hidden cases from a private
instructor folder, and measured values for judging predictions' accuracy. :func:`grade_submission` runs each
exercise in its own sandboxed child (:mod:`seqlab.grading.sandbox`) and judges what came back with
:func:`seqlab.exercises.judge`, the rule ``check()`` uses, so a mistake gets the same diagnosis in the
gradebook as in the student's notebook.
"""

from __future__ import annotations

import ast
import json
import math
import runpy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seqlab.exercises import EXERCISES, Case, Exercise, Verdict, expected_value, judge, measurement_args
from seqlab.exercises._core import _short
from seqlab.grading import codec, sandbox
from seqlab.grading.submissions import Submission, answer_plan

# Calls that do an exercise's work for the student are graded as written but flagged for a human look: each
# exercise's ``forbidden`` (its library twins), and everywhere any reach into the checkers (their references and
# cases ship in the package). A word matches a dotted name by its last parts (``LSTMCell`` matches
# ``nn.LSTMCell``); one starting with "." matches an attribute only (``ex.reference``, not a parameter).
ALWAYS_FORBIDDEN = ("seqlab.exercises", "seqlab.grading", "EXERCISES", "expected_value", ".reference")


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def forbidden_calls(name: str, sources: list[str]) -> list[str]:
    """The forbidden names that the functions defined in an answer use (the code a call runs; a demo at the
    cell's top level is not flagged), and any import of the checkers anywhere in the answer."""
    used: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                used |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                used |= {a.name for a in node.names}
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "seqlab." in node.value:
                used.add(node.value)                           # exec("from seqlab.exercises import ...")
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))):
            body = function.body if isinstance(function.body, list) else [function.body]
            for node in (sub for statement in body for sub in ast.walk(statement)):
                dotted = _dotted(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
                if dotted:
                    used.add(dotted)
    found = []
    for word in (*EXERCISES[name].forbidden, *ALWAYS_FORBIDDEN):
        attribute = word.startswith(".")
        if any(d.endswith(word) if attribute else d == word or d.endswith("." + word) or d.startswith(word + ".")
               or f".{word}." in d for d in used):
            found.append(word)
    return found


@dataclass(frozen=True)
class KeyCase:
    """One case of the key: the case, whether it is hidden, and its expected value (None until needed)."""

    case: Case
    hidden: bool
    expected: Any = None


@dataclass
class Key:
    """What one notebook is graded against (see the module docstring); built once, reused for every student."""

    notebook: str
    points: dict[str, float]
    cases: dict[str, list[KeyCase]]
    measurements: dict[str, tuple] = field(default_factory=dict)    # exercise -> () or (the measurement,)
    predictions: str = "completion"                                 # or "accuracy"

    def exercise(self, name: str) -> Exercise:
        return EXERCISES[name]


def load_hidden_cases(instructor: Path | None) -> dict[str, list[Case]]:
    """``INSTRUCTOR/hidden_cases.py``'s ``HIDDEN = {"exercise": [Case(args, what), ...]}``, or {}; with ``SEED = n``
    (a secret integer) every exercise that has a hidden-case factory gets its cases too."""
    if instructor is None or not (instructor / "hidden_cases.py").exists():
        return {}
    written = runpy.run_path(str(instructor / "hidden_cases.py"))
    hidden = {name: list(cases) for name, cases in written.get("HIDDEN", {}).items()}
    unknown = sorted(set(hidden) - set(EXERCISES))
    if unknown:
        raise ValueError(f"{instructor / 'hidden_cases.py'}: no exercise named {', '.join(unknown)}")
    seed = written.get("SEED")
    if seed is not None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError(f"{instructor / 'hidden_cases.py'}: SEED must be an integer, got {type(seed).__name__}")
        for name, ex in EXERCISES.items():
            if ex.hidden is not None:
                hidden.setdefault(name, []).extend(ex.hidden(seed))
    return hidden


def load_measurements(instructor: Path | None) -> dict[str, Any]:
    """``INSTRUCTOR/measurements.json``: ``{"predict_...": measurement}`` for judging predictions' accuracy."""
    if instructor is None or not (instructor / "measurements.json").exists():
        return {}
    return json.loads((instructor / "measurements.json").read_text(encoding="utf-8"))


def build_key(notebook: str, exercises: dict[str, float], *, instructor: Path | None = None,
              predictions: str = "completion") -> Key:
    """The key for ``notebook`` (its stem, e.g. ``04-lstm``): ``exercises`` maps each name to its points."""
    if predictions not in ("completion", "accuracy"):
        raise ValueError(f"predictions are graded for 'completion' or 'accuracy', not {predictions!r}")
    hidden = load_hidden_cases(instructor)
    measured = load_measurements(instructor)
    key = Key(notebook, dict(exercises), {}, predictions=predictions)
    for name in exercises:
        ex = EXERCISES[name]
        if ex.is_prediction and predictions == "completion":
            key.cases[name] = [KeyCase(ex.cases[0], hidden=False)]
            continue
        if ex.measured is not None:
            if name not in measured:          # no measurement: the prediction can only be graded for completion
                key.cases[name] = [KeyCase(ex.cases[0], hidden=False)]
                continue
            key.measurements[name] = measurement_args(ex, measured[name])
        given = key.measurements.get(name, ())
        cases = [KeyCase(c, False, expected_value(ex, given, c)) for c in ex.cases]
        cases += [KeyCase(c, True, expected_value(ex, given, c)) for c in hidden.get(name, [])]
        key.cases[name] = cases
    return key


def graded_for_completion(key: Key, name: str) -> bool:
    """A prediction judged only on whether one was made (its answer is public once the notebook runs)."""
    return EXERCISES[name].is_prediction and (key.predictions == "completion" or name not in key.measurements
                                              and EXERCISES[name].measured is not None)


# -- one submission ---------------------------------------------------------------------------------------

@dataclass
class ExerciseResult:
    name: str
    points: float
    score: float = 0.0
    status: str = "not found"
    cases: list[dict] = field(default_factory=list)
    message: str = ""
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return dict(self.__dict__)


def _case_rows(key: Key, name: str, run: sandbox.ChildRun) -> tuple[list[dict], dict]:
    """Parse the child's lines: per-case rows (status, value) and the events about the cell."""
    rows: dict[int, dict] = {}
    events: dict[str, Any] = {"cell_errors": [], "no_function": None, "done": False, "ready": False}
    for raw in run.lines:
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if not isinstance(message, dict):
            continue
        kind = message.get("event")
        if kind == "ready":
            events["ready"] = True
        elif kind == "cell_error":
            events["cell_errors"].append(str(message.get("error"))[:300])
        elif kind == "no_function" and events["no_function"] is None:
            events["no_function"] = str(message.get("error"))[:300]
        elif kind == "done":
            events["done"] = True
        elif kind == "case" and isinstance(message.get("i"), int) and message["i"] not in rows:
            rows[message["i"]] = message                          # the first report of a case counts
    public = sum(not kc.hidden for kc in key.cases[name])
    return [rows.get(i, {"status": "no result"}) for i in range(public)], events


def _job(name: str, plan) -> dict:
    return {"exercise": name, "imports": list(plan.imports), "cells": list(plan.cells), "target": plan.target}


def _hidden_rows(key: Key, name: str, run: sandbox.ChildRun, ex: Exercise) -> list[bool]:
    """Pass or fail per hidden case, and nothing else: no error text, no value, no status beyond that."""
    hidden = [kc for kc in key.cases[name] if kc.hidden]
    if failure := run.grader_failure():
        raise sandbox.GraderError(failure)
    rows: dict[int, dict] = {}
    for raw in run.lines:
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(message, dict) and message.get("event") == "case" and isinstance(message.get("i"), int):
            rows.setdefault(message["i"], message)
    passed = []
    for i, kc in enumerate(hidden):
        row = rows.get(i, {})
        ok = False
        if row.get("status") == "returned":
            try:
                got = codec.decode(row.get("value"))
                ok = got is not None and judge(ex, key.measurements.get(name, ()), kc.case, got, kc.expected).passed
            except Exception:           # an answer the comparison chokes on fails the case, never the batch
                ok = False
        passed.append(bool(ok))
    return passed


def grade_exercise(key: Key, name: str, notebook: dict, *, limits: sandbox.Limits,
                   box: sandbox.Sandbox | None = None, mode: str | None = None) -> ExerciseResult:
    """Run one exercise of one notebook in the sandbox and judge it case by case: the public cases in one
    process, the hidden ones (if any) in another of the hidden cases' own worker."""
    ex, points = EXERCISES[name], key.points[name]
    result = ExerciseResult(name, points)
    plan = answer_plan(notebook, name)
    if plan.problem:
        result.status, result.message = "not found", plan.problem
        result.flags.append("answer cell missing")
        return result
    found = forbidden_calls(name, list(plan.cells))
    if found:
        result.flags.append(f"uses {', '.join(found)}")
    key_cases = key.cases[name]
    completion = graded_for_completion(key, name)
    run = sandbox.run_child(_job(name, plan), limits, mode=mode, sandbox=box)
    result.seconds = round(run.seconds, 2)
    if run.retried:
        result.flags.append(f"grader retried once: {run.retried}"[:300])
    if failure := run.grader_failure():
        return _grader_error(result, failure)
    rows, events = _case_rows(key, name, run)
    if completion:
        return _judge_completion(result, rows[0], events, run)
    passed = 0.0
    public = [kc for kc in key_cases if not kc.hidden]
    for row, kc in zip(rows, public):
        row_out = {"hidden": False, "what": kc.case.what}
        status = row.get("status")
        if status == "returned":
            try:
                got = codec.decode(row.get("value"))
            except codec.Unreadable as err:
                row_out.update(status="unreadable", detail=str(err))
            else:
                if got is None and ex.is_prediction:
                    row_out.update(status="not written")
                    result.cases.append(row_out)
                    continue
                try:
                    verdict = judge(ex, key.measurements.get(name, ()), kc.case, got, kc.expected)
                except Exception:       # a comparison that chokes on an odd answer fails it, never the batch
                    verdict = Verdict(False, kc.case.hint or ex.hint, False)
                row_out.update(status="passed" if verdict.passed else "failed", hint=verdict.hint,
                               diagnosed=verdict.diagnosed)
                passed += verdict.passed
                if not verdict.passed:
                    row_out["got"] = _short(got)
                    row_out["expected"] = _short(kc.expected)
        elif status == "raised":
            row_out.update(status="raised", detail=str(row.get("error"))[:300], hint=kc.case.hint or ex.hint)
        elif status in ("not_written", "unreadable"):
            row_out.update(status=status.replace("_", " "), detail=str(row.get("error", ""))[:300])
        else:
            row_out.update(status="timed out" if run.timed_out else "crashed")
        result.cases.append(row_out)
    hidden_count = len(key_cases) - len(public)
    if hidden_count:
        hidden_run = sandbox.run_child({**_job(name, plan), "hidden": [kc.case.args for kc in key_cases if kc.hidden]},
                                       limits, mode=mode, sandbox=box, hidden=True)
        if hidden_run.retried:
            result.flags.append(f"grader retried the hidden cases once: {hidden_run.retried}"[:300])
        try:
            verdicts = _hidden_rows(key, name, hidden_run, ex)
        except sandbox.GraderError as err:
            return _grader_error(result, f"hidden cases: {err}")
        for ok in verdicts:
            result.cases.append({"hidden": True, "what": None, "status": "passed" if ok else "failed"})
            passed += ok
    result.score = round(points * passed / len(key_cases), 4)
    result.status = _exercise_status(result, events, run)
    public_ok = all(c["status"] == "passed" for c in result.cases if not c["hidden"])
    if public_ok and any(c["status"] != "passed" for c in result.cases if c["hidden"]):
        result.flags.append("passes the public checks but fails hidden ones")
    if events["cell_errors"]:
        result.flags.append("its cell raised an error")
    missing = sorted({d.split("'")[1] for d in [*(c.get("detail", "") for c in result.cases), *events["cell_errors"]]
                      if d.startswith("NameError: name '") and d.count("'") >= 2})
    if missing:                   # defined in a cell the grader does not run: a human may want to rescue it
        result.flags.append(f"uses {', '.join(missing)}, defined outside its answer cell (not run by the grader)")
    result.message = _exercise_message(result, events, run)
    if missing:
        result.message = (result.message + " " if result.message else "") + (
            f"The grader runs only this exercise's answer cell and the notebook's imports: define "
            f"{', '.join(missing)} in the answer cell.")
    return result


def _grader_error(result: ExerciseResult, why: str) -> ExerciseResult:
    """The grader could not run the answer: never the student's zero (the row says grader-error)."""
    result.status, result.score, result.cases = "grader-error", 0.0, []
    result.message = f"not graded: the grader failed ({why}); an instructor must regrade this"
    result.flags.append("grader error")
    return result


def _judge_completion(result: ExerciseResult, row: dict, events: dict, run: sandbox.ChildRun) -> ExerciseResult:
    status = row.get("status")
    made = status == "returned" and row.get("value") != ["none"]
    if status == "returned" and made:
        try:
            codec.decode(row.get("value"))
        except codec.Unreadable:
            made = False
    result.cases = [{"hidden": False, "what": "a prediction was made", "status": "passed" if made else "failed"}]
    result.score = result.points if made else 0.0
    result.status = ("made" if made else "timed out" if run.timed_out
                     else "no prediction" if status in ("returned", "not_written") else "error")
    result.message = ("prediction made (graded for completion)" if made else
                      "no prediction: decide, write it down, and hand in again" if result.status == "no prediction"
                      else _exercise_message(result, events, run))
    return result


def _exercise_status(result: ExerciseResult, events: dict, run: sandbox.ChildRun) -> str:
    statuses = [c["status"] for c in result.cases]
    if all(s == "passed" for s in statuses):
        return "passed"
    public = [c["status"] for c in result.cases if not c["hidden"]]
    if public and all(s == "not written" for s in public) and "passed" not in statuses:
        return "not written"                     # its hidden cases fail too: nothing was written to run them
    if run.timed_out and "timed out" in statuses:
        return "timed out"
    if events["no_function"] is not None:
        return "error"
    if "crashed" in statuses and "passed" not in statuses:
        return "crashed"
    return "partial" if "passed" in statuses else "failed"


def _exercise_message(result: ExerciseResult, events: dict, run: sandbox.ChildRun) -> str:
    if events["no_function"] is not None:
        return f"the answer did not define its function: {events['no_function']}"
    if run.output_overflow:
        return "the answer sent more output than the grader reads; it was stopped"
    if run.timed_out:
        return f"stopped after the time limit ({run.seconds:.0f} s)"
    if run.memory_exceeded:
        return "the answer used more memory than the grader allows; it was stopped"
    if not events["ready"] and not result.cases:
        return "the grader's child did not start"
    if not events["done"] and any(c["status"] == "crashed" for c in result.cases):
        return f"the answer crashed the process (exit {run.returncode})"
    if events["cell_errors"]:
        return f"the answer cell raised {events['cell_errors'][0]}"
    return ""


def grade_submission(key: Key, submission: Submission, *, limits: sandbox.Limits | None = None,
                     box: sandbox.Sandbox | None = None, mode: str | None = None,
                     progress: Callable[[str], None] | None = None) -> dict:
    """Grade every exercise of ``key`` in one submission; a JSON-able record (what the gradebook reads).
    ``status`` is ``graded``, or ``grader-error`` when any exercise could not be run (never a silent zero)."""
    limits = limits or sandbox.Limits()
    mode = box.mode if box is not None else (mode or sandbox.isolation_mode())
    start = time.monotonic()
    record = {"student": submission.student, "source": submission.source, "sha256": submission.sha256,
              "notebook": key.notebook, "isolation": (box or sandbox.shared_sandbox(mode)).describe(limits),
              "late": submission.late, "lms_id": submission.lms_id, "problem": submission.problem, "flags": [],
              "exercises": {}, "status": "graded"}
    if submission.extra.get("replaced"):
        record["flags"].append(f"several files; graded {submission.source}")
    for name in key.points:
        if submission.notebook is None:
            outcome = ExerciseResult(name, key.points[name], status="not graded", message=submission.problem or "")
        else:
            try:
                outcome = grade_exercise(key, name, submission.notebook, limits=limits, box=box, mode=mode)
            except Exception as err:     # the grader's own failure on this submission: its row, not the batch
                outcome = _grader_error(ExerciseResult(name, key.points[name]), f"{type(err).__name__}: {err}"[:300])
        record["exercises"][name] = outcome.to_json()
        record["flags"] += [f"{name}: {flag}" for flag in outcome.flags]
        if outcome.status == "grader-error":
            record["status"] = "grader-error"
        if progress:
            progress(name)
    if submission.problem:
        record["flags"].append(f"unreadable: {submission.problem}")
    record["score"] = round(sum(e["score"] for e in record["exercises"].values()), 4)
    record["max_score"] = sum(key.points.values())
    record["seconds"] = round(time.monotonic() - start, 2)
    assert math.isfinite(record["score"])
    return record
