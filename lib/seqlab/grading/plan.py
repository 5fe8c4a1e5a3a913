"""A semester plan and per-notebook instructor notes, read off the course itself.

:func:`schedule` spreads the notebooks over the teaching weeks (weeks holding a ``--skip`` date are left out)
and gives each a lecture date and a due date a week later; :func:`schedule_markdown`, :func:`schedule_csv`
and :func:`schedule_ics` write it (the ``.ics`` imports into any calendar; the same arguments give the same
bytes). :func:`instructor_notes` writes, for one notebook, what an instructor prepares: its goal (the opening
paragraph), what students need first, the sections, the live widgets to move in class (with the notebook's own
words on what to move), the "predict, then measure" questions to poll the
room with before running them, each exercise's catalogue of the mistakes its checker diagnoses (its own
words, read from the checker's source), and the run time on a 2-core laptop.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from seqlab import manifest
from seqlab.exercises import EXERCISES, catalogue, exercises_of, layout
from seqlab.notebook_rules import teaching_cells


@dataclass(frozen=True)
class Session:
    week: int            # 1-based teaching week
    lecture: date
    due: date
    notebook: str        # stem, e.g. 04-lstm
    title: str


def schedule(notebooks: list[Path], start: date, weeks: int, skip: list[date] | None = None) -> list[Session]:
    """One session per notebook, in order, over the weeks from ``start`` that hold no ``skip`` date; as many
    notebooks a week as it takes to fit (the early weeks take the extra ones). Due a week after the lecture,
    moved on past skipped weeks."""
    if weeks < 1:
        raise ValueError(f"--weeks must be at least 1, got {weeks}")
    skipped = {(d - start).days // 7 for d in skip or [] if d >= start}
    teaching = [w for w in range(weeks) if w not in skipped]
    if not teaching:
        raise ValueError("every week is skipped")
    per_week, extra = divmod(len(notebooks), len(teaching))
    sessions, at = [], 0
    for n, week in enumerate(teaching):
        take = per_week + (n < extra)
        for path in notebooks[at: at + take]:
            lecture = start + timedelta(weeks=week)
            due_week = week + 1
            while due_week in skipped:
                due_week += 1
            sessions.append(Session(n + 1, lecture, start + timedelta(weeks=due_week), path.stem,
                                    manifest.notebook(path.stem).title))
        at += take
    return sessions


def schedule_markdown(sessions: list[Session]) -> str:
    lines = ["# Semester plan", "", "| week | lecture | notebook | due |", "|---|---|---|---|"]
    lines += [f"| {s.week} | {s.lecture:%a %d %b %Y} | `{s.notebook}`: {s.title} | {s.due:%a %d %b %Y} |" for s in sessions]
    return "\n".join(lines) + "\n"


def schedule_csv(sessions: list[Session]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["week", "lecture", "notebook", "title", "due"])
    writer.writerows([s.week, s.lecture.isoformat(), s.notebook, s.title, s.due.isoformat()] for s in sessions)
    return buffer.getvalue()


def _ics_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,").replace("\n", "\\n")


def _fold(line: str) -> list[str]:
    """RFC 5545 folds lines longer than 75 octets: continuation lines start with a space."""
    out, raw = [], line.encode("utf-8")
    while len(raw) > 75:
        cut = 75 if not out else 74
        while (raw[cut] & 0xC0) == 0x80:        # never split a UTF-8 character
            cut -= 1
        out.append(raw[:cut].decode("utf-8"))
        raw = raw[cut:]
    out.append(raw.decode("utf-8"))
    return [out[0]] + [" " + part for part in out[1:]]


def schedule_ics(sessions: list[Session], course: str = "seqlab") -> str:
    """An iCalendar file: an all-day event per lecture and per due date, with stable UIDs and stamps."""
    stamp = f"{min(s.lecture for s in sessions):%Y%m%d}T000000Z" if sessions else "19700101T000000Z"
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//seqlab//course schedule//EN", "CALSCALE:GREGORIAN"]
    for s in sessions:
        for kind, day, summary in (("lecture", s.lecture, f"{course}: {s.notebook} ({s.title})"),
                                   ("due", s.due, f"{course}: {s.notebook} due")):
            uid = hashlib.sha1(f"{course}/{s.notebook}/{kind}".encode()).hexdigest()[:16]
            lines += ["BEGIN:VEVENT", f"UID:{uid}@seqlab", f"DTSTAMP:{stamp}",
                      f"DTSTART;VALUE=DATE:{day:%Y%m%d}", f"DTEND;VALUE=DATE:{day + timedelta(days=1):%Y%m%d}",
                      f"SUMMARY:{_ics_text(summary)}", "END:VEVENT"]
    lines.append("END:VCALENDAR")
    return "\r\n".join(part for line in lines for part in _fold(line)) + "\r\n"


# -- instructor notes -------------------------------------------------------------------------------------

def run_times() -> dict[str, str]:
    """Each notebook's run time on the 2-core machine (``{"04-lstm": "19 s", ...}``), from the course manifest."""
    return {nb.slug: nb.run_time for nb in manifest.NOTEBOOKS}


def instructor_notes(path: Path, run_time: str | None = None) -> str:
    """The notes for one notebook (see the module docstring), as Markdown."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = nb["cells"]
    sources = ["".join(c["source"]) for c in cells]
    lines = [f"# Instructor notes: {path.stem}", "", f"**{manifest.notebook(path.stem).title}**"
             + (f" — runs in {run_time} on a 2-core laptop." if run_time else ""), ""]
    opening = re.sub(r"^#[^\n]*\n+", "", sources[0]).strip().split("\n\n")[0]
    if opening:
        lines += ["## Goal", "", re.sub(r"\s+", " ", opening), ""]
    need = next((s for s in sources if s.startswith("**You need:**")), None)
    if need:
        lines += [need, ""]
    sections = [s.splitlines()[0].lstrip("# ").strip() for c, s in zip(cells, sources)
                if c["cell_type"] == "markdown" and s.startswith("## ")]
    if sections:
        lines += ["## Sections", "", *[f"- {s}" for s in sections], ""]
    widget_names = set(re.findall(r"from seqlab\.widgets import ([\w, ]+)", "\n".join(sources)))
    widgets = {w.strip() for group in widget_names for w in group.split(",") if w.strip()[:1].isupper()}
    demos = [(i, s) for i, (c, s) in enumerate(zip(cells, sources)) if c["cell_type"] == "code"
             and any(re.search(rf"\b{w}\(", s) for w in widgets)]
    if demos:
        lines += ["## Live demos (move these in class)", ""]
        for i, source in demos:
            heading = next((sources[j].splitlines()[0].lstrip("# ") for j in range(i, -1, -1)
                            if cells[j]["cell_type"] == "markdown" and sources[j].startswith("#")), "")
            used = sorted(w for w in widgets if re.search(rf"\b{w}\(", source))
            before = next((sources[j] for j in range(i - 1, -1, -1) if cells[j]["cell_type"] == "markdown"), "")
            what = re.sub(r"\s+", " ", re.sub(r"^#+ [^\n]*\n*", "", before)).strip()
            lines.append(f"- cell {i} ({heading}): {', '.join(used)}. {what[:300]}")
        lines.append("")
    names = layout.in_notebook_order(teaching_cells(cells), exercises_of(path.stem))
    polls = [n for n in names if EXERCISES[n].is_prediction]
    if polls:
        lines += ["## Prediction polls (ask the room before running the measurement)", ""]
        for name in polls:
            at = layout.answer_cell(cells, name)
            question = next((sources[j] for j in range(at - 1, -1, -1)     # the question, not the measurement's
                             if cells[j]["cell_type"] == "markdown" and "?" in sources[j]),
                            next((sources[j] for j in range(at - 1, -1, -1) if cells[j]["cell_type"] == "markdown"), ""))
            first = re.sub(r"\s+", " ", re.sub(r"^#+ .*\n", "", question)).strip()
            lines.append(f"- `{name}` ({EXERCISES[name].signature}): {first[:400]}")
        lines.append("")
    exercises = [n for n in names if not EXERCISES[n].is_prediction]
    if exercises:
        lines += ["## Exercises and the mistakes their checkers diagnose", ""]
        for name in exercises:
            ex = EXERCISES[name]
            grading = [f"{ex.points:g} point{'s' if ex.points != 1 else ''}"]
            if ex.forbidden:
                grading.append(f"flagged for a look if it calls {', '.join(ex.forbidden)}")
            if ex.hidden is not None:
                grading.append("hidden cases from your SEED")
            lines += [f"### {name}", "", f"`{ex.signature}`", "", f"*{'; '.join(grading)}.*", ""]
            lines += [f"- {m}" for m in catalogue(name)] + [""]
    return "\n".join(lines).rstrip() + "\n"
