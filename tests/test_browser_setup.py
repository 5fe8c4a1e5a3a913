"""The real-browser tests skip cleanly without Chromium, except in CI, where that is a failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import course

ROOT = Path(__file__).resolve().parent.parent


def _run_browser_tests(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
                           "tests/browser", "-p", "no:xdist"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SEQLAB_CHROMIUM": "/nonexistent/chromium", **env})


def test_without_chromium_the_browser_tests_skip_with_the_install_command():
    result = _run_browser_tests(SEQLAB_REQUIRE_BROWSER="")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "skipped" in out and course.BROWSER_INSTALL_HINT in out, out


def test_without_chromium_the_browser_tests_fail_where_required():
    result = _run_browser_tests(SEQLAB_REQUIRE_BROWSER="1")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "SEQLAB_REQUIRE_BROWSER is set" in out, out


def test_ci_requires_the_browser_tests_and_installs_chromium():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert "export SEQLAB_REQUIRE_BROWSER=1" in lines
    assert lines.index("export SEQLAB_REQUIRE_BROWSER=1") < lines.index("make test")
    assert course.BROWSER_DEBIAN_PACKAGES == ["chromium", "chromium-driver"]
