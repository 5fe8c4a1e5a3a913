"""testbed's comparison rule (what scripts/portability.py compares) agrees with nbval's own
comparison, on every cell of the committed notebooks that nbval compares, and on changes to each."""

from __future__ import annotations

import copy
import types
from collections import OrderedDict
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import IPyNbCell, coalesce_streams, get_sanitize_patterns, nocolors

from testbed import SANITIZE_CFG, compared_texts, is_compared, sanitize_patterns

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SKIP_COMPARE = ("metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg")   # nbval 0.11, without nbdime


def nbval_agrees(test: list, ref: list) -> bool:
    """nbval's own verdict (IPyNbCell.compare_outputs, as its runtest calls it) on two output lists."""
    parent = types.SimpleNamespace(skip_compare=SKIP_COMPARE,
                                   sanitize_patterns=OrderedDict(get_sanitize_patterns(SANITIZE_CFG.read_text())))
    cell = types.SimpleNamespace(parent=parent, colors=nocolors, format_output_compare=lambda *a: None)
    cell.sanitize = types.MethodType(IPyNbCell.sanitize, cell)
    return IPyNbCell.compare_outputs(cell, coalesce_streams(copy.deepcopy(test)), coalesce_streams(copy.deepcopy(ref)))


def ours_agree(test: list, ref: list) -> bool:
    patterns = sanitize_patterns()
    return compared_texts(test, patterns) == compared_texts(ref, patterns)


def variants(outputs: list) -> dict[str, list]:
    """The committed outputs changed in ways a fresh run can change them, and one way it must not."""
    found = {"as committed": outputs}
    text_at = next(((i, k) for i, o in enumerate(outputs) for k in (["text"] if o.output_type == "stream" else
                    [m for m in o.get("data", {}) if m.startswith("text/")]) ), None)
    if text_at is not None:
        changed = copy.deepcopy(outputs)
        i, key = text_at
        if key == "text":
            text = changed[i].text
            changed[i].text = text[:-1] + ("X" if text[-1:] != "X" else "Y") if text else "X"
            split = copy.deepcopy(outputs)
            half = len(text) // 2
            split[i:i + 1] = [nbformat.v4.new_output("stream", name=split[i].name, text=text[:half]),
                              nbformat.v4.new_output("stream", name=split[i].name, text=text[half:])]
            found["a stream printed in two pieces"] = split
        else:
            value = changed[i].data[key]
            changed[i].data[key] = value + " (changed)"
        found["one character of text changed"] = changed
    with_picture = copy.deepcopy(outputs) + [nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0K"})]
    found["a picture added"] = with_picture
    return found


CASES = [(path, index) for path in NOTEBOOKS
         for index, cell in enumerate(nbformat.read(path, as_version=4).cells) if is_compared(cell)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_the_rule_agrees_with_nbval_on_every_compared_cell(path):
    cells = nbformat.read(path, as_version=4).cells
    compared = [c for c in cells if is_compared(c)]
    assert compared, f"{path.name}: no cell is compared"
    for cell in compared:
        committed = cell.outputs
        for what, outputs in variants(committed).items():
            picture_only = what == "a picture added"
            nbval_says, ours_say = nbval_agrees(outputs, committed), ours_agree(outputs, committed)
            # nbval counts an added display_data with only a picture as an unexpected field set only when the
            # cell had none; both must say the same either way
            assert nbval_says == ours_say, (f"{path.name} cell {cells.index(cell)}, {what}: nbval says "
                                            f"{'equal' if nbval_says else 'different'}, the rule the opposite")
            if what == "one character of text changed":
                assert not ours_say
            if what in ("as committed", "a stream printed in two pieces") or picture_only:
                assert ours_say


def test_a_cell_marked_to_be_ignored_is_not_compared_even_when_tagged():
    cell = nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT\nprint(1)", metadata={"tags": ["nbval-check-output"]})
    assert not is_compared(cell)
    assert is_compared(nbformat.v4.new_code_cell("print(1)", metadata={"tags": ["nbval-check-output"]}))


def test_the_rule_reads_raw_notebook_json_as_nbformat_does():
    """A notebook read with json.load keeps multi-line text as a list of lines; nbformat joins them."""
    import json

    path = next(p for p in NOTEBOOKS if p.name.startswith("02"))
    raw = json.loads(path.read_text())["cells"]
    read = nbformat.read(path, as_version=4).cells
    patterns = sanitize_patterns()
    for raw_cell, cell in zip(raw, read):
        if cell.cell_type == "code":
            assert compared_texts(raw_cell["outputs"], patterns) == compared_texts(cell.outputs, patterns)


def test_streams_are_joined_per_name_with_carriage_returns_and_backspaces_applied():
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
