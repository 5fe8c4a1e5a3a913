"""Small notebooks that build each widget class of the course on small inputs: what the browser tests run.

A committed notebook runs once per test run, under nbval; the browser tests do not run it again. They run
one of these instead, per widget class that a committed notebook constructs (``widget_classes_in`` finds
them in the notebooks' code; ``test_widgets_in_lab.test_every_widget_class_a_notebook_builds_has_a_fixture``
fails when one has no fixture here). Each fixture is a source kept here, not a copy of a notebook's cells:
its inputs are small (a few tokens, random weights, or the course's checkpoints from data/checkpoints; nothing
downloaded), so it runs in seconds, and its widget is built the way the notebooks build it (the same public
constructor, the same kinds of arguments), so that every control the notebooks show is there to be moved.

``fixture_notebook`` lays a fixture out as the course lays out its notebooks: the set-up cell first, a
heading, each widget in a cell of its own, on a sub-slide of its own (``scripts/notebook_slides.py``'s
rule, applied as if the widget cells had run), and a final cell of assertions. Written into the folder that
the test's JupyterLab serves (``write_fixture``), never into ``notebooks/``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from dataclasses import dataclass
from pathlib import Path

import nbformat

from seqlab.notebook_rules import WIDGET_MIME

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class WidgetFixture:
    """``setup``: imports and small inputs (the set-up cell); ``widgets``: (name, code) per widget, the code
    building ``name``, which its cell then shows (the last line of a widget cell is that name)."""

    name: str
    title: str
    setup: str
    widgets: tuple[tuple[str, str], ...]

    @property
    def path(self) -> str:
        """The notebook's file name in the folder JupyterLab serves."""
        return f"fixture-{self.name}.ipynb"

    @property
    def widget_classes(self) -> set[str]:
        """The seqlab.widgets classes its widget cells construct."""
        return widget_classes_in("\n".join(code for _, code in self.widgets))


SETUP = "from seqlab.notebook import setup\nsetup(seed=0)\n\n"

FIXTURES: tuple[WidgetFixture, ...] = (
    WidgetFixture(
        "live-figure", "LiveFigure: a draw function and its sliders",
        SETUP + '''import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from seqlab.widgets import LiveFigure


def draw_wave(frequency: float):
    t = np.linspace(0.0, 1.0, 200, endpoint=False)
    fig, ax = plt.subplots(figsize=(6, 2.2), layout="constrained")
    ax.plot(t, np.sin(2 * np.pi * frequency * t))
    ax.set(xlabel="t", title=f"frequency f = {frequency:g}", ylim=(-1.1, 1.1))
    return fig


def describe_wave(frequency: float) -> str:
    return f"A sine wave over t from 0 to 1 at frequency f = {frequency:g}: {frequency:g} periods."


def draw_powers(rho: float):
    k = np.arange(31)
    fig, ax = plt.subplots(figsize=(6, 2.6), layout="constrained")
    ax.plot(k, rho ** k)
    ax.set(yscale="log", ylim=(1e-12, 1e12), xlabel="k", title=f"rho^k for rho = {rho:.1f}")
    return fig


def describe_powers(rho: float) -> str:
    return f"rho^k against k from 0 to 30 on a log scale, for rho = {rho:.1f}: it ends at {rho ** 30:.1e}."
''',
        (("wave", '''# as notebook 0's: a slider that redraws while it moves
wave = LiveFigure(draw_wave, {"frequency": widgets.FloatSlider(value=2.0, min=0.5, max=8.0, step=0.5,
                                                                description="frequency f")},
                  describe=describe_wave)'''),
         ("powers", '''# as notebook 3's: a slider that redraws when it is let go
powers = LiveFigure(draw_powers, {"rho": widgets.FloatSlider(value=1.5, min=0.3, max=3.0, step=0.1,
                                                             description="ρ", continuous_update=False)},
                    describe=describe_powers)'''))),
    WidgetFixture(
        "gate-explorer", "GateExplorer: three trained character models on one sentence",
        SETUP + '''from seqlab.data import char_lm_data
from seqlab.pretrained import load_pretrained
from seqlab.widgets import GateExplorer

vocab = char_lm_data().vocab
# notebook 5's models, in its order (a GRU first gives the taller picture of the two notebooks)
models = {label: load_pretrained(name)[0] for label, name in
          (("GRU", "charlm-gru"), ("LSTM", "charlm-lstm"), ("RNN", "charlm-rnn"))}
sentence = "In 2015, she left."
''',
        (("explorer", "explorer = GateExplorer(models, vocab, sentence, units=(0, 15), step=8, watch=3)"),)),
    WidgetFixture(
        "attention-explorer", "AttentionExplorer: one kind with all heads shown; three kinds of two layers",
        SETUP + '''import torch

from seqlab.widgets import AttentionExplorer, attention_from_model

generator = torch.Generator().manual_seed(0)


def weights(*shape):
    return torch.softmax(torch.randn(*shape, generator=generator), dim=-1)


# as notebook 10's (its widget slide the tallest of the four attention notebooks): 12 letters, 1 layer, 2 heads
letters = [("abcdefgh")[i] for i in torch.randint(0, 8, (12,), generator=generator)]
neighbour_maps = attention_from_model(weights(1, 1, 2, 12, 12), letters)
# as notebook 12's: encoder, decoder and cross-attention, so a kind dropdown and a layer slider
source = ["the", "cat", "sat", "on", "the", "mat", "<eos>"]
target = ["<bos>", "le", "chat", "assis"]
maps = attention_from_model({"encoder": weights(2, 1, 2, 7, 7), "decoder_self": weights(2, 1, 2, 4, 4),
                             "cross": weights(2, 1, 2, 4, 7)}, source, target)
''',
        (("heads", "heads = AttentionExplorer(neighbour_maps, all_heads=True, token=5)"),
         ("kinds", "kinds = AttentionExplorer(maps, layer=1, head=0, token=1)"))),
    WidgetFixture(
        "attention-stepper", "AttentionStepper: one head, step by step",
        SETUP + '''import numpy as np

from seqlab.widgets import AttentionStepper

rng = np.random.default_rng(0)
tokens = ["the", "cat", "sat", "down"]
X = rng.normal(size=(4, 6)).astype(np.float32)
W_Q, W_K, W_V = (rng.normal(size=(6, 4)).astype(np.float32) for _ in range(3))
''',
        (("stepper", "stepper = AttentionStepper(X, W_Q, W_K, W_V, tokens=tokens, stage=0)"),)),
    WidgetFixture(
        "positional-explorer", "PositionalExplorer: the encodings, a learned table beside them",
        SETUP + '''import torch

from seqlab.widgets import PositionalExplorer

# as notebook 11's: a learned table (64 positions, 32 wide) shown beside the fixed encodings
learned_table = 0.02 * torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
''',
        (("explorer", "explorer = PositionalExplorer(learned=learned_table,\n"
                      '                              learned_label="random, as at initialisation")'),)),
)


# -- which widget classes exist, and which a source builds ------------------------------------------

def widget_classes() -> dict[str, type]:
    """Every class in ``seqlab.widgets`` (any module under it) that makes a live widget: LiveFigure and the
    subclasses of Widget."""
    import seqlab.widgets
    from seqlab.widgets.base import Widget
    from seqlab.widgets.live import LiveFigure

    found = {}
    for module in pkgutil.walk_packages(seqlab.widgets.__path__, "seqlab.widgets."):
        for name, value in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if value is LiveFigure or (issubclass(value, Widget) and value is not Widget):
                found[name] = value
    return found


def _code(source: str) -> str:
    """A cell's source without IPython's magics and shell lines, which are not Python."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def widget_classes_in(source: str, classes: set[str] | None = None) -> set[str]:
    """The widget classes that ``source`` calls (``GateExplorer(...)``, ``seqlab.widgets.GateExplorer(...)``)."""
    classes = set(widget_classes()) if classes is None else classes
    called = set()
    for node in ast.walk(ast.parse(_code(source))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in classes:
                called.add(name)
    return called


def built_by_notebooks(folder: Path = ROOT / "notebooks") -> dict[str, list[str]]:
    """widget class -> the committed notebooks whose code constructs it."""
    classes = set(widget_classes())
    found: dict[str, list[str]] = {}
    for path in sorted(folder.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        source = "\n".join(_code(c.source) for c in nb.cells if c.cell_type == "code")
        for name in widget_classes_in(source, classes):
            found.setdefault(name, []).append(path.name)
    return found


# -- the notebook --------------------------------------------------------------------------------------

def fixture_notebook(fixture: WidgetFixture) -> nbformat.NotebookNode:
    """The fixture as a notebook, unexecuted, with the course's slide rule."""
    import notebook_slides  # scripts/ (the pytest ini's pythonpath)

    v4 = nbformat.v4
    cells = [v4.new_code_cell(fixture.setup.rstrip() + "\n"), v4.new_markdown_cell(f"# {fixture.title}")]
    for name, code in fixture.widgets:
        cells += [v4.new_markdown_cell(f"### The widget `{name}`"), v4.new_code_cell(f"{code}\n{name}")]
    names = ", ".join(name for name, _ in fixture.widgets)
    cells += [v4.new_markdown_cell("## After the widgets"),
              v4.new_code_cell(f"assert all(w.redraws >= 1 for w in [{names}])\nprint('all claims hold')")]
    kernel = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb = v4.new_notebook(cells=cells, metadata={"kernelspec": kernel})
    widget_cells = fixture_widget_cells(nb)
    for i in widget_cells:                 # the slide rule reads widgets from outputs: as if these had run
        nb.cells[i].outputs = [v4.new_output("display_data", data={WIDGET_MIME: {}})]
    notebook_slides.apply(nb)
    for i in widget_cells:
        nb.cells[i].outputs = []
    return nb


def fixture_widget_cells(nb: nbformat.NotebookNode) -> list[int]:
    """The indices of a fixture notebook's widget cells (a code cell that ends by showing one name)."""
    return [i for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and i > 0 and c.source.splitlines()[-1].isidentifier()]


def write_fixture(fixture: WidgetFixture, folder: Path) -> Path:
    path = folder / fixture.path
    nbformat.write(fixture_notebook(fixture), path)
    return path
