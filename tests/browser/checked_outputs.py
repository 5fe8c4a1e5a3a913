"""The text comparison nbval makes, for a notebook that JupyterLab ran (Run All Cells) and saved.

In `make test` a widget notebook runs once, in its browser test (the root conftest leaves out its nbval
items when that test runs in the same session), so the browser test checks what nbval would have: no
error (``lab_pages._run_all``), and the outputs of every cell tagged ``nbval-check-output`` equal to the
committed ones as text. The rule is nbval 0.11's with ``--nbval-lax``, written out here rather than
borrowed from nbval's internals, once, in ``testbed.py`` (scripts/portability.py uses the same), and
tested against nbval's own comparison (tests/test_compare_rule.py):

- stream outputs are joined per stream name (``stdout``, ``stderr``), with ``\\r`` and ``\\b`` applied;
- every other output contributes each of its ``data`` entries except pictures (``image/png``,
  ``image/jpeg``) and widget views (their model ids are new on every run); metadata, execution counts
  and tracebacks are not compared;
- each text is passed through the regexes of ``tests/sanitize.cfg`` (``--nbval-sanitize-with``) first;
- per key (a stream name or a MIME type) the lists of texts must be equal, in order.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from testbed import CHECK_TAG, compared_texts, is_compared, sanitize_patterns  # noqa: F401  (the one rule)


def differences(reference: Path, fresh: Path, patterns: list[tuple[str, str]] | None = None) -> list[str]:
    """Where ``fresh`` (the same notebook, run again) differs from ``reference`` in a checked cell's text."""
    patterns = sanitize_patterns() if patterns is None else patterns
    ref_cells = [c for c in nbformat.read(reference, as_version=4).cells if c.cell_type == "code"]
    new_cells = [c for c in nbformat.read(fresh, as_version=4).cells if c.cell_type == "code"]
    if [c.source for c in ref_cells] != [c.source for c in new_cells]:
        return [f"{fresh.name}: its code cells are not the committed ones"]
    found = []
    for i, (ref, new) in enumerate(zip(ref_cells, new_cells)):
        if not is_compared(ref):
            continue
        want, got = compared_texts(ref.outputs, patterns), compared_texts(new.outputs, patterns)
        if want != got:
            keys = sorted(set(want) | set(got))
            diff = "; ".join(f"{k}: committed {want.get(k)!r:.300} / now {got.get(k)!r:.300}"
                             for k in keys if want.get(k) != got.get(k))
            found.append(f"code cell {i} ({ref.source.splitlines()[0][:60]!r}): {diff}")
    return found
