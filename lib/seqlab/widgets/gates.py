r"""Gate explorer: what the gates, cell state and hidden state of an RNN/LSTM/GRU do over a text.

Three parts, as for every course widget:

- **compute** -- :func:`gate_record` runs a character model once over a text and returns a
  :class:`GateRecord`: the characters and, for every quantity the recurrent layer traces, a
  ``(T, H)`` numpy array (LSTM ``i f g o c h``, GRU ``r z n h``, RNN ``a h``).
- **draw** -- :func:`draw_gates` turns a record into stacked heatmaps (time x units): the chosen
  gate, the cell state (LSTM only) and the hidden state, with the chosen step's column outlined
  in every panel. :class:`GatePlot` is the same figure kept alive and updated in place, which is
  what makes the widget answer quickly.
- **controls** -- :class:`GateExplorer` joins them with ipywidgets (model, gate, units, a unit
  to watch, step) through :class:`~seqlab.widgets.live.LiveFigure`, and shows the chosen step's
  numbers for the units around the watched one, whose row is outlined in the picture.

    models = {"LSTM": load_pretrained("charlm-lstm")[0], "GRU": load_pretrained("charlm-gru")[0]}
    GateExplorer(models, char_lm_data().vocab, "In 2010, she moved to Paris.", units=(117, 132), watch=125)

The widget is laid out for a 1280 x 720 slide: about 1,050 px wide and under 600 px tall at the
course's figure resolution (picture and numbers side by side).

The GRU's ``z`` is torch's update gate: :math:`h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}`, so
``z`` near 1 *keeps* the old state (the lectures' :math:`z_t` is torch's :math:`1 - z_t`; see
``seqlab.nn.gru``).
"""

from __future__ import annotations

import html
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import Bbox, ScaledTranslation, blended_transform_factory

from seqlab.notebook import FIGURE_DPI
from seqlab.train import evaluating
from seqlab.widgets.live import LiveFigure, PNGFigure

if TYPE_CHECKING:
    from seqlab.data import Vocab

__all__ = ["GATES", "GateExplorer", "GateFigure", "GatePlot", "GateRecord", "QUANTITIES", "draw_gates", "gate_record"]

# cell type -> the gates a user can pick (in torch's weight order), and the default one
GATES: dict[str, tuple[str, ...]] = {"lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n"), "rnn": ("a",)}
DEFAULT_GATE = {"lstm": "f", "gru": "z", "rnn": "a"}

# name -> (symbol, description, kind); kind 'sigmoid' is drawn 0..1 with a sequential map,
# 'tanh' is in (-1, 1) and 'signed' is unbounded, both with a diverging map centred at 0
QUANTITIES: dict[str, tuple[str, str, str]] = {
    "i": ("i_t", "input gate", "sigmoid"),
    "f": ("f_t", "forget gate", "sigmoid"),
    "g": ("g_t", "candidate c̃_t", "tanh"),
    "o": ("o_t", "output gate", "sigmoid"),
    "c": ("c_t", "cell state", "signed"),
    "r": ("r_t", "reset gate", "sigmoid"),
    "z": ("z_t", "update gate", "sigmoid"),
    "n": ("n_t", "candidate h̃_t", "tanh"),
    "a": ("a_t", "pre-activation", "signed"),
    "h": ("h_t", "hidden state", "tanh"),
}
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
SEQUENTIAL_CMAP, DIVERGING_CMAP = "viridis", "RdBu_r"
VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}  # characters that would be blank as labels


def _visible(ch: str) -> str:
    return VISIBLE.get(ch, ch)


# ================================================================================================
# compute
# ================================================================================================

@dataclass(frozen=True)
class GateRecord:
    """Everything one pass of a character model over ``text`` computed inside its recurrent layer.

    ``values[name]`` is a ``(T, H)`` float32 array for every traced name (LSTM ``i f g o c h``,
    GRU ``r z n h``, RNN ``a h``); row ``t`` is the step that read ``chars[t]``. The state before
    the first step is zero. ``top_next[t]`` holds the model's three likeliest next characters
    after reading ``chars[: t + 1]``, with their probabilities.
    """

    chars: tuple[str, ...]
    cell: str                                   # 'lstm', 'gru' or 'rnn'
    mode: str                                   # the trace's mode: 'LSTM', 'GRU', 'RNN_TANH', 'RNN_RELU'
    values: dict[str, np.ndarray]               # name -> (T, H)
    layer: int = 0
    direction: str = "forward"
    top_next: tuple[tuple[tuple[str, float], ...], ...] = field(default=(), repr=False)

    @property
    def text(self) -> str:
        return "".join(self.chars)

    @property
    def steps(self) -> int:
        return len(self.chars)

    @property
    def hidden_size(self) -> int:
        return int(self.values["h"].shape[1])

    @property
    def gates(self) -> tuple[str, ...]:
        return GATES[self.cell]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]


@torch.no_grad()
def gate_record(model: torch.nn.Module, vocab: Vocab, text: str, *, layer: int = 0,
                direction: str = "forward") -> GateRecord:
    """Run ``model`` (a :class:`~seqlab.nn.charlm.CharLM`) once over ``text`` and record its gates.

    ``vocab`` maps characters to ids (``seqlab.data.char_lm_data().vocab``). The model runs in
    eval mode without gradients; its training flag is restored afterwards.
    """
    from seqlab.nn.recurrent import RecurrentBase

    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    if not text:
        raise ValueError("text is empty: give at least one character to run the model over")
    missing = sorted(set(text) - set(vocab.stoi))
    if missing:
        shown = ", ".join(repr(ch) for ch in missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise ValueError(f"text has {len(missing)} character(s) outside the model's vocabulary of "
                         f"{len(vocab)}: {shown}; remove or replace them")
    rnn = getattr(model, "rnn", None)
    if not isinstance(rnn, RecurrentBase):
        what = type(rnn).__name__ if rnn is not None else f"{type(model).__name__} without an .rnn layer"
        raise TypeError(f"the model's recurrent layer ({what}) records no gate trace; build the model with "
                        "seqlab's RNN/LSTM/GRU (e.g. CharLM(config), not reference=True)")
    if not 0 <= layer < rnn.num_layers:
        raise ValueError(f"layer must be in 0..{rnn.num_layers - 1}, got {layer}")
    if direction not in ("forward", "reverse") or (direction == "reverse" and not rnn.bidirectional):
        allowed = "'forward' or 'reverse'" if rnn.bidirectional else "'forward' (the model is not bidirectional)"
        raise ValueError(f"direction must be {allowed}, got {direction!r}")

    with evaluating(model):                                           # dropout off; each module's mode restored
        device = next(model.parameters()).device
        ids = vocab.encode(text).to(device)[None]                     # (1, T)
        _, _, trace = rnn(model.embed(ids), return_trace=True)
        logits = model.head(trace.layers[-1]["forward"]["h"]) if not rnn.bidirectional else None

    values = {name: trace.get(name, layer, direction)[0].float().cpu().numpy()   # (T, H)
              for name in trace.names}
    top_next: tuple = ()
    if logits is not None:
        probs, top = torch.softmax(logits[0].float(), dim=-1).topk(min(3, logits.shape[-1]), dim=-1)
        top_next = tuple(tuple((vocab.itos[int(i)], float(p)) for p, i in zip(ps, ids_))
                         for ps, ids_ in zip(probs.cpu(), top.cpu()))
    cell = {"LSTM": "lstm", "GRU": "gru"}.get(trace.mode, "rnn")
    return GateRecord(tuple(text), cell, trace.mode, values, layer, direction, top_next)


def _limit(record: GateRecord, name: str) -> tuple[float, float]:
    """Colour limits: 0..1 for sigmoid gates, ±1 for tanh outputs, ±(99th percentile of |x|) else."""
    kind = QUANTITIES[name][2]
    if kind == "sigmoid":
        return 0.0, 1.0
    if kind == "tanh" and not (name == "h" and record.mode == "RNN_RELU"):
        return -1.0, 1.0
    bound = float(np.percentile(np.abs(record[name]), 99)) or 1.0
    return -bound, bound


def _check_view(record: GateRecord, gate: str, units: tuple[int, int], step: int,
                mark: int | None = None) -> tuple[int, int]:
    if gate not in record.gates:
        raise ValueError(f"gate must be one of {record.gates} for a {record.cell.upper()}, got {gate!r}")
    start, stop = (int(u) for u in units)
    if not 0 <= start < stop <= record.hidden_size:
        raise ValueError(f"units=(start, stop) must satisfy 0 <= start < stop <= {record.hidden_size}, "
                         f"got {units}")
    if not 0 <= step < record.steps:
        raise ValueError(f"step must be in 0..{record.steps - 1}, got {step}")
    if mark is not None and not 0 <= mark < record.hidden_size:
        raise ValueError(f"mark must be a unit in 0..{record.hidden_size - 1} (or None), got {mark}")
    return start, stop


# ================================================================================================
# draw
# ================================================================================================

class GateFigure(PNGFigure):
    """The gate explorer's figure (a :class:`~seqlab.widgets.live.PNGFigure`)."""


class GatePlot:
    """A gate figure that stays alive: :meth:`update` changes its artists in place.

    Built once per record. Moving the units or the gate swaps image data, colour limits and
    titles; moving the step only moves the highlight. ``mark`` outlines one unit's row in every
    panel (when it is among the units shown). :meth:`png` renders it for the widget in
    three layers (matplotlib's blitting), each kept as pixels until something in it changes:

    - *static*: frames, colour bars, the characters under the bottom panel; kept per set of
      colour maps and limits (a handful per model), since colour bars are the dearest part;
    - *view*: the heatmaps, unit axes, spines, titles and the marked unit's outline, redrawn over
      the static layer, panel by panel, when the gate (one panel) or the units or the mark (every
      panel) change;
    - *step*: the highlight, the red character and the header, drawn over the view layer at
      every move.

    The figure is a :class:`GateFigure`, not registered with pyplot.
    """

    # inches: at the course's 80 dpi the LSTM's three panels are 672 x 388 px, so that picture, numbers
    # and controls fit a 1280 x 720 slide
    WIDTH, PANEL_HEIGHT, TOP, BOTTOM = 8.4, 1.3, 0.5, 0.45
    LEFT, RIGHT = 0.6, 0.65                                      # inches

    def __init__(self, record: GateRecord, *, dpi: int = FIGURE_DPI):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        self.record = record
        self.panels = ("gate", "c", "h") if record.cell == "lstm" else ("gate", "h")
        n, T = len(self.panels), record.steps
        height = self.TOP + self.BOTTOM + n * self.PANEL_HEIGHT
        self.figure = fig = GateFigure(figsize=(self.WIDTH, height), dpi=dpi, facecolor="white")
        self.canvas = FigureCanvasAgg(fig)
        grid = fig.add_gridspec(n, 2, width_ratios=(1, 0.018), wspace=0.02, hspace=0.3,
                                left=self.LEFT / self.WIDTH, right=1 - self.RIGHT / self.WIDTH,
                                top=1 - self.TOP / height, bottom=self.BOTTOM / height)
        self.axes, self.images, self.colorbars, self.titles, self.row_marks = [], [], [], [], []
        self.dynamic: list = []          # the step layer: what a step move changes
        self.view_artists: list = []     # the view layer, per panel: what a gate or units change changes
        for row, panel in enumerate(self.panels):
            ax = fig.add_subplot(grid[row, 0])
            image = ax.imshow(np.zeros((1, T)), aspect="auto", interpolation="nearest",
                              extent=(-0.5, T - 0.5, 0.5, -0.5), cmap=DIVERGING_CMAP)
            ax.set_xlim(-0.5, T - 0.5)
            colorbar = fig.colorbar(image, cax=fig.add_subplot(grid[row, 1]))
            colorbar.ax.tick_params(labelsize=8)
            colorbar.ax.yaxis.set_major_locator(MaxNLocator(4))
            ax.yaxis.set_major_locator(MaxNLocator(4, integer=True))
            ax.tick_params(axis="y", labelsize=8)
            # fixed label and title positions: matplotlib need not measure the tick labels
            ax.set_ylabel("unit", fontsize=9)
            ax.yaxis.set_label_coords(-0.045, 0.5)
            self.titles.append(ax.set_title("", loc="left", fontsize=10, y=1.0, pad=3))
            ax.grid(False)
            for side in ("top", "right"):
                ax.spines[side].set_visible(True)
            # the chosen step: a white band under a black outline, visible on any colour map
            blend = blended_transform_factory(ax.transData, ax.transAxes)
            for colour, width in (("white", 3.5), ("black", 1.5)):
                patch = Rectangle((-0.5, 0), 1, 1, transform=blend, fill=False, edgecolor=colour, lw=width,
                                  clip_on=False, zorder=3)
                ax.add_patch(patch)
                self.dynamic.append(patch)
            # the marked unit's row: a black outline on a white one, over the spines, under the step's
            # outline (zorder 2.8: the order the layers draw in, which savefig follows too)
            row_marks = [Rectangle((-0.5, -0.5), T, 1, fill=False, edgecolor=colour, lw=width, zorder=2.8,
                                   visible=False) for colour, width in (("white", 2.6), ("black", 1.1))]
            for patch in row_marks:
                ax.add_patch(patch)
            self.row_marks.append(row_marks)
            self.view_artists.append([image, *ax.spines.values(), ax.yaxis, self.titles[-1], *row_marks])
            self.axes.append(ax)
            self.images.append(image)
            self.colorbars.append(colorbar)
            self._set_quantity(row, "f" if panel == "gate" else panel)   # the gate is set by update()
        # x axis: the characters, under the bottom panel only
        every = max(1, int(np.ceil(T / 80)))            # beyond ~80 characters, label every k-th
        bottom = self.axes[-1]
        bottom.set_xticks(range(0, T, every))
        bottom.set_xticklabels([_visible(ch) for ch in record.chars[::every]], fontsize=9, family="monospace")
        bottom.tick_params(axis="x", length=0, pad=4)   # no tick marks under the characters
        bottom.set_xlabel("character read at step t", fontsize=9)
        bottom.xaxis.set_label_coords(0.5, -0.2 * 1.7 / self.PANEL_HEIGHT)
        for ax in self.axes[:-1]:
            ax.set_xticks([])
        # the step's character again, in red over its black tick label
        shift = ScaledTranslation(0, -4 / 72, fig.dpi_scale_trans)  # the tick labels' pad: 4 points
        self.step_label = bottom.text(0, 0, "", transform=blended_transform_factory(bottom.transData,
                                                                                    bottom.transAxes) + shift,
                                      ha="center", va="top", fontsize=9, family="monospace", color="crimson",
                                      fontweight="bold", bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})
        self.header = fig.text(self.LEFT / self.WIDTH, 1 - 0.08 / height, "", fontsize=11, va="top", ha="left")
        self.dynamic += [self.step_label, self.header]
        self.view: tuple | None = None
        self._quantities: list[str | None] = [None if p == "gate" else p for p in self.panels]
        self._background = None          # pixels of the static and view layers (no step layer)
        self._static: dict[tuple, object] = {}   # colour maps and limits -> pixels of the static layer
        self._stale_panels = set(range(n))       # panels whose view layer must be drawn again

    def _set_quantity(self, row: int, name: str) -> None:
        """Point panel ``row`` at quantity ``name``: colour map, limits, title."""
        limits = _limit(self.record, name)
        cmap = SEQUENTIAL_CMAP if QUANTITIES[name][2] == "sigmoid" else DIVERGING_CMAP
        image = self.images[row]
        # each change lays the colour bar out again (about 9 ms): once for both, and not at all
        # when they stay (i -> f)
        if (image.get_cmap().name, image.get_clim()) != (cmap, limits):
            with image.callbacks.blocked(signal="changed"):
                image.set_cmap(cmap)
                image.set_clim(*limits)
            self.colorbars[row].update_normal(image)
        symbol, description, _ = QUANTITIES[name]
        description = description.replace("c̃_t", r"$\tilde{c}_t$").replace("h̃_t", r"$\tilde{h}_t$")
        self.titles[row].set_text(f"${symbol}$  {description}")

    def update(self, gate: str, units: tuple[int, int], step: int, mark: int | None = None) -> GateFigure:
        """Show ``gate`` (one of ``record.gates``), units ``start <= u < stop``, highlight ``step``, and
        outline the row of unit ``mark`` (if it is one of the units shown)."""
        record = self.record
        start, stop = _check_view(record, gate, units, step, mark)
        old_units, old_mark = (self.view[1], self.view[3]) if self.view else (None, None)
        shown_mark = mark if mark is not None and start <= mark < stop else None
        if (start, stop) != old_units or mark != old_mark:
            for row_marks in self.row_marks:
                for patch in row_marks:
                    patch.set_visible(shown_mark is not None)
                    patch.set_y((shown_mark if shown_mark is not None else start) - 0.5)
            self._stale_panels.update(range(len(self.panels)))
        for row, panel in enumerate(self.panels):
            name = gate if panel == "gate" else panel
            if name != self._quantities[row] or (start, stop) != old_units:
                if name != self._quantities[row]:
                    self._set_quantity(row, name)
                self.images[row].set_data(record[name][:, start:stop].T)               # (units, T)
                self.images[row].set_extent((-0.5, record.steps - 0.5, stop - 0.5, start - 0.5))
                self._quantities[row] = name
                self._stale_panels.add(row)
        for artist in self.dynamic[:-2]:
            artist.set_x(step - 0.5)
        self.step_label.set_x(step)
        self.step_label.set_text(_visible(record.chars[step]))
        layer = f"layer {record.layer}" + (f", {record.direction}" if record.direction != "forward" else "")
        outlined = f", outlined: unit {shown_mark}" if shown_mark is not None else ""
        self.header.set_text(f"{record.mode.replace('_', ' ')} ({layer}), units {start}–{stop - 1}{outlined}:  "
                             f"step t = {step} reads {_visible(record.chars[step])!r}")
        self.view = (gate, (start, stop), step, mark)
        return self.figure

    def _panel_band(self, row: int) -> Bbox:
        """The pixels that panel ``row``'s view layer may touch, across the full width.

        Neighbouring bands meet a quarter of the way down the gap between two heatmaps: the title
        above a heatmap needs the rest of the gap, the colour bar's lowest label a little below.
        """
        box = self.axes[row].bbox
        top = box.y1 + (0.75 * (self.axes[row - 1].bbox.y0 - box.y1) if row else 0.5 * self.TOP * self.figure.dpi)
        bottom = box.y0 - 0.25 * (box.y0 - self.axes[row + 1].bbox.y1) if row + 1 < len(self.axes) else 0
        return Bbox.from_extents(0, bottom, self.figure.bbox.x1, top)

    def png(self, *, compress_level: int = 1) -> bytes:
        """PNG bytes of the figure as it is now, redrawing only the layers and panels that changed."""
        from PIL import Image

        if self._stale_panels:
            key = tuple((image.get_cmap().name, image.get_clim()) for image in self.images)
            if key not in self._static:
                layered = [a for panel in self.view_artists for a in panel] + self.dynamic
                for artist in layered:
                    artist.set_animated(True)      # left out of the full draw ...
                self.canvas.draw()
                self._static[key] = self.canvas.copy_from_bbox(self.figure.bbox)
                for artist in layered:
                    artist.set_animated(False)     # ... but part of the figure again for savefig
            if self._background is not None:
                self.canvas.restore_region(self._background)    # the panels that stay
            for row in sorted(self._stale_panels):
                band, height = self._panel_band(row), self.figure.bbox.height
                # restore_region takes pixel rows counted from the top (display coordinates count
                # from the bottom), and xy is where the region's own corner goes: (0, 0), unmoved
                self.canvas.restore_region(self._static[key], xy=(0, 0),
                                           bbox=(band.x0, height - band.y1, band.x1, height - band.y0))
                for artist in self.view_artists[row]:
                    self.figure.draw_artist(artist)
            self._stale_panels.clear()
            self._background = self.canvas.copy_from_bbox(self.figure.bbox)
        else:
            self.canvas.restore_region(self._background)
        for artist in self.dynamic:
            self.figure.draw_artist(artist)
        pixels = np.asarray(self.canvas.buffer_rgba())[..., :3]     # (height, width, 3), opaque
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="png", compress_level=compress_level)
        return buffer.getvalue()


def draw_gates(record: GateRecord, gate: str | None = None, units: tuple[int, int] | None = None,
               step: int = 0, mark: int | None = None) -> GateFigure:
    """Heatmaps over time x units of ``gate``, the cell state (LSTM) and the hidden state.

    ``units=(start, stop)`` selects units ``start <= u < stop`` (default: the first 32);
    ``gate`` defaults to the forget gate (LSTM), the update gate (GRU) or the pre-activation
    (RNN). The column of ``step`` is outlined in every panel, and the row of unit ``mark`` (if
    given and shown). Returns a new Figure.
    """
    gate = DEFAULT_GATE[record.cell] if gate is None else gate
    units = (0, min(32, record.hidden_size)) if units is None else units
    return GatePlot(record).update(gate, units, step, mark)


# ================================================================================================
# controls
# ================================================================================================

def shown_units(units: tuple[int, int], mark: int | None = None, max_units: int = 8) -> list[int]:
    """The units a step table lists: ``max_units`` of ``start <= u < stop``, centred on ``mark`` when
    it is one of them, else the first ones."""
    start, stop = units
    count = min(max_units, stop - start)
    if mark is None or not start <= mark < stop:
        first = start
    else:
        first = min(max(mark - count // 2, start), stop - count)
    return list(range(first, first + count))


def step_table(record: GateRecord, step: int, units: tuple[int, int], *, gate: str | None = None,
               max_units: int = 8, mark: int | None = None) -> str:
    """HTML with the numbers of one step: the character, the model's guess of the next one, and every
    traced value for ``max_units`` of units ``start <= u < stop`` (centred on unit ``mark`` if it is one
    of them, its column highlighted; row ``gate`` in bold)."""
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
    marked = "background:#fde2e2;"

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
                    f"{name} <span style='color:#666'>{html.escape(description.split(' ')[0])}</span></td>{values}</tr>")
    more = ""
    if stop - start > len(shown):
        more = f"<div>units {shown[0]}–{shown[-1]} of the selected {start}–{stop - 1}</div>"
    lines.append(f"<table style='border-collapse:collapse'>{''.join(rows)}</table>{more}</div>")
    return "".join(lines)


TAPE_CHARS = 100          # characters the text line above the step slider shows (a window of a longer text)


def text_tape(record: GateRecord, step: int) -> str:
    """HTML: the whole text in one line, the character read at ``step`` in red, underlined -- the step
    slider's axis written out in characters."""
    first = min(max(step - TAPE_CHARS // 2, 0), max(record.steps - TAPE_CHARS, 0))   # a long text: a window
    chars = [html.escape(_visible(ch)) for ch in record.chars[first:first + TAPE_CHARS]]
    chars[step - first] = f"<b style='color:crimson;text-decoration:underline;background:#fde2e2'>{chars[step - first]}</b>"
    before = "…" if first > 0 else ""
    after = "…" if first + TAPE_CHARS < record.steps else ""
    return (f"<div style='font-family:monospace;font-size:13px;white-space:pre;overflow:hidden'>"
            f"text: {before}{''.join(chars)}{after}</div>")


def gate_legend(gate: str) -> str:
    """HTML: one line on what the chosen gate (or quantity) does."""
    symbol, description, _ = QUANTITIES[gate]
    return (f"<div style='font-size:12px'><b>{html.escape(gate)}</b> ({html.escape(description)}): "
            f"{html.escape(LEGEND[gate])}</div>")


class GateExplorer:
    """Widget: pick a model, a gate, units, a unit to watch and a time step; see the heatmaps and the
    step's numbers.

    ``models`` maps a label (shown in the model dropdown) to a CharLM; each is run over ``text``
    once, when first shown. The units slider is inclusive at both ends (as it reads); the
    figure shows units ``lo..hi``. ``watch`` is a unit to follow (default: the window's first):
    its row is outlined in the picture and the numbers list the five units around it. Moving the
    units window away from it moves it into the window; typing a unit outside the window moves the
    window to it. Set controls from code (``explorer.step.value = 5``) to drive it without a
    display; ``explorer.live`` is the underlying LiveFigure.
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
        self.legend = widgets.HTML(gate_legend(self.gate.value))
        self.tape = widgets.HTML()
        self.numbers = widgets.HTML(layout=widgets.Layout(width="370px"))
        # registered before the LiveFigure's own observers, so they run first: a model switch, a units
        # move or a watched unit that need another control to follow are redrawn once
        self.model.observe(self._on_model, names="value")
        self.units.observe(self._on_units, names="value")
        self.watch.observe(self._on_watch, names="value")
        self.dpi = dpi
        # render= keeps one figure per model alive and blits it (GatePlot.png), instead of
        # building and fully rendering a new figure at every slider move
        self.live = LiveFigure(None, {"model": self.model, "gate": self.gate, "units": self.units,
                                      "watch": self.watch, "step": self.step}, render=self._render, dpi=dpi)
        self.widget = widgets.VBox([widgets.HBox([self.model, self.gate, self.units, self.watch]), self.legend,
                                    self.tape, self.step,
                                    widgets.HBox([self.live.image, self.numbers],
                                                 layout=widgets.Layout(align_items="flex-start")),
                                    self.live.status],
                                   layout=widgets.Layout(align_items="flex-start"))  # no stretched picture

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
        """Model switched: gate options follow its cell type, the units slider and watched unit its size."""
        record = self.record(change["new"])
        # no redraw at the end: the LiveFigure's own observer of the model dropdown runs next
        with self.live.held(redraw=False):
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
        """Units moved: a watched unit left outside the window moves to its nearest edge."""
        lo, hi = change["new"]
        if not lo <= self.watch.value <= hi:
            with self.live.held(redraw=False):
                self.watch.value = min(max(self.watch.value, lo), hi)

    def _on_watch(self, change) -> None:
        """A unit typed outside the window: the window (same width) moves to centre on it."""
        unit, (lo, hi) = change["new"], self.units.value
        if not lo <= unit <= hi:
            width = hi - lo
            new_lo = min(max(unit - width // 2, 0), self.units.max - width)
            with self.live.held(redraw=False):
                self.units.value = (new_lo, new_lo + width)

    # draw -----------------------------------------------------------------------------------------
    def plot(self, name: str) -> GatePlot:
        """The live figure of model ``name`` (built once)."""
        if name not in self._plots:
            self._plots[name] = GatePlot(self.record(name), dpi=self.dpi)
        return self._plots[name]

    def _render(self, model: str, gate: str, units: tuple[int, int], watch: int, step: int) -> bytes:
        view = (units[0], units[1] + 1)                 # slider (lo, hi) inclusive -> [start, stop)
        plot = self.plot(model)
        plot.update(gate, view, step, watch)
        self.numbers.value = step_table(plot.record, step, view, gate=gate, max_units=self.TABLE_UNITS, mark=watch)
        self.tape.value = text_tape(plot.record, step)
        self.legend.value = gate_legend(gate)
        return plot.png()

    def figure(self) -> GateFigure:
        """A new static figure of the current view (for a notebook's saved output)."""
        lo, hi = self.units.value
        return draw_gates(self.record(self.model.value), self.gate.value, (lo, hi + 1), self.step.value,
                          self.watch.value)

    @property
    def redraws(self) -> int:
        return self.live.redraws

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
