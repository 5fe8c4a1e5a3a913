"""Fixtures for the real-browser tests: a throw-away JupyterLab server and Debian's Chromium.

- ``chromium``: the path of the system Chromium (``$SEQLAB_CHROMIUM``, else ``chromium`` or
  ``chromium-browser`` on PATH). Missing Chromium or Playwright skips the browser tests with the
  command that installs them -- unless ``SEQLAB_REQUIRE_BROWSER=1`` (set by ``.ci/run``), which
  turns the skip into a failure, so that CI can never pass without running them.
- ``lab``: JupyterLab on 127.0.0.1 (a free port, a random token, no browser of its own) serving a
  temporary copy of ``notebooks/``, with its settings, workspaces and runtime files in a temporary
  directory too; the repository's notebooks are never touched. Stopped (kernels included) at the
  end of the module, by process group, whatever happened.
- ``browser``: headless Chromium driven by Playwright (``executable_path``: Playwright's own
  browser download cannot work offline), closed at the end of the module.
- a failed test's evidence (``lab_pages.open_page``) in ``test-artifacts/browser/failed/`` is from this
  run: what an earlier run left there for the same test is removed when it starts.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from seqlab.notebook_rules import lab_settings_files
from testbed import BROWSER_INSTALL_HINT, NPM_DIR, find_chromium

ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = (f"install Chromium and Playwright: `{BROWSER_INSTALL_HINT}` (Debian/Ubuntu; `make test` "
                "does it when run as root) and `.venv/bin/pip install -e '.[test]'` (`make test` does it)")
SERVER_START_TIMEOUT_S = 90


def _browser_required() -> bool:
    return os.environ.get("SEQLAB_REQUIRE_BROWSER", "") not in ("", "0")


def _unavailable(reason: str, hint: str = INSTALL_HINT) -> None:
    message = f"browser tests cannot run: {reason}; {hint}"
    if _browser_required():
        pytest.fail(message + " (SEQLAB_REQUIRE_BROWSER is set, so this is a failure, not a skip)",
                    pytrace=False)
    pytest.skip(message)


@pytest.fixture(autouse=True)
def _no_stale_evidence(request):
    from lab_pages import EVIDENCE, evidence_name
    for old in EVIDENCE.glob(f"{evidence_name(request.node.nodeid)}.*"):
        old.unlink()


@pytest.fixture(scope="session")
def site_npm_packages() -> Path:
    """``node_modules`` with the HTML edition's MathJax and axe-core. `make test` installs them before the
    network goes off (course.npm_packages); the tests themselves cannot."""
    modules = NPM_DIR / "node_modules"
    missing = [name for name in ("mathjax", "axe-core") if not (modules / name).exists()]
    if missing:
        _unavailable(f"the HTML edition's npm packages {missing} are not in {NPM_DIR}",
                     "run `python3 course.py site` once (it needs npm, from Node.js)")
    return modules


@pytest.fixture(scope="session")
def chromium() -> str:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _unavailable("the Python package playwright is not installed")
    path = find_chromium()
    if path is None:
        _unavailable("no Chromium found (looked for $SEQLAB_CHROMIUM, chromium, chromium-browser)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    """A running JupyterLab: where it is, what it serves, and its REST API."""

    url: str                # http://127.0.0.1:PORT
    token: str
    root: Path              # the temporary copy of notebooks/ it serves
    log: Path
    process: subprocess.Popen

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(f"{self.url}/api/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shut_down_kernels_of(self, notebook: str) -> int:
        """Delete the sessions (and so the kernels) of ``notebook``; returns how many there were."""
        sessions = [s for s in self.api("sessions") if s.get("path") == notebook]
        for session in sessions:
            self.api(f"sessions/{session['id']}", method="DELETE")
        return len(sessions)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _write_settings(settings: Path) -> None:
    """The course's JupyterLab overrides (seqlab.notebook_rules.LAB_OVERRIDES), as user settings."""
    for name, text in lab_settings_files().items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(text)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to JupyterLab (it shuts its kernels down), then SIGKILL to its process group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)     # the group we created: the server and its kernels
    except (ProcessLookupError, PermissionError):
        pass
    process.wait(timeout=15)


@pytest.fixture(scope="module")
def lab(chromium, tmp_path_factory) -> Lab:
    base = tmp_path_factory.mktemp("lab")
    root = base / "notebooks"
    shutil.copytree(ROOT / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    config = base / "jupyter"
    _write_settings(config / "lab-settings")
    env = {**os.environ,
           "JUPYTER_CONFIG_DIR": str(config / "config"),
           "JUPYTER_RUNTIME_DIR": str(config / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(config / "lab-settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(config / "workspaces"),
           "IPYTHONDIR": str(config / "ipython")}
    token, port = secrets.token_hex(16), _free_port()
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
               "--LabApp.expose_app_in_browser=True"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")              # JupyterLab refuses root without it
    log = base / "jupyterlab.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    server = Lab(f"http://127.0.0.1:{port}", token, root, log, process)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"JupyterLab exited with code {process.returncode} before answering; its log:\n"
                            f"{server.log_tail()}", pytrace=False)
            try:
                server.api("status")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {SERVER_START_TIMEOUT_S} s waiting for JupyterLab to answer on "
                            f"{server.url}/api/status; its log:\n{server.log_tail()}", pytrace=False)
            time.sleep(0.25)
        yield server
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True,
                                             args=["--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()
