"""The text comparison nbval makes, for a notebook that JupyterLab ran (Run All Cells) and saved.

In `make test` a widget notebook runs once, in its browser test (the root conftest leaves out its nbval
items when that test runs in the same session), so the browser test checks what nbval would have: no
error (``lab_pages._run_all``), and the outputs of every cell tagged ``nbval-check-output`` equal to the
committed ones as text. The rule is nbval 0.11's with ``--nbval-lax``, written out here rather than
borrowed from nbval's internals:

- stream outputs are joined per stream name (``stdout``, ``stderr``), with ``\\r`` and ``\\b`` applied;
- every other output contributes each of its ``data`` entries except pictures (``image/png``,
  ``image/jpeg``) and widget views (their model ids are new on every run); metadata, execution counts
  and tracebacks are not compared;
- each text is passed through the regexes of ``tests/sanitize.cfg`` (``--nbval-sanitize-with``) first;
- per key (a stream name or a MIME type) the lists of texts must be equal, in order.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import nbformat

CHECK_TAG = "nbval-check-output"
SANITIZE_CFG = Path(__file__).resolve().parents[1] / "sanitize.cfg"
NOT_COMPARED = {"image/png", "image/jpeg", "application/vnd.jupyter.widget-view+json"}
_CARRIAGE_RETURN = re.compile(r"^.*\r(?=[^\n])", re.MULTILINE)
_BACKSPACE = re.compile("[^\n]\x08")        # a character, then a backspace character (r"\b" would be a word boundary)


def sanitize_patterns(path: Path = SANITIZE_CFG) -> list[tuple[str, str]]:
    """(regex, replacement) pairs from an nbval sanitize file, in its order."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path)
    return [(parser[section]["regex"], parser[section]["replace"]) for section in parser.sections()]


def _stream_text(text: str) -> str:
    while True:                                   # a character followed by a backspace cancels out
        shorter = _BACKSPACE.sub("", text)
        if len(shorter) == len(text):
            break
        text = shorter
    return _CARRIAGE_RETURN.sub("", text)         # a line overwritten by a carriage return


def compared_texts(outputs: list, patterns: list[tuple[str, str]]) -> dict[str, list[str]]:
    """The texts nbval compares for one cell's outputs: key (stream name or MIME type) -> texts in order."""
    def clean(text: str) -> str:
        for regex, replacement in patterns:
            text = re.sub(regex, replacement, text)
        return text

    texts: dict[str, list[str]] = {}
    streams: dict[str, str] = {}
    for output in outputs:
        if output["output_type"] == "stream":
            if output["name"] not in streams:
                texts.setdefault(output["name"], [])          # keeps the stream's place among the keys
            streams[output["name"]] = streams.get(output["name"], "") + output["text"]
        elif output["output_type"] in ("execute_result", "display_data"):
            for mime, value in output.get("data", {}).items():
                if mime not in NOT_COMPARED:
                    texts.setdefault(mime, []).append(clean(value if isinstance(value, str) else str(value)))
        elif output["output_type"] == "error":
            texts.setdefault("error", []).append(f"{output['ename']}: {output['evalue']}")
    for name, text in streams.items():
        texts[name] = [clean(_stream_text(text))]
    return texts


def differences(reference: Path, fresh: Path, patterns: list[tuple[str, str]] | None = None) -> list[str]:
    """Where ``fresh`` (the same notebook, run again) differs from ``reference`` in a checked cell's text."""
    patterns = sanitize_patterns() if patterns is None else patterns
    ref_cells = [c for c in nbformat.read(reference, as_version=4).cells if c.cell_type == "code"]
    new_cells = [c for c in nbformat.read(fresh, as_version=4).cells if c.cell_type == "code"]
    if [c.source for c in ref_cells] != [c.source for c in new_cells]:
        return [f"{fresh.name}: its code cells are not the committed ones"]
    found = []
    for i, (ref, new) in enumerate(zip(ref_cells, new_cells)):
        if CHECK_TAG not in ref.metadata.get("tags", []):
            continue
        want, got = compared_texts(ref.outputs, patterns), compared_texts(new.outputs, patterns)
        if want != got:
            keys = sorted(set(want) | set(got))
            diff = "; ".join(f"{k}: committed {want.get(k)!r:.300} / now {got.get(k)!r:.300}"
                             for k in keys if want.get(k) != got.get(k))
            found.append(f"code cell {i} ({ref.source.splitlines()[0][:60]!r}): {diff}")
    return found
