"""The course manifest (lib/seqlab/manifest.py) and what reads it agree with notebooks/ and the README."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import readme_table
from seqlab import manifest

ROOT = Path(__file__).resolve().parent.parent

ON_DISK = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_every_notebook_is_in_the_manifest_and_every_entry_has_its_notebook():
    listed = [nb.slug for nb in manifest.NOTEBOOKS]
    missing = [n for n in ON_DISK if n not in listed]
    assert not missing, f"notebooks/ has {', '.join(missing)}; lib/seqlab/manifest.py does not"
    absent = [n for n in listed if n not in ON_DISK]
    assert not absent, f"lib/seqlab/manifest.py lists {', '.join(absent)}; notebooks/ does not have it"
    assert listed == ON_DISK, "the manifest lists the notebooks in the order of their numbers"


@pytest.mark.parametrize("slug", ON_DISK)
def test_each_notebooks_heading_is_its_manifest_title(slug):
    first = "".join(json.loads((ROOT / "notebooks" / f"{slug}.ipynb").read_text())["cells"][0]["source"])
    assert first.splitlines()[0] == manifest.notebook(slug).heading, f"{slug}: its heading and the manifest's title"


def test_one_resolver_takes_every_spelling_of_a_notebooks_name():
    lstm = manifest.notebook("04-lstm")
    for name in (4, "4", "04", "nb04", "NB4", "04-lstm.ipynb", "notebooks/04-lstm.ipynb", " 04 "):
        assert manifest.notebook(name) is lstm, name
    assert manifest.notebook("17").slug == "17-cost-and-beyond" and manifest.notebook(0).slug == "00-start-here"
    last = manifest.NOTEBOOKS[-1].slug
    for wrong in ("99", "04-gru", "lstm", "", "nb", "004"):
        with pytest.raises(manifest.UnknownNotebook, match=rf"no course notebook named .*one of: 00-start-here, .*, "
                                                           rf"{last}$"):
            manifest.notebook(wrong)


def test_parts_cover_every_notebook_but_00_in_teaching_order():
    numbers = [nb.number for _, notebooks in manifest.course_parts() for nb in notebooks]
    assert numbers == list(range(1, len(manifest.NOTEBOOKS)))
    assert all(notebooks for _, notebooks in manifest.course_parts()), "a part without notebooks"


def test_readme_table_names_each_notebook_with_its_manifest_run_time():
    assert readme_table.drift((ROOT / "README.md").read_text(encoding="utf-8")) == [], \
        "README.md's notebook table and lib/seqlab/manifest.py differ: run python scripts/readme_table.py"


def test_readme_table_is_written_from_the_manifest_keeping_the_descriptions():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_table.written(text) == text
    start, end = readme_table.table(text)
    lines = text.splitlines(keepends=True)
    rows = lines[start:end]
    lstm = next(i for i, row in enumerate(rows) if row.startswith("| `04-lstm`"))
    # drift: a wrong run time, a renamed notebook, a missing row, a row for a notebook the course lacks
    stale = rows.copy()
    stale[lstm] = stale[lstm].replace(f"| {manifest.notebook(4).run_time} |", "| 99 s |")
    stale[lstm + 1] = stale[lstm + 1].replace("`05-gru`", "`05-gated`")
    del stale[lstm + 2]
    stale.append("| `18-retired` | gone | 5 s | — |\n")
    broken = "".join(lines[:start] + stale + lines[end:])
    assert readme_table.drift(broken) == [
        f"04-lstm: README.md says '99 s', the manifest '{manifest.notebook(4).run_time}'",
        "05-gru: in the manifest, no row in README.md",
        "06-deep-and-bidirectional: in the manifest, no row in README.md",
        "05-gated: a row in README.md, not in the manifest", "18-retired: a row in README.md, not in the manifest"]
    repaired = readme_table.written(broken)
    assert readme_table.drift(repaired) == []
    got = repaired.splitlines(keepends=True)[start:end]
    assert got[lstm] == rows[lstm] and got[lstm + 1] == rows[lstm + 1], "descriptions kept, matched by number"
    deep = manifest.notebook(6)
    assert got[lstm + 2] == f"| `06-deep-and-bidirectional` | {deep.title} | {deep.run_time} | — |\n"
    assert len(got) == len(manifest.NOTEBOOKS)


def test_instructor_notes_take_run_times_from_the_manifest():
    from seqlab.grading import plan

    times = plan.run_times()
    assert list(times) == ON_DISK and times["04-lstm"] == manifest.notebook(4).run_time


def test_notebook_00s_committed_course_map_is_the_manifests():
    import matplotlib.pyplot as plt

    from seqlab.diagrams import course_map

    cells = json.loads((ROOT / "notebooks" / "00-start-here.ipynb").read_text())["cells"]
    drawn = [o["metadata"]["image/png"]["alt"] for c in cells if "course_map()" in "".join(c["source"])
             for o in c.get("outputs", []) if "image/png" in o.get("metadata", {})]
    diagram = course_map()
    plt.close(diagram.figure)
    assert drawn == [diagram.alt], ("00-start-here's committed course map is not the manifest's: re-execute it "
                                    "(scripts/execute_notebooks.py notebooks/00-start-here.ipynb)")


def _toctrees(index: str) -> list[tuple[str, list[str]]]:
    """(caption, entries) of each table of contents in a MyST index page."""
    blocks = re.findall(r"```\{toctree\}\n(.*?)```", index, flags=re.S)
    found = []
    for block in blocks:
        lines = [line for line in block.splitlines() if line.strip()]
        caption = next(line.split(":", 2)[2].strip() for line in lines if line.startswith(":caption:"))
        found.append((caption, [line for line in lines if not line.startswith(":")]))
    return found


def test_the_site_index_is_the_manifests_notebooks_by_part_in_teaching_order():
    import build_site

    index = build_site.index_page(ON_DISK)
    expected = [("Start", [nb for nb in manifest.NOTEBOOKS if nb.part is None])] + [
        (part[0].upper() + part[1:], list(notebooks)) for part, notebooks in manifest.course_parts()]
    assert _toctrees(index) == [(caption, [f"{nb.heading[2:]} <notebooks/{nb.slug}>" for nb in notebooks])
                                for caption, notebooks in expected]
    assert f"A course in {len(manifest.NOTEBOOKS)} notebooks, in {len(manifest.PARTS)} parts: " \
           f"{'; '.join(manifest.PARTS)}." in index
    # a student release of one notebook: its part alone; a file the manifest lacks stops the build, by name
    one = build_site.index_page(["04-lstm"], release=True)
    assert _toctrees(one) == [("Gates and depth", [f"{manifest.notebook(4).heading[2:]} <notebooks/04-lstm>"])]
    assert "A course in 1 notebook, in 1 part: gates and depth." in one and build_site.SOLUTIONS_LATER in one
    with pytest.raises(SystemExit, match="no course notebook named '18-draft'"):
        build_site.index_page([*ON_DISK, "18-draft"])


def _next_lines(slug: str) -> list[str]:
    cells = json.loads((ROOT / "notebooks" / f"{slug}.ipynb").read_text())["cells"]
    return [line for c in cells if c["cell_type"] == "markdown" for line in "".join(c["source"]).splitlines()
            if line.startswith("**Next:**")]


@pytest.mark.parametrize("slug", [nb.slug for nb in manifest.NOTEBOOKS[1:]])
def test_each_notebooks_next_line_leads_to_the_manifests_next_notebook(slug):
    """The student's path is a hand list too: each summary's "Next:" links the manifest's next notebook by its
    heading, and the last one's links no notebook (it must not say it is the last: a new notebook would make
    that false)."""
    number = manifest.notebook(slug).number
    lines = _next_lines(slug)
    assert len(lines) == 1, f"{slug}: one '**Next:**' line in its summary, found {lines}"
    linked = re.findall(r"\[([^\]]*)\]\((\d\d-[\w-]+\.ipynb)\)", lines[0])
    if number + 1 < len(manifest.NOTEBOOKS):
        following = manifest.NOTEBOOKS[number + 1]
        assert linked == [(following.heading[2:], following.filename)], \
            f"{slug}: its Next line should link [{following.heading[2:]}]({following.filename}); it has {lines[0]!r}"
    else:
        assert not linked, f"{slug} is the manifest's last notebook; its Next line links {linked}"
    assert not re.search(r"\blast notebook\b", lines[0]), f"{slug}: {lines[0]!r} counts the course by hand"


_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                 "sixteen seventeen eighteen nineteen twenty").split()


def _counts(text: str) -> list[tuple[int, str]]:
    """Every "<number> notebooks" / "<number> parts" in ``text``, the number in digits or in words."""
    found = []
    for number, noun in re.findall(r"\b(\d+|" + "|".join(_NUMBER_WORDS) + r")\s+(notebooks|parts)\b", text, re.I):
        found.append((int(number) if number.isdigit() else _NUMBER_WORDS.index(number.lower()), noun.lower()))
    return found


def test_no_prose_counts_the_course_by_hand():
    """A count of the course's notebooks or parts written into prose drifts when a notebook is added; the map,
    the table and the site index are drawn from the manifest, so the prose need not count."""
    course = {(len(manifest.NOTEBOOKS), "notebooks"), (len(manifest.NOTEBOOKS) - 1, "notebooks"),
              (len(manifest.PARTS), "parts")}
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    for slug in ON_DISK:
        cells = json.loads((ROOT / "notebooks" / f"{slug}.ipynb").read_text())["cells"]
        texts[slug] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    counted = {name: [c for c in _counts(text) if c in course] for name, text in texts.items()}
    assert not {name: found for name, found in counted.items() if found}, \
        "prose that counts the course's notebooks or parts by hand (say 'the notebooks', or derive it)"
    assert _counts("Seventeen notebooks after this one, in five parts; 18 notebooks") == [
        (17, "notebooks"), (5, "parts"), (18, "notebooks")]
