"""Fixtures shared by the unit tests (tests/browser has its own conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _matplotlib_settings_restored():
    """Give every test matplotlib's settings back as they were before it.

    seqlab.notebook.setup() changes rcParams for the whole process (as a notebook wants); without this, a test
    that calls it changes the figures of every later test on the same xdist worker (the course style hides
    the top and right spines, which a layered-figure test counts), so results depended on test order.
    """
    import matplotlib

    with matplotlib.rc_context():
        yield


@pytest.fixture(autouse=True)
def _no_figure_left_for_the_next_test():
    """Close, after each test, the pyplot figures it left open: a later test on the same xdist worker that
    checks its own redraws leak nothing (``plt.get_fignums() == []``) must not see another test's figure."""
    yield
    import sys

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
