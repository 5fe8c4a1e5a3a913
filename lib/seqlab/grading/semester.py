"""The semester's gradebook from each notebook's records, and the files an LMS imports.

:func:`semester_table` reads ``GRADES/NN-topic/records/*.json`` (what ``course.py grade`` wrote), applies the
late policy to submissions the LMS marked late, then the instructor's overrides (a CSV kept apart from the
records, so regrading never erases a decision), and gives one row per student. :func:`canvas_import` fills
the instructor's own Canvas gradebook export with those scores (students matched by SIS user id, SIS login
or Canvas id; the unmatched listed), :func:`moodle_import` writes Moodle's grade-import CSV (by email), and
:func:`gradescope_results` one student's ``results.json`` in Gradescope's autograder format.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from seqlab.grading.reports import safe_cell


@dataclass
class SemesterRow:
    student: str
    scores: dict[str, float] = field(default_factory=dict)      # notebook -> score after policy and overrides
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return round(sum(self.scores.values()), 4)


def read_overrides(path: Path | None) -> dict[tuple[str, str], tuple[float, str]]:
    """``student,notebook,score,reason`` rows: the score replaces the graded one, whatever a regrade gives."""
    if path is None:
        return {}
    with open(path, newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle))
    missing = {"student", "notebook", "score"} - set(rows[0] if rows else {"student", "notebook", "score"})
    if missing:
        raise ValueError(f"{path}: the overrides need the columns student, notebook, score (and reason); "
                         f"missing {', '.join(sorted(missing))}")
    return {(r["student"].strip(), r["notebook"].strip()): (float(r["score"]), (r.get("reason") or "").strip())
            for r in rows}


def semester_table(grades: Path, *, late_penalty: float = 0.0,
                   overrides: dict[tuple[str, str], tuple[float, str]] | None = None,
                   roster: dict[str, dict[str, str]] | None = None) -> tuple[list[str], dict[str, float], list[SemesterRow]]:
    """(notebooks, their maximum scores, one row per student), sorted; ``late_penalty`` is the fraction of a
    late submission's score taken off (0.1: a tenth)."""
    if not 0 <= late_penalty <= 1:
        raise ValueError(f"the late penalty is a fraction between 0 and 1, got {late_penalty}")
    overrides = overrides or {}
    notebooks, maxima, rows = [], {}, {}
    for folder in sorted(p for p in grades.iterdir() if (p / "records").is_dir()):
        notebooks.append(folder.name)
        for record_path in sorted((folder / "records").glob("*.json")):
            record = json.loads(record_path.read_text(encoding="utf-8"))
            maxima[folder.name] = record["max_score"]
            row = rows.setdefault(record["student"], SemesterRow(record["student"]))
            score = record["score"]
            if record.get("late") and late_penalty:
                score = round(score * (1 - late_penalty), 4)
                row.notes.append(f"{folder.name}: late, {late_penalty:.0%} off")
            row.scores[folder.name] = score
    for student in roster or {}:
        rows.setdefault(student, SemesterRow(student))
    for (student, notebook), (score, reason) in overrides.items():
        if notebook not in notebooks:
            raise ValueError(f"an override names the notebook {notebook!r}, which has no grades; known: "
                             f"{', '.join(notebooks)}")
        row = rows.setdefault(student, SemesterRow(student))
        row.scores[notebook] = score
        row.notes.append(f"{notebook}: set to {score:g} by hand ({reason or 'no reason given'})")
    for row in rows.values():
        for notebook in notebooks:
            if notebook not in row.scores:
                row.scores[notebook] = 0.0
                row.notes.append(f"{notebook}: no submission")
    return notebooks, maxima, [rows[s] for s in sorted(rows)]


def semester_csv_rows(notebooks: list[str], maxima: dict[str, float], rows: list[SemesterRow]) -> list[list[str]]:
    header = ["student", *notebooks, "total", "max_total", "notes"]
    max_total = sum(maxima.get(n, 0) for n in notebooks)
    return [header] + [[safe_cell(v) for v in (r.student, *(r.scores[n] for n in notebooks), r.total, max_total,
                                               "; ".join(r.notes))] for r in rows]


# (the export's column, the roster's column); many schools use the email address as the SIS login
CANVAS_ID_COLUMNS = (("SIS User ID", "sis_id"), ("SIS Login ID", "login"), ("SIS Login ID", "email"),
                     ("ID", "canvas_id"))


def canvas_import(export: Path, notebooks: list[str], maxima: dict[str, float], rows: list[SemesterRow],
                  roster: dict[str, dict[str, str]]) -> tuple[list[list[str]], list[str]]:
    """The instructor's Canvas gradebook export with a column per notebook filled in, and the unmatched.

    A notebook's column is the export's column whose name starts with the notebook's stem (``04-lstm (1234)``),
    else a new column named after it (Canvas then creates the assignment on import). Students are matched by
    the roster's ``sis_id``, ``login`` (or ``email``) or ``canvas_id`` against the export's SIS User ID, SIS Login
    ID or ID.
    Returns (rows to write, students and export rows that matched nothing).
    """
    with open(export, newline="", encoding="utf-8-sig") as handle:
        table = list(csv.reader(handle))
    header, body = table[0], table[1:]
    points_rows = [r for r in body if r and r[0].strip() in ("Points Possible", "")]
    students = [r for r in body if r not in points_rows]
    columns = {}
    for notebook in notebooks:
        found = [i for i, name in enumerate(header) if name.startswith(notebook)]
        if found:
            columns[notebook] = found[0]
        else:
            header.append(notebook)
            columns[notebook] = len(header) - 1
    width = len(header)
    index = {}
    for export_row in students:
        for column, _ in CANVAS_ID_COLUMNS:
            if column in header and export_row[header.index(column)].strip():
                index[(column, export_row[header.index(column)].strip())] = export_row
    matched, unmatched = set(), []
    for row in rows:
        person = roster.get(row.student, {})
        target = next((index[(c, person[k])] for c, k in CANVAS_ID_COLUMNS
                       if person.get(k) and (c, person[k]) in index), None)
        if target is None:
            unmatched.append(f"{row.student}: not in the Canvas export (give sis_id, login, email or canvas_id "
                             "in the roster)")
            continue
        matched.add(id(target))
        target.extend([""] * (width - len(target)))
        for notebook, column in columns.items():
            target[column] = f"{row.scores[notebook]:g}"
    for points in points_rows:
        points.extend([""] * (width - len(points)))
        for notebook, column in columns.items():
            points[column] = f"{maxima.get(notebook, 0):g}"
    unmatched += [f"{r[0]}: in the Canvas export, graded nothing" for r in students if id(r) not in matched]
    out = [header] + [r + [""] * (width - len(r)) for r in points_rows + students]
    return [[safe_cell(v) for v in r] for r in out], unmatched


def moodle_import(notebooks: list[str], rows: list[SemesterRow], roster: dict[str, dict[str, str]]) -> tuple[list[list[str]], list[str]]:
    """Moodle's grade import (Grades → Import → CSV): an ``Email address`` column to map users, a column per
    notebook. Students without an email in the roster are listed, not written."""
    out, unmatched = [["Email address", *notebooks]], []
    for row in rows:
        email = roster.get(row.student, {}).get("email", "")
        if not email:
            unmatched.append(f"{row.student}: no email in the roster")
            continue
        out.append([safe_cell(v) for v in (email, *(f"{row.scores[n]:g}" for n in notebooks))])
    return out, unmatched


def gradescope_results(record: dict) -> dict:
    """One record as Gradescope's autograder ``results.json``: a test per exercise, the checker's words as
    its output (hidden cases' inputs never appear: the record does not hold them)."""
    tests = []
    for name, ex in record["exercises"].items():
        failures = [c for c in ex["cases"] if c["status"] != "passed"]
        output = ex.get("message") or ""
        if failures:
            first = failures[0]
            output += ("\n" if output else "") + (f"{'a hidden check' if first['hidden'] else first.get('what')}: "
                                                  f"{first['status']}" + (f". Hint: {first['hint']}" if first.get("hint") else ""))
        tests.append({"name": name, "score": ex["score"], "max_score": ex["points"], "output": output or "passed",
                      "visibility": "visible"})
    return {"score": record["score"], "tests": tests,
            "output": f"Graded by seqlab's sandboxed grader (isolation: {record['isolation']})."}
