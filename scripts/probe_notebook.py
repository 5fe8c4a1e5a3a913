"""Run a notebook with one extra cell just before its final assertion cell, and print that cell's output.

    python scripts/probe_notebook.py notebooks/08-attention.ipynb 'print(date_accuracy)'
    SEQLAB_DEVICE=cuda python scripts/probe_notebook.py notebooks/17-cost-and-beyond.ipynb 'print(fused_gap)'

For a claim that fails on another machine (a GPU, another CPU): the final cell's assertions say *that*
a figure left its band, the probe says *where* it went, without editing the notebook. Errors in earlier
cells do not stop the run (``allow_errors``); the final cell's own result is printed after the probe's.
Nothing is written back.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from execute_notebooks import ANSI_COLOURS  # a sibling script (its folder is on the path): the same traceback cleaning


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    path, code = Path(argv[0]), argv[1]
    nb = nbformat.read(path, as_version=4)
    last = max(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code")   # the final assertion cell
    nb.cells.insert(last, nbformat.v4.new_code_cell(code))
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    failed = False
    for label, cell in (("PROBE", nb.cells[last]), ("FINAL", nb.cells[last + 1])):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                failed |= label == "FINAL"
                text = "\n".join(output.get("traceback", []))
            else:
                text = output.get("text", "") or str(output.get("data", {}).get("text/plain", ""))
            print(f"{path} {label}: {ANSI_COLOURS.sub('', text)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
