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
