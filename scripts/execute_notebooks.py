"""Re-execute notebooks in place from a fresh kernel, so committed outputs are what the code gives now.

    python scripts/execute_notebooks.py                 # every notebook in notebooks/
    python scripts/execute_notebooks.py notebooks/01-why-sequences.ipynb

Prints each notebook's run time (budget: 90 s on a 2-core laptop). Runs on the CPU
(SEQLAB_DEVICE=cpu), on this machine's own arithmetic: the saved numbers are one machine's, and
nbval compares as text only the cells tagged ``nbval-check-output`` (scripts/portability.py sets
them: outputs every arithmetic profile prints alike); the rest are guarded by each notebook's
final assertions, with bands measured across profiles. Widget state is
dropped from the saved file: GitHub refuses to render notebooks whose widget metadata lacks a
state, and every widget in the course is paired with a static figure anyway. The slide
metadata for presenting with jupyterlab-slideshow is set on the way (scripts/notebook_slides.py).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import notebook_slides  # noqa: E402  (a sibling script: the slide metadata rule)

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = 90.0


def clean_for_commit(nb: nbformat.NotebookNode) -> None:
    """Drop what should not be committed: widget state and per-run execution metadata."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("widgets", None)


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    # store_widget_state must stay on: nbclient needs it to route Output-widget messages.
    client = NotebookClient(nb, timeout=1800, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    started = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - started
    clean_for_commit(nb)
    notebook_slides.apply(nb)
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str]) -> int:
    os.environ["SEQLAB_DEVICE"] = "cpu"
    # One notebook at a time, with all of torch's threads: no OMP_WAIT_POLICY=PASSIVE here (alone, it made
    # notebook 3's loop of small steps 4x slower; see course.worker_threads for side-by-side runs).
    paths = [Path(a).resolve() for a in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    total = 0.0
    for path in paths:
        seconds = execute(path)
        total += seconds
        size_kb = path.stat().st_size / 1024
        flag = "  OVER BUDGET" if seconds > BUDGET_S else ""
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path   # drafts may live elsewhere
        print(f"{seconds:7.1f} s  {size_kb:7.0f} KB  {shown}{flag}", flush=True)
    print(f"{total:7.1f} s  total for {len(paths)} notebook(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
