"""The gate explorer's controls: model, gate, units, a unit to watch and a step, with the step's numbers."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import TYPE_CHECKING

import ipywidgets as widgets
import torch

from seqlab.colours import HIGHLIGHT, HIGHLIGHT_BACKGROUND
from seqlab.notebook import FIGURE_DPI
from seqlab.widgets.base import Widget
from seqlab.widgets.gates.compute import (DEFAULT_GATE, QUANTITIES, GateRecord, describe_gates, gate_record,
                                         visible_char)
from seqlab.widgets.gates.draw import GateFigure, GatePlot, draw_gates

if TYPE_CHECKING:
    from seqlab.data import Vocab

__all__ = ["LEGEND", "GateExplorer", "gate_legend", "shown_units", "step_table", "text_tape"]

# what each gate does, in one line: the legend under the controls (the dropdown keeps its labels short)
LEGEND: dict[str, str] = {
    "i": "how much of the candidate g_t to write into c_t (0: nothing, 1: all of it)",
    "f": "how much of the old memory c_{t-1} to keep (1 keeps it, 0 erases it)",
    "g": "the candidate c̃_t, what could be written into c_t, in (-1, 1)",
    "o": "how much of tanh(c_t) to show as h_t (1 shows it, 0 hides it)",
    "r": "how much of the old state's product W_hn h_{t-1} enters the candidate n_t",
    "z": "torch's convention: 1 keeps the old h_{t-1}, 0 takes the candidate n_t (the lectures' z_t is 1 - z_t)",
    "n": "the candidate h̃_t, what could replace the old state, in (-1, 1)",
    "a": "the pre-activation: a vanilla RNN has no gate, h_t = tanh(a_t)",
}


def shown_units(units: tuple[int, int], mark: int | None = None, max_units: int = 8) -> list[int]:
    """``max_units`` of units ``start <= u < stop``, centred on ``mark`` if it is one, else the first."""
    start, stop = units
    count = min(max_units, stop - start)
    if mark is None or not start <= mark < stop:
        first = start
    else:
        first = min(max(mark - count // 2, start), stop - count)
    return list(range(first, first + count))


def step_table(record: GateRecord, step: int, units: tuple[int, int], *, gate: str | None = None,
               max_units: int = 8, mark: int | None = None) -> str:
    """HTML with one step's numbers: the character, the next-character guess, and every traced value
    of :func:`shown_units` (``mark``'s column highlighted, row ``gate`` in bold)."""
    start, stop = units
    shown = shown_units(units, mark, max_units)
    T = record.steps
    lines = [f"<div style='font-family:monospace;font-size:12px'>"
             f"<div>step <b>t = {step}</b> of {T}: reads <b>{html.escape(repr(record.chars[step]))}</b></div>"]
    if record.top_next:
        guesses = ", ".join(f"{html.escape(repr(ch))} {p:.2f}" for ch, p in record.top_next[step])
        lines.append(f"<div>next-character guess: {guesses}</div>")
    names = [n for n in ("i", "f", "g", "o", "r", "z", "n", "a", "c", "h") if n in record.values]
    cell = "padding:1px 5px;text-align:right"
    marked = f"background:{HIGHLIGHT_BACKGROUND};color:black;"     # dark text on it in a dark theme too

    def style(u: int) -> str:
        return f"style='{marked if u == mark else ''}{cell}'"

    header = "".join(f"<th {style(u)}>{u}</th>" for u in shown)
    rows = [f"<tr><th style='{cell}'>unit</th>{header}</tr>"]
    for name in names:
        symbol, description, _ = QUANTITIES[name]
        values = "".join(f"<td {style(u)} data-name='{name}' data-unit='{u}'>{record[name][step, u]:+.3f}</td>"
                         for u in shown)
        weight = "font-weight:bold;" if name == gate else ""
        rows.append(f"<tr style='{weight}'><td style='padding:1px 5px;text-align:left' title='{html.escape(description)}'>"
                    f"{name} <span style='opacity:0.65'>{html.escape(description.split(' ')[0])}</span></td>{values}</tr>")
    more = ""
    if stop - start > len(shown):
        more = f"<div>units {shown[0]}–{shown[-1]} of the selected {start}–{stop - 1}</div>"
    lines.append(f"<table style='border-collapse:collapse'>{''.join(rows)}</table>{more}</div>")
    return "".join(lines)


TAPE_CHARS = 100          # characters the text line above the step slider shows (a window of a longer text)


def text_tape(record: GateRecord, step: int) -> str:
    """HTML: the text in one line, the character read at ``step`` highlighted."""
    first = min(max(step - TAPE_CHARS // 2, 0), max(record.steps - TAPE_CHARS, 0))   # a long text: a window
    chars = [html.escape(visible_char(ch)) for ch in record.chars[first:first + TAPE_CHARS]]
    chars[step - first] = (f"<b style='color:{HIGHLIGHT};text-decoration:underline;background:{HIGHLIGHT_BACKGROUND}'>"
                           f"{chars[step - first]}</b>")
    before = "…" if first > 0 else ""
    after = "…" if first + TAPE_CHARS < record.steps else ""
    return (f"<div style='font-family:monospace;font-size:13px;white-space:pre;overflow:hidden'>"
            f"text: {before}{''.join(chars)}{after}</div>")


def gate_legend(gate: str) -> str:
    """HTML: one line on what the chosen gate (or quantity) does."""
    symbol, description, _ = QUANTITIES[gate]
    return (f"<div style='font-size:12px'><b>{html.escape(gate)}</b> ({html.escape(description)}): "
            f"{html.escape(LEGEND[gate])}</div>")


class GateExplorer(Widget):
    """Widget: a model, a gate, units, a unit to watch and a step; the heatmaps and the step's numbers.

    ``models`` maps a label to a CharLM, run over ``text`` when first shown. The units slider is
    inclusive at both ends. ``watch`` (default: the window's first unit) is outlined and its
    neighbours' numbers listed; the units window and the watched unit keep each other inside.
    """

    TABLE_UNITS = 5        # columns of the numbers table: five units fit beside the picture on a slide

    def __init__(self, models: Mapping[str, torch.nn.Module], vocab: Vocab, text: str, *,
                 units: tuple[int, int] = (0, 31), step: int = 0, watch: int | None = None,
                 dpi: int = FIGURE_DPI):
        if not models:
            raise ValueError("models is empty: give at least one, e.g. {'LSTM': model}")
        self.models = dict(models)
        self.vocab, self.text = vocab, text
        self._records: dict[str, GateRecord] = {}
        self._plots: dict[str, GatePlot] = {}
        first = next(iter(self.models))
        record = self.record(first)
        hidden = record.hidden_size
        lo, hi = min(units[0], hidden - 1), min(units[1], hidden - 1)
        if watch is not None and not 0 <= watch < hidden:
            raise ValueError(f"watch must be a unit in 0..{hidden - 1}, got {watch}")
        if watch is not None and not lo <= watch <= hi:
            raise ValueError(f"watch={watch} is outside units={units}: pick a window that contains it")
        self.model = widgets.Dropdown(options=list(self.models), value=first, description="model",
                                      layout=widgets.Layout(width="150px"), style={"description_width": "45px"})
        self.gate = widgets.Dropdown(options=self._gate_options(record), value=DEFAULT_GATE[record.cell],
                                     description="gate", layout=widgets.Layout(width="210px"),
                                     style={"description_width": "35px"})
        slider = {"continuous_update": True, "style": {"description_width": "initial"}}
        self.units = widgets.IntRangeSlider(value=(lo, hi), min=0, max=hidden - 1, description="units",
                                            layout=widgets.Layout(width="360px"), **slider)
        self.watch = widgets.BoundedIntText(value=lo if watch is None else watch, min=0, max=hidden - 1,
                                            description="watch unit", layout=widgets.Layout(width="170px"),
                                            style={"description_width": "75px"})
        self.step = widgets.IntSlider(value=min(step, record.steps - 1), min=0, max=record.steps - 1,
                                      description="step t", layout=widgets.Layout(width="680px"), **slider)
        self.legend = widgets.HTML()
        self.tape = widgets.HTML()
        self.numbers = widgets.HTML(layout=widgets.Layout(width="370px"))
        # registered before the base class's own observers, so they run first: a model switch, a units
        # move or a watched unit that need another control to follow are redrawn once
        self.model.observe(self._on_model, names="value")
        self.units.observe(self._on_units, names="value")
        self.watch.observe(self._on_watch, names="value")
        super().__init__({"model": self.model, "gate": self.gate, "units": self.units, "watch": self.watch,
                          "step": self.step},
                         rows=[["model", "gate", "units", "watch"], self.legend, self.tape, "step"],
                         beside=[self.numbers], dpi=dpi)

    # compute, cached per model ------------------------------------------------------------------
    def record(self, name: str) -> GateRecord:
        """The record of model ``name`` over the text (computed once)."""
        if name not in self._records:
            self._records[name] = gate_record(self.models[name], self.vocab, self.text)
        return self._records[name]

    @staticmethod
    def _gate_options(record: GateRecord) -> list[tuple[str, str]]:
        # short labels ("z: update gate"): what the gate does is the legend's line below the controls
        return [(f"{g}: {QUANTITIES[g][1].removesuffix(' c̃_t').removesuffix(' h̃_t')}", g) for g in record.gates]

    # controls -------------------------------------------------------------------------------------
    def _on_model(self, change) -> None:
        """Model switched: gate options, units and watched unit follow it."""
        record = self.record(change["new"])
        # no redraw at the end: the base class's own observer of the model dropdown runs next
        with self.held(redraw=False):
            gate = self.gate.value
            self.gate.options = self._gate_options(record)
            self.gate.value = gate if gate in record.gates else DEFAULT_GATE[record.cell]
            if self.units.max != record.hidden_size - 1:
                lo, hi = self.units.value
                top = record.hidden_size - 1
                self.units.max = top
                self.units.value = (min(lo, top), min(hi, top))
                self.watch.max = top
                self.watch.value = min(max(self.watch.value, self.units.value[0]), self.units.value[1])

    def _on_units(self, change) -> None:
        """Units moved: a watched unit outside the window moves to its nearest edge."""
        lo, hi = change["new"]
        if not lo <= self.watch.value <= hi:
            with self.held(redraw=False):
                self.watch.value = min(max(self.watch.value, lo), hi)

    def _on_watch(self, change) -> None:
        """A unit typed outside the window: the window moves to centre on it."""
        unit, (lo, hi) = change["new"], self.units.value
        if not lo <= unit <= hi:
            width = hi - lo
            new_lo = min(max(unit - width // 2, 0), self.units.max - width)
            with self.held(redraw=False):
                self.units.value = (new_lo, new_lo + width)

    def update_text(self, model: str, gate: str, units: tuple[int, int], watch: int, step: int) -> None:
        record = self.record(model)
        view = (units[0], units[1] + 1)                 # slider (lo, hi) inclusive -> [start, stop)
        self.numbers.value = step_table(record, step, view, gate=gate, max_units=self.TABLE_UNITS, mark=watch)
        self.tape.value = text_tape(record, step)
        self.legend.value = gate_legend(gate)

    # draw -----------------------------------------------------------------------------------------
    def plot(self, name: str) -> GatePlot:
        """The live figure of model ``name`` (built once)."""
        if name not in self._plots:
            self._plots[name] = GatePlot(self.record(name), dpi=self.dpi)
        return self._plots[name]

    def render(self, model: str, gate: str, units: tuple[int, int], watch: int, step: int) -> bytes:
        plot = self.plot(model)
        plot.update(gate, (units[0], units[1] + 1), step, watch)
        return plot.png()

    def describe(self, model: str, gate: str, units: tuple[int, int], watch: int, step: int) -> str:
        return describe_gates(self.record(model), gate, (units[0], units[1] + 1), step, watch)

    def figure(self, **values) -> GateFigure:
        """A new figure of ``values``; a control left out keeps its current value."""
        values = {**self.values(), **values}
        lo, hi = values["units"]
        return draw_gates(self.record(values["model"]), values["gate"], (lo, hi + 1), values["step"], values["watch"])
