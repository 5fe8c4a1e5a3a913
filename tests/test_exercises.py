"""Every exercise's reference passes its own checker, and each notebook asks for its exercises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from seqlab.exercises import EXERCISES, NOTEBOOK_MODULES, check, exercises_of, plug_in

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


UNMEASURED = sorted(name for name, ex in EXERCISES.items() if ex.measured is None)
MEASURED = sorted(name for name, ex in EXERCISES.items() if ex.measured is not None)   # solutions: in test_exercises_nbNN


@pytest.mark.parametrize("name", UNMEASURED)
def test_reference_solution_passes_and_unfinished_work_is_named(name):
    # checking leaves torch's global generator where it was: notebooks seed once and then draw, and a checker
    # that drew from it (or reseeded it) would shift every later random number of the notebook
    state = torch.get_rng_state().clone()
    assert check(name, EXERCISES[name].reference)
    assert torch.equal(state, torch.get_rng_state()), f"checking {name} moved torch's global generator"

    def unfinished(*args):
        raise NotImplementedError

    result = check(name, unfinished)
    unfinished_says = "no prediction yet" if EXERCISES[name].is_prediction else "not written yet"
    assert not result and unfinished_says in repr(result)
    assert torch.equal(state, torch.get_rng_state()), f"checking unfinished work on {name} moved the generator"


@pytest.mark.parametrize("module", NOTEBOOK_MODULES)
def test_each_exercise_module_belongs_to_a_notebook_that_checks_all_of_its_exercises(module):
    number = module[2:4]
    (notebook,) = NOTEBOOKS.glob(f"{number}-*.ipynb")
    code = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code")
    names = exercises_of(module[:4])
    assert names, f"{module} registers no exercise"
    for name in names:
        assert f'check("{name}"' in code, f"{notebook.name} never calls check({name!r}, ...)"


@pytest.mark.parametrize("name", MEASURED)
def test_a_prediction_checked_without_its_measurement_says_which_cell_to_run_and_what_to_pass(name):
    measured = EXERCISES[name].measured
    with pytest.raises(TypeError) as error:
        check(name, lambda: None)
    assert f"run {measured.where}, then pass measured={measured.what}" in str(error.value)
    with pytest.raises((TypeError, ValueError), match=f"^{name}: the measurement does not fit .*; run "):
        check(name, lambda: None, measured="a string, not a measurement")


def test_an_exercise_without_a_measurement_refuses_one():
    with pytest.raises(TypeError, match=r"perplexity is checked without a measurement: call check\('perplexity', "):
        check("perplexity", lambda *args: 1.0, measured=(0.5, 0.5))


def test_unknown_exercise_lists_the_known_ones():
    with pytest.raises(KeyError, match="no exercise named 'nope'; known: "):
        check("nope", print)


def test_importing_the_exercises_leaves_torchs_global_generator_alone():
    """Notebooks seed once and then draw; an exercise module that reseeded or drew at import would shift
    every later random number of the notebook that imports it. (Checking is covered exercise by exercise
    above; a fresh process here, since this process has imported them long ago.)"""
    import importlib
    import subprocess
    import sys

    code = ("import torch; torch.manual_seed(0); s = torch.get_rng_state().clone(); "
            "import seqlab.exercises; "
            "assert torch.equal(s, torch.get_rng_state()), 'the global generator moved'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    importlib.import_module("seqlab.exercises")


PREDICTIONS = sorted(name for name, ex in EXERCISES.items() if ex.is_prediction)


@pytest.mark.parametrize("name", PREDICTIONS)
@pytest.mark.parametrize("not_made", ["None", "NotImplementedError"])
def test_a_prediction_not_yet_made_gets_no_answer_and_no_hint_and_nothing_is_measured(name, not_made, monkeypatch):
    """The answer is revealed only after a prediction: the checker neither measures nor prints anything of it."""
    import dataclasses

    from seqlab.exercises import _core

    def measurement_taken(*args):
        raise AssertionError(f"{name}: the checker measured before a prediction was made")

    exercise = EXERCISES[name]
    accept_any = None if exercise.measured is None else dataclasses.replace(exercise.measured, parse=lambda v: v)
    monkeypatch.setitem(_core.EXERCISES, name, dataclasses.replace(exercise, reference=measurement_taken,
                                                                    diagnose=measurement_taken, measured=accept_any))

    def no_prediction(*args):
        if not_made == "None":
            return None
        raise NotImplementedError

    result = check(name, no_prediction, measured=None if accept_any is None else "the notebook's measurement")
    text = repr(result)
    assert not result and text.startswith(f"… {name}: no prediction yet.")
    for giveaway in ("should be", "Hint", exercise.hint, "FAIL"):
        assert giveaway not in text, f"{name}: {giveaway!r} in the message for a prediction not made: {text}"


def test_every_exercise_belongs_to_exactly_one_notebook():
    """exercises_of() goes by the module that registered an exercise, not by where its reference lives:
    bptt_step's reference is seqlab.gradients.bptt_step, and notebook 3's final cell must still check it."""
    owners = {name: [m for m in NOTEBOOK_MODULES if name in exercises_of(m[:4])] for name in EXERCISES}
    assert all(len(found) == 1 for found in owners.values()), {n: f for n, f in owners.items() if len(f) != 1}
    assert "bptt_step" in exercises_of("nb03")


def test_plug_in_runs_the_students_function_once_written_and_the_reference_until_then():
    reference = EXERCISES["gru_cell"].reference

    def unwritten(*args):
        raise NotImplementedError

    def crashes(*args):
        raise IndexError("oops")

    def keeps_the_old_state(x, h, *weights):          # a mistake check() catches
        return h.clone()

    for fn, why in [(unwritten, "not written yet"), (42, "not written yet"), (crashes, "raised IndexError")]:
        plugged = plug_in("gru_cell", fn)
        assert plugged.fn is reference and not plugged.yours and why in plugged.label
    right = plug_in("gru_cell", reference)
    assert right.yours and right.passed and right.label == "your gru_cell"
    wrong = plug_in("gru_cell", keeps_the_old_state)
    assert wrong.fn is keeps_the_old_state and wrong.yours and not wrong.passed and "mistake" in wrong.label


def test_plug_in_refuses_a_prediction_and_an_unknown_name():
    prediction = next(name for name, ex in EXERCISES.items() if ex.is_prediction)
    with pytest.raises(ValueError, match="only a function exercise"):
        plug_in(prediction, lambda: 1.0)
    with pytest.raises(KeyError, match="no exercise named"):
        plug_in("no_such_exercise", lambda: 1.0)
