"""A student release of the course: the notebooks without solutions and without any prediction's answer.

    python scripts/release.py --out DIR [--solutions DIR] [NN ...]   # what `python3 course.py release` runs

For each notebook (all, or those numbered NN):

- every solution fold (``<details><summary>Solution ... </details>`` in a markdown cell) is replaced by a line
  saying the solutions are posted after the deadline;
- the outputs of cells tagged ``reveal`` (a prediction's measurement) are removed, as in ``work/`` copies;
- the final cell of assertions is left out: it checks the notebook's claims with the answers in hand;
- each exercise's answer cell (the registry says which exercises a notebook has; ``seqlab.exercises.layout``
  finds the cell that checks each) is marked in its metadata, ``{"seqlab": {"exercise": "name"}}``, for a grader.

``DIR/manifest.json`` lists the commit, each notebook's SHA-256 and its exercises. ``--solutions DIR`` writes
the course's notebooks as they are, with their own manifest, for after the deadline. The same commit gives the
same bytes: no dates, keys sorted. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from seqlab import manifest as course_manifest
from seqlab import notebook_rules as rules   # the reveal rule and the notebook JSON format work/ copies use too
from seqlab.exercises import EXERCISES, exercises_of, layout

ROOT = Path(__file__).resolve().parent.parent

POSTED_LATER = "*The solution to this exercise will be posted after the deadline.*"


def student_notebook(nb: dict, notebook: str) -> tuple[dict, list[str]]:
    """The student version of course notebook ``notebook`` (``nb``, as a new dict) and its exercises, in order."""
    nb = rules.without_reveals(json.loads(json.dumps(nb)))
    cells = rules.teaching_cells(nb["cells"])
    exercises = layout.in_notebook_order(cells, exercises_of(notebook))
    for name in exercises:
        cells[layout.answer_cell(cells, name)].setdefault("metadata", {})["seqlab"] = {"exercise": name}
    for cell in cells:
        if cell["cell_type"] == "markdown" and layout.SOLUTION_FOLD.search(rules.cell_source(cell)):
            cell["source"] = [layout.SOLUTION_FOLD.sub(POSTED_LATER, rules.cell_source(cell))]
    nb["cells"] = cells
    return nb, exercises


def _commit() -> str:
    found = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else "unknown"


def release(notebooks: list[Path], out: Path, solutions: Path | None = None) -> dict:
    """Write the student release into ``out`` (and the solutions into ``solutions``); return the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"commit": _commit(), "kind": "student", "notebooks": {}}
    key = {"commit": manifest["commit"], "kind": "solutions", "notebooks": {}}
    for path in notebooks:
        course_nb = json.loads(path.read_text(encoding="utf-8"))
        student, exercises = student_notebook(course_nb, path.stem)
        text = rules.notebook_text(student)
        (out / path.name).write_text(text, encoding="utf-8")
        manifest["notebooks"][path.name] = {"sha256": hashlib.sha256(text.encode()).hexdigest(),
                                            "exercises": {name: {"points": EXERCISES[name].points} for name in exercises}}
        if solutions is not None:
            solutions.mkdir(parents=True, exist_ok=True)
            original = rules.notebook_text(course_nb)
            (solutions / path.name).write_text(original, encoding="utf-8")
            key["notebooks"][path.name] = {"sha256": hashlib.sha256(original.encode()).hexdigest()}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if solutions is not None:
        (solutions / "manifest.json").write_text(json.dumps(key, indent=1, sort_keys=True) + "\n")
    return manifest


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("numbers", nargs="*", help="notebooks, e.g. 02 4 05-gru (default: all)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the student release")
    parser.add_argument("--solutions", type=Path, help="folder for the solutions release (after the deadline)")
    args = parser.parse_args(argv)
    try:
        entries = [course_manifest.notebook(name) for name in args.numbers] or list(course_manifest.NOTEBOOKS)
    except course_manifest.UnknownNotebook as err:
        print(f"[release] {err}")
        return 2
    chosen = [ROOT / "notebooks" / entry.filename for entry in dict.fromkeys(entries)]
    if args.out.resolve() == (ROOT / "notebooks").resolve():
        print("[release] --out must not be the course's own notebooks/")
        return 2
    manifest = release(chosen, args.out, args.solutions)
    count = sum(len(n["exercises"]) for n in manifest["notebooks"].values())
    print(f"[release] {len(chosen)} notebook(s), {count} exercises, solutions removed -> {args.out}"
          + (f"; solutions -> {args.solutions}" if args.solutions else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
