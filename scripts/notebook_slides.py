"""Slide structure for presenting the notebooks live (jupyterlab-slideshow), set by rule.

    python scripts/notebook_slides.py            # apply the rule to every notebook
    python scripts/notebook_slides.py --check    # exit 1, naming each cell that breaks the rule

A notebook is presented as it reads:

- one heading per markdown cell, on its first line: a markdown cell with a heading further down
  is split at each heading line (``#`` ... ``######`` outside fenced code), so that the heading
  opens a cell of its own. Nothing is lost or reworded: the new cells' sources are consecutive
  slices of the old one (only the newlines at each cut are dropped), and each new cell gets a
  stable id made from the old one;
- each ``#`` or ``##`` heading starts a slide, each ``###`` heading a sub-slide (down arrow);
- a live widget (a code cell whose saved outputs hold an ipywidgets view) gets a sub-slide of its
  own, and the cell after it starts a new sub-slide too, so that the widget never shares the
  projector with a page of text;
- everything else continues the slide it follows (no slide metadata); the set-up cell (imports) and the final cell of
  assertions run but are not shown.

The final cell of assertions is also out of the student's way when reading: its source is collapsed in
JupyterLab (``metadata.jupyter.source_hidden``, one click opens it) and folded in the HTML edition (myst-nb's
``hide-input`` tag); its output, "all claims hold", stays visible.

Solutions stay in their collapsed ``<details>`` block, so an instructor can open one on stage with
a click. The rule lives here, not in each notebook, so it never drifts: ``make execute``
(scripts/execute_notebooks.py) applies it, and a test runs ``--check``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

from seqlab.notebook_rules import WIDGET_MIME

ROOT = Path(__file__).resolve().parent.parent
HEADING = re.compile(r"#{1,6}\s")
FENCE = re.compile(r"\s{0,3}(```|~~~)")
# A cell that continues its slide carries no slide metadata: jupyterlab-slideshow reads a missing
# slide_type as "continue" (as nbconvert and RISE do) but does not know RISE's "-".
CONTINUE = "-"
FOLD_IN_SITE = "hide-input"   # myst-nb: the HTML edition shows the cell's input behind a toggle
CELL_ID_MAX = 64          # nbformat 4.5: ids are 1-64 characters of [a-zA-Z0-9-_]


def heading_lines(source: str) -> list[int]:
    """Indices of the lines of a markdown ``source`` that are ATX headings (not inside fenced code)."""
    found, fence = [], None
    for index, line in enumerate(source.split("\n")):
        opener = FENCE.match(line)
        if opener:
            if fence is None:
                fence = opener.group(1)
            elif opener.group(1) == fence:
                fence = None
            continue
        if fence is None and HEADING.match(line):
            found.append(index)
    return found


def split_points(cell: nbformat.NotebookNode) -> list[int]:
    """Line indices where a markdown cell must be cut so that each part has at most one heading,
    on its first line (empty when the cell already keeps the rule)."""
    if cell.cell_type != "markdown":
        return []
    lines = cell.source.split("\n")
    first_text = next((i for i, line in enumerate(lines) if line.strip()), 0)
    return [i for i in heading_lines(cell.source) if i > first_text]


def _slices(source: str, cuts: list[int]) -> list[str]:
    """``source`` cut before each line index in ``cuts``: consecutive slices whose concatenation is
    ``source``."""
    lines = source.split("\n")
    bounds = [0, *cuts, len(lines)]
    pieces = ["\n".join(lines[a:b]) + ("\n" if b < len(lines) else "") for a, b in zip(bounds, bounds[1:])]
    assert "".join(pieces) == source
    return pieces


def _new_id(base: str, part: int, taken: set[str]) -> str:
    """A valid cell id derived from ``base`` for part ``part`` (2, 3, ...) of a split cell, unused so far."""
    suffix = f"-{part}"
    while True:
        candidate = base[:CELL_ID_MAX - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        suffix = "-" + suffix.lstrip("-") + "x"


def split_cell(cell: nbformat.NotebookNode, taken: set[str]) -> list[nbformat.NotebookNode]:
    """The markdown ``cell`` as one cell per heading (the cell itself when it keeps the rule).

    The first part keeps the cell's id; the others get ``<id>-2``, ``<id>-3``, ... (added to
    ``taken``). Metadata is copied to every part; an attachment goes with the parts that name it.
    """
    cuts = split_points(cell)
    if not cuts:
        return [cell]
    parts = []
    attachments = cell.get("attachments") or {}
    for k, piece in enumerate(_slices(cell.source, cuts)):
        part = nbformat.v4.new_markdown_cell(piece.rstrip("\n"), metadata=nbformat.from_dict(dict(cell.metadata)))
        if k == 0:
            part.id = cell.id
        else:
            part.id = _new_id(cell.id, k + 1, taken)
            taken.add(part.id)
        used = {name: data for name, data in attachments.items() if f"attachment:{name}" in piece}
        if used:
            part.attachments = used
        parts.append(part)
    if attachments and not any(p.get("attachments") for p in parts):
        parts[0].attachments = attachments
    return parts


def split_headings(nb: nbformat.NotebookNode) -> list[str]:
    """Split every markdown cell that holds more than one heading (or a heading below its first
    line); return what changed, in words."""
    taken = {c.get("id") for c in nb.cells}
    cells, changes = [], []
    for index, cell in enumerate(nb.cells):
        parts = split_cell(cell, taken)
        if len(parts) > 1:
            changes.append(f"cell {index}: split into {len(parts)} cells at its headings "
                           + ", ".join(repr(p.source.split(chr(10), 1)[0][:40]) for p in parts[1:]))
        cells.extend(parts)
    nb.cells = cells
    return changes


def has_widget(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and any(WIDGET_MIME in o.get("data", {}) for o in cell.get("outputs", []))


def slide_type(cell: nbformat.NotebookNode, index: int, n_cells: int,
               previous: nbformat.NotebookNode | None = None) -> str:
    """The slide type for the cell at ``index`` of a notebook of ``n_cells`` cells, whose cell
    before it is ``previous``."""
    if cell.cell_type == "markdown":
        first = cell.source.lstrip().split("\n", 1)[0]
        if first.startswith(("# ", "## ")):
            return "slide"
        if first.startswith("### "):
            return "subslide"
    if cell.cell_type == "code" and (cell.source.startswith("from seqlab.notebook import setup") or index == n_cells - 1):
        return "skip"
    if has_widget(cell) or (previous is not None and has_widget(previous)):
        return "subslide"
    return "-"


def apply(nb: nbformat.NotebookNode) -> list[str]:
    """Apply the rule: split cells at their headings, set every cell's slide type, drop the old
    RISE settings; return what changed, in words (empty: the notebook keeps the rule)."""
    changes = split_headings(nb)
    for index, cell in enumerate(nb.cells):
        wanted = slide_type(cell, index, len(nb.cells), nb.cells[index - 1] if index else None)
        had = cell.metadata.get("slideshow", {}).get("slide_type", CONTINUE)
        if had != wanted or (wanted == CONTINUE and "slideshow" in cell.metadata):
            changes.append(f"cell {index}: slide_type {had!r} -> {wanted!r}")
            if wanted == CONTINUE:
                cell.metadata.pop("slideshow", None)
            else:
                cell.metadata["slideshow"] = {"slide_type": wanted}
    final = nb.cells[-1]
    if final.cell_type == "code":
        if not final.metadata.get("jupyter", {}).get("source_hidden"):
            changes.append(f"cell {len(nb.cells) - 1} (the final assertions): source collapsed")
            final.metadata.setdefault("jupyter", {})["source_hidden"] = True
        if FOLD_IN_SITE not in final.metadata.get("tags", []):
            changes.append(f"cell {len(nb.cells) - 1} (the final assertions): tagged {FOLD_IN_SITE}")
            final.metadata.setdefault("tags", []).append(FOLD_IN_SITE)
    if "rise" in nb.metadata:
        # settings of jupyterlab-rise, which the course no longer uses (its slideshow cannot draw widgets)
        changes.append("notebook: RISE settings removed")
        del nb.metadata["rise"]
    return changes


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    stale = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        changes = apply(nb)
        if changes and check:
            stale += 1
            print(f"{path.name}: does not keep the slide rule ({len(changes)} change(s) needed); run "
                  f"`python scripts/notebook_slides.py {path}`:\n  " + "\n  ".join(changes[:8]))
        elif changes:
            nbformat.validate(nb)
            nbformat.write(nb, path)
            print(f"{path.name}: {len(changes)} change(s)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
