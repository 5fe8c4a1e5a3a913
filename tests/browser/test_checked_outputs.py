"""checked_outputs.differences: the browser test's stand-in for nbval's text comparison (no browser needed)."""

from __future__ import annotations

import copy

import nbformat
from checked_outputs import compared_texts, differences, sanitize_patterns

from lab_pages import ROOT

NOTEBOOK = ROOT / "notebooks" / "10-multi-head-attention.ipynb"


def _checked(nb) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "nbval-check-output" in c.metadata.get("tags", [])]


def _write(nb, tmp_path):
    path = tmp_path / NOTEBOOK.name
    nbformat.write(nb, path)
    return path


def test_a_notebook_equals_itself_and_a_changed_checked_output_is_found(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert differences(NOTEBOOK, _write(nb, tmp_path)) == []
    i = next(i for i in _checked(nb) if any(o.output_type == "stream" for o in nb.cells[i].outputs))
    changed = copy.deepcopy(nb)
    stream = next(o for o in changed.cells[i].outputs if o.output_type == "stream")
    stream.text = stream.text.replace("0", "1", 1) if "0" in stream.text else stream.text + "x"
    found = differences(NOTEBOOK, _write(changed, tmp_path))
    assert len(found) == 1 and ("stdout" in found[0] or "stderr" in found[0])


def test_unchecked_cells_pictures_and_sanitized_text_are_not_compared(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    changed = copy.deepcopy(nb)
    unchecked = next(i for i, c in enumerate(changed.cells) if c.cell_type == "code" and c.outputs
                     and i not in _checked(changed))
    changed.cells[unchecked].outputs = []
    for i in _checked(changed):
        for o in changed.cells[i].outputs:
            if "image/png" in o.get("data", {}):
                o.data["image/png"] = "iVBORw0KGgo="                      # another picture
    assert differences(NOTEBOOK, _write(changed, tmp_path)) == []
    patterns = sanitize_patterns()
    one = compared_texts([nbformat.v4.new_output("stream", name="stdout", text="at 0x7f3a2b1c9d80\n")], patterns)
    other = compared_texts([nbformat.v4.new_output("stream", name="stdout", text="at 0x55d1e0a3bf10\n")], patterns)
    assert one == other == {"stdout": ["at 0xADDRESS\n"]}


def test_streams_are_joined_per_name_with_carriage_returns_applied():
    split = [nbformat.v4.new_output("stream", name="stdout", text="step 1\r"),
             nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
             nbformat.v4.new_output("stream", name="stdout", text="step 2\ndone\n")]
    whole = [nbformat.v4.new_output("stream", name="stdout", text="step 2\ndone\n"),
             nbformat.v4.new_output("stream", name="stderr", text="warning\n")]
    assert compared_texts(split, []) == compared_texts(whole, []) == {"stdout": ["step 2\ndone\n"],
                                                                      "stderr": ["warning\n"]}
    backspaced = [nbformat.v4.new_output("stream", name="stdout", text="epoch 1\x082\n")]
    assert compared_texts(backspaced, []) == {"stdout": ["epoch 2\n"]}
    result = [nbformat.v4.new_output("execute_result", data={"text/plain": "1", "image/png": "x"}, execution_count=3)]
    assert compared_texts(result, []) == {"text/plain": ["1"]}
