"""What every course widget shares: :func:`draw_matrix`, an annotated heatmap, and :class:`Widget`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Literal

import ipywidgets as widgets
import numpy as np
from matplotlib import colormaps
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from seqlab.colours import HIGHLIGHT, MASKED, VALUES, highlight_halo
from seqlab.notebook import FIGURE_DPI
from seqlab.widgets.live import LiveFigure, PNGFigure

__all__ = ["Widget", "draw_matrix", "format_number", "text_colour"]

MIN_FONTSIZE = 9                    # points; the figures are sized so that 1 pt stays >= 1 px at 1280x720


def format_number(value: float, fmt: str | Callable[[float], str] | None = None) -> str:
    """A cell's text: "−∞" / "∞" for infinities, "" for nan, else ``fmt`` (a format spec such as
    ``".3f"`` or ``"{:.1%}"``, or a callable); by default two decimals, whole numbers without them."""
    if np.isnan(value):
        return ""
    if np.isinf(value):
        return "−∞" if value < 0 else "∞"
    if callable(fmt):
        return fmt(value)
    if fmt is not None:
        return fmt.format(value) if "{" in fmt else format(value, fmt)
    if abs(value - round(value)) < 5e-3:
        text = f"{round(value):d}"
        return "0" if text == "-0" else text
    return f"{value:.2f}"


def text_colour(rgba: Sequence[float]) -> str:
    """Black or white, whichever reads better on a cell of colour ``rgba`` (relative luminance)."""
    r, g, b = (float(c) for c in rgba[:3])
    return "white" if 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5 else "black"


def _as_matrix(values) -> np.ndarray:
    if hasattr(values, "detach"):                            # a torch tensor, on any device
        values = values.detach().cpu().double().numpy()
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"values must be a matrix (rows, columns), got shape {array.shape}")
    return array


def _check_labels(name: str, labels: Sequence[str] | None, size: int, axis: str) -> list[str] | None:
    if labels is None:
        return None
    labels = [str(label) for label in labels]
    if len(labels) != size:
        raise ValueError(f"{name} needs one label per {axis}: got {len(labels)} labels for {size} {axis}s")
    return labels


def _text_width_pt(text: str, fontsize: float) -> float:
    """Roughly how wide ``text`` is set, in points (0.6 em a character)."""
    return 0.6 * fontsize * max(len(text), 1)


def draw_matrix(ax, values, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None, *,
                annotate: bool | Literal["auto"] = "auto", cmap: str | Colormap = VALUES, vmin: float | None = None,
                vmax: float | None = None, fmt: str | Callable[[float], str] | None = None,
                highlight_row: int | None = None, xlabel: str | None = None, ylabel: str | None = None,
                title: str | None = None, fontsize: float = 10, label_fontsize: float | None = None):
    """Draw ``values`` ``(rows, columns)`` (numpy or torch) on ``ax`` as a heatmap; returns the ``AxesImage``.

    Row i is at y = i, column j at x = j. ``-inf`` (masked) and nan cells are grey, ``-inf`` reads "−∞";
    ``vmin``/``vmax`` default to the finite range. ``annotate="auto"`` writes the numbers where they fit
    (judged from the axes' size: lay the figure out first). Crowded column labels turn vertical, then
    only every k-th label is shown. ``highlight_row`` is outlined and its label set in bold.
    """
    values = _as_matrix(values)
    rows, cols = values.shape
    row_labels = _check_labels("row_labels", row_labels, rows, "row")
    col_labels = _check_labels("col_labels", col_labels, cols, "column")
    if highlight_row is not None and not 0 <= highlight_row < rows:
        raise ValueError(f"highlight_row must be in 0..{rows - 1}, got {highlight_row}")
    if annotate not in (True, False, "auto"):
        raise ValueError(f"annotate must be True, False or 'auto', got {annotate!r}")
    label_fontsize = fontsize if label_fontsize is None else label_fontsize
    finite = values[np.isfinite(values)]
    if vmin is None:
        vmin = float(finite.min()) if finite.size else 0.0
    if vmax is None:
        vmax = float(finite.max()) if finite.size else 1.0
    if vmax <= vmin:                     # a constant matrix: any colour will do, but not a 0/0
        vmax = vmin + 1.0
    shown = np.where(np.isfinite(values), values, np.nan)      # -inf and nan: "bad" -> the grey face
    colour_map = (colormaps[cmap] if isinstance(cmap, str) else cmap).with_extremes(bad=MASKED)
    # resample the values, then colour them: for cells this size the same pixels as resampling colours, cheaper
    image = ax.imshow(shown, cmap=colour_map, vmin=vmin, vmax=vmax, aspect="equal", interpolation="nearest",
                      interpolation_stage="data")
    ax.set_facecolor(MASKED)

    box = ax.get_position()                                      # in figure fractions
    column_pt = box.width * ax.figure.get_figwidth() * 72 / cols
    row_pt = box.height * ax.figure.get_figheight() * 72 / rows
    texts = None
    if annotate == "auto":
        cell_pt = min(column_pt, row_pt)                         # aspect "equal": square cells
        annotate = fontsize + 2 <= cell_pt                       # too small cells: no number is formatted
        if annotate:
            texts = [[format_number(v, fmt) for v in row] for row in values]
            widest = max((_text_width_pt(t, fontsize) for row in texts for t in row), default=0.0)
            annotate = widest + 2 <= cell_pt
    if annotate:
        texts = texts or [[format_number(v, fmt) for v in row] for row in values]
        colours = colour_map(Normalize(vmin, vmax)(values))      # (rows, cols, 4), one call for every cell
        for (i, j), v in np.ndenumerate(values):
            colour = "black" if not np.isfinite(v) else text_colour(colours[i, j])
            ax.text(j, i, texts[i][j], ha="center", va="center", fontsize=fontsize, color=colour)

    # tick labels: every k-th, k = how many rows/columns one label spans (each tick is dear to set)
    col_labels = col_labels if col_labels is not None else [str(j) for j in range(cols)]
    row_labels = row_labels if row_labels is not None else [str(i) for i in range(rows)]
    vertical = max(_text_width_pt(label, label_fontsize) for label in col_labels) > 0.95 * column_pt
    col_every = math.ceil(label_fontsize / column_pt) if vertical else 1
    row_every = max(math.ceil(label_fontsize / row_pt), 1)
    ax.set_xticks(range(0, cols, col_every), col_labels[::col_every], fontsize=label_fontsize,
                  rotation=90 if vertical else 0)
    ax.set_yticks(range(0, rows, row_every), row_labels[::row_every], fontsize=label_fontsize)
    ax.tick_params(length=0)
    ax.grid(False)
    if highlight_row is not None:
        ax.add_patch(Rectangle((-0.5, highlight_row - 0.5), cols, 1, fill=False, edgecolor=HIGHLIGHT,
                               lw=2.0, clip_on=False, zorder=3, path_effects=highlight_halo(2.0)))
        if highlight_row % row_every == 0:                       # its label is shown
            label = ax.get_yticklabels()[highlight_row // row_every]
            label.set_fontweight("bold")
            label.set_color(HIGHLIGHT)
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=fontsize)
    if ylabel:
        ax.set_ylabel(ylabel, fontsize=fontsize)
    if title:
        ax.set_title(title, fontsize=fontsize)
    return image


class Widget:
    """Base class of the course widgets: controls -> a picture, redrawn at every change.

    A subclass makes its controls, calls ``super().__init__(controls)`` and implements :meth:`figure`
    and :meth:`describe`; it may override :meth:`render` (a faster path to the same picture) and
    :meth:`update_text`. ``rows`` lays out the controls top to bottom (a control's name, another
    widget, or a list of them side by side); ``beside`` / ``below`` hold widgets right of / under the
    picture. ``widget.controls[name].value = v`` moves a control from code; ``held()`` batches moves.
    """

    def __init__(self, controls: Mapping[str, widgets.ValueWidget], *,
                 rows: Sequence[str | widgets.Widget | Sequence[str | widgets.Widget]] | None = None,
                 beside: Sequence[widgets.Widget] = (), below: Sequence[widgets.Widget] = (), dpi: int = FIGURE_DPI,
                 show_timing: bool = True):
        rows = [list(controls)] if rows is None else rows
        lists = [row if isinstance(row, (list, tuple)) else [row] for row in rows]
        unknown = [item for row in lists for item in row if isinstance(item, str) and item not in controls]
        if unknown:
            raise ValueError(f"rows name controls that do not exist: {unknown}; controls: {list(controls)}")
        self.dpi = dpi
        self.live = LiveFigure(None, controls, render=self._redraw, describe=self.describe, dpi=dpi,
                               show_timing=show_timing)
        self.controls = self.live.controls
        self.defaults = self.live.last_values          # the values of the first picture
        boxes = []
        for row in rows:
            if isinstance(row, (list, tuple)):
                items = [self.controls[item] if isinstance(item, str) else item for item in row]
                boxes.append(widgets.HBox(items, layout=widgets.Layout(align_items="center", flex_flow="row wrap")))
            else:
                boxes.append(self.controls[row] if isinstance(row, str) else row)
        picture = self.live.image
        if beside:
            picture = widgets.HBox([picture, *beside], layout=widgets.Layout(align_items="flex-start"))
        # flex-start: the picture keeps its own pixel size instead of being stretched (and blurred)
        self.widget = widgets.VBox([*boxes, picture, self.live.description, *below, self.live.status],
                                   layout=widgets.Layout(align_items="flex-start"))

    # to implement ----------------------------------------------------------------------------------
    def figure(self, **values) -> Figure:
        """A new Figure of the state ``values`` (control name -> value)."""
        raise NotImplementedError(f"{type(self).__name__} must implement figure(**values)")

    def describe(self, **values) -> str:
        """The picture of ``values`` in one to three sentences, rounded to read alike on every machine:
        the static picture's alt text and the screen-reader text after each move."""
        raise NotImplementedError(f"{type(self).__name__} must implement describe(**values)")

    def render(self, **values) -> bytes:
        """PNG bytes of the state ``values``; by default a new :meth:`figure`, encoded."""
        from seqlab.widgets.live import figure_to_png

        return figure_to_png(self.figure(**values), dpi=self.dpi)

    def update_text(self, **values) -> None:
        """Update text widgets (labels, tables) for the state ``values``; called before each redraw."""

    # given --------------------------------------------------------------------------------------------
    def _redraw(self, **values) -> bytes:
        self.update_text(**values)
        return self.render(**values)

    def values(self) -> dict[str, object]:
        return self.live.values()

    def static_figure(self, **changes) -> PNGFigure:
        """A new figure of the state the widget was made in, with ``changes``, and :meth:`describe` as
        its alt text: the picture a notebook keeps for readers without a kernel."""
        unknown = set(changes) - set(self.controls)
        if unknown:
            raise ValueError(f"unknown controls {sorted(unknown)}; controls: {list(self.controls)}")
        values = {**self.defaults, **changes}
        fig = self.figure(**values)
        if not isinstance(fig, PNGFigure):
            raise TypeError(f"{type(self).__name__}.figure must return a PNGFigure (not registered with pyplot, "
                            f"shown as a picture), got {type(fig).__name__}")
        fig.alt = self.describe(**values)
        return fig

    @contextmanager
    def held(self, redraw: bool = True) -> Iterator[None]:
        """Change several controls with one redraw at the end (see LiveFigure.held)."""
        with self.live.held(redraw=redraw):
            yield

    @property
    def redraws(self) -> int:
        return self.live.redraws

    @property
    def last_redraw_ms(self) -> float:
        return self.live.last_redraw_ms

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
