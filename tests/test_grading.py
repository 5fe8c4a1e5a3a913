"""The grader's trusted side: reading submissions, the value codec, the same diagnosis as check(), the
gradebook, feedback and class report, and the round trip from the release (a perfect student gets every
point, the untouched release none).

The round trip runs 01, 04 and 16 here; ``SEQLAB_GRADING_FULL=1`` (CI's grading stage) runs every notebook.
"""

from __future__ import annotations

import csv
import inspect
import io
import json
import os
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from grading_helpers import NOTEBOOKS, ROOT, as_bytes, perfect, release, student_release, with_answers
from seqlab.exercises import EXERCISES, check
from seqlab.grading import cli, codec, grader, plan, reports, sandbox, semester
from seqlab.grading.submissions import Submission, answer_plan, collect, parse_notebook

ROUND_TRIP_EVERY_NOTEBOOK = os.environ.get("SEQLAB_GRADING_FULL") == "1"
ROUND_TRIP = [p.stem for p in NOTEBOOKS
              if p.stem[:2] != "00" and (ROUND_TRIP_EVERY_NOTEBOOK or p.stem[:2] in ("01", "04", "16"))]


def submission(nb: dict, student: str = "s") -> Submission:
    return Submission(student, f"{student}.ipynb", "0", parse_notebook(as_bytes(nb)))


# -- the codec: plain data only ------------------------------------------------------------------------

@pytest.mark.parametrize("value", [None, True, 3, 2**80, 0.1, float("inf"), "text", [1, (2.5, "a")],
                                   {"ab": 2, ("a", 1): [None]}, {1, 2}, torch.arange(6.0).reshape(2, 3),
                                   torch.tensor([True, False]), torch.ones(2, dtype=torch.bfloat16),
                                   np.eye(2), torch.empty(0, 3)])
def test_a_value_comes_back_as_it_was_sent(value):
    back = codec.decode(json.loads(json.dumps(codec.encode(value))))
    if isinstance(value, torch.Tensor):
        assert type(back) is torch.Tensor and back.dtype == value.dtype and torch.equal(back, value)
    elif isinstance(value, np.ndarray):
        assert type(back) is np.ndarray and np.array_equal(back, value)
    else:
        assert back == value and type(back) is type(value)


def test_objects_that_lie_are_refused_or_reduced_to_their_data():
    class Same:
        def __eq__(self, other):
            return True

    class Liar(torch.Tensor):
        def __eq__(self, other):
            return True

    with pytest.raises(codec.Unreadable, match="Same"):
        codec.encode(Same())
    back = codec.decode(codec.encode(torch.zeros(2).as_subclass(Liar)))
    assert type(back) is torch.Tensor and not torch.equal(back, torch.ones(2))


@pytest.mark.parametrize("data, words", [
    (["tensor", "float32", [2, 2], "AAAA"], "does not match"),
    (["tensor", "object", [1], ""], "dtype"),
    (["ndarray", "|O", [1], ""], "dtype"),
    (["pickle", "gANdcQAu"], "malformed"),
    ("just text", "malformed"),
    (["list", [["int", "1"]] * 3_000_000], "items"),
])
def test_the_decoder_trusts_nothing(data, words):
    with pytest.raises(codec.Unreadable, match=words):
        codec.decode(data)


# -- reading submissions ------------------------------------------------------------------------------------

def test_malformed_files_are_reported_never_read_as_code(tmp_path):
    good = as_bytes(student_release("01-why-sequences"))
    (tmp_path / "ok.ipynb").write_bytes(good)
    (tmp_path / "broken.ipynb").write_text("{not json")
    (tmp_path / "old.ipynb").write_text(json.dumps({"nbformat": 3, "worksheets": []}))
    with open(tmp_path / "huge.ipynb", "wb") as handle:       # 200 MB, sparse: refused by its size
        handle.truncate(200 * 2**20)
    (tmp_path / "link.ipynb").symlink_to(tmp_path / "ok.ipynb")
    found = {s.student: s for s in collect([tmp_path])}
    assert found["ok"].notebook is not None and found["ok"].problem is None
    assert "not valid JSON" in found["broken"].problem
    assert "nbformat 3" in found["old"].problem
    assert "200 MB" in found["huge"].problem
    assert "symbolic link" in found["link"].problem


def test_an_lms_zip_is_read_in_memory_and_its_traps_are_refused(tmp_path):
    good = as_bytes(student_release("01-why-sequences"))
    bomb = b'{"nbformat": 4, "cells": [], "x": "' + b"0" * (30 * 2**20) + b'"}'
    with zipfile.ZipFile(tmp_path / "download.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("smithjane_12345_678_01-why-sequences.ipynb", good)
        archive.writestr("doejohn_late_23456_789_01-why-sequences.ipynb", good)
        archive.writestr("../evil_34567_1_x.ipynb", good)
        archive.writestr("bomber_45678_2_x.ipynb", bomb)
        link = zipfile.ZipInfo("linker_56789_3_x.ipynb")
        link.external_attr = 0o120777 << 16
        archive.writestr(link, "/etc/passwd")
    found = {s.student: s for s in collect([tmp_path / "download.zip"], "canvas")}
    assert found["smithjane"].notebook is not None and found["smithjane"].lms_id == "12345"
    assert found["doejohn"].late
    assert "leaves the folder" in found["../evil"].problem
    assert "zip bomb" in found["bomber"].problem
    assert "link" in found["linker"].problem
    assert not list(tmp_path.glob("*.ipynb")), "nothing is extracted to disk"


def test_the_grader_finds_the_exercises_the_release_lists():
    for path in NOTEBOOKS:
        release_names = set(release.student_notebook(json.loads(path.read_text()), path.stem)[1])
        assert set(cli.exercise_points(path, None)) == release_names, path.name


def test_the_answer_plan_runs_the_defining_cell_not_the_measurement():
    plan = answer_plan(student_release("04-lstm"), "predict_rnn_horizon")
    assert plan.target == "predict_rnn_horizon"
    assert len(plan.cells) == 1 and "def predict_rnn_horizon" in plan.cells[0]
    assert "measure_rnn_horizon()" not in plan.cells[0], "the notebook's measurement is not the student's answer"
    plan = answer_plan(student_release("08-attention"), "predict_reversal_24")
    assert plan.target == "lambda: my_prediction" and "my_prediction = None" in plan.cells[0]
    missing = student_release("01-why-sequences")
    missing["cells"] = [c for c in missing["cells"] if "perplexity" not in (c.get("metadata", {}).get("seqlab") or {}).get("exercise", "")]
    assert "missing" in answer_plan(missing, "perplexity").problem


# -- the same diagnosis as check() ----------------------------------------------------------------------

def _source_of(value) -> str:
    if callable(value):
        return f"torch.{value.__name__}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_source_of(v)}" for k, v in value.items()) + "}"
    return repr(value)


def test_each_catalogued_lstm_mistake_gets_the_same_diagnosis_from_the_grader():
    from test_exercises_nb04 import LSTM_MISTAKES, make_cell
    key = grader.build_key("04-lstm", {"lstm_cell": 1.0})
    for kwargs, words in LSTM_MISTAKES:
        arguments = ", ".join(f"{k}={_source_of(v)}" for k, v in kwargs.items())
        answer = (inspect.getsource(make_cell) + f"\nlstm_cell = make_cell({arguments})\n"
                  'check("lstm_cell", lstm_cell)\n')
        outcome = grader.grade_exercise(key, "lstm_cell", with_answers("04-lstm", {"lstm_cell": answer}),
                                        limits=sandbox.Limits(seconds=60))
        in_notebook = repr(check("lstm_cell", make_cell(**kwargs)))
        first_failure = next(c for c in outcome.cases if c["status"] != "passed")
        assert words in first_failure["hint"], (kwargs, outcome.cases)
        assert f"Hint: {first_failure['hint']}" in in_notebook, (kwargs, in_notebook)


# -- the round trip ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def secret_seed(tmp_path_factory) -> Path:
    """An instructor folder whose hidden_cases.py holds only a SEED: every factory's hidden cases are graded."""
    folder = tmp_path_factory.mktemp("instructor")
    (folder / "hidden_cases.py").write_text("SEED = 20261202\n")
    return folder


@pytest.mark.parametrize("stem", ROUND_TRIP)
def test_a_perfect_student_gets_every_point_and_the_untouched_release_none(stem, secret_seed):
    points = cli.exercise_points(ROOT / "notebooks" / f"{stem}.ipynb", None)
    key = grader.build_key(stem, points, instructor=secret_seed)
    best = grader.grade_submission(key, submission(perfect(stem)))
    assert best["score"] == best["max_score"] == len(points), {
        n: (e["status"], e["message"]) for n, e in best["exercises"].items() if e["score"] != e["points"]}
    hidden = {n: [c["status"] for c in e["cases"] if c["hidden"]] for n, e in best["exercises"].items()}
    assert all(hidden[n] for n in points if EXERCISES[n].hidden), hidden
    assert not [f for f in best["flags"] if "uses" in f], best["flags"]
    blank = grader.grade_submission(key, submission(student_release(stem)))
    assert blank["score"] == 0
    assert {e["status"] for e in blank["exercises"].values()} <= {"not written", "no prediction"}


# -- the command, the gradebook, feedback and the class report -------------------------------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A class of four for notebook 01, graded through the command line with a roster."""
    base = tmp_path_factory.mktemp("class")
    subs = base / "submissions"
    subs.mkdir()
    (subs / "ada.ipynb").write_bytes(as_bytes(perfect("01-why-sequences")))
    (subs / "bob.ipynb").write_bytes(as_bytes(student_release("01-why-sequences")))
    wrong = 'def perplexity(probs):\n    return -sum(math.log(p) for p in probs) / len(probs)\ncheck("perplexity", perplexity)\n'
    (subs / "cy.ipynb").write_bytes(as_bytes(with_answers("01-why-sequences", {"perplexity": wrong})))
    (subs / "dee.ipynb").write_text("{broken")
    roster = base / "roster.csv"
    roster.write_text("student,student_id,last_name,first_name,email\nada,1,Lovelace,Ada,ada@example.org\n"
                      "bob,2,=HYPERLINK(\"http://x\"),Bob,bob@example.org\ncy,3,C,Cy,cy@example.org\n"
                      "eve,4,E,Eve,eve@example.org\n")
    out = base / "grades"
    args = [str(subs), "--notebook", "01", "--out", str(out), "--roster", str(roster), "--jobs", "2"]
    assert cli.main(["grade", *args]) == 0
    return out / "01-why-sequences", args


def test_the_gradebook_has_nbgraders_columns_and_is_safe_to_open(graded):
    folder, _ = graded
    rows = list(csv.DictReader(io.StringIO((folder / "gradebook.csv").read_text())))
    by_id = {r["student_id"]: r for r in rows}
    assert set(reports.NBGRADER_COLUMNS) <= set(rows[0])
    assert float(by_id["1"]["score"]) == 4.0 and by_id["1"]["perplexity:status"] == "passed"
    assert float(by_id["2"]["score"]) == 0 and by_id["2"]["last_name"].startswith("'=")
    assert by_id["3"]["perplexity:status"] == "failed" and by_id["3"]["perplexity:diagnosis"]
    assert by_id["4"]["status"] == "missing"
    assert by_id["dee"]["status"] == "unreadable"


def test_feedback_quotes_the_checker_and_the_class_report_counts_mistakes(graded):
    folder, _ = graded
    cy = (folder / "feedback" / f"{cli.record_name('cy')}.md").read_text()
    assert "mean negative log-likelihood" in cy and "exponentiate it" in cy
    assert "<h1>" in (folder / "feedback" / f"{cli.record_name('cy')}.html").read_text()
    report = (folder / "class-report.md").read_text()
    assert "## perplexity" in report and "(1 of 3)" in report and "exponentiate it" in report


def test_grading_resumes_and_regrades_one_student(graded, capsys):
    folder, args = graded
    before = (folder / "records" / f"{cli.record_name('ada')}.json").stat().st_mtime_ns
    assert cli.main(["grade", *args]) == 0
    assert "0 to grade" in capsys.readouterr().err
    assert (folder / "records" / f"{cli.record_name('ada')}.json").stat().st_mtime_ns == before
    assert cli.main(["grade", *args, "--student", "cy"]) == 0
    assert "1 to grade" in capsys.readouterr().err


def test_selfcheck_runs_the_graders_path_and_writes_the_file_to_hand_in(tmp_path, capsys):
    notebook = tmp_path / "01-why-sequences.ipynb"
    notebook.write_bytes(as_bytes(perfect("01-why-sequences")))
    assert cli.main(["selfcheck", str(notebook), "--out", str(tmp_path / "submit")]) == 0
    out = capsys.readouterr().out
    assert "Score: 4 / 4" in out and (tmp_path / "submit" / notebook.name).exists()


def test_safe_cell_defuses_formulas():
    assert [reports.safe_cell(v) for v in ("=1+1", "+x", "-2", "@a", "plain", 3)] == ["'=1+1", "'+x", "'-2", "'@a",
                                                                                      "plain", "3"]


# -- the semester: late policy, overrides, LMS files -----------------------------------------------------

def _record(folder: Path, student: str, score: float, *, late: bool = False) -> None:
    (folder / "records").mkdir(parents=True, exist_ok=True)
    record = {"student": student, "score": score, "max_score": 4.0, "late": late, "isolation": "test",
              "exercises": {"perplexity": {"score": score / 4, "points": 1.0, "message": "", "cases": [
                  {"hidden": True, "what": None, "status": "failed", "hint": "exponentiate it."}]}}}
    (folder / "records" / f"{student}.json").write_text(json.dumps(record))


def test_the_semester_applies_the_late_policy_then_overrides_that_survive_a_regrade(tmp_path):
    _record(tmp_path / "01-why-sequences", "ada", 4.0, late=True)
    _record(tmp_path / "01-why-sequences", "bob", 1.0)
    _record(tmp_path / "04-lstm", "ada", 3.0)
    overrides = {("bob", "01-why-sequences"): (3.5, "regraded by hand")}
    notebooks, maxima, rows = semester.semester_table(tmp_path, late_penalty=0.25, overrides=overrides)
    by = {r.student: r for r in rows}
    assert notebooks == ["01-why-sequences", "04-lstm"]
    assert by["ada"].scores == {"01-why-sequences": 3.0, "04-lstm": 3.0}
    assert by["bob"].scores == {"01-why-sequences": 3.5, "04-lstm": 0.0}
    assert any("by hand (regraded by hand)" in n for n in by["bob"].notes)
    _record(tmp_path / "01-why-sequences", "bob", 2.0)              # a regrade rewrites the record...
    _, _, rows = semester.semester_table(tmp_path, late_penalty=0.25, overrides=overrides)
    assert {r.student: r for r in rows}["bob"].scores["01-why-sequences"] == 3.5   # ...not the decision
    with pytest.raises(ValueError, match="no grades"):
        semester.semester_table(tmp_path, overrides={("bob", "99-none"): (1.0, "")})


def test_canvas_moodle_and_gradescope_files(tmp_path):
    _record(tmp_path / "04-lstm", "ada", 3.0)
    _record(tmp_path / "04-lstm", "bob", 1.0)
    notebooks, maxima, rows = semester.semester_table(tmp_path)
    export = tmp_path / "canvas.csv"
    export.write_text('Student,ID,SIS User ID,SIS Login ID,Section,04-lstm (5501)\n    Points Possible,,,,,4\n'
                      '"Lovelace, Ada",101,S1,ada1,A,\n"Ghost, G",199,S9,g9,A,\n')
    roster = {"ada": {"email": "ada1"}, "bob": {"login": "nobody", "email": "=bob@example.org"}}   # ada: by login
    table, unmatched = semester.canvas_import(export, notebooks, maxima, rows, roster)
    assert table[0][5] == "04-lstm (5501)" and table[1][5] == "4" and table[2][5] == "3"
    assert any(m.startswith("bob:") for m in unmatched) and any("Ghost" in m for m in unmatched)
    moodle, missed = semester.moodle_import(notebooks, rows, roster)
    assert moodle == [["Email address", "04-lstm"], ["ada1", "3"], ["'=bob@example.org", "1"]] and not missed
    assert semester.moodle_import(notebooks, rows, {"ada": {}})[1] == ["ada: no email in the roster",
                                                                       "bob: no email in the roster"]
    result = semester.gradescope_results(json.loads((tmp_path / "04-lstm" / "records" / "bob.json").read_text()))
    assert result["score"] == 1.0 and result["tests"][0]["output"].startswith("a hidden check: failed")


# -- the semester plan and instructor notes ----------------------------------------------------------

def test_the_schedule_skips_a_week_moves_due_dates_past_it_and_makes_a_valid_calendar():
    from datetime import date
    sessions = plan.schedule(NOTEBOOKS, date(2027, 1, 11), 14, skip=[date(2027, 3, 17)])
    assert [s.notebook for s in sessions] == [p.stem for p in NOTEBOOKS]
    lectures = {s.lecture for s in sessions}
    assert date(2027, 3, 15) not in lectures, "the skipped week has no lecture"
    assert all(s.due > s.lecture and s.due != date(2027, 3, 15) for s in sessions)
    assert max(lectures) <= date(2027, 1, 11) + (14 - 1) * (date(2027, 1, 18) - date(2027, 1, 11))
    ics = plan.schedule_ics(sessions)
    assert ics == plan.schedule_ics(sessions), "the same plan gives the same bytes"
    lines = ics.split("\r\n")
    assert lines[0] == "BEGIN:VCALENDAR" and lines[-2] == "END:VCALENDAR" and lines[-1] == ""
    assert all(len(line.encode()) <= 75 for line in lines)
    assert ics.count("BEGIN:VEVENT") == ics.count("END:VEVENT") == 2 * len(sessions)
    uids = [line for line in lines if line.startswith("UID:")]
    assert len(uids) == len(set(uids))
    with pytest.raises(ValueError, match="every week is skipped"):
        plan.schedule(NOTEBOOKS, date(2027, 1, 11), 1, skip=[date(2027, 1, 12)])


def test_instructor_notes_give_demos_polls_and_each_checkers_mistakes():
    notes = plan.instructor_notes(ROOT / "notebooks" / "04-lstm.ipynb", plan.run_times().get("04-lstm"))
    assert "## Goal" in notes and "**You need:**" in notes and "GateExplorer" in notes
    assert "`predict_rnn_horizon`" in notes and "T = 10" in notes
    assert "you returned (c_t, h_t)" in notes, "a mistake lstm_cell's checker diagnoses"
    assert "*1 point; flagged for a look if it calls LSTMCell, nn.LSTM, torch.lstm_cell, _VF; hidden cases from your" \
           " SEED.*" in notes
    assert re.search(r"runs in \d+ s", notes)


def test_predictions_can_be_graded_for_accuracy_against_the_instructors_measurement(tmp_path):
    (tmp_path / "measurements.json").write_text(json.dumps({"predict_reversal_24": [0.1, 0.9]}))
    key = grader.build_key("08-attention", {"predict_reversal_24": 1.0}, instructor=tmp_path, predictions="accuracy")
    assert not grader.graded_for_completion(key, "predict_reversal_24")
    nb = student_release("08-attention")
    defining = next(c for c in nb["cells"] if "".join(c["source"]).startswith("my_prediction = None"))
    outcomes = {}
    for guess in ("(0.1, 0.9)", "(0.9, 0.1)", "None"):
        defining["source"] = f"my_prediction = {guess}\n"
        outcomes[guess] = grader.grade_exercise(key, "predict_reversal_24", nb, limits=sandbox.Limits())
    assert outcomes["(0.1, 0.9)"].status == "passed"
    assert outcomes["(0.9, 0.1)"].status == "failed" and outcomes["(0.9, 0.1)"].cases[0]["hint"]
    assert outcomes["None"].status == "not written" and outcomes["None"].score == 0
    without = grader.build_key("08-attention", {"predict_reversal_24": 1.0}, predictions="accuracy")
    assert grader.graded_for_completion(without, "predict_reversal_24"), "no measurement: completion only"


def test_a_helper_defined_in_another_cell_is_flagged_and_explained():
    nb = with_answers("01-why-sequences", {"perplexity": 'def perplexity(probs):\n    return my_helper(probs)\n'
                                                         'check("perplexity", perplexity)\n'})
    nb["cells"].insert(3, {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                           "source": "def my_helper(probs):\n    return 1.0\n"})
    key = grader.build_key("01-why-sequences", {"perplexity": 1.0})
    outcome = grader.grade_exercise(key, "perplexity", nb, limits=sandbox.Limits())
    assert outcome.score == 0 and any("my_helper, defined outside its answer cell" in f for f in outcome.flags)
    assert "define my_helper in the answer cell" in outcome.message


def test_a_comparison_that_raises_fails_the_answer_not_the_batch(monkeypatch):
    import dataclasses

    def choke(got, expected):
        raise TypeError("cannot compare")

    monkeypatch.setitem(EXERCISES, "perplexity", dataclasses.replace(EXERCISES["perplexity"], same=choke))
    key = grader.build_key("01-why-sequences", {"perplexity": 1.0})
    answer = 'def perplexity(probs):\n    return 1.0\ncheck("perplexity", perplexity)\n'
    outcome = grader.grade_exercise(key, "perplexity", with_answers("01-why-sequences", {"perplexity": answer}),
                                    limits=sandbox.Limits())
    assert outcome.status == "failed" and outcome.score == 0 and all(c["hint"] for c in outcome.cases)


def test_one_odd_file_never_sinks_the_batch_and_every_student_keeps_their_own_record(tmp_path, capsys):
    """A 5,000-digit number in the JSON, metadata that is not a dict, an answer of 1,000 '+' terms, two
    students whose names a file system would fold together: each is graded (or read as unreadable) on its
    own row, and nobody's record, feedback or grade lands on another's."""
    subs = tmp_path / "submissions"
    (subs / "sub").mkdir(parents=True)
    good = perfect("01-why-sequences")
    (subs / "bigint.ipynb").write_text(json.dumps(good)[:-1] + ', "huge": ' + "7" * 5000 + "}")
    odd = json.loads(json.dumps(good))
    for cell in odd["cells"]:
        if cell["cell_type"] == "code":
            cell["metadata"]["seqlab"] = "oops"
    (subs / "oops.ipynb").write_text(json.dumps(odd))
    plus = "def perplexity(probs):\n    return " + " + ".join(["1"] * 1000) + '\ncheck("perplexity", perplexity)\n'
    (subs / "plus.ipynb").write_bytes(as_bytes(with_answers("01-why-sequences", {"perplexity": plus})))
    for name in ("王伟", "李娜", "sub_zed"):
        (subs / f"{name}.ipynb").write_bytes(as_bytes(good))
    (subs / "sub" / "zed.ipynb").write_bytes(as_bytes(student_release("01-why-sequences")))
    out = tmp_path / "grades"
    code = cli.main(["grade", str(subs), "--notebook", "01", "--out", str(out), "--jobs", "2"])
    folder = out / "01-why-sequences"
    records = [json.loads(p.read_text()) for p in (folder / "records").glob("*.json")]
    assert code == 0, [(r["student"], r["flags"]) for r in records if r["status"] == "grader-error"]
    rows = {r["student_id"]: r for r in csv.DictReader(io.StringIO((folder / "gradebook.csv").read_text()))}
    assert set(rows) == {"bigint", "oops", "plus", "王伟", "李娜", "sub_zed", "sub/zed"}
    assert rows["bigint"]["status"] == "unreadable"
    assert rows["oops"]["status"] == "graded" and float(rows["oops"]["score"]) == 4.0
    assert rows["plus"]["perplexity:status"] == "not found" and rows["plus"]["status"] == "graded"
    assert float(rows["王伟"]["score"]) == float(rows["李娜"]["score"]) == float(rows["sub_zed"]["score"]) == 4.0
    assert float(rows["sub/zed"]["score"]) == 0.0
    assert sorted(r["student"] for r in records) == sorted(rows)
    assert len(list((folder / "feedback").glob("*.md"))) == len(rows)


def test_a_secret_seed_gives_hidden_cases_and_an_answer_fitted_to_the_public_ones_fails(tmp_path):
    from seqlab.exercises import expected_value, judge

    (tmp_path / "hidden_cases.py").write_text("SEED = 424242\n")
    hidden = grader.load_hidden_cases(tmp_path)
    assert set(hidden) == {n for n, ex in EXERCISES.items() if ex.hidden} and len(hidden) >= 8
    (tmp_path / "hidden_cases.py").write_text("SEED = 7\n")
    assert not torch.equal(grader.load_hidden_cases(tmp_path)["lstm_cell"][0].args[0], hidden["lstm_cell"][0].args[0])
    ex, (case,) = EXERCISES["lstm_cell"], hidden["lstm_cell"]
    answers = {tuple(c.args[0].shape): ex.reference(*c.args) for c in ex.cases}
    fitted = lambda x, *rest: answers.get(tuple(x.shape), (x, x))  # noqa: E731  (memorises the public cases)
    assert check("lstm_cell", fitted)
    expected = expected_value(ex, (), case)
    assert not judge(ex, (), case, fitted(*case.args), expected).passed
    assert judge(ex, (), case, ex.reference(*case.args), expected).passed
    (tmp_path / "hidden_cases.py").write_text("SEED = '42'\n")
    with pytest.raises(ValueError, match="SEED must be an integer"):
        grader.load_hidden_cases(tmp_path)


def test_a_releases_manifest_says_what_is_graded_and_any_notebook_name_finds_it(tmp_path):
    out = tmp_path / "release"
    release.release([ROOT / "notebooks" / "04-lstm.ipynb"], out)
    listing = json.loads((out / "manifest.json").read_text())
    asked = listing["notebooks"]["04-lstm.ipynb"]["exercises"]
    del asked["split_lstm_weights"]                       # a release made before that exercise existed
    asked["lstm_cell"]["points"] = 3
    (out / "manifest.json").write_text(json.dumps(listing))
    assert {name: cli.find_course_notebook(name, out).name for name in ("4", "04", "nb04", "04-lstm")} == dict.fromkeys(
        ("4", "04", "nb04", "04-lstm"), "04-lstm.ipynb")
    assert cli.exercise_points(out / "04-lstm.ipynb", out) == {"predict_rnn_horizon": 1.0, "lstm_cell": 3.0}
    asked["lstm_cell_v0"] = {"points": 1}                   # one this checkout's checkers do not know
    (out / "manifest.json").write_text(json.dumps(listing))
    with pytest.raises(SystemExit, match="lstm_cell_v0, which this checkout's checkers do not know"):
        cli.exercise_points(out / "04-lstm.ipynb", out)
    with pytest.raises(SystemExit, match="no course notebook named '99'"):
        cli.find_course_notebook("99", out)
