"""Every notebook's exercises as the release and the grader will meet them, run here in `make test` (CI's grading
stage repeats the round trip in the sandbox): the registry and the notebook agree on which exercises there are,
each build exercise has its Solution fold where the release looks for it, and the perfect student's answer, read
back the grader's way (seqlab.grading.submissions.answer_plan) and run in a fresh namespace, passes check() on the
public cases, while the untouched release's answer is "not written"."""

from __future__ import annotations

import ast

import pytest
from grading_helpers import NOTEBOOKS, course_notebook, perfect, student_release

from seqlab import manifest
from seqlab.exercises import EXERCISES, check, exercises_of, layout
from seqlab.grading.submissions import answer_plan
from seqlab.notebook_rules import teaching_cells

WITH_EXERCISES = [p.stem for p in NOTEBOOKS if exercises_of(p.stem)]


def test_every_exercise_belongs_to_a_notebook_of_the_manifest():
    assert all(ex.notebook in range(len(manifest.NOTEBOOKS)) for ex in EXERCISES.values())
    assert len(WITH_EXERCISES) >= 17


@pytest.mark.parametrize("stem", [p.stem for p in NOTEBOOKS])
def test_the_registry_and_the_notebook_agree_on_its_exercises(stem):
    cells = teaching_cells(course_notebook(stem)["cells"])
    called = list(dict.fromkeys(name for cell in cells for name in layout.checked_in(cell)))
    registered = list(exercises_of(stem))
    unregistered = [name for name in called if name not in registered]
    uncalled = [name for name in registered if name not in called]
    assert not unregistered, f"{stem} checks {unregistered}, which no exercise module of notebook {stem[:2]} registers"
    assert not uncalled, f"{stem} registers {uncalled} (nb{stem[:2]}_*.py), but no cell of the notebook checks them"


def _run_plan(plan) -> object:
    """What the grader's child does with an answer plan, here, without the sandbox: the student's function."""
    namespace: dict = {"__name__": "__main__", "check": lambda *args, **kwargs: None}
    for line in plan.imports:
        exec(compile(line, "<import>", "exec"), namespace)
    for number, source in enumerate(plan.cells, start=1):
        exec(compile(source, f"<answer cell {number}>", "exec"), namespace)
    return eval(compile(plan.target, "<answer>", "eval"), namespace)


@pytest.mark.parametrize("stem", WITH_EXERCISES)
def test_each_build_exercise_has_its_solution_fold_and_it_passes_read_back_the_graders_way(stem):
    cells = teaching_cells(course_notebook(stem)["cells"])
    best, blank = perfect(stem), student_release(stem)
    for name in layout.in_notebook_order(cells, exercises_of(stem)):
        ex = EXERCISES[name]
        if ex.is_prediction:
            made = _run_plan(answer_plan(best, name))
            assert made(*ex.cases[0].args) is not None, f"{stem}: {name} not made"
            continue
        code = layout.solution_code(cells, name)
        assert code is not None, (f"{stem}: {name} has no Solution fold (<details><summary>Solution ...```python) in "
                                  f"the {layout.FOLD_WINDOW} cells after its answer cell {layout.answer_cell(cells, name)}")
        ast.parse(code)
        plan = answer_plan(best, name)
        assert plan.problem is None, f"{stem}: {name}: {plan.problem}"
        try:
            function = _run_plan(plan)
        except NameError as err:
            pytest.fail(f"{stem}: {name}'s solution is not self-contained: {err} (the grader runs only its cell)")
        if ex.measured is None:
            result = check(name, function)
            assert result, f"{stem}: {name}'s folded solution fails its own check:\n{result!r}"
        untouched = answer_plan(blank, name)
        assert untouched.problem is None, f"{stem}: {name} in the release: {untouched.problem}"
        with pytest.raises(NotImplementedError):
            _run_plan(untouched)(*ex.cases[0].args)


def _globals_used(function, depth: int = 1) -> set[str]:
    """The global names ``function`` (its nested code too) and, ``depth`` levels down, its module's helpers use."""
    names, codes = set(), [function.__code__]
    while codes:
        code = codes.pop()
        names |= set(code.co_names)
        codes += [c for c in code.co_consts if hasattr(c, "co_names")]
    if depth:
        for name in list(names):
            helper = function.__globals__.get(name)
            if callable(helper) and getattr(helper, "__module__", None) == function.__module__ and hasattr(helper, "__code__"):
                names |= _globals_used(helper, depth - 1)
    return names


def _texts(value) -> list[str]:
    if isinstance(value, str):
        return [value] if " " in value else []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _texts(item)]
    return []


@pytest.mark.parametrize("name", [n for n, ex in EXERCISES.items() if ex.diagnose is not None])
def test_the_catalogue_holds_every_diagnosis_a_table_of_mistakes_gives(name):
    """The instructor notes read catalogue(name); a diagnosis drawn from a *_MISTAKES table must be in it."""
    from seqlab.exercises import catalogue

    ex = EXERCISES[name]
    tables = [t for t in _globals_used(ex.diagnose) if t.endswith("MISTAKES")]
    missing = [text for t in tables for text in _texts(ex.diagnose.__globals__[t]) if text not in catalogue(name)]
    assert not missing, f"{name}: diagnoses in {tables} that its entry's mistakes= leaves out: {missing[:2]}"


def test_the_instructor_notes_list_the_gru_checkers_nine_table_diagnoses():
    from seqlab.exercises import nb05_gru
    from seqlab.grading.plan import instructor_notes

    notes = instructor_notes(NOTEBOOKS[0].parent / "05-gru.ipynb")
    assert len(nb05_gru._GRU_MISTAKES) == 9 and all(hint in notes for _, hint in nb05_gru._GRU_MISTAKES)


def _fingerprint(args: tuple) -> tuple:
    import torch

    def one(a):
        a = a.double() if isinstance(a, torch.Tensor) else a
        return (tuple(a.shape), round(float(a.sum()), 6), round(float(abs(a).sum()), 6),
                round(float((a * a).sum()), 6)) if hasattr(a, "shape") else repr(a)
    return tuple(one(a) for a in args)


@pytest.mark.parametrize("name", [n for n, ex in EXERCISES.items() if ex.hidden is not None])
def test_a_hidden_case_factory_gives_new_shapes_that_the_reference_answers(name):
    """Each hidden case has shapes no public case has (values, where the inputs are plain numbers or text); the
    reference passes it, and an answer that memorised the public cases' outputs passes every public check and
    fails every hidden case."""
    from seqlab.exercises import expected_value, judge

    ex = EXERCISES[name]
    hidden = list(ex.hidden(20261202))
    assert hidden, name
    shapes = [tuple(getattr(a, "shape", ()) for a in c.args) for c in ex.cases]
    if any(any(shape) for shape in shapes):
        assert all(tuple(getattr(a, "shape", ()) for a in c.args) not in shapes for c in hidden), name
    else:
        assert not {_fingerprint(c.args) for c in hidden} & {_fingerprint(c.args) for c in ex.cases}, name
    assert check(name, ex.reference)
    expected = [expected_value(ex, (), case) for case in hidden]
    assert all(judge(ex, (), case, ex.reference(*case.args), e).passed for case, e in zip(hidden, expected))
    memorised = {_fingerprint(c.args): ex.reference(*c.args) for c in ex.cases}
    first = next(iter(memorised.values()))

    def fitted(*args):
        return memorised.get(_fingerprint(args), first)
    assert check(name, fitted)
    assert not any(judge(ex, (), case, fitted(*case.args), e).passed for case, e in zip(hidden, expected))
