"""Write the README's notebook table from the course manifest (lib/seqlab/manifest.py).

    python scripts/readme_table.py          # rewrite the table's names and run times in README.md
    python scripts/readme_table.py --check  # exit 1, naming each notebook, if README.md and the manifest differ

The manifest owns the first column (the notebook's name) and the third (its run time); the second (what it
covers) and the fourth (its time on a GPU) are the README's own. A row is matched to its notebook by number,
so a renamed notebook keeps its description; a notebook without a row gets one (its title as the description,
"—" on a GPU: not yet run there) and a row for a notebook the course no longer has is dropped.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from seqlab import manifest

README = Path(__file__).resolve().parent.parent / "README.md"
HEADER = "| notebook | what it covers | run time* | on a GPU† |"


def cells(row: str) -> list[str]:
    """A table row's cells (an escaped ``\\|`` stays inside its cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().removeprefix("|").removesuffix("|"))]


def table(text: str) -> tuple[int, int]:
    """The line numbers [start, end) of the notebook table's rows (after its header and rule)."""
    lines = text.splitlines()
    if HEADER not in lines:
        raise SystemExit(f"[readme] README.md has no notebook table (a line {HEADER!r})")
    start = lines.index(HEADER) + 2
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return start, end


def rows(text: str) -> list[list[str]]:
    start, end = table(text)
    return [cells(line) for line in text.splitlines()[start:end]]


def written(text: str) -> str:
    """``text`` with the notebook table's names and run times taken from the manifest."""
    lines = text.splitlines(keepends=True)
    start, end = table(text)
    by_number = {}
    for row in rows(text):
        number = re.match(r"`(\d\d)-", row[0])
        if number:
            by_number[int(number.group(1))] = row
    new = []
    for nb in manifest.NOTEBOOKS:
        _, covers, _, gpu = by_number.get(nb.number, [None, nb.title, None, "—"])
        new.append(f"| `{nb.slug}` | {covers} | {nb.run_time} | {gpu} |\n")
    return "".join(lines[:start] + new + lines[end:])


def drift(text: str) -> list[str]:
    """What the README's table says that the manifest does not, one line per notebook."""
    listed = {row[0].strip("`"): row[2] for row in rows(text)}
    problems = []
    for nb in manifest.NOTEBOOKS:
        if nb.slug not in listed:
            problems.append(f"{nb.slug}: in the manifest, no row in README.md")
        elif listed[nb.slug] != nb.run_time:
            problems.append(f"{nb.slug}: README.md says {listed[nb.slug]!r}, the manifest {nb.run_time!r}")
    slugs = [nb.slug for nb in manifest.NOTEBOOKS]
    problems += [f"{name}: a row in README.md, not in the manifest" for name in listed if name not in slugs]
    if not problems and list(listed) != slugs:
        problems.append("the README's rows are not in the manifest's order")
    return problems


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    if "--check" in argv:
        problems = drift(text)
        for problem in problems:
            print(f"[readme] {problem}")
        if problems:
            print("[readme] run `python scripts/readme_table.py` to write the table from lib/seqlab/manifest.py")
        return 1 if problems else 0
    new = written(text)
    if new != text:
        README.write_text(new, encoding="utf-8")
    print(f"[readme] the notebook table lists {len(manifest.NOTEBOOKS)} notebooks"
          + (" (rewritten)" if new != text else " (unchanged)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
