"""The student release (scripts/release.py, `python3 course.py release`): no solutions, no answers, marked
answer cells, a manifest, and the same bytes every time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import release
from seqlab.exercises import NOTEBOOK_MODULES, exercises_of

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    release.release(NOTEBOOKS, out / "student", out / "solutions")
    return out


def test_the_release_is_byte_identical_when_repeated(released, tmp_path):
    release.release(NOTEBOOKS, tmp_path / "student", tmp_path / "solutions")
    for kind in ("student", "solutions"):
        names = sorted(p.name for p in (released / kind).iterdir())
        assert names == sorted(p.name for p in (tmp_path / kind).iterdir()) and "manifest.json" in names
        for name in names:
            assert (released / kind / name).read_bytes() == (tmp_path / kind / name).read_bytes(), (kind, name)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_a_student_notebook_has_no_solution_no_revealed_measurement_and_no_final_answers(released, path):
    course = json.loads(path.read_text())
    student = json.loads((released / "student" / path.name).read_text())
    text = json.dumps(student)
    assert "<summary>Solution" not in text
    assert len(student["cells"]) == len(course["cells"]) - 1              # the final assertions are left out
    assert "".join(student["cells"][-1]["source"]) == "".join(course["cells"][-2]["source"])
    for cell in student["cells"]:
        if "reveal" in cell.get("metadata", {}).get("tags", []):
            assert cell["outputs"] == [] and cell["execution_count"] is None
    assert 'lambda: {"alibi"}' not in text                                 # notebook 11's final cell held it
    assert (released / "solutions" / path.name).read_text() == path.read_text()


@pytest.mark.parametrize("module", NOTEBOOK_MODULES)
def test_every_exercise_is_listed_and_its_answer_cell_marked(released, module):
    (path,) = [p for p in NOTEBOOKS if p.name[:2] == module[2:4]]
    student = json.loads((released / "student" / path.name).read_text())
    manifest = json.loads((released / "student" / "manifest.json").read_text())
    listed = manifest["notebooks"][path.name]["exercises"]
    assert set(listed) == set(exercises_of(module[:4])) and all(v == {"points": 1.0} for v in listed.values())
    marked = [c["metadata"]["seqlab"]["exercise"] for c in student["cells"] if "seqlab" in c.get("metadata", {})]
    assert set(marked) == set(listed)
    assert manifest["kind"] == "student" and len(manifest["commit"]) in (7, 40) or manifest["commit"] == "unknown"


def test_the_command_line_refuses_to_write_over_the_course(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "release.py"), "--out", str(ROOT / "notebooks")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "must not be the course's own notebooks/" in run.stdout
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "release.py"), "02", "--out", str(tmp_path)],
                         capture_output=True, text=True)
    assert run.returncode == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["02-rnn.ipynb", "manifest.json"]


def test_the_html_edition_can_be_staged_from_a_release_without_any_solution(released, tmp_path, monkeypatch):
    import build_site
    mathjax = tmp_path / "mathjax"
    (mathjax / "es5").mkdir(parents=True)                 # the build copies MathJax; its content does not matter here
    monkeypatch.setattr(build_site, "npm_package", lambda name: mathjax)
    count, _ = build_site.stage(tmp_path / "src", released / "student", release=True)
    assert count == len(NOTEBOOKS)
    staged = "".join(p.read_text() for p in (tmp_path / "src" / "notebooks").glob("*.ipynb"))
    assert "<summary>Solution" not in staged and release.POSTED_LATER in staged
    assert build_site.SOLUTIONS_LATER in (tmp_path / "src" / "index.md").read_text()


def test_an_exercise_checked_with_single_quotes_is_found_by_the_release_and_the_grader():
    from seqlab.exercises import layout
    from seqlab.grading import submissions

    def code(source):
        return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}

    cells = [code("import torch"), code("def my_cell(x):\n    return x\n"), code("check('lstm_cell', my_cell)\n"),
             code('check( "split_lstm_weights", my_cell)'), code("check(\"predict_rnn_horizon\", lambda: 3)"),
             {"cell_type": "markdown", "metadata": {}, "source": "# the end"}]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    assert [layout.checked_in(c) for c in cells[2:5]] == [["lstm_cell"], ["split_lstm_weights"], ["predict_rnn_horizon"]]
    student, exercises = release.student_notebook(nb, "04-lstm")
    assert exercises == ["lstm_cell", "split_lstm_weights", "predict_rnn_horizon"]
    assert student["cells"][2]["metadata"]["seqlab"] == {"exercise": "lstm_cell"}
    assert layout.answer_cell(cells, "lstm_cell") == 2      # unmarked: found by its check call
    plan = submissions.answer_plan(nb, "lstm_cell")
    assert plan.problem is None and plan.target == "my_cell" and plan.imports == ("import torch",)


def test_single_quotes_and_an_open_fold_are_released_like_the_usual_form():
    """The fold rule and the prediction rule read the cells as the grader does: either quote, <details open>."""
    from seqlab.exercises import layout

    path = next(p for p in NOTEBOOKS if p.name.startswith("04-"))
    usual = json.loads(path.read_text())
    changed = json.loads(path.read_text())
    for cell in changed["cells"]:
        text = "".join(cell["source"])
        text = text.replace('check("predict_rnn_horizon"', "check('predict_rnn_horizon'")
        cell["source"] = text.replace("<details>\n<summary>Solution", "<details open>\n<summary>Solution")
    assert "<details open>" in json.dumps(changed) and "check('predict_rnn_horizon'" in json.dumps(changed)
    assert layout.solution_code(changed["cells"], "lstm_cell") == layout.solution_code(usual["cells"], "lstm_cell")
    released, usual_released = (release.student_notebook(nb, "04-lstm")[0] for nb in (changed, usual))
    text = json.dumps(released)
    assert "<summary>Solution" not in text and text.count(release.POSTED_LATER) == json.dumps(usual_released).count(
        release.POSTED_LATER)
    folds = [json.dumps(nb).count("What the measurement shows") for nb in (released, usual_released)]
    assert folds[0] == folds[1] >= 1
