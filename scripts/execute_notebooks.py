"""Re-execute notebooks in place from a fresh kernel, so committed outputs are what the code gives now.

    python scripts/execute_notebooks.py                 # every notebook in notebooks/
    python scripts/execute_notebooks.py notebooks/01-why-sequences.ipynb   # or 01, 1, 01-why-sequences
    python scripts/execute_notebooks.py --device cuda --out /tmp/on-gpu --jobs 4   # a GPU run, copies elsewhere

Prints each notebook's run time against its budget (``NOTEBOOK_BUDGET_S``). Runs on the CPU
(SEQLAB_DEVICE=cpu), on this machine's own arithmetic: the saved numbers are one machine's, and
nbval compares as text only the cells tagged ``nbval-check-output`` (scripts/portability.py sets
them: outputs every arithmetic profile prints alike); the rest are guarded by each notebook's
final assertions, with bands measured across profiles. Widget state is
dropped from the saved file: GitHub refuses to render notebooks whose widget metadata lacks a
state, and every widget in the course is paired with a static figure anyway. The slide
metadata for presenting with jupyterlab-slideshow is set on the way (scripts/notebook_slides.py).

``--device cuda`` runs them on a GPU instead (each notebook's final assertions then check its claims
there); ``--out DIR`` writes the executed copies to DIR, leaving the committed ones alone (a GPU run's
numbers are not the CPU's, so they are never committed); ``--jobs N`` runs N notebooks side by side
(their times are then each one's wall time while sharing the machine). A notebook that fails is
reported with its error and the others go on; the exit status says whether any failed.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient

import notebook_slides  # a sibling script (this script's folder is on the path): the slide metadata rule
from seqlab import manifest
from seqlab.notebook_rules import NOTEBOOK_BUDGET_S

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # testbed.py, at the root (standard library only): a script sees only scripts/
from testbed import worker_threads  # noqa: E402
ANSI_COLOURS = re.compile(r"\x1b\[[0-9;]*m")   # a traceback's terminal colours


def clean_for_commit(nb: nbformat.NotebookNode) -> None:
    """Drop what should not be committed: widget state and per-run execution metadata."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("widgets", None)


def execute(path: Path, out: Path | None = None) -> float:
    """Run one notebook from a fresh kernel; write it back in place (or to ``out``). Returns seconds."""
    nb = nbformat.read(path, as_version=4)
    # store_widget_state must stay on: nbclient needs it to route Output-widget messages.
    client = NotebookClient(nb, timeout=1800, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    started = time.perf_counter()
    try:
        client.execute()
    except Exception:
        if out is not None:   # a copy elsewhere: keep what ran, to read where it failed
            nbformat.write(nb, out.with_suffix(".failed.ipynb"))
        raise
    seconds = time.perf_counter() - started
    clean_for_commit(nb)
    notebook_slides.apply(nb)
    nbformat.write(nb, path if out is None else out)
    return seconds


def notebook_paths(names: list[str]) -> list[Path]:
    """The notebooks to run: each name a notebook file (a draft may live anywhere) or a course notebook's name
    as the manifest resolves it (``04``, ``4``, ``04-lstm``); none means every notebook in notebooks/."""
    paths = []
    for name in names:
        if Path(name).is_file():
            paths.append(Path(name).resolve())
            continue
        try:
            paths.append(ROOT / "notebooks" / manifest.notebook(name).filename)
        except manifest.UnknownNotebook as error:
            raise SystemExit(f"execute_notebooks: {error}") from None
    return paths or sorted((ROOT / "notebooks").glob("*.ipynb"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="files or names (04, 04-lstm); default: every notebook")
    parser.add_argument("--device", default="cpu", help="SEQLAB_DEVICE for the kernels: cpu (default), cuda, cuda:N")
    parser.add_argument("--out", type=Path, default=None, help="write the executed copies here, not in place")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks run side by side (default 1)")
    args = parser.parse_args(argv)
    os.environ["SEQLAB_DEVICE"] = args.device
    os.environ["SEQLAB_ANSWERS"] = "off"    # committed outputs run the references, never answers kept here
    # One notebook at a time, with all of torch's threads and no OMP_WAIT_POLICY=PASSIVE (alone, passive waiting
    # slows a loop of small steps); side by side, testbed.worker_threads shares the cores out among the kernels.
    if args.jobs > 1:
        os.environ.update(worker_threads(dict(os.environ), args.jobs))
    paths = notebook_paths(args.notebooks)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)

    def run(path: Path) -> tuple[Path, float, str | None]:
        started = time.perf_counter()
        try:
            return path, execute(path, None if args.out is None else args.out / path.name), None
        except Exception as err:  # noqa: BLE001  (reported below with the notebook's name; the others go on)
            message = ANSI_COLOURS.sub("", str(err))
            return path, time.perf_counter() - started, f"{type(err).__name__}: {message[-1500:]}"

    total, failed = 0.0, 0
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for path, seconds, error in pool.map(run, paths):
            total += seconds
            size_kb = (path if args.out is None else args.out / path.name).stat().st_size / 1024 if error is None else 0
            flag = "  OVER BUDGET" if seconds > NOTEBOOK_BUDGET_S else ""
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path   # drafts may live elsewhere
            if error is None:
                print(f"{seconds:7.1f} s  {size_kb:7.0f} KB  {shown}{flag}", flush=True)
            else:
                failed += 1
                print(f"{seconds:7.1f} s  FAILED   {shown}\n{error}", flush=True)
    print(f"{total:7.1f} s  total for {len(paths)} notebook(s) on {args.device}"
          + (f", {args.jobs} at a time" if args.jobs > 1 else "") + (f"; {failed} FAILED" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
