"""The rules every tool applies to a course notebook, written once: which cells reveal a prediction's answer and
how a student's copy hides them, which exercises a code cell checks, how notebook JSON is written, how a notebook's
heading is read, the widget view's MIME type, the run-time budget and JupyterLab's settings overrides.

Standard library only, so that ``course.py`` and the standard-library scripts can load this file before the set-up
without importing seqlab (``testbed.package_module``); everything else imports ``seqlab.notebook_rules``.
"""

from __future__ import annotations

import ast
import json
import re

# A cell tagged "reveal" shows a measurement that answers a "predict, then measure" exercise above it. A student's
# copy in work/ (and a student release) has those outputs removed, so the answer appears only when the student runs
# the cell after predicting; the HTML edition folds them (scripts/build_site.py).
REVEAL_TAG = "reveal"

RESULT_FOLD = ("<details>\n<summary>What the measurement shows (open it after you have written your prediction "
               "and run the check)</summary>\n\n{text}\n\n</details>")

# a live widget's output: its view, which needs a kernel (and, outside JupyterLab, JavaScript from a CDN)
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

# seconds one notebook may take from a fresh kernel on a quiet 2-core machine without a GPU; reported, never failed
NOTEBOOK_BUDGET_S = 90.0

# JupyterLab's settings overrides: no news pop-up, no update check (the tests run offline; a pop-up on a projector
# distracts). course.py lab and the hub write them as overrides.json; the browser tests as user settings.
LAB_OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}


def lab_settings_files() -> dict[str, str]:
    """LAB_OVERRIDES as JupyterLab's user-settings files: {path under the settings folder: its JSON}."""
    files = {}
    for plugin, settings in LAB_OVERRIDES.items():
        package, _, name = plugin.partition(":")
        files[f"{package}/{name}.jupyterlab-settings"] = json.dumps(settings)
    return files


MAGIC = re.compile(r"^\s*[%!]")


def parse_cell(source: str) -> tuple[ast.Module | None, list[str]]:
    """A code cell's source as a module; IPython lines (``%time``, ``!pip``) are left out and reported."""
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
    """The ``check("name", ...)`` calls in ``node`` (either quote) whose name is a literal string."""
    return [sub for sub in ast.walk(node) if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)
            and sub.func.id == "check" and sub.args and isinstance(sub.args[0], ast.Constant)
            and isinstance(sub.args[0].value, str)]


def checked_names(source: str) -> list[str]:
    """The exercises a code cell's source checks, in order, each once (none when it does not parse)."""
    tree, _ = parse_cell(source)
    return [] if tree is None else list(dict.fromkeys(call.args[0].value for call in check_calls(tree)))


def cell_source(cell: dict) -> str:
    """A cell's source as one string (nbformat stores a list of lines)."""
    return "".join(cell.get("source", ""))


def teaching_cells(cells: list) -> list:
    """A course notebook's cells a student works through: all but the last, which asserts the notebook's claims
    with the answers in hand (a student release leaves it out)."""
    return cells[:-1]

def notebook_heading(nb: dict) -> str:
    """The first line of notebook JSON ``nb``'s first cell: its ``# N · Title`` (``manifest.Notebook.heading``)."""
    lines = cell_source(nb["cells"][0]).splitlines() if nb.get("cells") else []
    return lines[0] if lines else ""


def is_reveal(cell: dict) -> bool:
    return cell.get("cell_type") == "code" and REVEAL_TAG in cell.get("metadata", {}).get("tags", [])


def without_reveals(nb: dict) -> dict:
    """``nb`` (notebook JSON) with the outputs of its reveal cells removed, in place; returns it.

    The prose that discusses a prediction's measurement (the markdown cell right after the revealed cells, unless
    it opens a new section or is a solution fold) is folded too, so reading on does not give the answer away."""
    cells = nb["cells"]
    for cell in filter(is_reveal, cells):
        cell["outputs"], cell["execution_count"] = [], None
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        if not any(name.startswith("predict_") for name in checked_names(cell_source(cell))):
            continue
        end = i + 1
        while end < len(cells) and is_reveal(cells[end]):
            end += 1
        revealed = is_reveal(cell) or end > i + 1            # the check, or the cells after it, show the measurement
        if not revealed or end >= len(cells) or cells[end].get("cell_type") != "markdown":
            continue
        text = cell_source(cells[end])
        if re.match(r"#{1,2} ", text) or text.lstrip().startswith("<details>"):     # a new section, a solution
            continue
        cells[end]["source"] = RESULT_FOLD.format(text=text.strip())
    return nb


def notebook_text(nb: dict) -> str:
    """Notebook JSON as nbformat writes it, so JupyterLab's first save changes nothing (plain JSON: the set-up's
    Python may lack nbformat)."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
