"""Which notebook outputs every machine prints alike: run the notebooks under several arithmetic
profiles, compare each cell's text outputs, and tag the cells nbval compares exactly.

    python scripts/portability.py run                   # execute every notebook under every profile
    python scripts/portability.py run --profiles native baseline notebooks/03-bptt-and-gradients.ipynb
    python scripts/portability.py report                # per notebook: cells failing, cells that differ
    python scripts/portability.py tag                   # set the nbval-check-output tags from the runs

Why: torch (ATen), MKL and oneDNN choose their kernels by CPU, and the thread count changes the
order of additions, so a number that comes out of floating-point work (a trained loss, a head's
share, a rounding gap) differs between a student's laptop and CI in the last bits, and a chaotic
or long computation carries that into the printed digits. ``make test`` runs nbval with
``--nbval-lax``: every cell still runs and each notebook's final cell asserts its claims with
bands, but only cells tagged ``nbval-check-output`` are compared as text. This script decides
which: a code cell is tagged when its sanitised text output is the same under every profile
(:data:`testbed.PROFILES`: the machine's widest code paths, the AVX2 paths, the pre-AVX baseline,
one thread, three threads) -- counts, shapes, formulas, worked examples in float64. A cell that
prints library source (``inspect.getsource``) is never tagged: nbval does not compare it, and
tests/test_notebooks_committed.py checks it instead (``test_a_printed_listing_is_the_librarys_current_code``
fails when the printed source, a comment included, is no longer the library's: re-execute the notebook).

Executed copies go to ``test-artifacts/portability/<profile>/``; the committed notebooks are never
re-executed here, only their tags change.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # testbed.py, at the root (standard library only): a script sees only scripts/
from testbed import CHECK_TAG, PROFILES, compared_texts, profile_environment, sanitize_patterns, worker_threads  # noqa: E402

OUT = ROOT / "test-artifacts" / "portability"
NEVER_COMPARED = re.compile(r"getsource|show_source|NBVAL_IGNORE_OUTPUT")   # printed library source (checked by
# its own test, see the docstring), and cells nbval is told to ignore (a tag on them too makes nbval warn)


def cell_text(cell: nbformat.NotebookNode, rules=None) -> str:
    """What nbval compares of one code cell (testbed.compared_texts, the one rule), as one text to diff."""
    texts = compared_texts(cell.get("outputs", []), sanitize_patterns() if rules is None else rules)
    return "\n".join(f"[{key}] {text}" for key, values in texts.items() for text in values)


def execute(path: Path, profile: str, jobs: int = 1) -> dict:
    """Run one notebook under one profile (all cells, errors kept), ``jobs`` notebooks side by side; save
    the copy; return a summary."""
    # side by side, the cores are shared out as in `make test` (testbed.worker_threads); a profile's own
    # thread count wins
    env = worker_threads(profile_environment(profile), jobs)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=1800, kernel_name="python3", allow_errors=True, store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    started = time.perf_counter()
    client.execute(env=env)                  # the kernel's whole environment: this one, with the profile's settings
    seconds = time.perf_counter() - started
    target = OUT / profile / path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    errors = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
              and any(o.get("output_type") == "error" for o in c.outputs)]
    return {"notebook": path.name, "profile": profile, "seconds": round(seconds, 1), "error_cells": errors}


def ran_this_code(notebook: Path, copy: Path) -> bool:
    """Whether ``copy`` is a run of ``notebook``'s code as it is now (edits to prose need no new run; a
    change in lib/ or data/ is not seen: use --again)."""
    if not copy.exists():
        return False
    code = [[c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code"] for p in (notebook, copy)]
    return code[0] == code[1]


def cmd_run(args) -> int:
    paths = [Path(p).resolve() for p in args.notebooks] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    jobs = [(p, prof) for prof in args.profiles for p in paths if args.again or not ran_this_code(p, OUT / prof / p.name)]
    summary_file = OUT / "runs.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    with ThreadPoolExecutor(args.jobs) as pool:
        for result in pool.map(lambda job: execute(*job, args.jobs), jobs):   # (printed in order: a slow one holds the rest)
            summary[f"{result['profile']}/{result['notebook']}"] = result
            flag = f"  ERRORS in cells {result['error_cells']}" if result["error_cells"] else ""
            print(f"{result['seconds']:7.1f} s  {result['profile']:9s} {result['notebook']}{flag}", flush=True)
            summary_file.write_text(json.dumps(summary, indent=1, sort_keys=True))
    return 0


def compare(name: str, profiles: list[str], revisions: tuple[str, ...] = ()) -> tuple[list[int], list[int], dict[str, list[int]]]:
    """For one notebook: (cells alike under all profiles and as committed, cells that differ, error cells
    per profile)."""
    rules = sanitize_patterns()
    notebook = ROOT / "notebooks" / name
    current = [p for p in profiles if ran_this_code(notebook, OUT / p / name)]
    if len(current) < len(profiles):
        raise SystemExit(f"{name}: no run of its current code under {sorted(set(profiles) - set(current))}: "
                         f"run `python scripts/portability.py run --profiles ... notebooks/{name}` first")
    runs = {p: nbformat.read(OUT / p / name, as_version=4) for p in current}
    committed = nbformat.read(notebook, as_version=4)
    # Earlier commits' outputs are runs on other machines (and their arithmetic): a cell whose source and id
    # are unchanged since then must have printed the same there too.
    earlier = {}
    for rev in revisions:
        shown = subprocess.run(["git", "show", f"{rev}:notebooks/{name}"], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode == 0:
            earlier[rev] = {c.get("id"): c for c in nbformat.reads(shown.stdout, as_version=4).cells if c.cell_type == "code"}
    alike, differ, errors = [], [], {}
    for index, cell in enumerate(committed.cells):
        if cell.cell_type != "code":
            continue
        texts = {p: cell_text(nb.cells[index], rules) for p, nb in runs.items()}
        texts["committed"] = cell_text(cell, rules)          # nbval compares a fresh run with this
        for rev, cells in earlier.items():
            old = cells.get(cell.get("id"))
            if old is not None and old.source == cell.source:
                texts[rev] = cell_text(old, rules)
        for p, nb in runs.items():
            if any(o.get("output_type") == "error" for o in nb.cells[index].outputs):
                errors.setdefault(p, []).append(index)
        (alike if len(set(texts.values())) == 1 else differ).append(index)
    return alike, differ, errors


def show_differences(name: str, cells: list[int], profiles: list[str]) -> None:
    """Print, line by line, where the given cells' text outputs differ: as committed and under each profile."""
    rules = sanitize_patterns()
    runs = {"committed": nbformat.read(ROOT / "notebooks" / name, as_version=4)}
    runs.update({p: nbformat.read(OUT / p / name, as_version=4) for p in profiles if (OUT / p / name).exists()})
    for index in cells:
        lines = {k: cell_text(nb.cells[index], rules).splitlines() for k, nb in runs.items()}
        print(f"  --- cell {index}")
        for j in range(max(len(v) for v in lines.values())):
            row = {k: v[j] if j < len(v) else "" for k, v in lines.items()}
            if len(set(row.values())) > 1:
                print("\n".join(f"    {k[:9]:9s}| {v[:200]}" for k, v in row.items()) + "\n")


def error_table(names: list[str], profiles: list[str]) -> str:
    """notebook x profile from the executed copies: 'ok', 'N cells fail', 'not run', or 'stale' (a run of
    older code than the notebook's)."""
    rows = [f"{'notebook':36s}" + "".join(f"{p:>12s}" for p in profiles)]
    for name in names:
        cells = []
        for p in profiles:
            copy = OUT / p / name
            if not copy.exists():
                cells.append("not run")
            elif not ran_this_code(ROOT / "notebooks" / name, copy):
                cells.append("stale")
            else:
                failing = [c for c in nbformat.read(copy, as_version=4).cells
                           if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.outputs)]
                cells.append(f"{len(failing)} fail" if failing else "ok")
        rows.append(f"{name:36s}" + "".join(f"{c:>12s}" for c in cells))
    return "\n".join(rows)


def cmd_report(args) -> int:
    names = [Path(p).name for p in args.notebooks] or sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    if args.table:
        print(error_table(names, args.profiles))
        return 0
    for name in names:
        alike, differ, errors = compare(name, args.profiles)
        print(f"{name}: {len(alike)} cells alike, {len(differ)} differ {differ}"
              + "".join(f"; {p}: errors in {e}" for p, e in errors.items()))
        if args.verbose:
            show_differences(name, differ, args.profiles)
    return 0


def cmd_tag(args) -> int:
    names = [Path(p).name for p in args.notebooks] or sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    for name in names:
        alike, differ, errors = compare(name, args.profiles, tuple(args.revisions))
        if errors:
            raise SystemExit(f"{name}: cells fail under some profile ({errors}); fix them before tagging")
        path = ROOT / "notebooks" / name
        nb = nbformat.read(path, as_version=4)
        tagged = 0
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            tags = [t for t in cell.metadata.get("tags", []) if t != CHECK_TAG]
            if index in alike and cell.outputs and not NEVER_COMPARED.search(cell.source):
                tags.append(CHECK_TAG)
                tagged += 1
            if tags:
                cell.metadata["tags"] = tags
            else:
                cell.metadata.pop("tags", None)
        nbformat.write(nb, path)
        print(f"{name}: {tagged} cells compared exactly, {len(differ)} left to the assertions")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    for verb in ("run", "report", "tag"):
        p = sub.add_parser(verb)
        p.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=list(PROFILES))
        p.add_argument("notebooks", nargs="*")
        if verb == "run":
            p.add_argument("--jobs", type=int, default=2, help="notebooks run side by side")
            p.add_argument("--again", action="store_true", help="re-run even where the copy ran the notebook's current code")
        if verb == "tag":
            p.add_argument("--revisions", nargs="*", default=[],
                           help="git revisions whose committed outputs count as runs too (cells with the same id and source)")
        if verb == "report":
            p.add_argument("-v", "--verbose", action="store_true", help="print the differing outputs")
            p.add_argument("--table", action="store_true", help="only the table notebook x profile: cells that fail")
    args = parser.parse_args(argv)
    os.environ.setdefault("SEQLAB_DEVICE", "cpu")
    return {"run": cmd_run, "report": cmd_report, "tag": cmd_tag}[args.verb](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
