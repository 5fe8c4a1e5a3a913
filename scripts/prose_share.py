"""How much of the package is docstring: characters inside docstrings / characters of the files, per folder.

    python3 scripts/prose_share.py            # a table per folder and the total
    python3 scripts/prose_share.py --files    # the 25 files with the most docstring text

Derivations and history belong in the notebooks; the code keeps what a caller needs (shapes, what is
returned, what is refused). ``tests/test_prose_share.py`` holds the package to ``LIMIT``.
Standard library only.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lib" / "seqlab"
LIMIT = 0.15
_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def docstring_chars(source: str) -> int:
    """Characters inside the module's, classes' and functions' docstrings (as written, indentation included)."""
    tree = ast.parse(source)
    return sum(len(ast.get_docstring(node, clean=False) or "") for node in ast.walk(tree) if isinstance(node, _OWNERS))


def shares(package: Path = PACKAGE) -> dict[Path, tuple[int, int]]:
    """Each file of the package: (docstring characters, all characters)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        found[path.relative_to(package)] = (docstring_chars(source), len(source))
    return found


def total_share(package: Path = PACKAGE) -> float:
    counts = shares(package).values()
    return sum(d for d, _ in counts) / sum(n for _, n in counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", action="store_true", help="list the files with the most docstring text")
    args = parser.parse_args()
    found = shares()
    if args.files:
        for path, (doc, size) in sorted(found.items(), key=lambda item: -item[1][0])[:25]:
            print(f"{doc:7d} {size:7d} {doc / size:6.1%}  {path}")
        return
    folders: dict[str, list[int]] = {}
    for path, (doc, size) in found.items():
        row = folders.setdefault(path.parts[0] if len(path.parts) > 1 else "(top level)", [0, 0])
        row[0] += doc
        row[1] += size
    print(f"{'folder':14s} {'docstring':>9s} {'all':>9s} {'share':>6s}")
    for name, (doc, size) in sorted(folders.items()):
        print(f"{name:14s} {doc:9d} {size:9d} {doc / size:6.1%}")
    doc, size = sum(d for d, _ in found.values()), sum(n for _, n in found.values())
    print(f"{'lib/seqlab':14s} {doc:9d} {size:9d} {doc / size:6.1%}   (limit {LIMIT:.0%})")


if __name__ == "__main__":
    main()
