"""CONTRIBUTING §1 names every switch of the test run that the code has.

The repository's own files are scanned (:data:`SCANNED`), not a list typed here: every environment variable
the code reads (``os.environ[...]``, ``.get``, ``.setdefault``, ``in``, ``os.getenv``, a module constant
holding the name, ``$NAME`` in shell), every ``pytest.mark.NAME``, every skip and xfail reason (its first
words) and every pytest ini option. A new one that §1 does not name fails with its file and line; so does a
``SEQLAB_*`` variable §1 names that no code reads any more. Ordinary variables of the system, Python and
pytest pass through :data:`ORDINARY`.

    python tests/test_contributing.py [ROOT]      # the inventory of a checkout (e.g. an older commit's)
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("course.py", "testbed.py", "conftest.py", "tests", "scripts", "lib/seqlab", "hub", ".ci/run", "Makefile")
# read by the code, deciding nothing of the course's own: the system's, the shell's, Python's and pytest's
ORDINARY = {"HOME", "PATH", "PWD", "PYTHON", "PYTHONPATH", "SECONDS", "XDG_RUNTIME_DIR", "PYTEST_CURRENT_TEST"}
ORDINARY_MARKERS = {"parametrize"}                 # makes tests; selects, skips and compares nothing
SKIP_CALLS = {"skip", "xfail", "importorskip", "mark.skip", "mark.skipif", "mark.xfail"}
REASON_WORDS = 4                                   # a skip reason is named by its first words


def scanned_files(root: Path) -> list[Path]:
    files = []
    for name in SCANNED:
        path = root / name
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".py", ".sh") and "__pycache__" not in p.parts)
        elif path.exists():
            files.append(path)
    return files


def _is_python(path: Path) -> bool:
    return path.suffix == ".py"


def _dotted(node: ast.AST) -> str:
    """``pytest.mark.skipif`` for that expression, "" for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _constants(tree: ast.Module) -> dict[str, list[str]]:
    """Module constants holding names (``ENV_VAR = "SEQLAB_DATA"``, ``NAMES = ("A", "B")``), and loop variables
    running over such a tuple (``for name in NAMES``)."""
    names: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            strings = ([value.value] if isinstance(value, ast.Constant) and isinstance(value.value, str) else
                       [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                       if isinstance(value, (ast.Tuple, ast.List, ast.Set)) else [])
            for target in targets:
                if isinstance(target, ast.Name) and strings:
                    names[target.id] = strings
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name) \
                and isinstance(node.iter, ast.Name) and node.iter.id in names:
            names[node.target.id] = names[node.iter.id]
    return names


def _is_environment(node: ast.AST) -> bool:
    """``os.environ``, or a name for the environment passed around (``environ``, ``env``)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or \
        (isinstance(node, ast.Name) and node.id in ("environ", "env"))


def _names(node: ast.AST, constants: dict[str, list[str]]) -> list[str]:
    """The variable names a key stands for; only NAMES_LIKE_THESE (``env["dependencies"]`` is a YAML file's)."""
    names = ([node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else
             constants.get(node.id, []) if isinstance(node, ast.Name) else [])
    return [name for name in names if re.fullmatch(r"[A-Z_][A-Z0-9_]*", name)]


def python_environment_reads(source: str) -> list[tuple[str, int]]:
    """(variable, line) for every environment variable this Python source reads."""
    tree = ast.parse(source)
    constants = _constants(tree)
    found = []
    for node in ast.walk(tree):
        keys: list[ast.AST] = []
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if _dotted(func) in ("os.getenv", "getenv"):
                keys = [node.args[0]]
            elif isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault") and _is_environment(func.value):
                keys = [node.args[0]]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environment(node.value):
            keys = [node.slice]
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
                and _is_environment(node.comparators[0]):
            keys = [node.left]
        found += [(name, node.lineno) for key in keys for name in _names(key, constants)]
    return found


def shell_environment_reads(source: str) -> list[tuple[str, int]]:
    """(variable, line) for every ``$NAME`` / ``${NAME}`` (upper case: the environment's) outside comments; in a
    Makefile ``$$NAME`` is the shell's and ``$(NAME)`` make's own."""
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        found += [(name, number) for name in re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", line)]
    return found


def _reason_text(node: ast.AST | None, assigned: dict[str, ast.AST], depth: int = 0) -> str:
    """The constant words of a reason: a string, an f-string's literal parts, a name assigned one of those."""
    if node is None or depth > 3:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return " ".join(_reason_text(v, assigned, depth + 1) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _reason_text(node.left, assigned, depth + 1) + " " + _reason_text(node.right, assigned, depth + 1)
    if isinstance(node, ast.Name) and node.id in assigned:
        return _reason_text(assigned[node.id], assigned, depth + 1)
    return ""


def reason_key(text: str) -> str:
    """The first words of a reason, by which §1 names it."""
    words = re.sub(r"^\W+", "", " ".join(text.split())).split(" ")
    return " ".join(words[:REASON_WORDS])


def python_markers_and_skips(source: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """([(marker, line)], [(reason key, line)]) of a Python source: every ``pytest.mark.NAME`` and the first
    words of every skip, skipif, xfail or importorskip (``importorskip`` names its module)."""
    tree = ast.parse(source)
    assigned = {t.id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)}
    markers, skips = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _dotted(node.value) == "pytest.mark":
            markers.append((node.attr, node.lineno))
        if isinstance(node, ast.Call) and (name := _dotted(node.func)).startswith("pytest.") \
                and name[len("pytest."):] in SKIP_CALLS:
            keywords = {k.arg: k.value for k in node.keywords}
            if name == "pytest.importorskip":
                reason = node.args[0] if node.args else keywords.get("modname")
            elif name in ("pytest.skip", "pytest.xfail") and node.args:
                reason = node.args[0]
            else:
                reason = keywords.get("reason")
            skips.append((reason_key(_reason_text(reason, assigned)), node.lineno))
    return markers, skips


def inventory(root: Path) -> dict[str, list[tuple[str, str]]]:
    """kind -> [(item, "file:line")] for a checkout at ``root``: ``variable``, ``marker``, ``skip``, ``ini``."""
    found: dict[str, list[tuple[str, str]]] = {"variable": [], "marker": [], "skip": [], "ini": []}
    for path in scanned_files(root):
        where = path.relative_to(root).as_posix()
        source = path.read_text(encoding="utf-8")
        if _is_python(path):
            found["variable"] += [(n, f"{where}:{line}") for n, line in python_environment_reads(source)]
            markers, skips = python_markers_and_skips(source)
            found["marker"] += [(n, f"{where}:{line}") for n, line in markers]
            found["skip"] += [(n, f"{where}:{line}") for n, line in skips]
        else:
            found["variable"] += [(n, f"{where}:{line}") for n, line in shell_environment_reads(source)]
    ini = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    found["ini"] = [(key, "pyproject.toml") for key in ini]
    found["ini"] += [(option.split("=")[0], "pyproject.toml addopts") for option in ini.get("addopts", "").split()
                     if option.startswith("-")]
    return found


def section_one(contributing: str) -> str:
    """The text of CONTRIBUTING's "## 1." section, whitespace collapsed."""
    match = re.search(r"^## 1\..*?(?=^## 2\.)", contributing, re.MULTILINE | re.DOTALL)
    assert match, "CONTRIBUTING.md has no section '## 1.' followed by '## 2.'"
    return " ".join(match.group(0).split())


def named(kind: str, item: str, text: str) -> bool:
    """Does §1 (``text``) name this item?"""
    if kind == "variable":
        return item in ORDINARY or re.search(rf"(?<![A-Z0-9_]){item}(?![A-Z0-9_])", text) is not None
    if kind == "marker":
        return item in ORDINARY_MARKERS or re.search(rf"mark\.{item}\b", text) is not None
    if kind == "skip":
        return bool(item) and item in text
    return f"`{item}" in text if not item.startswith("-") else item in text    # ini: `testpaths`, --nbval-lax


def missing(root: Path, contributing: str, found: dict[str, list[tuple[str, str]]] | None = None) -> list[str]:
    """What the code at ``root`` has (its ``found`` inventory) and §1 of ``contributing`` does not name, one line
    each, with where."""
    text = section_one(contributing)
    lines = []
    for kind, items in (found or inventory(root)).items():
        seen = set()
        for item, where in items:
            if (kind, item) not in seen and not named(kind, item, text):
                lines.append(f"{kind} {item or '(a reason without literal words)'!r} at {where}")
            seen.add((kind, item))
    return lines


def stale(root: Path, contributing: str, found: dict[str, list[tuple[str, str]]] | None = None) -> list[str]:
    """``SEQLAB_*`` variables §1 names that no scanned code reads."""
    read = {name for name, _ in (found or inventory(root))["variable"]}
    return sorted(set(re.findall(r"\bSEQLAB_[A-Z0-9_]*[A-Z0-9]", section_one(contributing))) - read)


@pytest.fixture(scope="module")
def repository() -> dict[str, list[tuple[str, str]]]:
    return inventory(ROOT)


def test_section_one_names_every_variable_marker_skip_reason_and_ini_option(repository):
    lines = missing(ROOT, (ROOT / "CONTRIBUTING.md").read_text(), repository)
    if lines:
        pytest.fail("CONTRIBUTING §1 does not name these (add a line there, or remove the switch):\n  "
                    + "\n  ".join(lines), pytrace=False)


def test_section_one_names_no_variable_the_code_does_not_read(repository):
    names = stale(ROOT, (ROOT / "CONTRIBUTING.md").read_text(), repository)
    if names:
        pytest.fail(f"CONTRIBUTING §1 names variables that nothing reads: {names}", pytrace=False)


# -- the scanner itself, on a tiny tree --------------------------------------------------------------------
CONTRIBUTING = """# x
## 1. How the course is tested
`SEQLAB_DEVICE`; `@pytest.mark.timeout`; `@pytest.mark.skipif` "needs a CUDA GPU"; `testpaths`, `addopts`: `-ra`.
## 2. Next
SEQLAB_FAKE is named here, outside §1, which does not count.
"""


@pytest.fixture
def tree(tmp_path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\naddopts = "-ra"\n')
    (tmp_path / "course.py").write_text('import os\nDEVICE = "SEQLAB_DEVICE"\nos.environ.get(DEVICE)\n')
    (tmp_path / "tests" / "test_a.py").write_text(
        "import pytest, torch\n"
        "@pytest.mark.timeout(5)\n"
        "@pytest.mark.parametrize('x', [1])\n"
        "@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU (torch sees none)')\n"
        "def test_a(x):\n    pass\n")
    return tmp_path


def test_the_scanner_passes_a_tree_whose_section_one_names_everything(tree):
    assert missing(tree, CONTRIBUTING) == []


@pytest.mark.parametrize("where, code, expected", [
    ("course.py", 'import os\nos.environ.get("SEQLAB_FAKE")\n', "variable 'SEQLAB_FAKE' at course.py:2"),
    ("testbed.py", 'import os\nif "SEQLAB_FAKE" in os.environ: pass\n', "variable 'SEQLAB_FAKE' at testbed.py:2"),
    ("lib/seqlab/x.py", 'import os\nNAME = "SEQLAB_FAKE"\nos.environ[NAME]\n', "variable 'SEQLAB_FAKE' at lib/seqlab/x.py:3"),
    ("hub/start.py", 'def f(environ):\n    return environ.get("CPU_FAKE")\n', "variable 'CPU_FAKE' at hub/start.py:2"),
    ("scripts/x.py", 'from os import getenv\nV = ("A_FAKE",)\n[getenv(v) for v in V]\n', "variable 'A_FAKE' at scripts/x.py:3"),
    (".ci/run", 'echo "${SEQLAB_FAKE:-0}"\n', "variable 'SEQLAB_FAKE' at .ci/run:1"),
    ("tests/test_b.py", "import pytest\n@pytest.mark.slow\ndef test_b(): pass\n", "marker 'slow' at tests/test_b.py:2"),
    ("tests/test_b.py", "import pytest\ndef test_b():\n    why = f'needs {1} quantum computer'\n    pytest.skip(why)\n",
     "skip 'needs quantum computer' at tests/test_b.py:4"),
    ("conftest.py", "import pytest\nx = pytest.importorskip('numpy_fake')\n", "skip 'numpy_fake' at conftest.py:2"),
    ("tests/test_b.py", "import pytest\npytestmark = pytest.mark.xfail(reason='known to fail on ARM')\n",
     "skip 'known to fail on' at tests/test_b.py:2"),
])
def test_the_scanner_names_what_section_one_lacks(tree, where, code, expected):
    (tree / where).parent.mkdir(parents=True, exist_ok=True)
    (tree / where).write_text(code)
    assert expected in missing(tree, CONTRIBUTING)


def test_the_scanner_names_a_new_ini_option_and_a_stale_variable(tree):
    (tree / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
                                         'addopts = "-ra --strict-markers"\nxfail_strict = true\n')
    assert missing(tree, CONTRIBUTING) == ["ini 'xfail_strict' at pyproject.toml",
                                           "ini '--strict-markers' at pyproject.toml addopts"]
    assert stale(tree, CONTRIBUTING.replace("`SEQLAB_DEVICE`", "`SEQLAB_DEVICE`, `SEQLAB_GONE`")) == ["SEQLAB_GONE"]


def test_ordinary_variables_and_comments_pass(tree):
    (tree / "Makefile").write_text('# $SEQLAB_FAKE in a comment\nall:\n\techo $$HOME $(PYTHON)\n')
    (tree / "scripts").mkdir()
    (tree / "scripts" / "x.py").write_text('import os\nos.environ.get("PATH")\n"SEQLAB_FAKE"  # a string alone\n')
    assert missing(tree, CONTRIBUTING) == []


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    for kind, items in inventory(root).items():
        distinct = sorted({item for item, _ in items})
        passed = [i for i in distinct if i in (ORDINARY if kind == "variable" else ORDINARY_MARKERS)]
        print(f"{kind}: {len(distinct) - len(passed)} for §1 to name" + (f", {len(passed)} ordinary" if passed else ""))
        for item in distinct:
            where = sorted({w for i, w in items if i == item})
            print(f"  {item!r:45} {', '.join(where[:4])}" + (f" and {len(where) - 4} more" if len(where) > 4 else ""))
