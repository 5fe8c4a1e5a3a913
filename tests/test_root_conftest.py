"""pytest's own selection means what pytest says: every notebook's nbval items run unless the user's ``-k``,
``-m`` or ``--deselect`` leaves them out, whatever browser test is selected beside them.

Checked on a tiny tree (two two-cell notebooks, a stand-in for a browser test class, the repository's real
root conftest loaded whole), by collection only: nothing runs. And on the repository itself: collecting a
widget notebook together with the browser tests deselects nothing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# the repository's root conftest, every hook of it, in the tiny tree
TREE_CONFTEST = f"""
import importlib.util

_spec = importlib.util.spec_from_file_location("seqlab_root_conftest", {str(ROOT / "conftest.py")!r})
_root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_root)
globals().update({{name: value for name, value in vars(_root).items() if name.startswith("pytest_")}})
"""

BROWSER_TEST = """
import pytest


@pytest.mark.browser
class TestFixture_live_figure:
    def test_widgets_in_jupyterlab(self):
        pass
"""

INI = """[pytest]
addopts = --nbval-lax -p no:cacheprovider -p no:xdist
markers = browser: a real-browser test
"""

BROWSER = "tests/browser/test_widgets_in_lab.py::TestFixture_live_figure::test_widgets_in_jupyterlab"


def _notebook(*sources: str) -> str:
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": source} for i, source in enumerate(sources)]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    # "course", not a name holding "browser": -k also matches the names of the directories from the rootdir down
    root = tmp_path_factory.mktemp("selection") / "course"
    (root / "tests" / "browser").mkdir(parents=True)
    (root / "notebooks").mkdir()
    (root / "pytest.ini").write_text(INI)
    (root / "conftest.py").write_text(TREE_CONFTEST)
    (root / "tests" / "browser" / "test_widgets_in_lab.py").write_text(BROWSER_TEST)
    (root / "notebooks" / "00-widgets.ipynb").write_text(_notebook("x = 1", "assert x == 1"))
    (root / "notebooks" / "01-other.ipynb").write_text(_notebook("y = 2", "assert y == 2"))
    return root


def _selected(tree: Path, *options: str) -> set[str]:
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *options],
                            cwd=tree, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return {line for line in result.stdout.splitlines() if "::" in line}


WIDGETS = {"notebooks/00-widgets.ipynb::Cell 0", "notebooks/00-widgets.ipynb::Cell 1"}
OTHER = {"notebooks/01-other.ipynb::Cell 0", "notebooks/01-other.ipynb::Cell 1"}


@pytest.mark.parametrize("options, expected", [
    pytest.param((), {BROWSER, *WIDGETS, *OTHER}, id="everything"),
    pytest.param(("-k", "not browser"), {*WIDGETS, *OTHER}, id="k-deselects-browser-test"),
    pytest.param(("-m", "not browser"), {*WIDGETS, *OTHER}, id="m-deselects-browser-test"),
    pytest.param(("--deselect", "tests/browser/test_widgets_in_lab.py::TestFixture_live_figure"), {*WIDGETS, *OTHER},
                 id="deselect-browser-test"),
    pytest.param(("--deselect", "tests/browser/test_widgets_in_lab.py"), {*WIDGETS, *OTHER},
                 id="deselect-browser-module"),
    pytest.param(("-k", "widgets"), {BROWSER, *WIDGETS}, id="k-selects-both"),
    pytest.param(("-k", "browser"), {BROWSER}, id="k-selects-browser-test-only"),
    pytest.param(("-k", "not other"), {BROWSER, *WIDGETS}, id="k-keeps-browser-test-and-notebook"),
])
def test_selection_is_pytests_own(tree, options, expected):
    assert _selected(tree, *options) == expected


def test_a_widget_notebook_collected_beside_the_browser_tests_keeps_its_cells():
    """The repository itself: no hook deselects a notebook's nbval items behind the user's back."""
    collected = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                                "notebooks/04-lstm.ipynb", "tests/browser/test_widgets_in_lab.py"],
                               cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert not re.search(r"\d+ deselected", collected.stdout), collected.stdout[-500:]
    cells = [line for line in collected.stdout.splitlines() if line.startswith("notebooks/04-lstm.ipynb::")]
    fixtures = [line for line in collected.stdout.splitlines() if "::TestFixture_" in line]
    assert len(cells) > 10 and len(fixtures) >= 5, collected.stdout[-1500:]
