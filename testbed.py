"""The machine the tests run on: what course.py sets up, and the tests and scripts rely on.

- where the browser tests find Chromium (:func:`find_chromium`, and the command that installs it) and the
  HTML edition's npm packages (:data:`NPM_DIR`);
- the arithmetic profiles (:data:`PROFILES`): ways this machine computes as other students' machines do;
- how ``make test`` runs pytest side by side (:func:`parallel_arguments`, :func:`worker_threads`);
- what of a notebook is compared as text (:func:`is_compared`, :func:`compared_texts`): nbval's rule, written
  once for the browser tests' check and for scripts/portability.py, and tested against nbval's own.

- the package's standard-library modules (the manifest, the notebook rules) loaded from their files
  (:func:`package_module`), for what runs without seqlab's environment.

course.py (the set-up and its command line), tests/browser/conftest.py, scripts/portability.py and
scripts/mutants.py import it from here. Standard library only: course.py imports it before the
virtual environment exists.
"""

from __future__ import annotations

import configparser
import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType

PACKAGE = Path(__file__).resolve().parent / "lib" / "seqlab"


def package_module(name: str) -> ModuleType:
    """``lib/seqlab/<name>.py`` (standard library only: ``manifest``, ``notebook_rules``) loaded from its file, as
    ``seqlab_<name>``: importing ``seqlab.<name>`` would import the package, and with it torch, which course.py
    and the standard-library scripts run without. Code that runs in the course's environment imports
    ``seqlab.<name>`` instead."""
    key = f"seqlab_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, PACKAGE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[key]
            raise
    return sys.modules[key]

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
    them in one kernel), each test module too (its fixtures are built once), and each widget fixture's
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
    OpenMP's threads must wait passively, not spin, or they take the cores from each other. Passive waiting
    is no default for a single process, though: there, a loop of small operations pays for each step's
    wake-ups in system time.
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


# -- what is compared: nbval 0.11's rule under --nbval-lax -------------------------------------------------
CHECK_TAG = "nbval-check-output"        # the cells compared as text
SANITIZE_CFG = Path(__file__).resolve().parent / "tests" / "sanitize.cfg"
NOT_COMPARED = {"image/png", "image/jpeg", package_module("notebook_rules").WIDGET_MIME}   # pictures; widget model ids
_IGNORE_COMMENT = re.compile(r"^\s*#\s*NBVAL_(IGNORE_OUTPUT|SKIP)\b", re.MULTILINE)   # nbval: the comment wins
_CARRIAGE_RETURN = re.compile(r"^.*\r(?=[^\n])", re.MULTILINE)
_BACKSPACE = re.compile("[^\n]\x08")


def is_compared(cell: dict) -> bool:
    """nbval compares this code cell's outputs: tagged nbval-check-output and not marked to ignore them."""
    return (cell.get("cell_type") == "code" and CHECK_TAG in cell.get("metadata", {}).get("tags", [])
            and not _IGNORE_COMMENT.search("".join(cell.get("source", ""))))


def sanitize_patterns(path: Path = SANITIZE_CFG) -> list[tuple[str, str]]:
    """(regex, replacement) pairs of an nbval sanitize file (``--nbval-sanitize-with``), in its order."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path)
    return [(parser[section]["regex"], parser[section]["replace"]) for section in parser.sections()]


def _stream_text(text: str) -> str:
    while True:                                   # a character followed by a backspace cancels out
        shorter = _BACKSPACE.sub("", text)
        if len(shorter) == len(text):
            break
        text = shorter
    return _CARRIAGE_RETURN.sub("", text)         # a line overwritten by a carriage return


def compared_texts(outputs: list, patterns: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The texts nbval compares for one cell's outputs: key (stream name, MIME type, "error") -> texts in order.

    Streams are joined per name with \\r and \\b applied; every other output gives each of its ``data``
    entries but pictures and widget views; each text goes through the sanitize ``patterns`` first.
    """
    def clean(text: str) -> str:
        for regex, replacement in patterns:
            text = re.sub(regex, replacement, text)
        return text

    def joined(value) -> str:                     # raw notebook JSON keeps multi-line text as a list of lines
        return "".join(value) if isinstance(value, list) else value if isinstance(value, str) else str(value)

    texts: dict[str, list[str]] = {}
    streams: dict[str, str] = {}
    for output in outputs:
        if output["output_type"] == "stream":
            if output["name"] not in streams:
                texts.setdefault(output["name"], [])          # keeps the stream's place among the keys
            streams[output["name"]] = streams.get(output["name"], "") + joined(output["text"])
        elif output["output_type"] in ("execute_result", "display_data"):
            for mime, value in output.get("data", {}).items():
                if mime not in NOT_COMPARED:
                    texts.setdefault(mime, []).append(clean(joined(value)))
        elif output["output_type"] == "error":
            texts.setdefault("error", []).append(f"{output['ename']}: {output['evalue']}")
    for name, text in streams.items():
        texts[name] = [clean(_stream_text(text))]
    return texts
