"""The slide rule (scripts/notebook_slides.py) on small synthetic notebooks: cells are split at their
headings without losing a character, ids stay valid and unique, widgets get sub-slides of their own,
and --check names what breaks the rule."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import notebook_slides
from seqlab.notebook_rules import WIDGET_MIME

ROOT = Path(__file__).resolve().parent.parent

WIDGET_OUTPUT = nbformat.v4.new_output("display_data", data={
    "text/plain": "VBox(children=(FloatSlider(value=2.0),))",
    WIDGET_MIME: {"model_id": "abc", "version_major": 2, "version_minor": 0}})


def _notebook(*cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from seqlab.notebook import setup\nsetup()"), *cells,
                nbformat.v4.new_code_cell("assert True")]
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell{i}"
    return nb


def _types(nb) -> list[str]:
    return [c.metadata.get("slideshow", {}).get("slide_type", "-") for c in nb.cells]


def test_a_cell_with_three_headings_becomes_three_cells_with_every_character_kept():
    source = "## Part one\n\nSome text.\n\n### A detail\n\nMore text.\nLast line.\n\n## Part two\nEnd."
    nb = _notebook(nbformat.v4.new_markdown_cell(source))
    changes = notebook_slides.apply(nb)
    md = [c for c in nb.cells if c.cell_type == "markdown"]
    assert [c.source for c in md] == ["## Part one\n\nSome text.", "### A detail\n\nMore text.\nLast line.",
                                      "## Part two\nEnd."]
    # consecutive slices of the old source: only the newlines at each cut were dropped
    rebuilt = "\n\n".join(c.source for c in md[:2]) + "\n\n" + md[2].source
    assert rebuilt == source
    assert [c.id for c in md] == ["cell1", "cell1-2", "cell1-3"]
    assert _types(nb) == ["skip", "slide", "subslide", "slide", "skip"]
    assert any("split into 3 cells" in change for change in changes)
    nbformat.validate(nb)


def test_text_before_the_first_heading_stays_on_the_slide_it_continues():
    nb = _notebook(nbformat.v4.new_markdown_cell("# Title"),
                   nbformat.v4.new_markdown_cell("An introduction.\n### Then a sub-slide\nbody"))
    notebook_slides.apply(nb)
    assert [c.source for c in nb.cells[1:-1]] == ["# Title", "An introduction.", "### Then a sub-slide\nbody"]
    assert _types(nb) == ["skip", "slide", "-", "subslide", "skip"]


def test_hashes_inside_fenced_code_and_leading_blank_lines_are_not_headings():
    source = "\n\n## Heading\n```python\n# a comment, not a heading\nx = 1\n```\n~~~\n## nor this\n~~~\ntext"
    nb = _notebook(nbformat.v4.new_markdown_cell(source))
    assert notebook_slides.heading_lines(source) == [2]
    notebook_slides.apply(nb)
    assert nb.cells[1].source == source and len(nb.cells) == 3
    assert _types(nb)[1] == "slide"


def test_new_ids_are_valid_and_unique_even_when_the_obvious_one_is_taken_or_too_long():
    long_id = "x" * 64
    nb = _notebook(nbformat.v4.new_markdown_cell("## A\n## B\n## C"), nbformat.v4.new_markdown_cell("## D\n## E"))
    nb.cells[1].id, nb.cells[2].id = "a", "a-2"      # the id the first cell's second part would get
    nb.cells[2].id = long_id
    nb.cells.insert(3, nbformat.v4.new_markdown_cell("text"))
    nb.cells[3].id = "a-2"
    notebook_slides.apply(nb)
    ids = [c.id for c in nb.cells]
    assert len(ids) == len(set(ids)), ids
    assert all(1 <= len(i) <= 64 for i in ids)
    nbformat.validate(nb)
    assert [c.source for c in nb.cells if c.cell_type == "markdown"] == ["## A", "## B", "## C", "## D", "## E", "text"]


def test_a_cell_that_continues_its_slide_carries_no_slide_metadata():
    nb = _notebook(nbformat.v4.new_markdown_cell("## A"), nbformat.v4.new_code_cell("1 + 1"))
    nb.cells[2].metadata["slideshow"] = {"slide_type": "-"}      # RISE's "continue", unknown to jupyterlab-slideshow
    assert "cell 2: slide_type '-' -> '-'" in notebook_slides.apply(nb)
    assert "slideshow" not in nb.cells[2].metadata


def test_applying_twice_changes_nothing_the_second_time():
    nb = _notebook(nbformat.v4.new_markdown_cell("## A\n\ntext\n### B\nmore"), nbformat.v4.new_code_cell("1 + 1"))
    assert notebook_slides.apply(nb)
    before = nbformat.writes(nb)
    assert notebook_slides.apply(nb) == []
    assert nbformat.writes(nb) == before


def test_a_widget_gets_a_sub_slide_of_its_own_and_the_next_cell_starts_another():
    widget = nbformat.v4.new_code_cell("explorer", outputs=[WIDGET_OUTPUT])
    nb = _notebook(nbformat.v4.new_markdown_cell("## Explore"), nbformat.v4.new_markdown_cell("Move the slider."),
                   widget, nbformat.v4.new_code_cell("static_figure()"), nbformat.v4.new_markdown_cell("text"))
    notebook_slides.apply(nb)
    assert _types(nb) == ["skip", "slide", "-", "subslide", "subslide", "-", "skip"]


def test_a_widget_followed_by_a_heading_keeps_the_heading_slide_type():
    widget = nbformat.v4.new_code_cell("explorer", outputs=[WIDGET_OUTPUT])
    nb = _notebook(nbformat.v4.new_markdown_cell("## Explore"), widget, nbformat.v4.new_markdown_cell("## Next"))
    notebook_slides.apply(nb)
    assert _types(nb) == ["skip", "slide", "subslide", "slide", "skip"]


def test_attachments_go_with_the_part_that_shows_them():
    cell = nbformat.v4.new_markdown_cell("## A\n![x](attachment:a.png)\n## B\n![y](attachment:b.png)")
    cell.attachments = {"a.png": {"image/png": "AAAA"}, "b.png": {"image/png": "BBBB"}}
    nb = _notebook(cell)
    notebook_slides.apply(nb)
    assert [sorted(c.get("attachments", {})) for c in nb.cells[1:3]] == [["a.png"], ["b.png"]]
    nbformat.validate(nb)


@pytest.mark.parametrize("broken", ["two headings", "stale metadata"])
def test_check_names_what_breaks_the_rule_and_writes_nothing(tmp_path, broken):
    nb = _notebook(nbformat.v4.new_markdown_cell("## A\ntext\n## B"))
    if broken == "stale metadata":
        notebook_slides.apply(nb)
        del nb.cells[1].metadata["slideshow"]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    written = path.read_text()
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "notebook_slides.py"), "--check", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 1
    expected = "split into 2 cells" if broken == "two headings" else "cell 1: slide_type '-' -> 'slide'"
    assert expected in result.stdout, result.stdout
    assert path.read_text() == written
    # and without --check the rule is applied, after which --check passes
    subprocess.run([sys.executable, str(ROOT / "scripts" / "notebook_slides.py"), str(path)], check=True,
                   capture_output=True)
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "notebook_slides.py"), "--check", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
