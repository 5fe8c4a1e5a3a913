"""CONTRIBUTING §1 names every switch of the test run that the code has.

The repository's own files are scanned (:data:`SCANNED`: Python, shell, the notebooks' code cells, binder/), not a
list typed here: every environment variable the code reads (``os.environ[...]``, ``.get``, ``.setdefault``,
``.pop``, ``in``, ``os.getenv``, by any alias, through a copy or a parameter the environment is passed in; a
module constant or a literal loop holding the name; the literal a helper is called with; ``$NAME`` in shell),
every ``pytest.mark.NAME`` (``mark``, ``pt.mark`` too), every skip and xfail reason, pytest's and unittest's (its
first words), every conftest hook (``pytest_*``, ``collect_ignore``, ``collect_ignore_glob``, ``pytest_plugins``)
and every pytest ini option. A new one that §1 does not name fails with its file and line; a skip reason or hook
§1 names on a line that does not name its file fails too, and so does a read whose key is no literal unless a
``# env-key: WHY`` comment (:data:`EXEMPT`) says why, and a ``SEQLAB_*`` variable §1 names that no code reads
any more. Ordinary variables of the system, Python and pytest pass through :data:`ORDINARY`.

    python tests/test_contributing.py [ROOT]      # the inventory of a checkout (e.g. an older commit's)
"""

from __future__ import annotations

import ast
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("course.py", "testbed.py", "conftest.py", "tests", "scripts", "lib/seqlab", "hub", ".ci/run", "Makefile",
           "notebooks", "binder", "postBuild")
# read by the code, deciding nothing of the course's own: the system's, the shell's, Python's and pytest's
ORDINARY = {"HOME", "PATH", "PWD", "PYTHON", "PYTHONPATH", "SECONDS", "XDG_RUNTIME_DIR", "PYTEST_CURRENT_TEST"}
ORDINARY_MARKERS = {"parametrize"}                 # makes tests; selects, skips and compares nothing
SKIP_CALLS = {"pytest.skip", "pytest.xfail", "pytest.importorskip", "pytest.mark.skip", "pytest.mark.skipif",
              "pytest.mark.xfail", "pytest.skip.Exception", "unittest.skip", "unittest.skipIf", "unittest.skipUnless",
              "unittest.SkipTest", "unittest.case.SkipTest"}
REASON_WORDS = 4                                   # a skip reason is named by its first words
# a read whose key is no literal (a helper's parameter, an f-string) fails unless one of its lines says why here
EXEMPT = re.compile(r"#\s*env-key:\s*\S.{9,}")
CONFTEST_NAMES = {"collect_ignore", "collect_ignore_glob", "pytest_plugins"}
NOTEBOOK_MAGIC = re.compile(r"^\s*[%!]")           # IPython's magics and shell escapes: not Python


def scanned_files(root: Path) -> list[Path]:
    files = []
    for name in SCANNED:
        path = root / name
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts and
                            (p.suffix in (".py", ".sh", ".ipynb") or not p.suffix and _shebang(p)))
        elif path.exists():
            files.append(path)
    return files


def _shebang(path: Path) -> str:
    with path.open("rb") as f:
        first = f.readline(200)
    return first.decode("utf-8", "replace") if first.startswith(b"#!") else ""


def _is_python(path: Path) -> bool:
    return path.suffix == ".py" or not path.suffix and "python" in _shebang(path)


def notebook_cells(source: str) -> list[tuple[int, str, str, list[str]]]:
    """(cell number, Python, shell, nbval's switches) of a notebook's code cells. The Python has IPython's lines
    blanked (line numbers kept); the shell is those lines: ``!command``, a ``%%bash`` cell, ``%env NAME`` (read as
    ``$NAME``). nbval's switches: its tags (``nbval-*``, ``raises-exception``) and ``# NBVAL_*`` comments."""
    cells = []
    for number, cell in enumerate(json.loads(source)["cells"]):
        if cell["cell_type"] != "code":
            continue
        lines = ("".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]).split("\n")
        if re.match(r"%%(bash|sh|script)\b", lines[0]):
            python, shell = [""] * len(lines), [""] + lines[1:]
        else:
            python = ["" if NOTEBOOK_MAGIC.match(line) else line for line in lines]
            shell = [line.lstrip()[1:] if line.lstrip().startswith("!") else
                     re.sub(r"^\s*%(set_)?env\s+([A-Za-z_]\w*).*", r"$\2", line) if re.match(r"\s*%(set_)?env\s", line)
                     else "" for line in lines]
        switches = [t for t in cell.get("metadata", {}).get("tags", [])
                    if t.startswith("nbval-") or t == "raises-exception"]
        switches += re.findall(r"^\s*#\s*(NBVAL_\w+)", "\n".join(lines), re.MULTILINE)
        cells.append((number, "\n".join(python), "\n".join(shell), switches))
    return cells


def _dotted(node: ast.AST) -> str:
    """``pytest.mark.skipif`` for that expression, "" for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> what it stands for: ``import pytest as pt``, ``from pytest import mark``, ``from os import
    environ``, ``import unittest as ut``, ``m = pytest.mark``."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname})
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            aliases.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names if a.name != "*"})
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _canonical(node.value, aliases)
            if value.split(".")[0] in ("pytest", "unittest", "os") and "." in value:
                aliases[node.targets[0].id] = value
    return aliases


def _canonical(node: ast.AST, aliases: dict[str, str]) -> str:
    """The dotted name with its first part's alias resolved: ``pt.mark.slow`` -> ``pytest.mark.slow``."""
    head, _, rest = _dotted(node).partition(".")
    if not head:
        return ""
    head = aliases.get(head, head)
    return f"{head}.{rest}" if rest else head


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


def _arguments(function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call) -> list[tuple[str, ast.AST]]:
    """(parameter, value) of a call to ``function`` (``self`` skipped for ``obj.method(...)``)."""
    params = [a.arg for a in function.args.posonlyargs + function.args.args]
    if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        params = params[1:]
    return list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]


class _Environment:
    """Which expressions of one source are the environment: ``os.environ`` (by any alias), a name for it passed
    around (``environ``, ``env``), and whatever the source binds to one of those or to a copy of one
    (``base = dict(os.environ)``, ``e = {**os.environ}``, ``self.vars = os.environ.copy()``, a parameter of a
    function the source calls with the environment)."""

    def __init__(self, tree: ast.Module, aliases: dict[str, str]):
        self.aliases, self.names = aliases, {"environ", "env"}
        functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for _ in range(4):                                     # names bound to names bound to the environment
            before = len(self.names)
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None \
                        and self(node.value):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    self.names |= {_dotted(t) for t in targets if _dotted(t)}
                elif isinstance(node, ast.Call) and (name := _dotted(node.func).split(".")[-1]) in functions:
                    self.names |= {param for param, value in _arguments(functions[name], node) if self(value)}
            if len(self.names) == before:
                break

    def __call__(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "environ" or _canonical(node, self.aliases) == "os.environ":
            return True
        if isinstance(node, (ast.Name, ast.Attribute)):
            return _dotted(node) in self.names
        if isinstance(node, ast.Call):
            func = node.func
            return (isinstance(func, ast.Attribute) and func.attr == "copy" and self(func.value)) or \
                (_dotted(func) == "dict" and bool(node.args) and self(node.args[0]))
        if isinstance(node, ast.Dict):
            return any(k is None and self(v) for k, v in zip(node.keys, node.values))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self(node.left)
        return False


def _names(node: ast.AST, constants: dict[str, list[str]]) -> list[str] | None:
    """The variable names a key stands for, only NAMES_LIKE_THESE (``env["dependencies"]`` is a YAML file's);
    None for a key that is no literal and no module constant."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        names = [node.value]
    elif isinstance(node, ast.Name) and node.id in constants:
        names = constants[node.id]
    else:
        return None
    return [name for name in names if re.fullmatch(r"[A-Z_][A-Z0-9_]*", name)]


def _loop_names(name: str, node: ast.AST, parents: dict[ast.AST, ast.AST], constants: dict[str, list[str]]):
    """The names ``name`` runs over where ``node`` is inside ``for name in ("A", "B")`` (or a comprehension's)."""
    around = parents.get(node)
    while around is not None and not isinstance(around, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        loops = [around] if isinstance(around, ast.For) else getattr(around, "generators", [])
        for loop in loops:
            if isinstance(loop.target, ast.Name) and loop.target.id == name:
                if isinstance(loop.iter, (ast.Tuple, ast.List, ast.Set)) and all(
                        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in loop.iter.elts):
                    return [e.value for e in loop.iter.elts if re.fullmatch(r"[A-Z_][A-Z0-9_]*", e.value)]
                return None
        around = parents.get(around)
    return None


def _exempt(node: ast.AST, lines: list[str]) -> bool:
    """Does one of the node's lines, or a comment line right above it, carry ``# env-key: WHY``?"""
    above = lines[node.lineno - 2:node.lineno - 1] if node.lineno > 1 else []
    return any(EXEMPT.search(line) for line in lines[node.lineno - 1:(node.end_lineno or node.lineno)]) or \
        any(line.lstrip().startswith("#") and EXEMPT.search(line) for line in above)


def python_environment_reads(source: str) -> list[tuple[str, int]]:
    """(variable, line) for every environment variable this Python source reads."""
    return python_environment_scan(source)[0]


def python_environment_scan(source: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """([(variable, line)], [(key, line)]): every environment variable this Python source reads, and every read
    whose key is no literal (``os.environ[name]``, ``getenv(f"X_{n}")``, the whole environment iterated), unless
    its line carries ``# env-key: WHY`` (:data:`EXEMPT`). A literal a function of the source is called with, in
    the place of the parameter it reads by, counts as a read at the call."""
    tree = ast.parse(source)
    lines = source.splitlines()
    aliases = _aliases(tree)
    constants = _constants(tree)
    environment = _Environment(tree, aliases)
    found, unnamed = [], []
    readers: dict[str, set[str]] = {}                        # function -> the parameters it reads the environment by
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        keys: list[ast.AST] = []
        if isinstance(node, ast.Call):
            func = node.func
            if _canonical(func, aliases) == "os.getenv" and node.args:
                keys = [node.args[0]]
            elif isinstance(func, ast.Attribute) and environment(func.value):
                if func.attr in ("get", "setdefault", "pop") and node.args:
                    keys = [node.args[0]]
                elif func.attr in ("items", "keys", "values"):
                    keys = [node]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and environment(node.value):
            keys = [node.slice]
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
                and environment(node.comparators[0]):
            keys = [node.left]
        elif isinstance(node, (ast.For, ast.comprehension)) and environment(node.iter):
            keys = [node.iter]
        for key in keys:
            names = _names(key, constants)
            if names is not None:
                found += [(name, node.lineno) for name in names]
                continue
            line = getattr(node, "lineno", None) or parents[node].lineno
            if isinstance(key, ast.Name) and (names := _loop_names(key.id, node, parents, constants)) is not None:
                found += [(name, line) for name in names]
                continue
            if isinstance(key, ast.Name):                   # a parameter of the function around it, perhaps
                around = parents.get(node)
                while around is not None and not isinstance(around, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    around = parents.get(around)
                if around is not None and key.id in [a.arg for a in around.args.posonlyargs + around.args.args +
                                                     around.args.kwonlyargs]:
                    readers.setdefault(around.name, set()).add(key.id)
            if not _exempt(node if hasattr(node, "lineno") else parents[node], lines):
                unnamed.append((ast.unparse(key), line))
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (name := _dotted(node.func).split(".")[-1]) in readers:
            passed = [value for param, value in _arguments(functions[name], node) if param in readers[name]]
            found += [(n, node.lineno) for a in passed for n in (_names(a, constants) or [])]
    return found, unnamed


def shell_environment_reads(source: str) -> list[tuple[str, int]]:
    """(variable, line) for every ``$NAME`` / ``${NAME}`` (upper case: the environment's) outside comments; in a
    Makefile ``$$NAME`` is the shell's and ``$(NAME)`` make's own."""
    return shell_environment_scan(source)[0]


def shell_environment_scan(source: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """As :func:`shell_environment_reads`, and the indirect reads (``${!name}``) not marked ``# env-key: WHY``."""
    found, unnamed = [], []
    for number, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        found += [(name, number) for name in re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", line)]
        if not EXEMPT.search(line):
            unnamed += [(f"${{!{name}}}", number) for name in re.findall(r"\$\{!(\w+)", line)]
    return found, unnamed
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
    words of every skip, skipif, xfail or importorskip (``importorskip`` names its module), pytest's by any
    alias (``import pytest as pt``, ``from pytest import mark, skip``), and unittest's ``skip``, ``skipIf``,
    ``skipUnless``, ``SkipTest``, ``self.skipTest`` and ``expectedFailure``."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    assigned = {t.id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)}
    markers, skips = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _canonical(node.value, aliases) == "pytest.mark":
            markers.append((node.attr, node.lineno))
        if isinstance(node, (ast.Name, ast.Attribute)) and _canonical(node, aliases) == "unittest.expectedFailure":
            skips.append(("unittest.expectedFailure", node.lineno))
        if not isinstance(node, ast.Call):
            continue
        name = _canonical(node.func, aliases)
        if name not in SKIP_CALLS and not (isinstance(node.func, ast.Attribute) and node.func.attr == "skipTest"):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        position = {"pytest.importorskip": 0, "pytest.mark.skipif": None, "pytest.mark.xfail": None,
                    "unittest.skipIf": 1, "unittest.skipUnless": 1}.get(name, 0)
        reason = (node.args[position] if position is not None and len(node.args) > position else
                  keywords.get("reason", keywords.get("msg", keywords.get("modname"))))
        skips.append((reason_key(_reason_text(reason, assigned)), node.lineno))
    return markers, skips


def python_hooks(source: str) -> list[tuple[str, int]]:
    """(name, line) of every ``pytest_*`` function (a hook, in a conftest.py or a plugin) and every assignment to
    ``collect_ignore``, ``collect_ignore_glob`` or ``pytest_plugins`` (``=``, ``+=``, ``.append``, ``.extend``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("pytest_"):
            found.append((node.name, node.lineno))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [(t.id, node.lineno) for t in targets if isinstance(t, ast.Name) and t.id in CONFTEST_NAMES]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                _dotted(node.func.value) in CONFTEST_NAMES:
            found.append((_dotted(node.func.value), node.lineno))
    return found


KINDS = ("variable", "key", "marker", "skip", "hook", "nbval", "ini")


def inventory(root: Path) -> dict[str, list[tuple[str, str]]]:
    """kind -> [(item, "file:line")] for a checkout at ``root``: ``variable``, ``key`` (a read by a key that is no
    literal), ``marker``, ``skip``, ``hook`` (conftest's), ``nbval`` (a notebook cell's tag or comment for nbval),
    ``ini``. A notebook's place is "file:cell N:line"."""
    found: dict[str, list[tuple[str, str]]] = {kind: [] for kind in KINDS}
    for path in scanned_files(root):
        where = path.relative_to(root).as_posix()
        source = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            sources = []
            for number, python, shell, switches in notebook_cells(source):
                sources.append((f"{where}:cell {number}", python))
                variables, keys = shell_environment_scan(shell)
                found["variable"] += [(n, f"{where}:cell {number}:{line}") for n, line in variables]
                found["key"] += [(n, f"{where}:cell {number}:{line}") for n, line in keys]
                found["nbval"] += [(n, f"{where}:cell {number}") for n in switches]
        elif _is_python(path):
            sources = [(where, source)]
        else:
            variables, keys = shell_environment_scan(source)
            found["variable"] += [(n, f"{where}:{line}") for n, line in variables]
            found["key"] += [(n, f"{where}:{line}") for n, line in keys]
            continue
        for place, code in sources:
            variables, keys = python_environment_scan(code)
            markers, skips = python_markers_and_skips(code)
            for kind, items in zip(KINDS, (variables, keys, markers, skips, python_hooks(code))):
                found[kind] += [(n, f"{place}:{line}") for n, line in items]
    ini = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    found["ini"] = [(key, "pyproject.toml") for key in ini]
    found["ini"] += [(option.split("=")[0], "pyproject.toml addopts") for option in ini.get("addopts", "").split()
                     if option.startswith("-")]
    return found


def section_one(contributing: str) -> str:
    """The text of CONTRIBUTING's "## 1." section, whitespace collapsed."""
    return " ".join(section_one_items(contributing))


def section_one_items(contributing: str) -> list[str]:
    """§1's paragraphs and list items (a line starting "- " begins one), each with its whitespace collapsed."""
    match = re.search(r"^## 1\..*?(?=^## 2\.)", contributing, re.MULTILINE | re.DOTALL)
    assert match, "CONTRIBUTING.md has no section '## 1.' followed by '## 2.'"
    items: list[list[str]] = [[]]
    for line in match.group(0).splitlines():
        if not line.strip() or line.startswith("- "):
            items.append([])
        items[-1].append(line)
    return [" ".join(" ".join(item).split()) for item in items if " ".join(item).strip()]


def names_file(text: str, path: str, paths: set[str]) -> bool:
    """Does ``text`` (one §1 item) name the file ``path``: its path, a folder above it ("tests/browser/"), or its
    bare name where no other scanned file has that name ("test_gpt.py")?"""
    candidates = [path] + [f"{'/'.join(path.split('/')[:i])}/" for i in range(1, path.count("/") + 1)]
    if sum(p.rsplit("/", 1)[-1] == path.rsplit("/", 1)[-1] for p in paths) == 1:
        candidates.append(path.rsplit("/", 1)[-1])
    return any(re.search(rf"(?<![\w/.-]){re.escape(c)}(?![\w-]|[./]\w)", text) for c in candidates)


def named(kind: str, item: str, text: str, items: list[str] = (), path: str = "",
          paths: set[str] = frozenset()) -> bool:
    """Does §1 (``text``, whole; ``items``, its list items) name this item (found in the file ``path``)? A skip
    reason, a hook and a read by a key that is no literal are named only on an item that also names the file."""
    if kind == "variable":
        return item in ORDINARY or re.search(rf"(?<![A-Z0-9_]){item}(?![A-Z0-9_])", text) is not None
    if kind == "marker":
        return item in ORDINARY_MARKERS or re.search(rf"mark\.{item}\b", text) is not None
    if kind in ("skip", "hook", "key"):
        shown = item if kind == "skip" else f"`{item}`"
        return bool(item) and any(shown in entry and names_file(entry, path, paths) for entry in items)
    if kind == "nbval":
        return f"`{item}`" in text or f"`# {item}`" in text
    return f"`{item}" in text if not item.startswith("-") else item in text    # ini: `testpaths`, --nbval-lax


def missing(root: Path, contributing: str, found: dict[str, list[tuple[str, str]]] | None = None) -> list[str]:
    """What the code at ``root`` has (its ``found`` inventory) and §1 of ``contributing`` does not name, one line
    each, with where: a variable, marker or ini option once, a skip reason or hook once per file, each read by a
    key that is no literal."""
    found = found or inventory(root)
    text, items = section_one(contributing), section_one_items(contributing)
    paths = {where.split(":")[0] for entries in found.values() for _, where in entries}
    lines = []
    for kind, entries in found.items():
        seen = set()
        for item, where in entries:
            path = where.split(":")[0]
            key = (item, path) if kind in ("skip", "hook") else (item, where) if kind == "key" else item
            if key not in seen and not named(kind, item, text, items, path, paths):
                shown = item if kind == "skip" else f"`{item}`"
                elsewhere = kind in ("skip", "hook") and item and any(shown in entry for entry in items)
                lines.append(f"{kind} {item or '(a reason without literal words)'!r} at {where}" +
                             (": §1 names it, but on no line that names this file" if elsewhere else ""))
            seen.add(key)
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
`SEQLAB_DEVICE`; `@pytest.mark.timeout`; `testpaths`, `addopts`: `-ra`.
- `@pytest.mark.skipif` "needs a CUDA GPU" in tests/test_a.py.
- reports: conftest.py's `pytest_sessionstart`.
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
    (tmp_path / "conftest.py").write_text("def pytest_sessionstart(session):\n    pass\n")
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


@pytest.mark.parametrize("where, code, expected", [
    # pytest by another name
    ("tests/test_b.py", "from pytest import mark\n@mark.slow\ndef test_b(): pass\n", "marker 'slow' at tests/test_b.py:2"),
    ("tests/test_b.py", "import pytest as pt\n@pt.mark.slow\ndef test_b(): pass\n", "marker 'slow' at tests/test_b.py:2"),
    ("tests/test_b.py", "import pytest\nm = pytest.mark\n@m.slow\ndef test_b(): pass\n", "marker 'slow' at tests/test_b.py:3"),
    ("tests/test_b.py", "from pytest import skip\nskip('needs a quantum computer', allow_module_level=True)\n",
     "skip 'needs a quantum computer' at tests/test_b.py:2"),
    ("tests/test_b.py", "import pytest as pt\ndef test_b():\n    pt.skip(reason='needs a quantum computer')\n",
     "skip 'needs a quantum computer' at tests/test_b.py:3"),
    ("tests/test_b.py", "from pytest import mark as m\n@m.skipif(True, reason='only on ARM machines')\ndef test_b(): pass\n",
     "skip 'only on ARM machines' at tests/test_b.py:2"),
    # unittest's skips
    ("tests/test_b.py", "import unittest\n@unittest.skip('needs a quantum computer')\ndef test_b(): pass\n",
     "skip 'needs a quantum computer' at tests/test_b.py:2"),
    ("tests/test_b.py", "import unittest as ut\n@ut.skipIf(True, 'only on ARM machines')\ndef test_b(): pass\n",
     "skip 'only on ARM machines' at tests/test_b.py:2"),
    ("tests/test_b.py", "from unittest import skipUnless\n@skipUnless(False, reason='only on ARM machines')\ndef t(): pass\n",
     "skip 'only on ARM machines' at tests/test_b.py:2"),
    ("tests/test_b.py", "import unittest\nclass T(unittest.TestCase):\n    def test_b(self):\n"
                        "        self.skipTest('needs a quantum computer')\n", "skip 'needs a quantum computer' at tests/test_b.py:4"),
    ("tests/test_b.py", "import unittest\ndef test_b():\n    raise unittest.SkipTest('needs a quantum computer')\n",
     "skip 'needs a quantum computer' at tests/test_b.py:3"),
    ("tests/test_b.py", "import unittest\nclass T(unittest.TestCase):\n    @unittest.expectedFailure\n    def test_b(self): pass\n",
     "skip 'unittest.expectedFailure' at tests/test_b.py:3"),
    # a reason §1 names, in a file its line does not name
    ("tests/test_new.py", "import pytest\n@pytest.mark.skipif(True, reason='needs a CUDA GPU')\ndef test_b(): pass\n",
     "skip 'needs a CUDA GPU' at tests/test_new.py:2: §1 names it, but on no line that names this file"),
    # conftest: hooks and what it leaves out
    ("tests/conftest.py", "collect_ignore = ['test_a.py']\n", "hook 'collect_ignore' at tests/conftest.py:1"),
    ("tests/conftest.py", "import sys\ncollect_ignore_glob = ['*_gpu.py'] if sys.platform == 'darwin' else []\n",
     "hook 'collect_ignore_glob' at tests/conftest.py:2"),
    ("tests/conftest.py", "import sys\nif sys.platform == 'win32':\n    collect_ignore.append('test_a.py')\n",
     "hook 'collect_ignore' at tests/conftest.py:3"),
    ("tests/conftest.py", "pytest_plugins = ['some_plugin']\n", "hook 'pytest_plugins' at tests/conftest.py:1"),
    ("tests/conftest.py", "def pytest_collection_modifyitems(config, items):\n    items[:] = items[:1]\n",
     "hook 'pytest_collection_modifyitems' at tests/conftest.py:1"),
    ("tests/conftest.py", "def pytest_sessionstart(session):\n    pass\n",
     "hook 'pytest_sessionstart' at tests/conftest.py:1: §1 names it, but on no line that names this file"),
    # the environment by another name
    ("scripts/x.py", "import os\nbase = dict(os.environ)\nbase.get('SEQLAB_FAKE')\n", "variable 'SEQLAB_FAKE' at scripts/x.py:3"),
    ("scripts/x.py", "import os\nv = {**os.environ, 'A': '1'}\nv['SEQLAB_FAKE']\n", "variable 'SEQLAB_FAKE' at scripts/x.py:3"),
    ("scripts/x.py", "import os\nclass C:\n    def __init__(self):\n        self.vars = os.environ.copy()\n"
                     "        self.vars.pop('SEQLAB_FAKE')\n", "variable 'SEQLAB_FAKE' at scripts/x.py:5"),
    ("scripts/x.py", "import os\ndef f(e):\n    return 'SEQLAB_FAKE' in e\nf(os.environ)\n", "variable 'SEQLAB_FAKE' at scripts/x.py:3"),
    ("scripts/x.py", "from os import environ as E\nE.get('SEQLAB_FAKE')\n", "variable 'SEQLAB_FAKE' at scripts/x.py:2"),
    ("scripts/x.py", "import os as o\no.getenv('SEQLAB_FAKE')\n", "variable 'SEQLAB_FAKE' at scripts/x.py:2"),
    # a key that is no literal: flagged; a helper's callers' literals are reads
    ("scripts/x.py", "import os\ndef flag(name):\n    return os.environ.get(name) == '1'\nflag('SEQLAB_FAKE')\n",
     "key 'name' at scripts/x.py:3"),
    ("scripts/x.py", "import os\ndef flag(name):\n    return os.environ.get(name) == '1'\nflag(name='SEQLAB_FAKE')\n",
     "variable 'SEQLAB_FAKE' at scripts/x.py:4"),
    ("scripts/x.py", "import os\nn = 'FAKE'\nos.environ[f'SEQLAB_{n}']\n", "key \"f'SEQLAB_{n}'\" at scripts/x.py:3"),
    ("scripts/x.py", "import os\n{k: v for k, v in os.environ.items() if k.startswith('SEQLAB_')}\n",
     "key 'os.environ.items()' at scripts/x.py:2"),
    ("scripts/x.py", "import os\nos.getenv(name)  # env-key:\n", "key 'name' at scripts/x.py:2"),     # no reason given
    ("binder/start", "#!/usr/bin/env bash\nname=SEQLAB_FAKE\necho ${!name}\n", "key '${!name}' at binder/start:3"),
    # binder/
    ("binder/postBuild", "#!/usr/bin/env bash\nset -eu\necho \"$SEQLAB_FAKE\"\n", "variable 'SEQLAB_FAKE' at binder/postBuild:3"),
    ("binder/start", "#!/usr/bin/env python3\nimport os\nos.environ['SEQLAB_FAKE']\n", "variable 'SEQLAB_FAKE' at binder/start:3"),
])
def test_the_scanner_sees_through_aliases_helpers_copies_conftest_and_binder(tree, where, code, expected):
    (tree / where).parent.mkdir(parents=True, exist_ok=True)
    (tree / where).write_text(code)
    assert expected in missing(tree, CONTRIBUTING)


def test_the_scanner_reads_the_code_cells_of_notebooks(tree):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "os.environ['SEQLAB_PROSE'] is prose"},
             {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": ["%matplotlib inline\n", "import os, pytest\n", "os.environ['SEQLAB_FAKE']\n",
                         "!echo $SEQLAB_SHELL\n", "pytest.skip('needs a quantum computer')"]}]
    cells += [{"cell_type": "code", "metadata": {"tags": ["nbval-skip", "hide-input"]}, "outputs": [],
               "execution_count": None, "source": "# NBVAL_RAISES_EXCEPTION\n%env SEQLAB_MAGIC\n1 / 0"},
              {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
               "source": "%%bash\necho ${SEQLAB_BASH}"}]
    (tree / "notebooks").mkdir()
    (tree / "notebooks" / "01-x.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                                                "nbformat_minor": 5}))
    assert sorted(missing(tree, CONTRIBUTING)) == sorted([
        "variable 'SEQLAB_FAKE' at notebooks/01-x.ipynb:cell 1:3",
        "variable 'SEQLAB_SHELL' at notebooks/01-x.ipynb:cell 1:4",
        "variable 'SEQLAB_MAGIC' at notebooks/01-x.ipynb:cell 2:2",
        "variable 'SEQLAB_BASH' at notebooks/01-x.ipynb:cell 3:2",
        "skip 'needs a quantum computer' at notebooks/01-x.ipynb:cell 1:5",
        "nbval 'nbval-skip' at notebooks/01-x.ipynb:cell 2",
        "nbval 'NBVAL_RAISES_EXCEPTION' at notebooks/01-x.ipynb:cell 2"])


def test_exempt_and_resolved_reads_pass(tree):
    (tree / "scripts").mkdir()
    (tree / "scripts" / "x.py").write_text(
        "import os\n"
        "def flag(name):\n"
        "    return os.environ.get(name)  # env-key: the names its callers pass, each scanned at the call\n"
        "flag('SEQLAB_DEVICE')\n"
        "# env-key: a child's environment, less the one variable its test decides\n"
        "child = {k: v for k, v in os.environ.items() if k != 'SEQLAB_DEVICE'}\n"
        "for name in ('SEQLAB_DEVICE',):\n"
        "    os.environ.pop(name, None)\n")
    assert missing(tree, CONTRIBUTING) == []
    found = inventory(tree)["variable"]
    assert ("SEQLAB_DEVICE", "scripts/x.py:4") in found and ("SEQLAB_DEVICE", "scripts/x.py:8") in found


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
