"""The machine the tests run on: what course.py sets up, and the tests and scripts rely on.

- where the browser tests find Chromium (:func:`find_chromium`, and the command that installs it) and the
  HTML edition's npm packages (:data:`NPM_DIR`);
- the arithmetic profiles (:data:`PROFILES`): ways this machine computes as other students' machines do;
- how ``make test`` runs pytest side by side (:func:`parallel_arguments`, :func:`worker_threads`).

course.py (the set-up and its command line), tests/browser/conftest.py, scripts/portability.py and
scripts/mutants.py import it from here. Standard library only: course.py imports it before the
virtual environment exists.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# The real-browser tests (tests/browser) drive the system's Chromium with Playwright (a Playwright
# browser download needs the network at test time and is not used). `course.py test` installs these Debian
# packages when it runs as root where apt-get exists (CI, containers); elsewhere it says how.
BROWSER_DEBIAN_PACKAGES = ["chromium", "chromium-driver"]
BROWSER_INSTALL_HINT = "sudo apt-get install -y " + " ".join(BROWSER_DEBIAN_PACKAGES)
# The HTML edition (`site`) serves MathJax from its own files, and its accessibility audit (a browser test)
# injects axe-core from disk: both npm packages, pinned in site/package-lock.json, installed with `npm ci`
# into NPM_DIR by `course.py site` and `course.py test` (before the tests cut the network off).
NPM_DIR = Path(__file__).resolve().parent / ".cache" / "npm"


def find_chromium() -> str | None:
    """The Chromium the browser tests drive: ``$SEQLAB_CHROMIUM``, else chromium on PATH."""
    explicit = os.environ.get("SEQLAB_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


# Arithmetic profiles: ways one machine computes as other students' machines do. torch's own kernels
# (ATen), MKL and oneDNN each choose their code path by the CPU (AVX-512, AVX2, or a pre-AVX baseline), and
# the thread count changes the order in which sums are added, so a float comes out different in its last
# bits from one machine to another (ARM laptops take other paths again). The notebooks' claims must hold,
# and `make test` must pass, under each: `python3 course.py test --profiles` runs the notebook tests under
# every profile and prints a table; scripts/portability.py decides which outputs are compared as text.
ARITHMETIC_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
PROFILES: dict[str, dict[str, str]] = {
    "native": {},                                   # the machine's widest code paths (threads: see worker_threads)
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "baseline": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "threads1": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    "threads3": {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3"},
}


def profile_environment(profile: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the arithmetic variables of ``profile`` and no others, so
    that a value left in the shell cannot silently change what a profile means."""
    if profile not in PROFILES:
        raise SystemExit(f"[course] no arithmetic profile {profile!r}; the profiles are {', '.join(PROFILES)}")
    base = {k: v for k, v in (os.environ if env is None else env).items() if k not in ARITHMETIC_VARIABLES}
    return {**base, **PROFILES[profile]}


def parallel_arguments(args: list[str], cpus: int | None = None) -> list[str]:
    """pytest-xdist's arguments for ``make test``: one worker per core (at most 4), unless the user chose.

    ``--dist loadscope``, pytest-xdist's own rule: a worker gets the test functions of one module, or the
    tests of one class, as one unit. So the cells of one notebook stay on one worker, in order (nbval runs
    them in one kernel), each test module too (its fixtures are built once), and each widget notebook's
    browser test, a class of its own in tests/browser/test_widgets_in_lab.py, is a unit of its own, so that
    the slow ones spread out. ``--no-loadscope-reorder`` keeps collection order, which starts with the
    browser tests, the longest.
    """
    if any(a.startswith(("-n", "--numprocesses", "--dist")) or a.endswith("no:xdist") for a in args):
        return []
    workers = min(4, cpus if cpus is not None else (os.cpu_count() or 1))
    return ["-n", str(workers), "--dist", "loadscope", "--no-loadscope-reorder"] if workers > 1 else []


def worker_threads(env: dict[str, str], workers: int, cpus: int | None = None) -> dict[str, str]:
    """``env`` for ``workers`` test processes side by side: torch threads shared out over the cores.

    Unless ``env`` (or a profile) sets them, each worker gets ``cores // workers`` threads (on 2 cores and
    2 workers: 1), so that no thread waits for a core. Oversubscribed (a profile of 3 threads on 2 workers),
    OpenMP's threads must wait passively, not spin: two 2-thread trainings side by side on 2 cores ran 4x
    slower spinning. Passive waiting is no default for a single process, though: alone, a loop of small
    operations (notebook 3's SGD runs) took 93 s instead of 24 s, each step's wake-ups costing system time.
    The thread count changes the order of additions, never a claim: every notebook is checked under
    several (``--profiles``).
    """
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    if workers <= 1:
        return dict(env)
    out = dict(env)
    if "OMP_NUM_THREADS" not in out:
        out["OMP_NUM_THREADS"] = out.get("MKL_NUM_THREADS", str(max(1, cpus // workers)))
    out.setdefault("MKL_NUM_THREADS", out["OMP_NUM_THREADS"])
    if int(out["OMP_NUM_THREADS"]) * workers > cpus:
        out.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return out
