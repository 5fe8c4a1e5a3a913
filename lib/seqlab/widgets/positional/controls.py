"""The positional explorer's controls: ``d_model``, ``length``, ``dimension``, ``pos`` and the shift ``k``."""

from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as widgets
from matplotlib.figure import Figure

from seqlab.notebook import FIGURE_DPI
from seqlab.widgets.base import Widget
from seqlab.widgets.positional.compute import _check_sizes, describe_positional
from seqlab.widgets.positional.draw import PositionalPlot

__all__ = ["PositionalExplorer"]

class PositionalExplorer(Widget):
    """Widget: ``d_model`` (even, 8..128), ``length`` (8..128), ``dimension``, ``pos`` and the shift ``k``.

    ``learned=`` (short for ``tables={"learned": ...}``) or ``tables={name: table}`` show trained tables
    in the bottom row, one panel per encoding that puts position in.
    """

    def __init__(self, d_model: int = 64, length: int = 64, *, dimension: int = 8, pos: int = 10, k: int = 5,
                 learned=None, learned_label: str | None = None, tables: Mapping[str, object] | None = None,
                 base: float = 10000.0, dpi: int = FIGURE_DPI):
        _check_sizes(d_model, length)
        self._plot_args = {"learned": learned, "learned_label": learned_label, "tables": tables, "base": base,
                           "dpi": dpi}
        self.plot = PositionalPlot(**self._plot_args)
        style = {"description_width": "initial"}
        layout = widgets.Layout(width="300px")
        self.d_model = widgets.IntSlider(value=d_model, min=8, max=128, step=8, description="d_model",
                                         continuous_update=False, style=style, layout=layout)
        self.length = widgets.IntSlider(value=length, min=8, max=128, step=8, description="length",
                                        continuous_update=False, style=style, layout=layout)
        self.dimension = widgets.IntSlider(value=dimension, min=0, max=d_model - 1, description="dimension",
                                           style=style, layout=layout)
        self.pos = widgets.IntSlider(value=pos, min=0, max=length - 1, description="pos", style=style, layout=layout)
        self.k = widgets.IntSlider(value=k, min=1, max=length - 1, description="shift k", style=style, layout=layout)
        # before the base class's observers: keep dimension, pos and k inside the new sizes, one redraw
        self.d_model.observe(self._resize, names="value")
        self.length.observe(self._resize, names="value")
        super().__init__({"d_model": self.d_model, "length": self.length, "dimension": self.dimension,
                          "pos": self.pos, "k": self.k},
                         rows=[["d_model", "length"], ["dimension", "pos", "k"]], dpi=dpi)

    def _resize(self, change) -> None:
        with self.held(redraw=False):
            self.dimension.max = self.d_model.value - 1
            self.pos.max = self.length.value - 1
            self.k.max = self.length.value - 1

    def render(self, d_model: int, length: int, dimension: int, pos: int, k: int) -> bytes:
        self.plot.update(d_model, length, dimension, pos, k)
        return self.plot.png()

    def describe(self, d_model: int, length: int, dimension: int, pos: int, k: int) -> str:
        if (d_model, length) != self.plot.sizes:                # the views of these sizes, as drawn
            self.plot.update(d_model, length, dimension, pos, k)
        return describe_positional(d_model, length, dimension, pos, k, views=self.plot.views, base=self.plot.base)

    def figure(self, d_model: int, length: int, dimension: int, pos: int, k: int) -> Figure:
        plot = PositionalPlot(**self._plot_args)
        plot.update(d_model, length, dimension, pos, k)
        return plot.figure
