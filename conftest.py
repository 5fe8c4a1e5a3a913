"""Repository-wide pytest hooks that report and never select: a per-notebook run-time report, the slowest
test files and the browser tests' latency. No hook here adds or drops a test: ``-k``, ``-m`` and
``--deselect`` mean what pytest says (tests/test_root_conftest.py), and every notebook runs under nbval.

nbval turns each notebook cell into one test item; this sums their durations per notebook and
prints a table at the end of the run (and writes it to test-artifacts/notebook-times.json), so the
per-notebook budget (seqlab.notebook_rules.NOTEBOOK_BUDGET_S) is checked on every test run. It
reports; it never fails a run on timing, since CI machines are noisy.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

from seqlab.notebook_rules import NOTEBOOK_BUDGET_S

_notebook_seconds: dict[str, float] = defaultdict(float)
_file_seconds: dict[str, float] = defaultdict(float)     # every test file (notebooks too): setup + call + teardown
_failed_notebooks: set[str] = set()                       # printed at the end with the command to reproduce
SLOWEST_FILES = 15


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    _file_seconds[path] += report.duration
    if path.endswith(".ipynb"):
        _notebook_seconds[path] += report.duration
        if report.failed:
            _failed_notebooks.add(path)


def pytest_sessionstart(session):
    session.config._seqlab_started = time.time()


def _browser_latency_summary(terminalreporter) -> None:
    """The browser tests' slider -> picture latency, if they wrote it during this run."""
    latency = Path(__file__).parent / "test-artifacts" / "browser" / "latency.json"
    started = getattr(terminalreporter.config, "_seqlab_started", None)
    if started is None or not latency.exists() or latency.stat().st_mtime < started:
        return
    data = json.loads(latency.read_text())
    terminalreporter.section("widget latency in a real browser (control -> new picture)")
    for notebook, widgets in data.get("fixtures", {}).items():   # an older run wrote "notebooks"
        for name, widget in widgets.items():
            for slider, w in widget["sliders"].items():
                terminalreporter.write_line(f"{w['median_ms']:7.0f} ms  median of {len(w['samples_ms'])} moves  "
                                            f"{notebook} {name}, slider {slider!r}")
            for control, w in widget.get("controls", {}).items():
                terminalreporter.write_line(f"{w['median_ms']:7.0f} ms  median of {len(w['samples_ms'])} changes  "
                                            f"{notebook} {name}, {w['kind']} {control!r}")
    terminalreporter.write_line(f"{data['median_ms']:7.0f} ms  overall median ({data['machine']}); "
                                f"details in {latency.relative_to(Path(__file__).parent)}")


def _slowest_files_summary(terminalreporter) -> None:
    """Where the suite's time goes, per file (worker-seconds: with N workers the run takes about 1/N of the sum)."""
    if not _file_seconds or hasattr(terminalreporter.config, "workerinput"):
        return
    total = sum(_file_seconds.values())
    terminalreporter.section(f"slowest test files ({total:.0f} worker-seconds in all)")
    for path, seconds in sorted(_file_seconds.items(), key=lambda kv: -kv[1])[:SLOWEST_FILES]:
        terminalreporter.write_line(f"{seconds:7.1f} s  {100 * seconds / total:4.1f} %  {path}")
    out = Path(__file__).parent / "test-artifacts"
    out.mkdir(exist_ok=True)
    (out / "test-file-times.json").write_text(json.dumps(dict(sorted(_file_seconds.items())), indent=1))


def _reproduce_summary(terminalreporter) -> None:
    """For each notebook that failed, the command that runs it alone (and the one for after an edit)."""
    if not _failed_notebooks or hasattr(terminalreporter.config, "workerinput"):
        return
    terminalreporter.section("to reproduce a notebook failure")
    for path in sorted(_failed_notebooks):
        terminalreporter.write_line(f".venv/bin/python -m pytest {path}    "
                                    f"(after editing it: make notebook NB={Path(path).name[:2]})")


def pytest_terminal_summary(terminalreporter):
    _reproduce_summary(terminalreporter)
    _browser_latency_summary(terminalreporter)
    _slowest_files_summary(terminalreporter)
    if not _notebook_seconds:
        return
    workers = getattr(terminalreporter.config.option, "numprocesses", None)
    shared = f"; {workers} test workers shared the machine, so these are longer than alone" if workers else ""
    terminalreporter.section(f"notebook run times (budget {NOTEBOOK_BUDGET_S:.0f} s each, alone{shared})")
    for path, seconds in sorted(_notebook_seconds.items()):
        flag = "  OVER BUDGET" if seconds > NOTEBOOK_BUDGET_S else ""
        terminalreporter.write_line(f"{seconds:7.1f} s  {path}{flag}")
    if hasattr(terminalreporter.config, "workerinput"):
        return                                         # a pytest-xdist worker: the controller writes it
    out = Path(__file__).parent / "test-artifacts"
    out.mkdir(exist_ok=True)
    (out / "notebook-times.json").write_text(json.dumps(dict(sorted(_notebook_seconds.items())), indent=1))
