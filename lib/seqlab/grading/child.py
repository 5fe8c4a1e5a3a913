"""The answer's process: runs one student's answer to one exercise and reports what it returned. No verdicts.

:func:`run_job` is called in a fresh process forked by the sandbox's worker (:mod:`seqlab.grading.worker`),
after its limits are set and its privileges dropped. The job (from the trusted grader: the exercise, the
student's import lines and answer cells, the expression that is the student's function, and either nothing,
meaning the exercise's public cases, or the hidden cases' arguments under ``"hidden"``) is run: the answer,
then the function on every case's arguments, with one JSON line per event on the result channel (stdout). The student's prints go nowhere. Everything here can
be patched by the student's code, which is why this process only *reports*: the parent decodes the values
(:mod:`seqlab.grading.codec`) and judges them with the exercise's own rule.

Events: ``{"event": "ready", "cases": n}``, ``{"event": "cell_error", "error": text}``,
``{"event": "no_function", "error": text}``, ``{"event": "case", "i": i, "status": "returned" | "raised" |
"not_written" | "unreadable", ...}``, ``{"event": "done"}``.
"""

from __future__ import annotations

import copy
import json
import os
import sys


class _Discard:
    """Where the student's prints go: nowhere (a gigabyte of prints costs only the time to make it)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _describe(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}"
    return text if len(text) <= 300 else text[:296] + " ..."


def run_job(job: dict) -> None:
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")     # the result channel: the original stdout
    blank = os.open(os.devnull, os.O_WRONLY)
    os.dup2(blank, 1)                                         # C-level prints, too, go nowhere
    os.dup2(blank, 2)
    sys.stdout = sys.stderr = _Discard()

    def send(message: dict) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    import torch                                              # before the student's code can patch anything

    from seqlab.exercises import EXERCISES
    from seqlab.grading.codec import Unreadable, encode

    exercise = EXERCISES[job["exercise"]]
    hidden = job.pop("hidden", None)
    cases = [case.args for case in exercise.cases] if hidden is None else list(hidden)
    del hidden
    send({"event": "ready", "cases": len(cases)})
    torch.manual_seed(0)
    namespace: dict = {"__name__": "__main__", "check": lambda *args, **kwargs: None}
    for line in job["imports"]:
        try:
            exec(compile(line, "<import>", "exec"), namespace)
        except BaseException:                                 # an import the notebook had but this one lacks
            pass
    for number, source in enumerate(job["cells"], start=1):
        try:
            exec(compile(source, f"<answer cell {number}>", "exec"), namespace)
        except BaseException as err:
            send({"event": "cell_error", "error": _describe(err)})
    try:
        function = eval(compile(job["target"], "<answer>", "eval"), namespace)
    except BaseException as err:
        send({"event": "no_function", "error": _describe(err)})
        return
    if not callable(function):
        send({"event": "no_function", "error": f"{job['target']} is a {type(function).__name__}, not a function"})
        return
    for i, args in enumerate(cases):
        try:
            got = function(*copy.deepcopy(args))
        except NotImplementedError:
            send({"event": "case", "i": i, "status": "not_written"})
            continue
        except BaseException as err:                          # SystemExit and KeyboardInterrupt included
            send({"event": "case", "i": i, "status": "raised", "error": _describe(err)})
            continue
        try:
            send({"event": "case", "i": i, "status": "returned", "value": encode(got)})
        except (Unreadable, RecursionError, MemoryError, ValueError, TypeError) as err:
            send({"event": "case", "i": i, "status": "unreadable", "error": str(err)[:300]})
    send({"event": "done"})

