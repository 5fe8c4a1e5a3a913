"""Repository-wide pytest hooks: a per-notebook run-time report.

nbval turns each notebook cell into one test item; this sums their durations per notebook and
prints a table at the end of the run (and writes it to test-artifacts/notebook-times.json), so
the 90-second budget per notebook is checked on every test run. It reports; it never fails a
run on timing, since CI machines are noisy.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

NOTEBOOK_BUDGET_S = 90.0
_notebook_seconds: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        _notebook_seconds[path] += report.duration


def pytest_terminal_summary(terminalreporter):
    if not _notebook_seconds:
        return
    terminalreporter.section("notebook run times (budget %.0f s each)" % NOTEBOOK_BUDGET_S)
    for path, seconds in sorted(_notebook_seconds.items()):
        flag = "  OVER BUDGET" if seconds > NOTEBOOK_BUDGET_S else ""
        terminalreporter.write_line(f"{seconds:7.1f} s  {path}{flag}")
    out = Path(__file__).parent / "test-artifacts"
    out.mkdir(exist_ok=True)
    (out / "notebook-times.json").write_text(json.dumps(dict(sorted(_notebook_seconds.items())), indent=1))
