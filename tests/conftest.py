"""Fixtures shared by the unit tests (tests/browser has its own conftest.py)."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(autouse=True)
def _matplotlib_as_the_test_found_it():
    """Give the next test matplotlib as this one found it: its settings back, and no pyplot figure left open.

    seqlab.notebook.setup() changes rcParams for the whole process (as a notebook wants); without this, a test
    that calls it changes the figures of every later test on the same xdist worker (the course style hides
    the top and right spines, which a layered-figure test counts), so results depended on test order. And a
    later test that checks its own redraws leak nothing (``plt.get_fignums() == []``) must not see another
    test's figure.
    """
    import matplotlib

    with matplotlib.rc_context():
        yield
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
