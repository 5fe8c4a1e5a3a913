"""LiveFigure: controls that redraw a figure, shown as PNG bytes in an ``ipywidgets.Image``.

Swapping an Image's bytes does not flicker and writes nothing into the cell's outputs, so a notebook
runs alike under nbval and in a browser.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import anywidget
import ipywidgets as widgets
import matplotlib
import traitlets
from matplotlib.figure import Figure

from seqlab.notebook import FIGURE_DPI


def figure_to_png(fig: matplotlib.figure.Figure, dpi: int = FIGURE_DPI) -> bytes:
    """PNG bytes of ``fig``, which is then closed."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    return buffer.getvalue()


class LiveRegion(anywidget.AnyWidget):
    """A visually hidden polite live region (``role="status"``): screen readers read ``text`` out
    when it changes, without taking the focus.

    Its element is made once per view and only its text changes: some screen readers announce changes
    only in a region that was already there (ipywidgets' HTML replaces its element). Hidden by clipping,
    as ``display: none`` would hide it from screen readers too.
    """

    text = traitlets.Unicode("").tag(sync=True)

    _esm = r"""
    function render({ model, el }) {
      const region = document.createElement("div");
      region.className = "seqlab-live-region";
      region.setAttribute("role", "status");
      region.setAttribute("aria-live", "polite");
      region.setAttribute("aria-atomic", "true");
      // visually hidden, still read: 1 px, clipped, out of the flow
      Object.assign(region.style, { position: "absolute", width: "1px", height: "1px", margin: "-1px",
                                    padding: "0", border: "0", overflow: "hidden", whiteSpace: "nowrap",
                                    clip: "rect(0 0 0 0)", clipPath: "inset(50%)" });
      const say = () => { region.textContent = model.get("text"); };
      say();
      model.on("change:text", say);
      el.style.position = "relative";
      el.appendChild(region);
      return () => model.off("change:text", say);
    }
    export default { render };
    """


class PNGFigure(Figure):
    """A Figure not registered with pyplot that shows itself as a PNG when it is a cell's value.

    ``alt`` (set by :meth:`~seqlab.widgets.base.Widget.static_figure`) goes into the output's metadata
    as ``{"image/png": {"alt": alt}}``, the picture's alt text.
    """

    alt: str | None = None

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=self.dpi)
        return buffer.getvalue()

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        # metadata only: IPython merges it with the PNG that _repr_png_ (or, in a kernel, matplotlib's
        # inline formatter) makes, so the pixels are those of a figure without alt text, drawn once
        return {}, ({"image/png": {"alt": self.alt}} if self.alt else {})


class LiveFigure:
    """A figure that redraws itself when any of ``controls`` changes.

    ``draw`` (values -> a Figure) or ``render`` (values -> PNG bytes, for a figure kept alive) makes
    the picture; ``describe`` (values -> one to three sentences) is written after each redraw into
    ``description``, a :class:`LiveRegion`. ``redraws``, ``last_values``, ``last_redraw_ms`` and
    ``last_description`` hold the latest redraw's count, values, time and text.
    """

    def __init__(self, draw: Callable[..., matplotlib.figure.Figure] | None, controls: Mapping[str, widgets.ValueWidget],
                 *, render: Callable[..., bytes] | None = None, describe: Callable[..., str] | None = None,
                 dpi: int = FIGURE_DPI, show_timing: bool = True):
        if (draw is None) == (render is None):
            raise ValueError("give exactly one of draw (returns a Figure) and render (returns PNG bytes)")
        self.draw = draw
        self.render = render if render is not None else self._draw_to_png
        self._holding = False
        self.controls = dict(controls)
        self.dpi = dpi
        self.describe = describe
        self.image = widgets.Image(format="png")
        # read by screen readers, invisible on screen (the picture says it to the eye)
        self.description = None if describe is None else LiveRegion()
        self.last_description = ""
        self.status = widgets.HTML()
        self.show_timing = show_timing
        self.redraws = 0
        self.last_values: dict[str, object] = {}
        self.last_redraw_ms = float("nan")
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        # flex-start: the picture keeps its own pixel size instead of being stretched (and blurred)
        # to the width of the output area
        described = [self.description] if self.description is not None else []
        self.widget = widgets.VBox([widgets.HBox(list(self.controls.values())), self.image, *described, self.status],
                                   layout=widgets.Layout(align_items="flex-start"))
        self.redraw()

    def values(self) -> dict[str, object]:
        return {name: control.value for name, control in self.controls.items()}

    def _draw_to_png(self, **values) -> bytes:
        return figure_to_png(self.draw(**values), dpi=self.dpi)

    def redraw(self) -> None:
        started = time.perf_counter()
        values = self.values()
        self.image.value = self.render(**values)
        self.last_redraw_ms = (time.perf_counter() - started) * 1000
        self.last_values = values
        self.redraws += 1
        if self.describe is not None:          # before the status line: its counter is what a redraw sends last
            self.last_description = self.describe(**values)
            self.description.text = self.last_description
        # data-redraws changes at every redraw, even one that gives the same picture (a control without
        # a visible effect in this state): how a browser, or tests/browser, knows the kernel has answered
        timing = f"redrawn in {self.last_redraw_ms:.0f} ms" if self.show_timing else ""
        self.status.value = f"<small data-redraws='{self.redraws}'>{timing}</small>"

    @contextmanager
    def held(self, redraw: bool = True) -> Iterator[None]:
        """Change several controls with one redraw at the end (none if not ``redraw``)."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if redraw:
            self.redraw()

    def _on_change(self, change) -> None:
        if not self._holding:
            self.redraw()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
