"""The root conftest's one-run-per-widget-notebook rule respects pytest's own selection.

A widget notebook's nbval items are left out only when its browser test is still selected after ``-k``,
``-m`` and ``--deselect``. Checked on a tiny tree (a two-cell notebook, a stand-in browser test class,
the root conftest's hook with a browser taken as present), by collection only: nothing runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TREE_CONFTEST = f"""
import importlib.util

_spec = importlib.util.spec_from_file_location("seqlab_root_conftest", {str(ROOT / "conftest.py")!r})
_root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_root)
_root._browser_can_run = lambda: True
pytest_collection_modifyitems = _root.pytest_collection_modifyitems
"""

BROWSER_TEST = """
import pytest


@pytest.mark.browser
class TestNotebook_00_tiny:
    notebook = "00-tiny.ipynb"

    def test_widgets_in_jupyterlab(self):
        pass
"""

INI = """[pytest]
addopts = --nbval-lax -p no:cacheprovider -p no:xdist
markers = browser: a real-browser test
"""

BROWSER = "tests/browser/test_widgets_in_lab.py::TestNotebook_00_tiny::test_widgets_in_jupyterlab"


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
    (root / "notebooks" / "00-tiny.ipynb").write_text(_notebook("x = 1", "assert x == 1"))
    (root / "notebooks" / "01-other.ipynb").write_text(_notebook("y = 2"))
    return root


def _selected(tree: Path, *options: str) -> set[str]:
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *options],
                            cwd=tree, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return {line for line in result.stdout.splitlines() if "::" in line}


TINY = {"notebooks/00-tiny.ipynb::Cell 0", "notebooks/00-tiny.ipynb::Cell 1"}
OTHER = {"notebooks/01-other.ipynb::Cell 0"}


@pytest.mark.parametrize("options, expected", [
    pytest.param((), {BROWSER, *OTHER}, id="browser-test-selected"),
    pytest.param(("-k", "00"), {BROWSER}, id="k-selects-both"),
    pytest.param(("-k", "not browser"), {*TINY, *OTHER}, id="k-deselects-browser-test"),
    pytest.param(("-m", "not browser"), {*TINY, *OTHER}, id="m-deselects-browser-test"),
    pytest.param(("--deselect", "tests/browser/test_widgets_in_lab.py::TestNotebook_00_tiny"), {*TINY, *OTHER},
                 id="deselect-browser-test"),
    pytest.param(("-k", "not other"), {BROWSER}, id="k-keeps-browser-test"),
])
def test_widget_notebook_cells_are_left_out_only_when_its_browser_test_stays_selected(tree, options, expected):
    assert _selected(tree, *options) == expected
