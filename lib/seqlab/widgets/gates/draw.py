"""The gate explorer's draw part: a record as stacked heatmaps over time x units, or one unit as coloured text."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import Bbox, ScaledTranslation, blended_transform_factory

from seqlab.colours import DIVERGING, HIGHLIGHT, SEQUENTIAL
from seqlab.notebook import FIGURE_DPI
from seqlab.widgets.gates.compute import DEFAULT_GATE, QUANTITIES, GateRecord, visible_char
from seqlab.widgets.layered import LayeredFigure
from seqlab.widgets.live import PNGFigure

__all__ = ["GateFigure", "GatePlot", "draw_gates", "draw_text_colours"]


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


class GateFigure(PNGFigure):
    """The gate explorer's figure (a :class:`~seqlab.widgets.live.PNGFigure`)."""


class GatePlot:
    """A gate figure kept alive: :meth:`update` changes its artists in place, :meth:`png` renders it.

    Layers (:class:`~seqlab.widgets.layered.LayeredFigure`, one panel per heatmap): *static* frames,
    colour bars and characters, kept per set of colour maps and limits; *view* the heatmaps, titles
    and the ``mark`` unit's outline, redrawn panel by panel; *step* the step's highlight and header.
    """

    # inches: at FIGURE_DPI the picture, the numbers and the controls fit a 1280 x 720 slide
    WIDTH, PANEL_HEIGHT, TOP, BOTTOM = 8.4, 1.3, 0.5, 0.45
    LEFT, RIGHT = 0.6, 0.65                                      # inches

    def __init__(self, record: GateRecord, *, dpi: int = FIGURE_DPI):
        self.record = record
        self.panels = ("gate", "c", "h") if record.cell == "lstm" else ("gate", "h")
        n, T = len(self.panels), record.steps
        height = self.TOP + self.BOTTOM + n * self.PANEL_HEIGHT
        self.figure = fig = GateFigure(figsize=(self.WIDTH, height), dpi=dpi, facecolor="white")
        grid = fig.add_gridspec(n, 2, width_ratios=(1, 0.018), wspace=0.02, hspace=0.3,
                                left=self.LEFT / self.WIDTH, right=1 - self.RIGHT / self.WIDTH,
                                top=1 - self.TOP / height, bottom=self.BOTTOM / height)
        self.axes, self.images, self.colorbars, self.titles, self.row_marks = [], [], [], [], []
        self.dynamic: list = []          # the step layer: what a step move changes
        view_artists: list = []          # the view layer, per panel: what a gate or units change changes
        for row, panel in enumerate(self.panels):
            ax = fig.add_subplot(grid[row, 0])
            image = ax.imshow(np.zeros((1, T)), aspect="auto", interpolation="nearest",
                              extent=(-0.5, T - 0.5, 0.5, -0.5), cmap=DIVERGING)
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
            # the spines in their place: drawn over the heatmap, under the marked unit's outline
            view_artists.append([image, *ax.spines.values(), ax.yaxis, self.titles[-1], *row_marks])
            self.axes.append(ax)
            self.images.append(image)
            self.colorbars.append(colorbar)
            self._set_quantity(row, "f" if panel == "gate" else panel)   # the gate is set by update()
        # x axis: the characters, under the bottom panel only
        every = max(1, int(np.ceil(T / 80)))            # beyond ~80 characters, label every k-th
        bottom = self.axes[-1]
        bottom.set_xticks(range(0, T, every))
        bottom.set_xticklabels([visible_char(ch) for ch in record.chars[::every]], fontsize=9, family="monospace")
        bottom.tick_params(axis="x", length=0, pad=4)   # no tick marks under the characters
        bottom.set_xlabel("character read at step t", fontsize=9)
        bottom.xaxis.set_label_coords(0.5, -0.2 * 1.7 / self.PANEL_HEIGHT)
        for ax in self.axes[:-1]:
            ax.set_xticks([])
        # the step's character again, in red over its black tick label
        shift = ScaledTranslation(0, -4 / 72, fig.dpi_scale_trans)  # the tick labels' pad: 4 points
        self.step_label = bottom.text(0, 0, "", transform=blended_transform_factory(bottom.transData,
                                                                                    bottom.transAxes) + shift,
                                      ha="center", va="top", fontsize=9, family="monospace", color=HIGHLIGHT,
                                      fontweight="bold", bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})
        self.header = fig.text(self.LEFT / self.WIDTH, 1 - 0.08 / height, "", fontsize=11, va="top", ha="left")
        self.dynamic += [self.step_label, self.header]
        self.view: tuple | None = None
        self._quantities: list[str | None] = [None if p == "gate" else p for p in self.panels]
        self._colours: tuple | None = None       # each panel's colour map and limits: what the static layer shows
        # the static layer (colour bars) is kept per set of colour maps and limits: at most two per cell
        # type (sigmoid gates, the tanh candidate)
        self.layered = LayeredFigure(fig, step_artists=self.dynamic, keep_statics=4,
                                     panels=[(artists, self._panel_band(row)) for row, artists in enumerate(view_artists)])

    def _set_quantity(self, row: int, name: str) -> None:
        """Point panel ``row`` at quantity ``name``: colour map, limits, title."""
        limits = _limit(self.record, name)
        cmap = SEQUENTIAL if QUANTITIES[name][2] == "sigmoid" else DIVERGING
        image = self.images[row]
        # new colours lay the colour bar out again: set map and limits at once, and only when they differ
        if (image.get_cmap().name, image.get_clim()) != (cmap, limits):
            with image.callbacks.blocked(signal="changed"):
                image.set_cmap(cmap)
                image.set_clim(*limits)
            self.colorbars[row].update_normal(image)
        symbol, description, _ = QUANTITIES[name]
        description = description.replace("c̃_t", r"$\tilde{c}_t$").replace("h̃_t", r"$\tilde{h}_t$")
        self.titles[row].set_text(f"${symbol}$  {description}")

    def update(self, gate: str, units: tuple[int, int], step: int, mark: int | None = None) -> GateFigure:
        """Show ``gate`` over units ``start <= u < stop``, highlight ``step`` and outline unit ``mark``
        (if shown)."""
        record = self.record
        start, stop = _check_view(record, gate, units, step, mark)
        old_units, old_mark = (self.view[1], self.view[3]) if self.view else (None, None)
        shown_mark = mark if mark is not None and start <= mark < stop else None
        stale: set[int] = set()                          # the panels whose view layer changes
        if (start, stop) != old_units or mark != old_mark:
            for row_marks in self.row_marks:
                for patch in row_marks:
                    patch.set_visible(shown_mark is not None)
                    patch.set_y((shown_mark if shown_mark is not None else start) - 0.5)
            stale.update(range(len(self.panels)))
        for row, panel in enumerate(self.panels):
            name = gate if panel == "gate" else panel
            if name != self._quantities[row] or (start, stop) != old_units:
                if name != self._quantities[row]:
                    self._set_quantity(row, name)
                self.images[row].set_data(record[name][:, start:stop].T)               # (units, T)
                self.images[row].set_extent((-0.5, record.steps - 0.5, stop - 0.5, start - 0.5))
                self._quantities[row] = name
                stale.add(row)
        colours = tuple((image.get_cmap().name, image.get_clim()) for image in self.images)
        if colours != self._colours:                     # a colour bar changed: in the stale panels only
            self._colours = colours
            self.layered.restyle(key=colours, panels=stale)
        elif stale:
            self.layered.view_changed(panels=stale)
        for artist in self.dynamic[:-2]:
            artist.set_x(step - 0.5)
        self.step_label.set_x(step)
        self.step_label.set_text(visible_char(record.chars[step]))
        layer = f"layer {record.layer}" + (f", {record.direction}" if record.direction != "forward" else "")
        outlined = f", outlined: unit {shown_mark}" if shown_mark is not None else ""
        self.header.set_text(f"{record.mode.replace('_', ' ')} ({layer}), units {start}–{stop - 1}{outlined}:  "
                             f"step t = {step} reads {visible_char(record.chars[step])!r}")
        self.view = (gate, (start, stop), step, mark)
        return self.figure

    def _panel_band(self, row: int) -> Bbox:
        """The pixels panel ``row``'s view layer may touch, full width: bands meet a quarter of the way
        down the gap between heatmaps (the title above needs the rest)."""
        box = self.axes[row].bbox
        top = box.y1 + (0.75 * (self.axes[row - 1].bbox.y0 - box.y1) if row else 0.5 * self.TOP * self.figure.dpi)
        bottom = box.y0 - 0.25 * (box.y0 - self.axes[row + 1].bbox.y1) if row + 1 < len(self.axes) else 0
        return Bbox.from_extents(0, bottom, self.figure.bbox.x1, top)

    def png(self, *, compress_level: int = 1) -> bytes:
        """PNG bytes of the figure now, redrawing only what changed."""
        return self.layered.png(compress_level=compress_level)


def draw_gates(record: GateRecord, gate: str | None = None, units: tuple[int, int] | None = None,
               step: int = 0, mark: int | None = None) -> GateFigure:
    """A new figure: heatmaps over time x units of ``gate``, the cell state (LSTM) and the hidden state.

    ``units=(start, stop)``: default the first 32; ``gate``: default :data:`DEFAULT_GATE`. The column
    of ``step`` is outlined in every panel, and the row of unit ``mark`` if shown.
    """
    gate = DEFAULT_GATE[record.cell] if gate is None else gate
    units = (0, min(32, record.hidden_size)) if units is None else units
    return GatePlot(record).update(gate, units, step, mark)


def draw_text_colours(chars: str | tuple[str, ...], values: np.ndarray, *, vmax: float | None = None,
                      title: str = "", label: str = "value", char_width: float = 0.15):
    """The text, each character on its value's colour: one unit drawn as Karpathy does.

    ``values`` ``(T,)``: one number per character, on the diverging map clipped at ``±vmax`` (default
    the largest ``|value|``). A line break ends a row. Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize

    values = np.asarray(values, dtype=np.float64)
    if values.shape != (len(chars),):
        raise ValueError(f"values should have one number per character, shape ({len(chars)},), got {values.shape}")
    if len(chars) == 0:
        raise ValueError("the text is empty: nothing to draw")
    rows, row, col = [], [], 0                                        # rows of (character, value)
    for ch, v in zip(chars, values):
        row.append((visible_char(ch) if ch in "\n\t\r" else ch, v))
        if ch == "\n":
            rows.append(row)
            row = []
    if row:
        rows.append(row)
    width = max(len(r) for r in rows)
    grid = np.full((len(rows), width), np.nan)                        # (rows, columns); nan: no character
    for r, cells in enumerate(rows):
        grid[r, : len(cells)] = [v for _, v in cells]
    bound = float(vmax) if vmax is not None else float(np.abs(values).max()) or 1.0
    cmap = plt.get_cmap(DIVERGING).with_extremes(bad="white")
    norm = Normalize(-bound, bound, clip=True)

    fig, ax = plt.subplots(figsize=(width * char_width + 0.4, len(rows) * 0.3 + 1.1), facecolor="white")
    image = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    for r, cells in enumerate(rows):
        for k, (ch, v) in enumerate(cells):
            red, green, blue, _ = cmap(norm(v))
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5      # white letters on a dark background
            ax.text(k, r, ch, ha="center", va="center", family="monospace", fontsize=11,
                    color="white" if dark else "black")
    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=11, loc="left")
    bar = fig.colorbar(image, ax=ax, orientation="horizontal", fraction=0.9 / (len(rows) + 4), pad=0.02,
                       aspect=40)
    bar.set_label(label, fontsize=9)
    bar.ax.tick_params(labelsize=8)
    return fig
