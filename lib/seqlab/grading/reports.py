"""What grading writes: a gradebook CSV, a feedback file per student, and a class report of mistakes.

All three read the records :func:`seqlab.grading.grader.grade_submission` returns. A failed case's hint is
the checker's own words; a *diagnosed* hint (a mistake the checker recognised) gets an id, the first eight hex
digits of the SHA-1 of its text with the numbers left out (a case's sizes do not make another mistake), so the gradebook can name it in one cell and the class report can count it. A hidden
case's feedback gives the hint, never its inputs or expected value.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import re
from collections import Counter
from pathlib import Path

NBGRADER_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                    "raw_score", "late_submission_penalty", "score", "max_score"]
RISKY_START = ("=", "+", "-", "@", "\t", "\r", "\n")


def safe_cell(value: object) -> str:
    """A CSV cell a spreadsheet will not run as a formula (OWASP's advice: a leading quote)."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(RISKY_START) else text


def diagnosis_id(hint: str) -> str:
    """The mistake a hint names, whatever the case's sizes: digits do not count ("rows 0:4" = "rows 0:3")."""
    return hashlib.sha1(re.sub(r"\d+", "#", hint).encode("utf-8")).hexdigest()[:8]


def read_roster(path: Path | None) -> dict[str, dict[str, str]]:
    """A roster CSV with a ``student`` column (the name in the file names) and optionally ``student_id``,
    ``last_name``, ``first_name``, ``email``, ``sis_id``, ``login``; keyed by ``student``."""
    if path is None:
        return {}
    with open(path, newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle))
    if rows and "student" not in rows[0]:
        raise ValueError(f"{path}: the roster needs a 'student' column (found {', '.join(rows[0])})")
    return {row["student"].strip(): {k: (v or "").strip() for k, v in row.items() if k} for row in rows}


def _diagnoses(exercise: dict) -> list[str]:
    return sorted({diagnosis_id(c["hint"]) for c in exercise["cases"] if c.get("diagnosed") and c.get("hint")})


def gradebook_rows(records: list[dict], exercises: list[str], roster: dict[str, dict[str, str]],
                   assignment: str) -> list[list[str]]:
    """The gradebook as rows (header first): nbgrader's export columns, then ours, then three per exercise."""
    header = [*NBGRADER_COLUMNS, "isolation", "status", "flags", "source"]
    for name in exercises:
        header += [name, f"{name}:status", f"{name}:diagnosis"]
    rows = [header]
    by_student = {r["student"]: r for r in records}
    students = sorted(set(by_student) | set(roster))
    for student in students:
        person, record = roster.get(student, {}), by_student.get(student)
        status = ("missing" if record is None else "grader-error" if record.get("status") == "grader-error"
                  else "unreadable" if record.get("problem")
                  else "graded" if not roster or student in roster else "not on the roster")
        score = record["score"] if record else 0
        max_score = record["max_score"] if record else ""
        row = [assignment, "", "", person.get("student_id", student), person.get("last_name", ""),
               person.get("first_name", ""), person.get("email", ""), score, 0, score, max_score,
               record["isolation"] if record else "", status, "; ".join(record["flags"]) if record else "",
               record["source"] if record else ""]
        for name in exercises:
            ex = (record or {}).get("exercises", {}).get(name)
            row += ([ex["score"], ex["status"], " ".join(_diagnoses(ex))] if ex else [0, "missing", ""])
        rows.append([safe_cell(v) for v in row])
    return rows


def write_gradebook(path: Path, rows: list[list[str]]) -> None:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")


def feedback_markdown(record: dict, exercises: list[str] | None = None) -> str:
    """One student's feedback: the score, then each exercise (in ``exercises``' order, the notebook's) with
    the checker's words for what went wrong."""
    lines = [f"# Feedback: {record['notebook']}", "",
             f"**Score: {record['score']:g} / {record['max_score']:g}**", ""]
    if record.get("problem"):
        return "\n".join([*lines, f"Your file could not be graded: {record['problem']}."]) + "\n"
    for name in exercises or list(record["exercises"]):
        ex = record["exercises"][name]
        lines += [f"## {name}: {ex['status']} ({ex['score']:g} / {ex['points']:g})", ""]
        if ex.get("message"):
            lines += [ex["message"], ""]
        for number, case in enumerate(ex["cases"], start=1):
            if case["status"] == "passed":
                continue
            label = "a hidden check" if case["hidden"] else f"check {number} ({case.get('what')})"
            text = f"- {label}: {case['status']}"
            if case.get("detail"):
                text += f" ({case['detail']})"
            if not case["hidden"] and "got" in case:
                text += f"; got {case['got']}, expected {case['expected']}"
            if case.get("hint"):
                text += f". Hint: {case['hint']}"
            lines.append(text)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def feedback_html(markdown_text: str) -> str:
    """The feedback as a small self-contained HTML page (headings, bold, list items; everything escaped)."""
    body = []
    for line in markdown_text.splitlines():
        text = html.escape(line)
        if line.startswith("## "):
            body.append(f"<h2>{text[3:]}</h2>")
        elif line.startswith("# "):
            body.append(f"<h1>{text[2:]}</h1>")
        elif line.startswith("- "):
            body.append(f"<li>{text[2:]}</li>")
        elif line.startswith("**") and line.endswith("**"):
            body.append(f"<p><strong>{text[2:-2]}</strong></p>")
        elif line:
            body.append(f"<p>{text}</p>")
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Feedback</title></head>"
            "<body>\n" + "\n".join(body) + "\n</body></html>\n")


def class_report(records: list[dict], exercises: list[str]) -> str:
    """Per exercise: how many passed, and how many made each mistake the checker diagnoses."""
    graded = [r for r in records if not r.get("problem")]
    lines = ["# Class report", "", f"{len(graded)} submissions graded"
             + (f", {len(records) - len(graded)} unreadable" if len(records) > len(graded) else "") + ".", ""]
    if graded:
        scores = sorted(r["score"] for r in graded)
        lines += [f"Scores: mean {sum(scores) / len(scores):.2f}, median {scores[len(scores) // 2]:g}, "
                  f"out of {graded[0]['max_score']:g}.", ""]
    for name in exercises:
        results = [r["exercises"][name] for r in graded if name in r["exercises"]]
        if not results:
            continue
        statuses = Counter(e["status"] for e in results)
        lines += [f"## {name}", "", ", ".join(f"{n} {s}" for s, n in statuses.most_common()) + ".", ""]
        mistakes = Counter()
        hints = {}
        for e in results:
            for case in e["cases"]:
                if case.get("diagnosed") and case.get("hint"):
                    hints.setdefault(diagnosis_id(case["hint"]), case["hint"])
            for did in {diagnosis_id(c["hint"]) for c in e["cases"] if c.get("diagnosed") and c.get("hint")}:
                mistakes[did] += 1
        for did, count in mistakes.most_common():
            lines.append(f"- {100 * count / len(results):.0f} % ({count} of {len(results)}), `{did}`: {hints[did]}")
        if mistakes:
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
