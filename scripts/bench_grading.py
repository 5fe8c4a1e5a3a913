"""How fast the grader grades a class: N generated submissions of one notebook, graded as an instructor would.

    python scripts/bench_grading.py [--notebook 04-lstm] [--students 200] [--untouched 0] [--jobs 2] [--seed N]
    python scripts/bench_grading.py --students 20 --lib /path/to/an/older/checkout/lib   # the same, older grader

Half-made classes are generated from the course itself: ``--students`` perfect submissions (every folded
solution pasted into its answer cell, every prediction made) and ``--untouched`` copies of the student release.
They are graded by ``python -m seqlab.grading grade`` in a child process (with ``--lib``, another checkout's
grader, for a before/after comparison in one run), and the table gives wall time, submissions per minute and
CPU-seconds per exercise (the grader and every process it started, all reaped), with the CPU model. With
``--seed``, an instructor folder with that ``SEED`` adds every factory's hidden cases (a second process per
exercise that has them), as a course graded with hidden cases pays.
"""

from __future__ import annotations

import argparse
import csv
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


def _cpu_cgroup() -> Path | None:
    """A cgroup that counts the CPU time of the grader and everything it starts (bubblewrap's processes are
    not all reaped by their parents, so ``RUSAGE_CHILDREN`` misses them); root only, None elsewhere."""
    for base, counter in ((Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage"), (Path("/sys/fs/cgroup"), "cpu.stat")):
        if os.geteuid() == 0 and ((base / counter).exists() or (base / "cgroup.controllers").exists()):
            folder = base / f"seqlab-bench-{os.getpid()}"
            try:
                folder.mkdir()
            except OSError:
                continue
            return folder
    return None


def _cgroup_cpu_seconds(folder: Path) -> float:
    if (folder / "cpuacct.usage").exists():
        return int((folder / "cpuacct.usage").read_text()) / 1e9
    stat = dict(line.split() for line in (folder / "cpu.stat").read_text().splitlines())
    return int(stat["usage_usec"]) / 1e6


def grade(folder: Path, out: Path, stem: str, jobs: int, lib: Path | None,
          instructor: Path | None = None) -> tuple[float, float, str]:
    """Grade the class; wall seconds, CPU seconds of the grader and all it started, and how CPU was counted."""
    env = dict(os.environ)
    if lib is not None:
        env["PYTHONPATH"] = str(lib)
    command = [sys.executable, "-m", "seqlab.grading", "grade", str(folder), "--notebook", stem[:2],
               "--out", str(out), "--jobs", str(jobs), *(["--instructor", str(instructor)] if instructor else [])]
    group = _cpu_cgroup()
    if group is not None:                          # join the cgroup first; every process started after inherits it
        command = ["sh", "-c", f'echo $$ > "{group}/cgroup.procs" && exec "$0" "$@"', *command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"grading failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    if group is not None:
        cpu, how = _cgroup_cpu_seconds(group), "cgroup"
        group.rmdir()
    else:
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        how = "rusage (misses the sandbox's unreaped processes)"
    return wall, cpu, how


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebook", default="04-lstm")
    parser.add_argument("--students", type=int, default=200, help="perfect submissions")
    parser.add_argument("--untouched", type=int, default=0, help="untouched copies of the release")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--lib", type=Path, help="grade with the seqlab found in this folder instead")
    parser.add_argument("--seed", type=int, help="grade with hidden cases from this SEED")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="seqlab-bench-grading-") as tmp:
        folder, out = Path(tmp) / "submissions", Path(tmp) / "grades"
        folder.mkdir()
        exercises = make_class(folder, args.notebook, args.students, args.untouched)
        count = args.students + args.untouched
        instructor = None
        if args.seed is not None:
            instructor = Path(tmp) / "instructor"
            instructor.mkdir(mode=0o700)
            (instructor / "hidden_cases.py").write_text(f"SEED = {args.seed}\n")
        wall, cpu, how = grade(folder, out, args.notebook, args.jobs, args.lib, instructor)
        with open(out / args.notebook / "gradebook.csv", newline="", encoding="utf-8") as handle:
            book = list(csv.DictReader(handle))
    full = sum(1 for row in book if row["score"] and float(row["score"]) == float(row["max_score"]))
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; grader: {args.lib or 'this checkout'}; "
          f"--jobs {args.jobs}; hidden cases: {'SEED ' + str(args.seed) if instructor else 'none'}; CPU counted by {how}")
    print("| notebook | submissions | exercises each | full marks | wall s | submissions / min | CPU-s / exercise |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.notebook} | {count} ({args.students} perfect, {args.untouched} untouched) | {exercises} | "
          f"{full} | {wall:.1f} | {60 * count / wall:.1f} | {cpu / max(count * exercises, 1):.3f} |")
    assert len(book) == count, f"the gradebook has {len(book)} rows for {count} submissions"
    assert full == args.students, f"{full} full marks for {args.students} perfect submissions: the grader is wrong"


if __name__ == "__main__":
    main()
