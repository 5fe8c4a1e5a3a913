#!/usr/bin/env python3
"""The start step of a student's server on a hub: run as the student, before the single-user server, then exec it.

    python3 hub/start.py jupyterhub-singleuser [ARGS...]      # hub/jupyterhub_config.py's Spawner.cmd
    binder/start jupyterhub-singleuser [ARGS...]              # the image's (repo2docker's start script)

1. The course is pulled into the home (``~/seqlab``, or ``$SEQLAB_COURSE_DIR``) with nbgitpuller when
   ``$SEQLAB_COURSE_REPO`` names a repository (an nbgitpuller link does the same when a student clicks it:
   ``python3 course.py hub-link``). Students never edit that clone, so nbgitpuller's merge has nothing of theirs to
   merge.
2. Each course notebook that ``~/work`` lacks is copied into it, as ``python3 course.py lab`` does (course.py's
   own ``sync_work_copies``): a student's copy is never overwritten; when the course's version changed since the
   copy was made, the log says so, and ``python3 course.py reset`` (or the README's instructions) takes it.
3. ``OMP_NUM_THREADS`` (and MKL's, OpenBLAS's) is set from the server's CPU limit (``$CPU_LIMIT``, which JupyterHub's
   spawners set, else the cgroup's CPU quota), unless already set: torch would otherwise start one thread per core
   of the whole machine in every student's kernel, and N students' kernels would fight over the same cores.

Standard library only (it imports course.py, which is too); nbgitpuller is imported only to pull.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CODE = Path(os.environ.get("SEQLAB_CODE", HERE.parent))       # where course.py is: the checkout, or the image's copy
sys.path.insert(0, str(CODE))   # course.py is never installed: import it from the checkout or the image's copy
import course  # noqa: E402

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def log(message: str) -> None:
    print(f"[seqlab start] {message}", file=sys.stderr, flush=True)


def cgroup_cpu_limit(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """This process's CPU quota in cores (v1: cfs_quota_us / cfs_period_us, v2: cpu.max), None when unlimited."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            base = root / "cpu" / path.lstrip("/")
            try:
                quota = int((base / "cpu.cfs_quota_us").read_text())
                period = int((base / "cpu.cfs_period_us").read_text())
            except (OSError, ValueError):
                return None
            return quota / period if quota > 0 else None
    for line in lines:
        if line.startswith("0::"):
            try:
                quota, period = (root / line[3:].lstrip("/") / "cpu.max").read_text().split()
            except (OSError, ValueError):
                return None
            return None if quota == "max" else int(quota) / int(period)
    return None


def thread_count(environ: dict[str, str], cores: int | None = None) -> int:
    """Threads per kernel: the CPU limit rounded down (at least 1), at most the machine's cores."""
    cores = cores or os.cpu_count() or 1
    limit = None
    if environ.get("CPU_LIMIT"):
        try:
            limit = float(environ["CPU_LIMIT"])
        except ValueError:
            limit = None
    if limit is None:
        limit = cgroup_cpu_limit()
    if limit is None or limit <= 0:
        return cores
    return max(1, min(cores, math.floor(limit)))


def thread_environment(environ: dict[str, str], cores: int | None = None) -> dict[str, str]:
    """``environ`` with the thread variables set from the CPU limit, those already set left as they are."""
    threads = str(thread_count(environ, cores))
    return {**environ, **{name: threads for name in THREAD_VARIABLES if not environ.get(name)}}


def pull_course(repo: str, branch: str, target: Path) -> None:
    """Clone the course into ``target``, or bring it up to date, with nbgitpuller (as an nbgitpuller link would)."""
    from nbgitpuller.pull import GitPuller

    log(f"pulling the course {repo} ({branch}) into {target}")
    for line in GitPuller(repo, str(target), branch=branch).pull():
        line = line.rstrip()
        if line:
            print(f"[seqlab start] git: {line}", file=sys.stderr, flush=True)


def sync_notebooks(course_notebooks: Path, work: Path) -> tuple[list[str], list[str]]:
    copied, changed = course.sync_work_copies(course_notebooks, work)
    if copied:
        log(f"copied {len(copied)} notebook(s) into {work}, where the student's changes stay theirs: {', '.join(copied)}")
    for name in changed:
        log(f"the course's {name} has changed since the student's copy was made; the copy is kept as it is "
            f"(`python3 course.py reset {Path(name).stem}` in the course folder takes the new version, the old "
            "copy going to work/.old/)")
    return copied, changed


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    home = Path.home()
    target = home / os.environ.get("SEQLAB_COURSE_DIR", "seqlab")
    repo = os.environ.get("SEQLAB_COURSE_REPO")
    if repo:
        try:
            pull_course(repo, os.environ.get("SEQLAB_COURSE_BRANCH", "main"), target)
        except Exception as error:                     # the server still starts, on the copy it has
            log(f"could not pull the course ({type(error).__name__}: {error}); starting with what is there")
    notebooks = target / "notebooks" if (target / "notebooks").is_dir() else CODE / "notebooks"
    if notebooks.is_dir():
        sync_notebooks(notebooks, home / "work")
    else:
        log(f"no course notebooks found (looked in {target / 'notebooks'} and {CODE / 'notebooks'})")
    env = thread_environment(dict(os.environ))
    log(f"{env['OMP_NUM_THREADS']} thread(s) per kernel (OMP_NUM_THREADS), from the CPU limit")
    if not argv:                                       # the steps only (nothing to run after them)
        return 0
    os.execvpe(argv[0], argv, env)
    return 0                                           # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
