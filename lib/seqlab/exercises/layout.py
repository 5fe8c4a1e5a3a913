"""Where an exercise lives in a notebook: its answer cell and its Solution fold. One rule for the release, the
grader, the instructor notes and the tests.

Which exercises a notebook has is the registry's (:func:`seqlab.exercises.exercises_of`), not read from the
notebook; this module only *locates* each one: the answer cell is the code cell the release marked
``{"seqlab": {"exercise": name}}``, else the first one that calls ``check("name", ...)`` (either quote); the
Solution fold is a markdown cell ``<details><summary>Solution ...</summary> ... ```python ... ``` ... </details>``
among the :data:`FOLD_WINDOW` cells after the answer cell. ``tests/test_exercise_layout.py`` holds every notebook to it.
"""

from __future__ import annotations

import ast
import re

MAGIC = re.compile(r"^\s*[%!]")
SOLUTION_FOLD = re.compile(r"<details>\s*<summary>\s*Solution\b.*?</details>", re.IGNORECASE | re.DOTALL)
SOLUTION_CODE = re.compile(r"<summary>\s*Solution\b.*?```python\n(.*?)```", re.IGNORECASE | re.DOTALL)
FOLD_WINDOW = 3          # the fold is one of the three cells after the answer cell (a hint cell may come between)


def cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def parse_cell(source: str) -> tuple[ast.Module | None, list[str]]:
    """A cell's code as a module; IPython lines (``%time``, ``!pip``) are left out and reported."""
    lines, notes = [], []
    for line in source.splitlines():
        if MAGIC.match(line):
            notes.append(f"skipped the IPython line {line.strip()[:40]!r}")
            lines.append("")
        else:
            lines.append(line)
    try:
        return ast.parse("\n".join(lines)), notes
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        return None, [*notes, f"a cell does not parse ({type(err).__name__}: {getattr(err, 'msg', err)})"]


def check_calls(node: ast.AST) -> list[ast.Call]:
    """The ``check("name", ...)`` calls in ``node`` whose name is a literal string."""
    return [sub for sub in ast.walk(node) if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)
            and sub.func.id == "check" and sub.args and isinstance(sub.args[0], ast.Constant)
            and isinstance(sub.args[0].value, str)]


def check_call(node: ast.AST, name: str) -> ast.Call | None:
    return next((call for call in check_calls(node) if call.args[0].value == name), None)


def checked_in(cell: dict) -> list[str]:
    """The exercises a code cell checks, in order (none for a markdown cell or one that does not parse)."""
    if cell.get("cell_type") != "code":
        return []
    tree, _ = parse_cell(cell_source(cell))
    return [] if tree is None else list(dict.fromkeys(call.args[0].value for call in check_calls(tree)))


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


def solution_fold(cells: list[dict], name: str) -> int | None:
    """The index of the Solution fold after ``name``'s answer cell, or None."""
    at = answer_cell(cells, name)
    if at is None:
        return None
    for i in range(at + 1, min(at + 1 + FOLD_WINDOW, len(cells))):
        if cells[i].get("cell_type") == "markdown" and SOLUTION_CODE.search(cell_source(cells[i])):
            return i
    return None


def solution_code(cells: list[dict], name: str) -> str | None:
    """The Python code of ``name``'s Solution fold, or None."""
    at = solution_fold(cells, name)
    return None if at is None else SOLUTION_CODE.search(cell_source(cells[at])).group(1)
