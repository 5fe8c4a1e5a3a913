"""A browser wait that never ends fails within its bound and leaves its evidence.

On a tiny page, no JupyterLab (a stand-in log file plays the server's): a promise that never settles,
awaited through ``lab_pages.evaluate`` with a one-second bound, fails the test with what it waited for;
awaited through Playwright's own evaluate (no bound at all), the test's pytest-timeout cap ends it, in a
pytest run of its own. Either way a screenshot, the page's console, the server's log and the error are
written (``lab_pages.open_page``). Needs Chromium and Playwright, like every browser test (conftest.py).
And no script runs in a page but through that bounded evaluate (a check of the sources).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace

import lab_pages
import pytest
from lab_pages import ROOT, evaluate, evidence_name, open_page

SERVER_LOG = "[I 12:00:00.000 ServerApp] a JupyterLab server's log line\n"
PNG = b"\x89PNG\r\n\x1a\n"


def _check_evidence(folder: Path, name: str, console: str, error: str) -> None:
    assert (folder / f"{name}.png").read_bytes().startswith(PNG), sorted(folder.iterdir())
    assert console in (folder / f"{name}.console.log").read_text()
    assert (folder / f"{name}.jupyterlab.log").read_text() == SERVER_LOG
    assert error in (folder / f"{name}.error.txt").read_text()


@pytest.mark.timeout(60)
def test_a_stuck_wait_fails_within_its_bound_with_its_evidence(browser, tmp_path, monkeypatch, request):
    monkeypatch.setattr(lab_pages, "EVIDENCE", tmp_path / "failed")
    (tmp_path / "jupyterlab.log").write_text(SERVER_LOG)
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match="timed out after 1 s waiting for a promise that never settles"):
        with open_page(browser, SimpleNamespace(log=tmp_path / "jupyterlab.log")) as page:
            page.set_content("<h1>waiting</h1>")
            evaluate(page, "() => console.log('before the stuck wait')")
            evaluate(page, "() => new Promise(() => {})", what="a promise that never settles", timeout_s=1)
    assert time.monotonic() - started < 30
    _check_evidence(tmp_path / "failed", evidence_name(request.node.nodeid), "before the stuck wait",
                    "timed out after 1 s")


UNBOUNDED = """
from pathlib import Path
from types import SimpleNamespace

import lab_pages
import pytest
from playwright.sync_api import sync_playwright

lab_pages.EVIDENCE = Path({evidence!r})


@pytest.fixture
def browser():
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path={chromium!r}, headless=True,
                                             args=["--disable-gpu", "--disable-dev-shm-usage"])
        yield browser
        browser.close()


def test_unbounded_wait(browser):
    with lab_pages.open_page(browser, SimpleNamespace(log={log!r})) as page:
        page.set_content("<h1>stuck</h1>")
        page.evaluate("() => { console.log('before the unbounded wait'); return new Promise(() => {}); }")
"""


@pytest.mark.timeout(120)
def test_an_unbounded_wait_ends_at_the_tests_cap_with_its_evidence(chromium, tmp_path):
    """The cap's method is the project's (pyproject.toml): with "thread", pytest-timeout would end the
    whole process, and no evidence would be written."""
    method = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["timeout_method"]
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    script = UNBOUNDED                          # the paths written into the script it runs
    for name, value in (("chromium", chromium), ("evidence", tmp_path / "failed"),
                        ("log", tmp_path / "jupyterlab.log")):
        script = script.replace(f"{{{name}!r}}", repr(str(value)))
    (tmp_path / "test_unbounded.py").write_text(script)
    (tmp_path / "jupyterlab.log").write_text(SERVER_LOG)
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "browser"), os.environ.get("PYTHONPATH", "")])}
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                          "--timeout", "3", "-o", f"timeout_method={method}", "test_unbounded.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=100)
    out = run.stdout + run.stderr
    assert run.returncode == 1 and "1 failed" in out and "Timeout (>3.0s) from pytest-timeout" in out, out
    assert time.monotonic() - started < 60, out
    _check_evidence(tmp_path / "failed", evidence_name("test_unbounded.py::test_unbounded_wait"),
                    "before the unbounded wait", "Timeout (>3.0s) from pytest-timeout")


def test_every_script_in_a_page_goes_through_the_bounded_evaluate():
    """Playwright's evaluate calls appear only inside lab_pages.evaluate (and in this file's unbounded example)."""
    raw = [f"{path.name}:{number}: {line.strip()}" for path in sorted((ROOT / "tests" / "browser").glob("*.py"))
           if path.name != Path(__file__).name
           for number, line in enumerate(path.read_text().splitlines(), 1)
           if re.search(r"\.(evaluate|evaluate_handle|eval_on_selector|eval_on_selector_all)\(", line)
           and "target.evaluate(" not in line]
    assert not raw, "unbounded scripts in a page (use lab_pages.evaluate):\n" + "\n".join(raw)
