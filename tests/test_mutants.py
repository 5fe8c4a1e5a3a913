"""scripts/mutants.py (plant a known bug in a copy of the library, see which tests catch it) cannot rot: every
mutant's text is still found exactly once, and one mutant is planted and caught for real."""

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
    assert text.count(mutant.old) == 1, f"update {mutant.name} in scripts/mutants.py"


def test_a_planted_mutant_is_caught_by_the_tests():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutants.py"), "causal-mask-shifted", "--",
                          "tests/test_masks.py"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "SURVIVED" not in run.stdout and "causal-mask-shifted" in run.stdout
