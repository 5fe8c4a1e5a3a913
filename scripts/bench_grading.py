"""How fast the grader grades a class: N generated submissions of one notebook, graded as an instructor would.

    python scripts/bench_grading.py [--notebook 04-lstm] [--students 200] [--untouched 0] [--jobs 2]
    python scripts/bench_grading.py --students 20 --lib /path/to/an/older/checkout/lib   # the same, older grader

Half-made classes are generated from the course itself: ``--students`` perfect submissions (every folded
solution pasted into its answer cell, every prediction made) and ``--untouched`` copies of the student release.
They are graded by ``python -m seqlab.grading grade`` in a child process (with ``--lib``, another checkout's
grader, for a before/after comparison in one run), and the table gives wall time, submissions per minute and
CPU-seconds per exercise (the grader and every process it started, all reaped), with the CPU model.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "scripts")]
from bench_lm import _cpu_model as cpu_model  # noqa: E402  (one reading of /proc/cpuinfo for every benchmark)
from grading_helpers import as_bytes, perfect, student_release  # noqa: E402


def make_class(folder: Path, stem: str, students: int, untouched: int) -> int:
    """Write the submissions; returns how many exercises each has."""
    good, blank = as_bytes(perfect(stem)), as_bytes(student_release(stem))
    for i in range(students):
        (folder / f"student{i:04d}.ipynb").write_bytes(good)
    for i in range(untouched):
        (folder / f"untouched{i:04d}.ipynb").write_bytes(blank)
    nb = json.loads(blank)
    return sum(1 for c in nb["cells"] if c["cell_type"] == "code" and "seqlab" in c.get("metadata", {}))


def grade(folder: Path, out: Path, stem: str, jobs: int, lib: Path | None) -> tuple[float, float, int]:
    env = dict(os.environ)
    if lib is not None:
        env["PYTHONPATH"] = str(lib)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "seqlab.grading", "grade", str(folder), "--notebook", stem[:2],
                           "--out", str(out), "--jobs", str(jobs)], env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"grading failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebook", default="04-lstm")
    parser.add_argument("--students", type=int, default=200, help="perfect submissions")
    parser.add_argument("--untouched", type=int, default=0, help="untouched copies of the release")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--lib", type=Path, help="grade with the seqlab found in this folder instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="seqlab-bench-grading-") as tmp:
        folder, out = Path(tmp) / "submissions", Path(tmp) / "grades"
        folder.mkdir()
        exercises = make_class(folder, args.notebook, args.students, args.untouched)
        count = args.students + args.untouched
        wall, cpu, _ = grade(folder, out, args.notebook, args.jobs, args.lib)
        book = (out / args.notebook / "gradebook.csv").read_text().splitlines()
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; grader: {args.lib or 'this checkout'}; "
          f"--jobs {args.jobs}")
    print("| notebook | submissions | exercises each | wall s | submissions / min | CPU-s / exercise |")
    print("|---|---|---|---|---|---|")
    print(f"| {args.notebook} | {count} ({args.students} perfect, {args.untouched} untouched) | {exercises} | "
          f"{wall:.1f} | {60 * count / wall:.1f} | {cpu / max(count * exercises, 1):.3f} |")
    assert len(book) == count + 1, f"the gradebook has {len(book) - 1} rows for {count} submissions"


if __name__ == "__main__":
    main()
