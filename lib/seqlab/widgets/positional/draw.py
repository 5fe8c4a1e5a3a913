"""The positional explorer's draw part: :class:`PositionalPlot`, one figure kept alive and updated in place."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from matplotlib.ticker import MaxNLocator

from seqlab.colours import DIVERGING
from seqlab.nn.positional import ENCODING_CLASSES, sinusoidal_table
from seqlab.notebook import FIGURE_DPI
from seqlab.widgets.base import draw_matrix, text_colour
from seqlab.widgets.layered import LayeredFigure
from seqlab.widgets.live import PNGFigure
from seqlab.widgets.positional.compute import (HOOK_VIEWS, EncodingView, _check_sizes, as_table, dimension_wave,
                                               encoding_views, shift_rotation, shown_encodings)

__all__ = ["PositionalPlot"]


def _nice_ticks(ax, rows: int, cols: int) -> None:
    """Round tick positions for a ``rows x cols`` matrix."""
    for axis, size in ((ax.xaxis, cols), (ax.yaxis, rows)):
        if size > 16:
            ticks = [int(t) for t in MaxNLocator(nbins=6, integer=True).tick_values(0, size - 1) if 0 <= t <= size - 1]
        else:
            ticks = list(range(0, size, 1 if size <= 8 else 2))
        axis.set_ticks(ticks, [str(t) for t in ticks])
        for label in axis.get_ticklabels():
            label.set_rotation(0)


def _replace_matrix(ax, values: np.ndarray, title: str, clim: tuple[float, float]) -> None:
    """New values, of any shape, for a heatmap draw_matrix drew on ``ax``."""
    rows, cols = values.shape
    image = ax.images[0]
    image.set_data(values)
    image.set_clim(*clim)
    image.set_extent((-0.5, cols - 0.5, rows - 0.5, -0.5))
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_title(title, fontsize=ax.title.get_fontsize(), y=1.0)


class PositionalPlot:
    """The explorer's figure, kept alive: :meth:`update`, then :meth:`png`.

    Top: the sinusoidal table and one dimension's wave; bottom: one panel per view of
    :func:`~.compute.encoding_views` (``tables`` / ``learned``: trained tables), and :math:`R_k`'s block.
    Only ``d_model`` and ``length`` redraw the heatmaps.
    """

    FONTSIZE = 10

    def __init__(self, *, learned=None, learned_label: str | None = None, tables: Mapping[str, object] | None = None,
                 base: float = 10000.0, dpi: int = FIGURE_DPI):
        self.base = base
        self.tables = {name: as_table(table) for name, table in (tables or {}).items()}
        if learned is not None:
            self.tables["learned"] = as_table(learned)
        self.table_labels = {name: "trained" for name in self.tables}
        if learned_label is not None:
            self.table_labels["learned"] = learned_label
        panels = sum(len(ENCODING_CLASSES[name].hooks()) for name in shown_encodings())   # one per encoding and hook
        columns = panels + 1                                       # and the R_k corner
        self.figure = PNGFigure(figsize=(min(12.0 + 2.5 * (panels - 3), 15.5), 6.7), dpi=dpi)   # <= 1240 px wide
        grid = self.figure.add_gridspec(2, columns, height_ratios=[1.0, 1.0], hspace=0.5, wspace=0.35,
                                        left=0.05, right=0.985, top=0.94, bottom=0.07)
        half = (columns + 1) // 2
        self.ax_pe = self.figure.add_subplot(grid[0, :half])
        self.ax_wave = self.figure.add_subplot(grid[0, half:])
        self.ax_sim = [self.figure.add_subplot(grid[1, j]) for j in range(panels)]
        self.views: list[EncodingView] = []
        corner = grid[1, panels].subgridspec(2, 1, height_ratios=[1.0, 0.8], hspace=0.45)
        self.ax_rot = self.figure.add_subplot(corner[0])
        self.ax_info = self.figure.add_subplot(corner[1])
        self.ax_info.axis("off")
        self.sizes: tuple[int, int] | None = None
        self.state: dict[str, int] = {}
        # a slider dragged back and forth revisits sizes: keep their static pixels
        self.layers = LayeredFigure(self.figure, keep_statics=8)
        self._build_view_artists()

    # the artists that follow dimension / pos / k (the view layer) --------------------------------------
    def _build_view_artists(self) -> None:
        fs = self.FONTSIZE
        self.dim_line = self.ax_pe.axvline(0, color="black", lw=2.5)
        self.pos_line = self.ax_pe.axhline(0, color="black", lw=1.0, ls="--")
        self.shift_line = self.ax_pe.axhline(0, color="black", lw=1.0, ls=":")
        (self.wave_curve,) = self.ax_wave.plot([], [], color="tab:blue", lw=1.5)
        (self.wave_points,) = self.ax_wave.plot([], [], "o", color="tab:blue", ms=3)
        (self.wave_pos,) = self.ax_wave.plot([], [], "o", color="black", ms=7, mfc="none", mew=1.5)
        # titles at y = 1: where matplotlib puts them anyway (x tick labels below), without the search
        # through every tick label's extent that it does at each full draw to find that out
        self.wave_title = self.ax_wave.set_title("", fontsize=fs, y=1.0)
        self.sim_rows = [ax.axhline(0, color="black", lw=1.0, ls="--") for ax in self.ax_sim]
        draw_matrix(self.ax_rot, np.eye(2), ["sin", "cos"], ["sin", "cos"], annotate=True, cmap=DIVERGING,
                    vmin=-1, vmax=1, fmt="+.3f", fontsize=fs)
        self.rot_image = self.ax_rot.images[0]
        self.rot_texts = list(self.ax_rot.texts)
        self.rot_title = self.ax_rot.set_title("", fontsize=fs, y=1.0)
        self.rot_info = self.ax_info.text(0.0, 1.0, "", transform=self.ax_info.transAxes, ha="left", va="top",
                                          fontsize=fs - 1, family="monospace")
        # view layer: what follows the dimension and the shift; step layer: what follows pos alone
        self.layers.view_artists = [self.dim_line, self.wave_curve, self.wave_points, self.wave_title,
                                    self.rot_image, *self.rot_texts, self.rot_title]
        self.layers.step_artists = [self.pos_line, self.shift_line, self.wave_pos, *self.sim_rows, self.rot_info]

    # the heatmaps and frames, redrawn when d_model or length change (the static layer) -------------
    def _draw_sizes(self, d_model: int, length: int) -> None:
        fs = self.FONTSIZE
        table = sinusoidal_table(length, d_model, base=self.base, dtype=torch.float64).numpy()
        self.views = encoding_views(length, d_model, tables=self.tables, table_labels=self.table_labels)
        panels = [(self.ax_pe, table, f"sinusoidal PE: {length} positions × d_model = {d_model}", 1.0)]
        panels += [(ax, view.values, view.title, view.limit) for ax, view in zip(self.ax_sim, self.views)]
        for ax, values, title, limit in panels:
            if self.sizes is None:               # the first picture: draw_matrix sets the style ...
                labels = ("dimension", "position") if ax is self.ax_pe else ("position n", "position m")
                draw_matrix(ax, values, annotate=False, cmap=DIVERGING, vmin=-limit, vmax=limit, xlabel=labels[0],
                            ylabel=labels[1], title=title, fontsize=fs)
                ax.set_title(title, fontsize=fs, y=1.0)
            else:                                # ... later sizes only swap the numbers
                _replace_matrix(ax, values, title, (-limit, limit))
            _nice_ticks(ax, *values.shape)
        self.ax_pe.set_aspect("auto")
        self.ax_wave.set_xlim(-0.5, max(length - 1, 1) + 0.5)
        self.ax_wave.set_ylim(-1.15, 1.15)
        if self.sizes is None:
            self.ax_wave.set_xlabel("position", fontsize=fs)
            self.ax_wave.tick_params(labelsize=fs)
            signed = any(HOOK_VIEWS[view.hook].signed for view in self.views)
            self.figure.suptitle("cosine similarity of positions m and n (red = alike, blue = opposite)"
                                 + ("; a score bias: 0 white, below 0 blue" if signed else "")
                                 + "; PE(pos + k) = R_k PE(pos)", x=0.5, y=0.49, fontsize=fs)
        self.sizes = (d_model, length)
        self.layers.restyle(key=(d_model, length))

    def update(self, d_model: int, length: int, dimension: int, pos: int, k: int) -> None:
        """Show ``dimension`` of ``d_model`` and mark the rows ``pos`` and ``pos + k``."""
        _check_sizes(d_model, length)
        if not 0 <= pos < length:
            raise ValueError(f"pos must be in 0..{length - 1}, got {pos}")
        if (d_model, length) != self.sizes:
            self._draw_sizes(d_model, length)
            self.state = {}
        x, y, values, wavelength = dimension_wave(d_model, dimension, length, base=self.base)
        i = dimension // 2
        rot = shift_rotation(d_model, pos, k, i, base=self.base)
        if (self.state.get("dimension"), self.state.get("k")) != (dimension, k):     # the view layer
            self.dim_line.set_xdata([dimension, dimension])
            self.wave_curve.set_data(x, y)
            self.wave_points.set_data(np.arange(length), values)
            kind = "sin" if dimension % 2 == 0 else "cos"
            self.wave_title.set_text(f"dimension {dimension} = {kind}(pos · ω_{i}),  ω_{i} = {rot.omega:.3g},  "
                                     f"wavelength 2π/ω_{i} = {wavelength:,.1f}")
            self.rot_image.set_data(rot.block)
            norm, cmap = self.rot_image.norm, self.rot_image.get_cmap()
            for text, value in zip(self.rot_texts, rot.block.ravel()):
                text.set_text(f"{value:+.3f}")
                text.set_color(text_colour(cmap(norm(value))))
            self.rot_title.set_text(f"R_{k}, block {i}: angle ω_{i}·k = {rot.omega * k:.3f}")
            self.layers.view_changed()
        self.pos_line.set_ydata([pos, pos])                                            # the step layer
        self.shift_line.set_ydata([pos + k, pos + k])
        self.shift_line.set_visible(0 <= pos + k < length)
        self.wave_pos.set_data([pos], [values[pos]])
        for line in self.sim_rows:
            line.set_ydata([pos, pos])
        self.rot_info.set_text(f"dims {2 * i}, {2 * i + 1}:\n"
                               f"PE({pos})      {rot.pe_pos[0]:+.3f} {rot.pe_pos[1]:+.3f}\n"
                               f"R_{k} PE({pos})  {rot.rotated[0]:+.3f} {rot.rotated[1]:+.3f}\n"
                               f"PE({pos + k})      {rot.pe_shifted[0]:+.3f} {rot.pe_shifted[1]:+.3f}\n"
                               f"all {d_model} dims: max\n|R_k PE(pos) - PE(pos+k)|\n= {rot.max_error:.1e}")
        self.state = {"d_model": d_model, "length": length, "dimension": dimension, "pos": pos, "k": k}
        self.rotation = rot

    def png(self) -> bytes:
        return self.layers.png()
