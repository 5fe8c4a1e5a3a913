"""Build the course's offline HTML edition: every executed notebook, in order, as static pages.

    python scripts/build_site.py [--out build/site]        # what `make site` runs (after the set-up)
    python scripts/build_site.py --release DIR --out DIR   # the edition of a student release: no solutions

The notebooks are shown as committed (nothing is re-run), with navigation and a table of contents
(Sphinx, myst-nb and the book theme; configuration in site/conf.py). The result is a folder of
static files an instructor can put on a course page or into an LMS and a student can read offline
or on a phone: open ``build/site/index.html``. No page fetches anything from the network: MathJax is
copied into the build from the npm package pinned in site/package.json (installed once into
.cache/npm/ with ``npm ci``), and widget outputs, whose JavaScript would come from a CDN, are
replaced by a note (each widget has a static figure beside it). Solutions stay folded (<details>).

Steps: stage site/ and the notebooks into build/site-src/, then sphinx-build into --out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from seqlab import manifest
from seqlab.notebook_rules import WIDGET_MIME, is_reveal, notebook_heading

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # course.py, at the root, installs the npm packages; a script sees only scripts/
import course  # noqa: E402

SITE = ROOT / "site"
WIDGET_NOTE = ("*A live widget is here when you run this notebook in JupyterLab (`make lab`). "
               "Its static figure, with the same content at its starting setting, is shown beside it.*")


def npm_package(name: str) -> Path:
    """The folder of an npm package pinned in site/package.json (``course.npm_packages`` runs ``npm ci`` once)."""
    modules = course.npm_packages()
    if modules is None or not (modules / name).exists():
        sys.exit(f"[site] the npm package {name} is missing from {course.NPM_DIR}: see the note above")
    return modules / name


def without_widget_outputs(nb: nbformat.NotebookNode) -> int:
    """Replace each widget's output (its JavaScript view, which would need a CDN) by a short note, in place.
    Returns how many were replaced."""
    replaced = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for output in cell.get("outputs", []):
            if WIDGET_MIME in output.get("data", {}):
                replaced += 1
                output = nbformat.v4.new_output("display_data", data={"text/markdown": WIDGET_NOTE})
            outputs.append(output)
        cell.outputs = outputs
    return replaced


TOGGLE_LABEL = '<summary aria-label="Toggle hidden content">'


def fix_toggle_names(page: Path) -> None:
    """myst-nb labels each hide-input/hide-output toggle "Toggle hidden content" while it shows "Show code cell
    output": a screen reader would announce a name other than the visible one (axe: label-content-name-mismatch).
    Without the label the visible text is the name."""
    html = page.read_text(encoding="utf-8")
    if TOGGLE_LABEL in html:
        page.write_text(html.replace(TOGGLE_LABEL, "<summary>"), encoding="utf-8")


def fold_reveals(nb: nbformat.NotebookNode) -> int:
    """Fold the output of each reveal cell (a prediction's measurement) behind myst-nb's "show output"
    toggle, so a reader meets the question before the answer. Returns how many were folded."""
    folded = 0
    for cell in nb.cells:
        if is_reveal(cell) and cell.get("outputs"):
            tags = cell.metadata.setdefault("tags", [])
            if "hide-output" not in tags:
                tags.append("hide-output")
            folded += 1
    return folded


INDEX = """# seqlab: from recurrent networks to Transformers

A course in {count}, in {part_count}: {parts}. Every model is written from scratch and
checked against PyTorch's own, and every notebook ends with a cell of assertions that states its claims.

This is the read-only edition: each notebook as it was last executed, with its outputs and figures.
To run the code, move the sliders and do the exercises, get the course and open it in JupyterLab
(`make lab`; see the README). {solutions}
{toctrees}"""

TOCTREE = """
```{{toctree}}
:maxdepth: 1
:caption: {caption}

{entries}
```
"""
START = "Start"                      # the caption of the notebooks in no part (00)


def _many(n: int, noun: str) -> str:
    return f"{n} {noun}" + "s" * (n != 1)


def index_page(stems: list[str], *, release: bool = False) -> str:
    """The edition's index.md, from the course manifest: the notebooks among ``stems`` (file stems) in teaching
    order, one table of contents per part, captioned with the part's name, each entry titled with its heading.
    A stem the manifest lacks stops the build, naming it."""
    try:
        present = {manifest.notebook(stem).slug for stem in stems}
    except manifest.UnknownNotebook as error:
        raise SystemExit(f"[site] {error}") from None
    groups = [(part or START, [nb for nb in manifest.NOTEBOOKS if nb.part == part and nb.slug in present])
              for part in (None, *manifest.PARTS)]
    groups = [(caption, notebooks) for caption, notebooks in groups if notebooks]
    parts = [caption for caption, _ in groups if caption != START]
    toctrees = "".join(TOCTREE.format(caption=caption[0].upper() + caption[1:], entries="\n".join(
        f"{nb.heading.removeprefix('# ')} <notebooks/{nb.slug}>" for nb in notebooks))
        for caption, notebooks in groups)
    return INDEX.format(count=_many(len(present), "notebook"), part_count=_many(len(parts), "part"),
                        parts="; ".join(parts), toctrees=toctrees,
                        solutions=SOLUTIONS_LATER if release else SOLUTIONS_FOLDED)


SOLUTIONS_FOLDED = "Solutions stay folded until you open them."
SOLUTIONS_LATER = "This edition is a student release: the solutions are posted after each deadline."


def stage(staging: Path, source: Path = ROOT / "notebooks", *, release: bool = False) -> tuple[int, int]:
    """Write the Sphinx source folder: conf, static files, MathJax, the index, the notebooks of ``source``
    (the course's, or a student release's from ``course.py release``: then the index says so)."""
    if staging.exists():
        shutil.rmtree(staging)
    shutil.copytree(SITE, staging, ignore=shutil.ignore_patterns("package*.json", "__pycache__"))
    shutil.copytree(npm_package("mathjax") / "es5", staging / "_static" / "mathjax")
    (staging / "notebooks").mkdir()
    paths = sorted(source.glob("[0-9][0-9]-*.ipynb"))
    if not paths:
        raise SystemExit(f"[site] no notebooks NN-*.ipynb in {source}")
    index = index_page([path.stem for path in paths], release=release)      # every file a course notebook
    widgets = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        heading = manifest.notebook(path.stem).heading
        if notebook_heading(nb) != heading:         # its page's title: fail here, not in Sphinx
            raise SystemExit(f"[site] {path.name} begins {notebook_heading(nb)!r}, not its heading in "
                             f"lib/seqlab/manifest.py, {heading!r}")
        widgets += without_widget_outputs(nb)
        fold_reveals(nb)
        nbformat.write(nb, staging / "notebooks" / path.name)
    (staging / "index.md").write_text(index)
    return len(paths), widgets


def build(out: Path, release: Path | None = None) -> Path:
    started = time.perf_counter()
    staging = ROOT / "build" / "site-src"
    count, widgets = stage(staging, release or ROOT / "notebooks", release=release is not None)
    if out.exists():
        shutil.rmtree(out)
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-j", "1", str(staging), str(out)],
                   check=True, cwd=ROOT)
    (out / ".buildinfo").unlink(missing_ok=True)
    for page in out.rglob("*.html"):
        fix_toggle_names(page)
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html"))
    (out / "pages.json").write_text(json.dumps(pages, indent=1) + "\n")
    print(f"[site] {count} notebooks ({widgets} widget outputs replaced by a note) -> {len(pages)} pages in "
          f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}/ in {time.perf_counter() - started:.0f} s;"
          f" open {out / 'index.html'}", flush=True)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    parser.add_argument("--release", type=Path, help="build from a student release (course.py release --out DIR)")
    args = parser.parse_args(argv)
    build(args.out.resolve(), args.release.resolve() if args.release else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
