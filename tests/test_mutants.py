"""scripts/mutants.py (plant a known bug in a copy of the library, see which tests catch it) cannot rot: every
mutant's text is still found exactly once, and one mutant is planted and caught for real.

This pins the exact text of one line per mutant (CONTRIBUTING §1 says so): rewriting such a line fails here until
its mutant is rewritten too. Kept on purpose: without it a mutant stops matching silently, and the next run of
the script (by hand, minutes long) is where anyone learns that the claim "the tests catch these bugs" went stale.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import mutants

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("mutant", mutants.MUTANTS, ids=lambda m: m.name)
def test_each_mutant_still_matches_the_library_exactly_once(mutant):
    text = (ROOT / "lib" / "seqlab" / mutant.file).read_text()
    assert text.count(mutant.old) == 1, (
        f"lib/seqlab/{mutant.file} has {text.count(mutant.old)} copies of mutant {mutant.name}'s line "
        f"{mutant.old!r}, not 1: rewrite its `old` and `new` in scripts/mutants.py for the new code, then "
        f"`python scripts/mutants.py {mutant.name}` shows whether the tests still catch it")


def test_a_planted_mutant_is_caught_by_the_tests():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutants.py"), "causal-mask-shifted", "--",
                          "tests/test_masks.py"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "SURVIVED" not in run.stdout and "causal-mask-shifted" in run.stdout
