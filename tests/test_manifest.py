"""The course manifest (lib/seqlab/manifest.py) and what reads it agree with notebooks/ and the README."""

from __future__ import annotations

import json
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
    stale[lstm] = stale[lstm].replace("| 19 s |", "| 99 s |")
    stale[lstm + 1] = stale[lstm + 1].replace("`05-gru`", "`05-gated`")
    del stale[lstm + 2]
    stale.append("| `18-retired` | gone | 5 s | — |\n")
    broken = "".join(lines[:start] + stale + lines[end:])
    assert readme_table.drift(broken) == [
        "04-lstm: README.md says '99 s', the manifest '19 s'", "05-gru: in the manifest, no row in README.md",
        "06-deep-and-bidirectional: in the manifest, no row in README.md",
        "05-gated: a row in README.md, not in the manifest", "18-retired: a row in README.md, not in the manifest"]
    repaired = readme_table.written(broken)
    assert readme_table.drift(repaired) == []
    got = repaired.splitlines(keepends=True)[start:end]
    assert got[lstm] == rows[lstm] and got[lstm + 1] == rows[lstm + 1], "descriptions kept, matched by number"
    assert got[lstm + 2] == f"| `06-deep-and-bidirectional` | {manifest.notebook(6).title} | 34 s | — |\n"
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
