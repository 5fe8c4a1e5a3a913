"""Fixtures shared by the unit tests (tests/browser has its own conftest.py)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def two_threads():
    """Run the test on 2 torch threads, as the recorded figures were measured, then restore the setting.

    Re-measured losses depend on the order of float additions, which depends on the thread count;
    setting it for the whole process would change every later test's arithmetic too.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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
