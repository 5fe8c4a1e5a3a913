"""The course as data: its notebooks in teaching order, each with its number, slug (the file's stem), title (its
``# N · title`` heading without the number), short title (the course map's box), part and run time. Standard library
only, so that ``course.py`` can load this file before the set-up, without importing seqlab.

Everything that lists the course reads it: ``seqlab.diagrams.COURSE_PARTS`` and the course map, the README's
notebook table (``scripts/readme_table.py`` writes its names and run times; a test fails when they drift),
the HTML edition's index, the schedule's titles and the instructor notes' run times, and every notebook name
given to ``course.py`` or ``scripts/execute_notebooks.py``. ``tests/test_manifest.py`` says by name where
``notebooks/`` and this file disagree. Adding a notebook: its ``.ipynb`` plus one entry here (CONTRIBUTING §4).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

# The course's parts, in teaching order (notebook 00, which draws the map, belongs to none)
PARTS = ("recurrent networks", "gates and depth", "encoder–decoder, attention", "Transformers",
         "language models, cost")


class Notebook(NamedTuple):
    number: int
    slug: str               # the file's stem: notebooks/<slug>.ipynb
    title: str              # its heading, "# <number> · <title>" (00 is written with both digits)
    short: str              # its box on the course map
    part: str | None        # one of PARTS; None for 00
    run_time_s: int         # seconds on a quiet 2-core machine without a GPU (README, "run time*")

    @property
    def name(self) -> str:
        """The two-digit number: "04"."""
        return f"{self.number:02d}"

    @property
    def filename(self) -> str:
        return f"{self.slug}.ipynb"

    @property
    def run_time(self) -> str:
        return f"{self.run_time_s} s"

    @property
    def heading(self) -> str:
        """The notebook's first line."""
        return f"# {self.name if self.number == 0 else self.number} · {self.title}"


NOTEBOOKS = (
    Notebook(0, "00-start-here", "Start here", "start here", None, 5),
    Notebook(1, "01-why-sequences", "Why sequences", "why sequences", PARTS[0], 10),
    Notebook(2, "02-rnn", "The vanilla recurrent neural network", "the RNN", PARTS[0], 35),
    Notebook(3, "03-bptt-and-gradients",
             "Training RNNs: backpropagation through time, vanishing and exploding gradients", "BPTT, gradients",
             PARTS[0], 25),
    Notebook(4, "04-lstm", "Long short-term memory (LSTM)", "LSTM", PARTS[1], 29),
    Notebook(5, "05-gru", "Gated recurrent unit (GRU)", "GRU", PARTS[1], 30),
    Notebook(6, "06-deep-and-bidirectional", "Deep and bidirectional RNNs, and the RNN as belief monitoring",
             "deep, bidirectional", PARTS[1], 43),
    Notebook(7, "07-seq2seq", "Encoder–decoder models (sequence to sequence)", "seq2seq", PARTS[2], 39),
    Notebook(8, "08-attention", "Attention in encoder–decoder models", "attention", PARTS[2], 20),
    Notebook(9, "09-self-attention", "Self-attention", "self-attention", PARTS[2], 9),
    Notebook(10, "10-multi-head-attention", "Multi-head attention", "multi-head", PARTS[2], 10),
    Notebook(11, "11-positional-encodings", "Positional encodings", "positions", PARTS[3], 20),
    Notebook(12, "12-transformer-block", "The Transformer block", "the block", PARTS[3], 25),
    Notebook(13, "13-transformer-model", "The whole Transformer", "whole model", PARTS[3], 26),
    Notebook(14, "14-gpt", "A GPT-style language model, and sampling from it", "GPT and sampling", PARTS[4], 53),
    Notebook(15, "15-kv-cache", "The KV cache, and four models in one race", "KV cache and race", PARTS[4], 20),
    Notebook(16, "16-bert", "BERT: masked language models and a real pretrained encoder", "BERT", PARTS[4], 40),
    Notebook(17, "17-cost-and-beyond", "What attention costs, and the road beyond", "cost, beyond", PARTS[4], 10),
)


class UnknownNotebook(ValueError):
    """A name that is no notebook of the course; the message lists the valid ones."""


def names() -> str:
    return ", ".join(nb.slug for nb in NOTEBOOKS)


def notebook(name: str | int) -> Notebook:
    """The entry for ``name``: ``4``, ``"4"``, ``"04"``, ``"nb04"``, ``"04-lstm"``, ``"04-lstm.ipynb"`` and
    ``"notebooks/04-lstm.ipynb"`` all give notebook 4's. A slug must be the course's own (``"04-gru"`` is an
    error, not notebook 4)."""
    text = str(name).strip()
    stem = Path(text).name.removesuffix(".ipynb") if text else text
    number = re.fullmatch(r"(?:nb)?(\d{1,2})", stem, flags=re.I)
    for nb in NOTEBOOKS:
        if (number and int(number.group(1)) == nb.number) or stem == nb.slug:
            return nb
    raise UnknownNotebook(f"no course notebook named {name!r}; give its number (04, 4, nb04) or its name, one of: "
                          f"{names()}")


def course_parts() -> tuple[tuple[str, tuple[Notebook, ...]], ...]:
    """Each part with its notebooks, in teaching order."""
    return tuple((part, tuple(nb for nb in NOTEBOOKS if nb.part == part)) for part in PARTS)


def _check() -> None:
    numbers = [nb.number for nb in NOTEBOOKS]
    assert numbers == list(range(len(NOTEBOOKS))), f"notebooks must be numbered 0, 1, 2, ... in order: {numbers}"
    for nb in NOTEBOOKS:
        assert re.fullmatch(r"\d\d-[a-z0-9]+(-[a-z0-9]+)*", nb.slug) and nb.slug[:2] == nb.name, nb
        assert nb.part in PARTS or (nb.part is None and nb.number == 0), nb
    parts = [nb.part for nb in NOTEBOOKS if nb.part is not None]
    assert parts == sorted(parts, key=PARTS.index), "each part's notebooks must come together, parts in order"


_check()
