"""LayeredFigure: a figure kept alive between redraws and rendered to PNG in layers (matplotlib's blitting)."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

__all__ = ["LayeredFigure"]


class LayeredFigure:
    """A figure that stays alive and renders to PNG in three layers, each kept as pixels.

    - *static*: everything not named below; drawn once, and again after :meth:`restyle`;
    - *view*: ``view_artists``, drawn over the static pixels after :meth:`view_changed`;
    - *step*: ``step_artists``, drawn over the view pixels at every :meth:`png`.

    The owner changes artists in place, calls :meth:`view_changed` if a view artist changed, and asks
    for :meth:`png`. What lies on top of a view artist in a full draw must be a view or step artist
    too (the frames of axes holding view artists are redrawn after them unless listed; step artists
    need a zorder above the frames', 2.5). ``savefig`` still draws everything.

    ``panels=[(artists, band), ...]`` splits the view layer into bands (a display-pixel ``Bbox`` each)
    that :meth:`view_changed` / :meth:`restyle` with ``panels=`` redraw alone. ``keep_views=k`` /
    ``keep_statics=k`` keep the pixels of the last ``k`` views / static layers by the ``key`` given
    to :meth:`view_changed` / :meth:`restyle` (a full-figure copy each).
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
        """The static layer changed (to the state ``key``, if given; inside ``panels``' bands only, if
        given): draw it at the next :meth:`png`, or take its kept pixels. The owner must have put every
        static artist in the state ``key`` names."""
        self._static = None
        self._views.clear()
        self._static_key = key
        if key is not None and key in self._statics:
            self._static = self._statics[key] = self._statics.pop(key)     # the most recently used goes last
        self._mark_stale(panels)

    def view_changed(self, key=None, *, panels: Iterable[int] | None = None) -> None:
        """View artists changed (to the view ``key``, in ``panels`` only, if given): draw the view
        layer at the next :meth:`png`, or take its kept pixels."""
        self._view_key = key
        kept = self._views.get(key) if key is not None else None
        if kept is not None:
            self._views[key] = self._views.pop(key)          # the most recently used goes last
            self._background = kept
            self._stale.clear()
        else:
            self._mark_stale(panels)

    def png(self, *, compress_level: int = 1) -> bytes:
        """PNG bytes of the figure now, drawing only the layers (and panels) that changed."""
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
    """The spines of the axes holding ``artists``, but those listed: a heatmap's edge pixels reach
    under its frame, so the frames go on top again."""
    artists = list(artists)
    listed = {id(artist) for artist in artists}
    holders = {artist.axes for artist in artists if getattr(artist, "axes", None) is not None}
    return [spine for ax in holders for spine in ax.spines.values() if id(spine) not in listed]
