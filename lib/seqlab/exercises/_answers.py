"""The student's answers, kept from one notebook to the next: build in 10, use it again in 12 and 14.

When :func:`~seqlab.exercises.plug_in` finds a written answer that passes its check, it saves the code of the
cell that defined it (its imports and definitions; never the calls) to ``.seqlab-answers/NAME.py`` beside the
notebook (the kernel's working folder: ``work/`` for a student's copies). A later notebook calls
:func:`yours` with the exercise's name and gets the student's function back, re-checked, or the reference with
a label that says why. Only functions defined in a notebook (module ``__main__``) are saved; the library's and
the tests' never are. ``SEQLAB_ANSWERS`` names another folder, or ``off`` to neither save nor read.
"""

from __future__ import annotations

import ast
import linecache
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

FOLDER = ".seqlab-answers"
PRELUDE = "import math\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"


def answers_dir() -> Path | None:
    """Where answers are kept, or None when ``SEQLAB_ANSWERS=off``."""
    setting = os.environ.get("SEQLAB_ANSWERS", "")
    if setting.lower() == "off":
        return None
    return Path(setting) if setting else Path.cwd() / FOLDER


def definitions_of(fn: Callable[..., Any]) -> str | None:
    """The imports and definitions of the cell (or file) that defined ``fn``, without its other statements
    (a ``check(...)`` call, a demo); None when the source cannot be found or does not define ``fn``."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    source = "".join(linecache.getlines(code.co_filename))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    kept = [node for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))]
    if not any(isinstance(node, ast.FunctionDef) and node.name == fn.__name__ for node in kept):
        return None
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


def save(name: str, fn: Callable[..., Any]) -> Path | None:
    """Keep ``fn``'s defining code as exercise ``name``'s answer; returns the file, or None if not kept."""
    folder = answers_dir()
    if folder is None or getattr(fn, "__module__", None) != "__main__":
        return None
    source = definitions_of(fn)
    if source is None:
        return None
    try:
        folder.mkdir(exist_ok=True)
        path = folder / f"{name}.py"
        path.write_text(f"# {name}: kept by seqlab.exercises.plug_in; the function is {fn.__name__}\n{source}\n",
                        encoding="utf-8")
    except OSError:                    # a read-only folder: the notebook still runs, the answer is not kept
        return None
    return path


def load(name: str) -> Callable[..., Any] | None:
    """The kept answer to exercise ``name`` as a function, or None if there is none (or it no longer runs)."""
    folder = answers_dir()
    path = None if folder is None else folder / f"{name}.py"
    if path is None or not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    first = text.split("\n", 1)[0]
    function = first.rsplit(" ", 1)[-1]
    namespace: dict[str, Any] = {"__name__": f"seqlab_answer_{name}"}
    try:
        exec(compile(PRELUDE + text, str(path), "exec"), namespace)      # the student's own code, on their machine
    except Exception:                  # noqa: BLE001 -- a kept answer that no longer runs is no answer
        return None
    fn = namespace.get(function)
    return fn if callable(fn) else None
