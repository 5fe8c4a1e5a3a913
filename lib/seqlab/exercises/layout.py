"""Where an exercise lives in a notebook: its answer cell and its Solution fold. One rule for the release, the
grader, the instructor notes and the tests.

Which exercises a notebook has is the registry's (:func:`seqlab.exercises.exercises_of`), not read from the
notebook; this module only *locates* each one: the answer cell is the code cell the release marked
``{"seqlab": {"exercise": name}}``, else the first one that calls ``check("name", ...)`` (either quote); the
Solution fold is a markdown cell ``<details><summary>Solution ...</summary> ... ```python ... ``` ... </details>``
(``<details open>`` too) among the :data:`FOLD_WINDOW` cells after the answer cell; the release removes exactly what
it matches. ``tests/test_exercise_layout.py`` holds every notebook to it.
"""

from __future__ import annotations

import ast
import re

from seqlab.notebook_rules import cell_source, check_calls, checked_names, parse_cell

SOLUTION_FOLD = re.compile(r"<details\b[^>]*>\s*<summary\b[^>]*>\s*Solution\b.*?</details>", re.IGNORECASE | re.DOTALL)
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
FOLD_WINDOW = 3          # the fold is one of the three cells after the answer cell (a hint cell may come between)


def check_call(node: ast.AST, name: str) -> ast.Call | None:
    return next((call for call in check_calls(node) if call.args[0].value == name), None)


def checked_in(cell: dict) -> list[str]:
    """The exercises a code cell checks, in order (none for a markdown cell or one that does not parse)."""
    return checked_names(cell_source(cell)) if cell.get("cell_type") == "code" else []


def answer_cell(cells: list[dict], name: str) -> int | None:
    """The index of ``name``'s answer cell (see the module docstring), or None."""
    for i, cell in enumerate(cells):
        if cell.get("cell_type") == "code" and (cell.get("metadata", {}).get("seqlab") or {}).get("exercise") == name:
            return i
    for i, cell in enumerate(cells):
        if cell.get("cell_type") == "code" and name in cell_source(cell) and name in checked_in(cell):
            return i
    return None


def in_notebook_order(cells: list[dict], names) -> list[str]:
    """``names`` ordered by their answer cells; a LookupError names any exercise the cells never check."""
    found = {name: answer_cell(cells, name) for name in names}
    missing = [name for name, at in found.items() if at is None]
    if missing:
        raise LookupError(f"no answer cell (a cell calling check(\"name\", ...)) for {', '.join(missing)}")
    return sorted(found, key=lambda name: found[name])


def fold_code(text: str) -> str | None:
    """The Python code inside the Solution fold of a markdown cell's ``text``, or None (no fold, or no code in it)."""
    fold = SOLUTION_FOLD.search(text)
    code = _PYTHON_BLOCK.search(fold.group(0)) if fold else None
    return code.group(1) if code else None


def solution_fold(cells: list[dict], name: str) -> int | None:
    """The index of the Solution fold after ``name``'s answer cell, or None."""
    at = answer_cell(cells, name)
    if at is None:
        return None
    for i in range(at + 1, min(at + 1 + FOLD_WINDOW, len(cells))):
        if cells[i].get("cell_type") == "markdown" and fold_code(cell_source(cells[i])) is not None:
            return i
    return None


def solution_code(cells: list[dict], name: str) -> str | None:
    """The Python code of ``name``'s Solution fold, or None."""
    at = solution_fold(cells, name)
    return None if at is None else fold_code(cell_source(cells[at]))
