r"""LayeredFigure: a figure kept alive between redraws and rendered to PNG in three layers.

Every course widget that answers a move quickly (attention, gates, positional encodings) renders
through it (matplotlib's blitting): *static* (frames, tick labels, colour bars; drawn once), *view*
(heatmaps, titles; redrawn when the view changes) and *step* (a highlight, a list; drawn at every
move). A move that only changes the step layer costs a PNG encoding and a few artists, not a full
draw. A figure of stacked panels can name its view artists per panel (a horizontal band of the
figure each), so that a change in one panel redraws that band only.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

__all__ = ["LayeredFigure"]


class LayeredFigure:
    """A figure that stays alive and renders to PNG in three layers, each kept as pixels.

    - *static*: everything not named below; drawn once (and again after :meth:`restyle`);
    - *view*: ``view_artists``; drawn over the static pixels when :meth:`view_changed` was called;
    - *step*: ``step_artists``; drawn over the view pixels at every :meth:`png`.

    The owner changes artists in place (``set_data``, ``set_text``, ``set_xy``), calls
    :meth:`view_changed` if a view artist changed, and asks for :meth:`png`. A layer is drawn
    over the one below, so what lies on top of a view artist in a full draw must be a view or step
    artist too (the frames of the axes that hold view artists belong to the view layer, drawn after
    them as in a full draw unless listed among them, where they are drawn in their place; step
    artists should have a zorder above the frames', 2.5). ``savefig`` on :attr:`figure` still draws
    everything (the layers are marked animated only while the static pixels are taken), so the same
    figure serves a static picture too.

    ``panels=[(artists, band), ...]`` gives the view layer per panel instead of ``view_artists``:
    ``band`` is the :class:`~matplotlib.transforms.Bbox` (display pixels) that the panel's artists
    draw in, and :meth:`view_changed` / :meth:`restyle` with ``panels=`` redraw those bands only.

    ``keep_views=k`` keeps the pixels of the last ``k`` views, named by the ``key`` given to
    :meth:`view_changed` (e.g. ``(layer, head)``): going back to one of them costs no view
    drawing (a full-figure copy each, about width x height x 4 bytes). ``keep_statics=k`` does the
    same for the static layer, named by the ``key`` given to :meth:`restyle` (e.g. the sizes of the
    matrices shown): going back to one costs no full draw.
    """

    def __init__(self, figure: Figure, view_artists: Iterable = (), step_artists: Iterable = (), *,
                 panels: Sequence[tuple[Iterable, Bbox]] | None = None, keep_views: int = 0, keep_statics: int = 0):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        view_artists = list(view_artists)
        if panels is not None and view_artists:
            raise ValueError("give the view layer either as view_artists or as panels=[(artists, band), ...], not both")
        self.figure = figure
        self.canvas = FigureCanvasAgg(figure)
        self.step_artists = list(step_artists)
        if panels is None:
            # one panel, the whole figure; view_artists is read at each png, so an owner may fill it later
            self.view_artists = view_artists
            self._bands: list[Bbox | None] = [None]
            self._frames = [_frames(view_artists)]
        else:
            self._panels = [list(artists) for artists, _ in panels]
            self._bands = [band for _, band in panels]
            self._frames = [_frames(artists) for artists in self._panels]
            self.view_artists = [artist for artists in self._panels for artist in artists]
        self._stale = set(range(len(self._bands)))   # panels whose view layer must be drawn again
        self._static = None          # pixels without the view and step layers
        self._background = None      # static + view pixels
        self.keep_views = keep_views
        self._views: dict = {}       # key -> static + view pixels, oldest first
        self._view_key = None
        self.keep_statics = keep_statics
        self._statics: dict = {}     # key -> static pixels, oldest first
        self._static_key = None

    def _panel_artists(self, panel: int) -> list:
        artists = self.view_artists if self._bands == [None] else self._panels[panel]
        return artists + self._frames[panel]

    def _mark_stale(self, panels: Iterable[int] | None) -> None:
        if panels is None:
            self._stale = set(range(len(self._bands)))
            self._background = None
        else:
            self._stale.update(panels)

    def restyle(self, key=None, *, panels: Iterable[int] | None = None) -> None:
        """Something in the static layer changed (to the state named ``key``, if given): draw it again
        at the next :meth:`png`, or take its kept pixels. The owner must have put every static artist
        in the state ``key`` names (kept pixels are a copy of them, not a replacement). ``panels``:
        the static layer changed inside these panels' bands only (default: anywhere)."""
        self._static = None
        self._views.clear()
        self._static_key = key
        if key is not None and key in self._statics:
            self._static = self._statics[key] = self._statics.pop(key)     # the most recently used goes last
        self._mark_stale(panels)

    def view_changed(self, key=None, *, panels: Iterable[int] | None = None) -> None:
        """View artists changed (to the view named ``key``, if given; in ``panels`` only, if given):
        draw the view layer again at the next :meth:`png`, or take its kept pixels."""
        self._view_key = key
        kept = self._views.get(key) if key is not None else None
        if kept is not None:
            self._views[key] = self._views.pop(key)          # the most recently used goes last
            self._background = kept
            self._stale.clear()
        else:
            self._mark_stale(panels)

    def png(self, *, compress_level: int = 1) -> bytes:
        """PNG bytes of the figure as it is now, drawing only the layers (and panels) that changed."""
        from PIL import Image

        if self._static is None:
            layered = self.view_artists + [frame for frames in self._frames for frame in frames] + self.step_artists
            for artist in layered:
                artist.set_animated(True)          # left out of the full draw ...
            try:
                self.canvas.draw()
            finally:
                for artist in layered:
                    artist.set_animated(False)     # ... but part of the figure again for savefig
            self._static = self.canvas.copy_from_bbox(self.figure.bbox)
            if self.keep_statics and self._static_key is not None:
                self._statics[self._static_key] = self._static
                while len(self._statics) > self.keep_statics:
                    self._statics.pop(next(iter(self._statics)))
        if self._stale:
            everywhere = self._background is None or len(self._stale) == len(self._bands)
            self.canvas.restore_region(self._static if everywhere else self._background)
            for panel in sorted(self._stale):
                if not everywhere:                 # this panel's band goes back to static pixels
                    self._restore_static(self._bands[panel])
                for artist in self._panel_artists(panel):
                    if artist.get_visible():
                        self.figure.draw_artist(artist)
            self._stale.clear()
            self._background = self.canvas.copy_from_bbox(self.figure.bbox)
            if self.keep_views and self._view_key is not None:
                self._views[self._view_key] = self._background
                while len(self._views) > self.keep_views:
                    self._views.pop(next(iter(self._views)))
        else:
            self.canvas.restore_region(self._background)
        for artist in self.step_artists:
            if artist.get_visible():
                self.figure.draw_artist(artist)
        pixels = np.asarray(self.canvas.buffer_rgba())[..., :3]     # (height, width, 3), opaque
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="png", compress_level=compress_level)
        return buffer.getvalue()

    def _restore_static(self, band: Bbox) -> None:
        # restore_region takes pixel rows counted from the top (display coordinates count from the
        # bottom), and xy is where the region's own corner goes: (0, 0), unmoved
        height = self.figure.bbox.height
        self.canvas.restore_region(self._static, xy=(0, 0), bbox=(band.x0, height - band.y1, band.x1, height - band.y0))


def _frames(artists: Iterable) -> list:
    """The spines of the axes that hold ``artists``, except those listed among them: a heatmap's edge
    pixels reach under its frame, so the frames go on top again, as in a full draw."""
    artists = list(artists)
    listed = {id(artist) for artist in artists}
    holders = {artist.axes for artist in artists if getattr(artist, "axes", None) is not None}
    return [spine for ax in holders for spine in ax.spines.values() if id(spine) not in listed]
