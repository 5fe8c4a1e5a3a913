"""The command line: ``python3 course.py grade ...`` (instructors) and ``python3 course.py selfcheck ...`` (students).

    grade SUBMISSIONS... --notebook NN [--release DIR] [--instructor DIR] [--roster CSV] [--out DIR]
          [--jobs 2] [--pattern plain|canvas|moodle|REGEX] [--student ID] [--predictions completion|accuracy]
          [--time-limit SECONDS] [--memory GB]
    selfcheck NOTEBOOK [--out DIR]
    schedule --start YYYY-MM-DD --weeks N [--skip YYYY-MM-DD ...] [--out DIR]
    gradebook [GRADES] [--roster CSV] [--late-penalty F] [--overrides CSV] [--canvas EXPORT] [--moodle]
              [--gradescope] [--out DIR]

``grade`` writes into ``OUT/NN-topic/``: ``records/<student>.json`` (one per student, written as soon as that
student is graded, so a killed run resumes where it stopped; ``--student ID`` regrades one), then
``gradebook.csv``, ``feedback/<student>.md`` and ``.html``, and ``class-report.md``.

``gradebook`` combines every notebook graded under ``GRADES`` into ``semester.csv`` (late policy, then the
overrides, which live in their own file so a regrade never erases them), and writes the files an LMS imports:
``canvas-import.csv`` (your own Canvas gradebook export, filled in), ``moodle-import.csv``, and Gradescope's
``results.json`` per student.

``schedule`` writes a week-by-week plan (``schedule.md``, ``.csv``, ``.ics``) and ``notes/NN-topic.md`` per
notebook: goals, live demos, prediction polls, each checker's catalogue of mistakes, run times.

``selfcheck`` runs exactly the grader's path on the public cases of one notebook (the student's own notebook,
in the same sandbox) and copies the notebook to hand in into ``OUT`` (default ``submit/``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import sys
import threading
from datetime import date
from pathlib import Path

from seqlab import manifest as course_manifest
from seqlab.exercises import EXERCISES, REGISTERED_BY, exercises_of, layout
from seqlab.grading import grader, plan, reports, sandbox, semester
from seqlab.grading.submissions import Submission, collect, parse_notebook
from seqlab.notebook_rules import teaching_cells

PACKAGE_ROOT = Path(__file__).resolve().parents[2]          # lib/ in a checkout
CHECKOUT = PACKAGE_ROOT.parent


def find_course_notebook(name: str, release: Path | None) -> Path:
    """Notebook ``name`` (``04``, ``4``, ``nb04``, ``04-lstm``: the course manifest's resolver) in the release folder,
    else in the checkout's ``notebooks/``."""
    try:
        entry = course_manifest.notebook(name)
    except course_manifest.UnknownNotebook as err:
        raise SystemExit(f"grade: {err}") from None
    folder = release if release is not None else CHECKOUT / "notebooks"
    path = folder / entry.filename
    if not path.is_file():
        raise SystemExit(f"grade: no {entry.filename} in {folder}")
    return path


def exercise_points(path: Path, release: Path | None) -> dict[str, float]:
    """The exercises of one course or release notebook, in the order of their answer cells, with their points.

    A release's ``manifest.json`` says which exercises its notebook asks for and their points (a release from an
    older commit keeps its own list); a course notebook's are the registry's, with each exercise's own points."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = nb["cells"] if release is not None else teaching_cells(nb["cells"])
    listing = release / "manifest.json" if release is not None else None
    if listing is not None and listing.exists():
        notebooks = json.loads(listing.read_text(encoding="utf-8"))["notebooks"]
        if path.name not in notebooks:
            raise SystemExit(f"grade: the release's manifest.json does not list {path.name}")
        listed = notebooks[path.name]["exercises"]
        unknown = sorted(set(listed) - set(EXERCISES))
        if unknown:
            raise SystemExit(f"grade: the release's {path.name} asks for {', '.join(unknown)}, which this checkout's "
                             "checkers do not know; grade with the commit the release was made from")
        points = {name: float(value.get("points", EXERCISES[name].points)) for name, value in listed.items()}
    else:
        points = {name: ex.points for name, ex in exercises_of(path.stem).items()}
    try:
        return {name: points[name] for name in layout.in_notebook_order(cells, points)}
    except LookupError as err:
        raise SystemExit(f"grade: {path}: {err}") from None


def key_fingerprint(points: dict[str, float], instructor: Path | None, predictions: str) -> str:
    """What a record was graded against (the points, the instructor's files, the grader and the exercises'
    modules); a record with another fingerprint is graded again."""
    digest = hashlib.sha256(json.dumps([points, predictions], sort_keys=True).encode())
    for name in ("hidden_cases.py", "measurements.json"):
        if instructor is not None and (instructor / name).exists():
            digest.update((instructor / name).read_bytes())
    checkers = sorted({sys.modules[REGISTERED_BY[name]].__file__ for name in points})   # cases, references, factories
    for path in [grader.__file__, *checkers]:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:16]


def record_name(student: str) -> str:
    """A file name for one student's record and feedback, unique per exact student id: the id made safe for
    a file system, plus a short hash of the id itself (``王伟`` and ``李娜``, or ``sub/zed`` and ``sub_zed``,
    must never share a file)."""
    digest = hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', student)[:80] or '_'}-{digest}"


def _write_json(path: Path, data: dict) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)                  # atomic: a killed run never leaves half a record


def grade_command(args: argparse.Namespace) -> int:
    release = Path(args.release).resolve() if args.release else None
    instructor = Path(args.instructor).resolve() if args.instructor else None
    notebook = find_course_notebook(args.notebook, release)
    points = exercise_points(notebook, release)
    out = Path(args.out).resolve() / notebook.stem
    (out / "records").mkdir(parents=True, exist_ok=True)
    (out / "feedback").mkdir(exist_ok=True)
    mode = sandbox.isolation_mode()
    if mode == "rlimits-only" and not args.allow_weak_isolation:
        print("grade: this machine offers no sandbox (bubblewrap with namespaces); student code would run with "
              "resource limits only, able to read your files and other students'. Install bubblewrap (Debian: "
              "apt-get install bubblewrap) or grade in a container; --allow-weak-isolation grades anyway.",
              file=sys.stderr)
        return 2
    try:
        description = sandbox.preflight(mode)
    except sandbox.GraderError as err:
        print(f"grade: stopped before grading anyone, and no gradebook written: {err}", file=sys.stderr)
        return 2
    if mode != "bwrap+uid":
        print(f"WARNING: the grader runs student code in the weaker mode '{mode}' on this machine "
              f"({description}). Grade as root, or inside a container, for the strongest. The mode is written "
              "into the gradebook.", file=sys.stderr)
    if instructor is not None and instructor.stat().st_mode & 0o077:
        print(f"WARNING: {instructor} is readable by other users; `chmod 700` it (student code never sees it, "
              "but other accounts on this machine can read it).", file=sys.stderr)
    submissions = collect([Path(p) for p in args.submissions], args.pattern)
    if args.student:
        submissions = [s for s in submissions if s.student == args.student]
        if not submissions:
            raise SystemExit(f"grade: no submission from {args.student!r}")
    key = grader.build_key(notebook.stem, points, instructor=instructor, predictions=args.predictions)
    names: dict[str, str] = {}
    for sub in submissions:
        name = record_name(sub.student)
        if names.setdefault(name, sub.student) != sub.student:
            raise SystemExit(f"grade: students {names[name]!r} and {sub.student!r} would share the record {name}; "
                             "rename one file")
    fingerprint = key_fingerprint(points, instructor, args.predictions)
    limits = sandbox.Limits(seconds=args.time_limit, memory=int(args.memory * 2**30))
    todo = []
    for sub in submissions:
        path = out / "records" / f"{record_name(sub.student)}.json"
        if path.exists() and not args.student:
            old = json.loads(path.read_text(encoding="utf-8"))
            if old.get("sha256") == sub.sha256 and old.get("key") == fingerprint and old.get("status") != "grader-error":
                continue                                   # graded before, same file, same key: resume
        todo.append((sub, path))
    print(f"grade: {notebook.stem}, {len(submissions)} submissions, {len(todo)} to grade, {len(points)} "
          f"exercises, isolation {mode}, {args.jobs} at a time", file=sys.stderr)
    boxes: list[sandbox.Sandbox] = []
    lock = threading.Lock()

    def work(item: tuple[Submission, Path]) -> str:
        with lock:
            box = boxes.pop() if boxes else sandbox.Sandbox(mode).__enter__()
        try:
            record = grader.grade_submission(key, item[0], limits=limits, box=box)
        except Exception as err:             # the grader's own failure on this submission: its row, never the batch
            record = {"student": item[0].student, "source": item[0].source, "sha256": item[0].sha256,
                      "notebook": notebook.stem, "isolation": mode, "late": item[0].late, "lms_id": item[0].lms_id,
                      "problem": None, "flags": [f"grader error: {type(err).__name__}: {err}"[:400]],
                      "exercises": {}, "status": "grader-error", "score": 0.0, "max_score": sum(points.values())}
        finally:
            with lock:
                boxes.append(box)
        record["key"] = fingerprint
        _write_json(item[1], record)
        return item[0].student

    progress = _progress(len(todo))
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for _ in pool.map(work, todo):
                progress()
    finally:
        for box in boxes:
            box.close()
    records = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "records").glob("*.json"))]
    roster = reports.read_roster(Path(args.roster) if args.roster else None)
    reports.write_gradebook(out / "gradebook.csv", reports.gradebook_rows(records, list(points), roster, notebook.stem))
    for record in records:
        text = reports.feedback_markdown(record, list(points))
        (out / "feedback" / f"{record_name(record['student'])}.md").write_text(text, encoding="utf-8")
        (out / "feedback" / f"{record_name(record['student'])}.html").write_text(reports.feedback_html(text),
                                                                                 encoding="utf-8")
    (out / "class-report.md").write_text(reports.class_report(records, list(points)), encoding="utf-8")
    print(f"grade: wrote {out / 'gradebook.csv'}, {out / 'class-report.md'} and {len(records)} feedback files",
          file=sys.stderr)
    failed = [r["student"] for r in records if r.get("status") == "grader-error"]
    if failed:
        print(f"grade: ERROR: the grader could not run {len(failed)} of {len(records)} submissions "
              f"({', '.join(failed[:5])}{' ...' if len(failed) > 5 else ''}); their rows say grader-error, not a "
              "score. Fix the cause and grade again (graded submissions are kept).", file=sys.stderr)
        return 1
    return 0


def _progress(total: int):
    try:
        from tqdm import tqdm
        bar = tqdm(total=total, unit="submission", file=sys.stderr)
        return lambda: bar.update(1)
    except ImportError:                           # tqdm is a dependency; this is only a fallback
        done = [0]

        def tick() -> None:
            done[0] += 1
            print(f"graded {done[0]} of {total}", file=sys.stderr)
        return tick


def selfcheck_command(args: argparse.Namespace) -> int:
    path = Path(args.notebook)
    raw = path.read_bytes()
    notebook = parse_notebook(raw)
    number = re.match(r"\d{1,2}(?!\d)", path.stem)        # "04-lstm (1).ipynb", as a browser saves a second copy
    course = find_course_notebook(number.group(0) if number else path.stem, None)
    points = exercise_points(course, None)
    key = grader.build_key(course.stem, points)
    submission = Submission(path.stem, path.name, hashlib.sha256(raw).hexdigest(), notebook)
    record = grader.grade_submission(key, submission, limits=sandbox.Limits(seconds=args.time_limit),
                                     box=sandbox.shared_sandbox())
    if record.get("status") == "grader-error":
        print(reports.feedback_markdown(record, list(points)))
        print("selfcheck: the grader itself failed on this machine (see above); this says nothing about your "
              "answers", file=sys.stderr)
        return 1
    print(reports.feedback_markdown(record, list(points)))
    print(f"(checked the way the grader checks it, on the public cases, isolation {record['isolation']}; "
          "the grader also runs hidden cases)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, out / path.name)
    print(f"hand in: {out / path.name}")
    return 0


def gradebook_command(args: argparse.Namespace) -> int:
    grades, out = Path(args.grades), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    roster = reports.read_roster(Path(args.roster) if args.roster else None)
    notebooks, maxima, rows = semester.semester_table(
        grades, late_penalty=args.late_penalty, roster=roster,
        overrides=semester.read_overrides(Path(args.overrides) if args.overrides else None))
    if not notebooks:
        raise SystemExit(f"gradebook: no graded notebooks in {grades} (run `course.py grade` first)")
    reports.write_gradebook(out / "semester.csv", semester.semester_csv_rows(notebooks, maxima, rows))
    written, unmatched = ["semester.csv"], []
    if args.canvas:
        table, missed = semester.canvas_import(Path(args.canvas), notebooks, maxima, rows, roster)
        reports.write_gradebook(out / "canvas-import.csv", table)
        written.append("canvas-import.csv")
        unmatched += [f"Canvas: {m}" for m in missed]
    if args.moodle:
        table, missed = semester.moodle_import(notebooks, rows, roster)
        reports.write_gradebook(out / "moodle-import.csv", table)
        written.append("moodle-import.csv")
        unmatched += [f"Moodle: {m}" for m in missed]
    if args.gradescope:
        for folder in (grades / n for n in notebooks):
            for record_path in sorted((folder / "records").glob("*.json")):
                record = json.loads(record_path.read_text(encoding="utf-8"))
                target = out / "gradescope" / folder.name / record_name(record["student"]) / "results.json"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(json.dumps(semester.gradescope_results(record), indent=1), encoding="utf-8")
        written.append("gradescope/")
    print(f"gradebook: {len(rows)} students, {len(notebooks)} notebooks; wrote {', '.join(written)} in {out}")
    for line in unmatched:
        print(f"  unmatched: {line}")
    return 0


def schedule_command(args: argparse.Namespace) -> int:
    start = date.fromisoformat(args.start)
    skip = [date.fromisoformat(d) for d in args.skip]
    notebooks = [CHECKOUT / "notebooks" / nb.filename for nb in course_manifest.NOTEBOOKS]
    sessions = plan.schedule(notebooks, start, args.weeks, skip)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "schedule.md").write_text(plan.schedule_markdown(sessions), encoding="utf-8")
    (out / "schedule.csv").write_text(plan.schedule_csv(sessions), encoding="utf-8")
    (out / "schedule.ics").write_bytes(plan.schedule_ics(sessions).encode("utf-8"))
    times = plan.run_times()
    (out / "notes").mkdir(exist_ok=True)
    for path in notebooks:
        (out / "notes" / f"{path.stem}.md").write_text(plan.instructor_notes(path, times.get(path.stem)),
                                                       encoding="utf-8")
    print(f"schedule: {len(sessions)} sessions over {args.weeks} weeks from {start}; wrote schedule.md, "
          f"schedule.csv, schedule.ics and notes/ in {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("grade", help="grade a class's submissions of one notebook")
    grade.add_argument("submissions", nargs="+", help="notebooks, folders of them, or LMS zip downloads")
    grade.add_argument("--notebook", required=True, help="the notebook's number, e.g. 04")
    grade.add_argument("--release", help="the student release they worked from (its manifest gives points)")
    grade.add_argument("--instructor", help="a private folder: hidden_cases.py, measurements.json")
    grade.add_argument("--roster", help="CSV with a 'student' column (the name in the file names)")
    grade.add_argument("--out", default="grades", help="where to write (default: grades/)")
    grade.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    grade.add_argument("--pattern", default="plain", help="file names: plain, canvas, moodle or a regex")
    grade.add_argument("--student", help="regrade this student only")
    grade.add_argument("--predictions", default="completion", choices=["completion", "accuracy"])
    grade.add_argument("--time-limit", type=float, default=60.0, help="seconds per exercise (default 60)")
    grade.add_argument("--memory", type=float, default=6.0, help="GiB of memory per exercise (default 6)")
    grade.add_argument("--allow-weak-isolation", action="store_true",
                       help="grade even where no sandbox is available (resource limits only)")
    grade.set_defaults(run=grade_command)
    selfcheck = commands.add_parser("selfcheck", help="check your notebook the way the grader will")
    selfcheck.add_argument("notebook")
    selfcheck.add_argument("--out", default="submit")
    selfcheck.add_argument("--time-limit", type=float, default=60.0)
    selfcheck.set_defaults(run=selfcheck_command)
    book = commands.add_parser("gradebook", help="the semester's gradebook, and files for Canvas, Moodle, Gradescope")
    book.add_argument("grades", nargs="?", default="grades", help="what `grade` wrote (default: grades/)")
    book.add_argument("--out", default="grades/semester")
    book.add_argument("--roster", help="CSV: student, student_id, email, sis_id, login, canvas_id, ...")
    book.add_argument("--late-penalty", type=float, default=0.0,
                      help="fraction taken off a submission the LMS marked late (e.g. 0.1)")
    book.add_argument("--overrides", help="CSV student,notebook,score,reason: kept apart, survives regrading")
    book.add_argument("--canvas", help="your Canvas gradebook export (CSV) to fill in for import")
    book.add_argument("--moodle", action="store_true", help="write Moodle's grade-import CSV (by email)")
    book.add_argument("--gradescope", action="store_true", help="write results.json per student")
    book.set_defaults(run=gradebook_command)
    when = commands.add_parser("schedule", help="a week-by-week plan (.md, .csv, .ics) and instructor notes")
    when.add_argument("--start", required=True, help="the first lecture, YYYY-MM-DD")
    when.add_argument("--weeks", type=int, required=True, help="weeks in the term, skipped ones included")
    when.add_argument("--skip", nargs="*", default=[], help="dates whose week has no lecture (YYYY-MM-DD ...)")
    when.add_argument("--out", default="plan")
    when.set_defaults(run=schedule_command)
    args = parser.parse_args(argv)
    if getattr(args, "jobs", 1) < 1:
        parser.error("--jobs must be at least 1")
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
