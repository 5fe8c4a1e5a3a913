"""Slide metadata for presenting the notebooks live with RISE (jupyterlab-rise), set by rule.

    python scripts/notebook_slides.py            # write it into every notebook
    python scripts/notebook_slides.py --check    # exit 1, naming each cell whose metadata differs

A notebook is presented as it reads: each ``#`` or ``##`` heading starts a slide, each ``###``
heading a sub-slide (down arrow), and everything else continues the slide it follows (RISE
scrolls long slides). The set-up cell (imports) and the final cell of assertions run but are
not shown. Solutions stay in their collapsed ``<details>`` block, so an instructor can open one
on stage with a click. The rule lives here, not in each notebook, so it never drifts: ``make
execute`` applies it, and a test runs ``--check``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
RISE_SETTINGS = {"scroll": True, "transition": "none", "start_slideshow_at": "beginning"}


def slide_type(cell: nbformat.NotebookNode, index: int, n_cells: int) -> str:
    """RISE's slide type for the cell at ``index`` of a notebook of ``n_cells`` cells."""
    if cell.cell_type == "markdown":
        first = cell.source.lstrip().split("\n", 1)[0]
        if first.startswith(("# ", "## ")):
            return "slide"
        if first.startswith("### "):
            return "subslide"
        return "-"
    if cell.cell_type == "code" and (cell.source.startswith("from seqlab.notebook import setup") or index == n_cells - 1):
        return "skip"
    return "-"


def apply(nb: nbformat.NotebookNode) -> list[str]:
    """Set the slide metadata of every cell (and RISE's settings); return what changed, in words."""
    changes = []
    for index, cell in enumerate(nb.cells):
        wanted = slide_type(cell, index, len(nb.cells))
        had = cell.metadata.get("slideshow", {}).get("slide_type")
        if had != wanted:
            changes.append(f"cell {index}: slide_type {had!r} -> {wanted!r}")
            cell.metadata["slideshow"] = {"slide_type": wanted}
    if nb.metadata.get("rise") != RISE_SETTINGS:
        changes.append(f"notebook: rise settings {nb.metadata.get('rise')!r} -> {RISE_SETTINGS!r}")
        nb.metadata["rise"] = dict(RISE_SETTINGS)
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
            print(f"{path.name}: slide metadata out of date ({len(changes)} cells); run "
                  f"`python scripts/notebook_slides.py`:\n  " + "\n  ".join(changes[:5]))
        elif changes:
            nbformat.write(nb, path)
            print(f"{path.name}: {len(changes)} change(s)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
