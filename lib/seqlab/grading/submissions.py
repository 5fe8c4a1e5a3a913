"""Reading what students hand in, without trusting it: notebooks, LMS bulk downloads, and the answers in them.

:func:`collect` turns files, folders and ``.zip`` downloads into :class:`Submission` s, one per student, read
into memory with size limits (a zip is never extracted to disk, so ``../`` paths and symlinks go nowhere).
:func:`answer_plan` finds, in one notebook, what the grader's child runs for an exercise: the notebook's import
lines, the cell(s) that define the answer, and the expression (from the ``check(...)`` call) that is the
student's function. Nothing here runs student code.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import re
import stat
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from seqlab.exercises import layout

MAX_NOTEBOOK_BYTES = 20 * 2**20      # a course notebook with outputs is under 2 MB
MAX_ZIP_MEMBERS = 5000
MAX_ZIP_TOTAL = 2 * 2**30            # what a bulk download may expand to, all members together
MAX_ZIP_RATIO = 200                  # a member that expands more than this is a zip bomb

PATTERNS = {
    # a bare file: the student is the file name without .ipynb
    "plain": r"^(?P<student>.+?)\.ipynb$",
    # Canvas "Download submissions": lastfirst[_late]_<canvas id>_<submission id>_<file name>
    "canvas": r"^(?P<student>[^_]+)(?P<late>_late)?_(?P<id>\d+)_\d+_.*\.ipynb$",
    # Moodle "Download all submissions": <Full Name>_<id>_assignsubmission_file_/<file name>
    "moodle": r"^(?P<student>[^/]+?)_(?P<id>\d+)_assignsubmission_file_?/.*\.ipynb$",
}


class BadSubmission(ValueError):
    """A file the grader refuses to read, with the reason in words."""


@dataclass
class Submission:
    """One student's notebook: ``student`` (from the file name), where it came from, its bytes' SHA-256,
    and either ``notebook`` (parsed) or ``problem`` (why it could not be read)."""

    student: str
    source: str
    sha256: str
    notebook: dict | None = None
    problem: str | None = None
    late: bool = False
    lms_id: str | None = None
    extra: dict = field(default_factory=dict)


def _student_of(name: str, pattern: re.Pattern) -> tuple[str, bool, str | None] | None:
    found = pattern.search(name)
    if not found:
        return None
    groups = found.groupdict()
    return groups["student"], bool(groups.get("late")), groups.get("id")


def parse_notebook(raw: bytes) -> dict:
    """A submitted notebook as a dict, or :class:`BadSubmission` saying why not (size, JSON, nbformat, cells)."""
    if len(raw) > MAX_NOTEBOOK_BYTES:
        raise BadSubmission(f"the file is {len(raw) / 2**20:.0f} MB; a notebook is graded up to "
                            f"{MAX_NOTEBOOK_BYTES // 2**20} MB (clear large outputs and save again)")
    try:
        nb = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as err:   # ValueError: a 5,000-digit int too
        raise BadSubmission(f"not a notebook: the file is not valid JSON ({type(err).__name__})") from None
    if not isinstance(nb, dict) or "cells" not in nb and "worksheets" not in nb:
        raise BadSubmission("not a notebook: no cells")
    if nb.get("nbformat") != 4:
        raise BadSubmission(f"nbformat {nb.get('nbformat')!r} is not read; open the notebook in JupyterLab "
                            "and save it (JupyterLab writes nbformat 4)")
    cells = nb.get("cells")
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise BadSubmission("not a notebook: its cells are not a list of cells")
    for cell in cells:
        source = cell.get("source", "")
        if isinstance(source, list):
            if not all(isinstance(line, str) for line in source):
                raise BadSubmission("not a notebook: a cell's source is not text")
            cell["source"] = "".join(source)
        elif not isinstance(source, str):
            raise BadSubmission("not a notebook: a cell's source is not text")
        if not isinstance(cell.get("metadata", {}), dict):
            cell["metadata"] = {}
        if not isinstance(cell["metadata"].get("seqlab", {}), dict):
            del cell["metadata"]["seqlab"]                     # the release writes a dict; anything else is noise
        if not isinstance(cell.get("cell_type", ""), str):
            raise BadSubmission("not a notebook: a cell's type is not text")
    return nb


def _submission(student: str, source: str, raw: bytes, late: bool = False, lms_id: str | None = None) -> Submission:
    sub = Submission(student, source, hashlib.sha256(raw).hexdigest(), late=late, lms_id=lms_id)
    try:
        sub.notebook = parse_notebook(raw)
    except BadSubmission as err:
        sub.problem = str(err)
    except Exception as err:                  # whatever else a file can do to a parser: this file's problem only
        sub.problem = f"not a notebook this grader can read ({type(err).__name__})"
    return sub


def _from_zip(path: Path, pattern: re.Pattern) -> Iterable[Submission]:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        raise BadSubmission(f"{path.name}: not a readable zip ({err})") from None
    with archive:
        members = archive.infolist()
        if len(members) > MAX_ZIP_MEMBERS:
            raise BadSubmission(f"{path.name}: {len(members)} files; at most {MAX_ZIP_MEMBERS} are read")
        if sum(m.file_size for m in members) > MAX_ZIP_TOTAL:
            raise BadSubmission(f"{path.name}: expands to more than {MAX_ZIP_TOTAL // 2**30} GB")
        for member in members:
            name = member.filename
            if member.is_dir() or not name.endswith(".ipynb") or "/.ipynb_checkpoints/" in f"/{name}":
                continue
            who = _student_of(name, pattern)
            if who is None:
                continue
            unsafe = (name.startswith("/") or ".." in Path(name).parts or ":" in name
                      or stat.S_ISLNK(member.external_attr >> 16))
            if unsafe:
                yield Submission(who[0], f"{path.name}:{name}", "", problem="refused: the zip entry is a link "
                                 "or its path leaves the folder (../ or absolute)", late=who[1], lms_id=who[2])
                continue
            if member.file_size > MAX_NOTEBOOK_BYTES or member.file_size > MAX_ZIP_RATIO * max(member.compress_size, 1):
                yield Submission(who[0], f"{path.name}:{name}", "", late=who[1], lms_id=who[2],
                                 problem=f"refused: {member.file_size / 2**20:.0f} MB when unpacked (too large, "
                                         "or a zip bomb)")
                continue
            with archive.open(member) as handle:
                raw = handle.read(MAX_NOTEBOOK_BYTES + 1)
            yield _submission(who[0], f"{path.name}:{name}", raw, who[1], who[2])


def collect(paths: Iterable[Path], pattern: str = "plain") -> list[Submission]:
    """Every submission in ``paths`` (notebooks, folders of them, zips), one per student, sorted by student.

    ``pattern`` is a name in :data:`PATTERNS` or a regular expression with a group ``student`` (and optionally
    ``late`` and ``id``), matched against the file name (inside a zip: the member's path). When a student
    appears twice, the later file in sorted order wins and the other is reported in ``extra["replaced"]``.
    """
    regex = re.compile(PATTERNS.get(pattern, pattern))
    if "student" not in regex.groupindex:
        raise ValueError(f"the file-name pattern needs a group named 'student': {pattern!r}")
    found: list[Submission] = []
    for path in paths:
        path = Path(path)
        files = sorted(p for p in path.rglob("*") if p.is_file() or p.is_symlink()) if path.is_dir() else [path]
        for file in files:
            relative = file.relative_to(path).as_posix() if path.is_dir() else file.name
            if file.suffix == ".zip":
                found.extend(_from_zip(file, regex))
                continue
            who = _student_of(relative, regex) or _student_of(file.name, regex)
            if who is None or file.suffix != ".ipynb" or ".ipynb_checkpoints" in file.parts:
                continue
            if file.is_symlink():
                found.append(Submission(who[0], relative, "", problem="refused: the file is a symbolic link"))
                continue
            if file.stat().st_size > MAX_NOTEBOOK_BYTES:
                found.append(Submission(who[0], relative, "", late=who[1], lms_id=who[2], problem=(
                    f"the file is {file.stat().st_size / 2**20:.0f} MB; a notebook is graded up to "
                    f"{MAX_NOTEBOOK_BYTES // 2**20} MB (clear large outputs and save again)")))
                continue
            found.append(_submission(who[0], relative, file.read_bytes(), who[1], who[2]))
    by_student: dict[str, Submission] = {}
    for sub in sorted(found, key=lambda s: (s.student, s.source)):
        if sub.student in by_student:
            sub.extra.setdefault("replaced", []).append(by_student[sub.student].source)
        by_student[sub.student] = sub
    return [by_student[s] for s in sorted(by_student)]


# -- what the child runs for one exercise -----------------------------------------------------------------

@dataclass(frozen=True)
class AnswerPlan:
    """What to run for one exercise: ``imports`` (each import statement found before the answer), the
    ``cells`` that define the answer (check calls removed), and ``target``, the expression whose value is the
    student's function (``lstm_cell``, ``lambda: my_prediction``). ``sources`` is the student's code, for the
    static flags; ``problem`` says why nothing can run."""

    exercise: str
    imports: tuple[str, ...] = ()
    cells: tuple[str, ...] = ()
    target: str = ""
    problem: str | None = None
    notes: tuple[str, ...] = ()


def _calls_check(statement: ast.stmt) -> bool:
    return any(isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id == "check"
               for s in ast.walk(statement))


def _binds(tree: ast.Module, name: str) -> bool:
    for statement in tree.body:
        targets: list[ast.AST] = []
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and statement.name == name:
            return True
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
            targets = [statement.target]
        for target in targets:
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                return True
    return False


def answer_plan(notebook: dict, exercise: str) -> AnswerPlan:
    """What the grader's child must run to get the student's function for ``exercise`` (see :class:`AnswerPlan`)."""
    cells = notebook["cells"]
    index = layout.answer_cell(cells, exercise)
    if index is None:
        return AnswerPlan(exercise, problem="the answer cell is missing (no cell calls "
                                            f'check("{exercise}", ...)); restore it from the release')
    parsed = [(layout.parse_cell(layout.cell_source(c)) if c.get("cell_type") == "code" else (None, []))
              for c in cells[: index + 1]]
    tree, notes = parsed[index]
    call = layout.check_call(tree, exercise) if tree is not None else None
    if call is None or len(call.args) < 2:
        return AnswerPlan(exercise, problem=f'the answer cell no longer calls check("{exercise}", your_function)',
                          notes=tuple(notes))
    target = call.args[1]
    wanted = ([target.id] if isinstance(target, ast.Name)
              else sorted({n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}))
    chosen: set[int] = set()
    for name in wanted:                  # the latest cell, up to the answer cell, that defines each name
        for i in range(index, -1, -1):
            if parsed[i][0] is not None and _binds(parsed[i][0], name):
                chosen.add(i)
                break
    imports = []
    run = []
    try:
        for i in range(index + 1):
            if parsed[i][0] is not None:
                imports += [ast.unparse(s) for s in parsed[i][0].body if isinstance(s, (ast.Import, ast.ImportFrom))]
        for i in sorted(chosen):
            module = parsed[i][0]
            kept = [s for s in module.body if not _calls_check(s)]      # the grader, not check(), judges
            run.append(ast.unparse(ast.Module(body=kept, type_ignores=[])))
            notes += parsed[i][1]
        target_text = ast.unparse(target)
    except (RecursionError, ValueError, MemoryError) as err:
        return AnswerPlan(exercise, problem=f"the answer cell cannot be read back ({type(err).__name__}: an "
                                            "expression nested too deeply); simplify it and hand in again")
    return AnswerPlan(exercise, tuple(dict.fromkeys(imports)), tuple(run), target_text, notes=tuple(notes))
