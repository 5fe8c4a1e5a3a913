"""Submissions for the grader's tests, made from the course's own notebooks: the untouched student release,
a perfect student (every folded solution pasted into its answer cell, every prediction made), and one
notebook with chosen answer cells."""

from __future__ import annotations

import json
import re
from pathlib import Path

import release

from seqlab.exercises import layout

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))

PREDICTION_VALUE = re.compile(r"^(\w+) = None\b", re.MULTILINE)


def course_notebook(stem: str) -> dict:
    return json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))


def student_release(stem: str) -> dict:
    return release.student_notebook(course_notebook(stem), stem)[0]


def answer_cells(nb: dict) -> dict[str, dict]:
    return {cell["metadata"]["seqlab"]["exercise"]: cell for cell in nb["cells"]
            if cell["cell_type"] == "code" and "seqlab" in cell.get("metadata", {})}


def solution_of(stem: str, exercise: str) -> str:
    """The code of the solution fold that follows ``exercise``'s answer cell in the course notebook."""
    code = layout.solution_code(course_notebook(stem)["cells"], exercise)
    if code is None:
        raise LookupError(f"{stem}: no solution fold within {layout.FOLD_WINDOW} cells after {exercise}'s answer cell")
    return code


def with_answers(stem: str, answers: dict[str, str]) -> dict:
    """The student release of ``stem`` with the answer cells of ``answers`` replaced by their source."""
    nb = student_release(stem)
    cells = answer_cells(nb)
    for name, source in answers.items():
        cells[name]["source"] = source
    return nb


PREDICTION_FUNCTION = re.compile(r"^def predict_\w+\(\):", re.MULTILINE)


def perfect(stem: str) -> dict:
    """Every exercise answered by the course's own solution; every prediction made (a value, not None)."""
    nb = student_release(stem)
    answers = answer_cells(nb)
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
        if PREDICTION_VALUE.search(source) and "YOUR PREDICTION" in source:
            cell["source"] = PREDICTION_VALUE.sub(r"\1 = 0.5", source)
        elif PREDICTION_FUNCTION.search(source) and "raise NotImplementedError" in source:
            cell["source"] = source.replace("raise NotImplementedError", "return 0.5")
    for name, cell in answers.items():
        source = "".join(cell["source"])
        if "raise NotImplementedError" in source:
            check_lines = "\n".join(line for line in source.splitlines() if line.startswith("check("))
            cell["source"] = solution_of(stem, name) + "\n" + check_lines + "\n"
    return nb


def as_bytes(nb: dict) -> bytes:
    return json.dumps(nb).encode("utf-8")
