"""The package stays code with short docstrings: derivations and history live in the notebooks (issue 35's diet).
`python3 scripts/prose_share.py` gives the table per folder; `--files` the heaviest files."""

from __future__ import annotations

import prose_share


def test_docstrings_are_at_most_the_limit_of_the_package():
    share = prose_share.total_share()
    heaviest = sorted(prose_share.shares().items(), key=lambda item: -item[1][0])[:3]
    assert share <= prose_share.LIMIT, (f"docstrings are {share:.1%} of lib/seqlab (limit {prose_share.LIMIT:.0%}); "
                                        f"the heaviest: {[str(path) for path, _ in heaviest]}")


def test_the_measure_counts_docstrings_only():
    source = '"""Module."""\n\n# a comment is not a docstring\ndef f():\n    """Doc."""\n    return "not a docstring"\n'
    assert prose_share.docstring_chars(source) == len("Module.") + len("Doc.")
