"""The committed notebooks read well without a kernel: executed, error-free, small, self-checking.

nbval (run on notebooks/ in the same test command) checks that their outputs are reproduced;
this file checks what a reader on GitHub sees.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from seqlab import notebook_rules as rules
from seqlab.notebook_rules import is_reveal

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MAX_BYTES = 2 * 1024 * 1024


def test_there_are_notebooks_in_teaching_order():
    names = [p.name for p in NOTEBOOKS]
    assert names[0] == "00-start-here.ipynb"
    assert all(re.fullmatch(r"\d\d-[a-z0-9-]+\.ipynb", n) for n in names), f"not all named NN-topic.ipynb: {names}"
    numbers = [int(n[:2]) for n in names]
    assert numbers == list(range(len(numbers))), f"notebooks must be numbered 00, 01, ... without gaps: {names}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_executed_and_clean(path):
    assert path.stat().st_size < MAX_BYTES, f"{path.name} is {path.stat().st_size / 1e6:.1f} MB"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "a notebook without code"
    counts = [c.execution_count for c in code]
    assert all(counts), f"{path.name}: cells never executed: {[i for i, n in enumerate(counts) if not n]}"
    assert counts == list(range(1, len(code) + 1)), f"{path.name}: not executed top to bottom in one kernel"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: error outputs {[e.ename for e in errors]}"
    widgets = nb.metadata.get("widgets")
    assert widgets is None or all("state" in v for v in widgets.values()), \
        f"{path.name}: widget metadata without state (GitHub refuses to render it)"
    assert "from seqlab.notebook import setup" in code[0].source, "first code cell seeds and sets the style"
    assert "assert" in code[-1].source, "the last code cell states the notebook's claims as assertions"
    has_figure = any("image/png" in o.get("data", {}) for c in code for o in c.outputs)
    assert has_figure, f"{path.name}: no static figure, so it reads poorly without a kernel"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_carries_the_slide_metadata_of_the_rule(path):
    """Instructors present with jupyterlab-slideshow; scripts/notebook_slides.py sets the metadata (make execute does it)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "notebook_slides.py"), "--check", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbval_compares_the_exact_outputs_and_only_those(path):
    """`make test` runs nbval with --nbval-lax: only cells tagged nbval-check-output are compared as text
    (scripts/portability.py tags those that every arithmetic profile prints alike). Each notebook has
    some, so a change in what it computes exactly still fails; none prints library source (a printed listing
    is checked once, by test_a_printed_listing_is_the_librarys_current_code below, which names the function);
    none is also marked # NBVAL_IGNORE_OUTPUT (the mark would win)."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    compared = [i for i, c in enumerate(code) if "nbval-check-output" in c.metadata.get("tags", [])]
    assert compared, f"{path.name}: no cell tagged nbval-check-output (run scripts/portability.py run, then tag)"
    for i in compared:
        assert "getsource" not in code[i].source, f"{path.name}: code cell {i} prints library source and is compared"
        assert code[i].outputs, f"{path.name}: code cell {i} is tagged but has no output to compare"
        assert "NBVAL_IGNORE_OUTPUT" not in code[i].source, (
            f"{path.name}: code cell {i} is tagged and marked # NBVAL_IGNORE_OUTPUT; nbval warns of overlapping "
            "options and the mark wins: drop the tag (scripts/portability.py tag never sets it there)")


# -- "predict, then measure": the answer comes after the prediction, never before ---------------------------
def _prediction_cells(cells) -> list[tuple[str, int, int]]:
    """(exercise, the cell where the student writes the prediction, the cell that checks it) for each
    ``check("predict_...", ...)``: the prediction is the last cell at or before the check that sets the
    variable its ``lambda:`` returns to None, or that defines the function it passes."""
    import ast

    found = []
    for c, cell in enumerate(cells):
        if cell.cell_type != "code" or "assert" in cell.source:
            continue
        tree, _ = rules.parse_cell(cell.source)
        calls = [call for call in rules.check_calls(tree) if call.args[0].value.startswith("predict_")] if tree else []
        if not calls or len(calls[0].args) < 2:
            continue
        name, answer = calls[0].args[0].value, calls[0].args[1]
        lambda_name = isinstance(answer, ast.Lambda) and isinstance(answer.body, ast.Name)
        variable = answer.body.id if lambda_name else None
        function = answer.id if isinstance(answer, ast.Name) else None
        if not (variable or function):
            continue
        written = re.compile(rf"^{variable} = None\b" if variable else rf"^def {function}\(", re.M)
        p = max(i for i in range(c + 1) if cells[i].cell_type == "code" and written.search(cells[i].source))
        found.append((name, p, c))
    return found


PREDICTION_CELLS = [(path, *found) for path in NOTEBOOKS
                    for found in _prediction_cells(nbformat.read(path, as_version=4).cells)]


def test_every_prediction_of_the_course_is_found_once():
    from seqlab.exercises import EXERCISES

    names = [name for _, name, _, _ in PREDICTION_CELLS]
    assert sorted(names) == sorted(n for n, ex in EXERCISES.items() if ex.is_prediction)
    assert len(names) >= 17                                  # the course has 17; a renamed one would lose its guard


@pytest.mark.parametrize("path, name, prediction, checked", PREDICTION_CELLS,
                         ids=[f"{p.name[:2]}-{n}" for p, n, _, _ in PREDICTION_CELLS])
def test_a_prediction_is_asked_before_its_answer_is_shown(path, name, prediction, checked):
    """The committed check says only that no prediction was made; every cell after the prediction up to the
    check is tagged reveal (a student's work/ copy comes without their outputs; the HTML edition folds them)."""
    cells = nbformat.read(path, as_version=4).cells
    said = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cells[checked].outputs)
    assert f"… {name}: no prediction yet." in said and "should be" not in said, said
    between = [i for i in range(prediction + 1, checked + 1) if cells[i].cell_type == "code"]
    untagged = [i for i in between if not is_reveal(cells[i])]
    assert not untagged, f"{path.name}: cells {untagged} show {name}'s measurement but are not tagged reveal"
    assert not is_reveal(cells[prediction]), f"{path.name}: the student's prediction cell is tagged reveal"


# -- printed listings: a committed notebook shows the library's code as it is now ---------------------------
def _seqlab_names(cells) -> dict[str, tuple[str, str]]:
    """name -> (module, attribute) for every ``from seqlab... import ...`` in the notebook's code cells."""
    import ast

    names = {}
    for cell in cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:                       # a cell with IPython syntax (?? or %magic)
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("seqlab"):
                names.update({alias.asname or alias.name: (node.module, alias.name) for alias in node.names})
    return names


LISTINGS = [(path, index, expr) for path in NOTEBOOKS
            for index, cell in enumerate(nbformat.read(path, as_version=4).cells) if cell.cell_type == "code"
            for expr in re.findall(r"print\(inspect\.getsource\(([\w.]+)\)\)", cell.source)]


@pytest.mark.parametrize("path, index, expr", LISTINGS, ids=[f"{p.name[:2]}-{e}" for p, _, e in LISTINGS])
def test_a_printed_listing_is_the_librarys_current_code(path, index, expr):
    """A listing printed with inspect.getsource is committed as output; after any change to that code, a
    comment or docstring included, the notebook must be re-executed (make notebook NB=NN), or it shows code
    the library no longer has. Kept on purpose (CONTRIBUTING §1): what a student reads in a listing, comments
    too, is the library's; comparing only the code would let a stale comment stand."""
    import importlib
    import inspect

    cells = nbformat.read(path, as_version=4).cells
    module, attribute = _seqlab_names(cells)[expr.split(".")[0]]
    obj = getattr(importlib.import_module(module), attribute)
    for part in expr.split(".")[1:]:
        obj = getattr(obj, part)
    printed = "".join(o.get("text", "") for o in cells[index].outputs if o.output_type == "stream")
    assert inspect.getsource(obj) in printed, (f"{path.name}, cell {index}: the printed {expr} is not the library's "
                                               f"current code; run `make notebook NB={path.name[:2]}`")
