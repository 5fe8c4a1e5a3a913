"""The attention explorer's draw part: one head's matrix with the chosen query's row, or all heads of a layer."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps, rcParams
from matplotlib.colors import Normalize
from matplotlib.patches import Rectangle
from matplotlib.transforms import ScaledTranslation, blended_transform_factory

from seqlab.colours import HIGHLIGHT, WEIGHTS, highlight_halo
from seqlab.notebook import FIGURE_DPI
from seqlab.widgets.attention.compute import (AttentionMap, HeadSummary, check_view, clip_token, summarize_head,
                                              top_attended)
from seqlab.widgets.base import draw_matrix, text_colour
from seqlab.widgets.layered import LayeredFigure
from seqlab.widgets.live import PNGFigure

__all__ = ["AttentionPlot", "clip_token", "draw_attention", "head_shares_figure", "mask_figure"]

FONT = 10                 # points: tick labels and text (>= 9 pt at 1280x720, where 1 pt >= 1 px)
CHAR_IN = 0.6 * FONT / 72  # about one character's width in inches


def _short(weight: float) -> str:
    """A weight in a small cell: ".42", "1", "" for ~0."""
    if weight < 0.005:
        return ""
    return "1" if weight >= 0.995 else f"{weight:.2f}".lstrip("0")


class AttentionPlot:
    """The explorer's figure for one :class:`AttentionMap`, kept alive: :meth:`update`, then :meth:`png`.

    One head's matrix with the chosen query's row outlined and written in, and beside it what the
    query attends to most and the head's summary; or, ``all_heads``, the layer's heads as a grid,
    the chosen head framed. Layers (:class:`~seqlab.widgets.layered.LayeredFigure`): a layer or head
    change redraws the heatmaps and titles, a token move the highlight and the list.
    """

    def __init__(self, amap: AttentionMap, *, all_heads: bool = False, top: int = 5, dpi: int = FIGURE_DPI,
                 summaries: dict[int, Sequence[HeadSummary]] | None = None):
        self.amap, self.all_heads, self.top = amap, all_heads, top
        self._summaries = summaries if summaries is not None else {}      # layer -> per head; may be shared
        self.norm, self.cmap = Normalize(0.0, 1.0), colormaps[WEIGHTS]
        self.view: tuple[int, int, int] | None = None
        (self._build_grid if all_heads else self._build_single)(dpi)
        # the last few views' pixels are kept: flipping between two heads or layers draws no heatmap again
        self.layered = LayeredFigure(self.figure, self.view_artists, self.step_artists, keep_views=4)

    def summaries(self, layer: int) -> Sequence[HeadSummary]:
        if layer not in self._summaries:
            self._summaries[layer] = [summarize_head(w, self_attention=self.amap.self_attention)
                                      for w in self.amap.weights[layer]]
        return self._summaries[layer]

    # layout ---------------------------------------------------------------------------------------
    def _label_sizes(self, cell: float) -> tuple[float, float, bool]:
        """(width of the y labels, height of the x labels, x labels vertical?) in inches."""
        amap = self.amap
        y_width = CHAR_IN * max(len(clip_token(t)) for t in amap.query_tokens) + 0.15
        longest_key = CHAR_IN * max(len(clip_token(t)) for t in amap.key_tokens)
        vertical = longest_key > 0.95 * cell
        return y_width, (longest_key + 0.15 if vertical else FONT / 72 + 0.15), vertical

    def _matrix_axes(self, fig, left: float, bottom: float, cell: float, W: float, Hgt: float):
        n, m = self.amap.n_queries, self.amap.n_keys
        return fig.add_axes((left / W, bottom / Hgt, m * cell / W, n * cell / Hgt))

    def _build_single(self, dpi: int) -> None:
        amap = self.amap
        n, m = amap.n_queries, amap.n_keys
        cell = float(np.clip(min(6.0 / m, 5.0 / n), 0.08, 0.45))             # inches per token
        y_width, x_height, _ = self._label_sizes(cell)
        left = 0.35 + y_width                                                  # "query" axis title + labels
        bottom = 0.35 + x_height                                               # "key" axis title + labels
        right_panel = 3.3
        W = left + m * cell + 0.25 + 0.15 + 0.45 + right_panel
        Hgt = max(bottom + n * cell + 0.75, 4.2)
        self.figure = fig = PNGFigure(figsize=(W, Hgt), dpi=dpi, facecolor="white")
        ax = self._matrix_axes(fig, left, bottom, cell, W, Hgt)
        self.image = draw_matrix(ax, amap.weights[0, 0], [clip_token(t) for t in amap.query_tokens],
                                 [clip_token(t) for t in amap.key_tokens], annotate=False, cmap=WEIGHTS, vmin=0.0,
                                 vmax=1.0, xlabel="key (what is read)", ylabel="query (who reads)", fontsize=FONT)
        every = math.ceil(FONT / (cell * 72))               # long sequences: label every k-th token, not overlapping
        if every > 1:
            ax.set_xticks(range(0, m, every), [clip_token(t) for t in amap.key_tokens][::every], fontsize=FONT,
                          rotation=ax.get_xticklabels()[0].get_rotation())
            ax.set_yticks(range(0, n, every), [clip_token(t) for t in amap.query_tokens][::every], fontsize=FONT)
        self.axes = [ax]
        cax = fig.add_axes(((left + m * cell + 0.25) / W, bottom / Hgt, 0.15 / W, n * cell / Hgt))
        colorbar = fig.colorbar(self.image, cax=cax)
        colorbar.ax.tick_params(labelsize=9)
        colorbar.set_label("weight", fontsize=9)
        self.title = fig.text(left / W, 1 - 0.12 / Hgt, "", fontsize=11, va="top", ha="left")
        panel_x = 1 - (right_panel - 0.1) / W
        self.summary = fig.text(panel_x, bottom / Hgt, "", fontsize=9, va="bottom", ha="left", linespacing=1.4)
        # the list: what stays is drawn once (static layer); per move only the query, tokens and weights
        line = FONT * 1.45 / 72 / Hgt                          # one line of the list, in figure fractions
        top_y = 1 - 0.6 / Hgt
        self.listing = fig.text(panel_x, top_y, "", fontsize=FONT, va="top", ha="left")
        fig.text(panel_x, top_y - line, "attends most to:", fontsize=FONT, va="top", ha="left")
        fig.text(panel_x, top_y - 2 * line, "\n".join(f"{r}." for r in range(1, self.top + 1)), fontsize=FONT,
                 va="top", ha="left", linespacing=1.45, color="#555555")
        self.list_tokens = fig.text(panel_x + 0.3 / W, top_y - 2 * line, "", fontsize=FONT, va="top", ha="left",
                                    linespacing=1.45)
        self.list_weights = fig.text(panel_x + 1.9 / W, top_y - 2 * line, "", fontsize=FONT, va="top", ha="right",
                                     linespacing=1.45)
        self.view_artists = [self.image, self.title, self.summary]
        # the chosen row: an outline, the weights written in, the query's label again in red
        self.row_box = ax.add_patch(Rectangle((-0.5, -0.5), m, 1, fill=False, edgecolor=HIGHLIGHT, lw=2.2,
                                              clip_on=False, zorder=3, path_effects=highlight_halo(2.2)))
        # the row's weights in its cells where ".42" fits (else the list says them)
        self.row_texts = [ax.text(j, 0, "", ha="center", va="center", fontsize=9 if cell >= 0.3 else 8, zorder=4)
                          for j in range(m if cell >= 0.22 else 0)]
        pad = ScaledTranslation(-rcParams["ytick.major.pad"] / 72, 0, fig.dpi_scale_trans)   # where tick labels end
        blend = blended_transform_factory(ax.transAxes, ax.transData) + pad
        self.row_label = ax.text(0, 0, "", transform=blend, ha="right", va="center", fontsize=FONT,
                                 fontweight="bold", color=HIGHLIGHT, zorder=4,
                                 bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})
        self.step_artists = [self.row_box, *self.row_texts, self.row_label, self.listing, self.list_tokens,
                             self.list_weights]

    def _build_grid(self, dpi: int) -> None:
        amap = self.amap
        n, m, H = amap.n_queries, amap.n_keys, amap.heads
        cols = H if H <= 4 else math.ceil(H / 2)
        rows = math.ceil(H / cols)
        cell = float(np.clip(min(10.4 / (cols * m), 5.2 / (rows * n)), 0.04, 0.3))
        y_width, x_height, _ = self._label_sizes(cell)
        gap_x, gap_y, top = 0.25, 0.45, 0.95
        left, bottom = 0.35 + y_width, 0.35 + x_height
        W = left + cols * m * cell + (cols - 1) * gap_x + 0.3
        W = max(W, 7.5)
        Hgt = bottom + rows * n * cell + (rows - 1) * gap_y + top
        self.figure = fig = PNGFigure(figsize=(W, Hgt), dpi=dpi, facecolor="white")
        self.axes, self.images, self.titles, self.boxes, self.frames = [], [], [], [], []
        every = math.ceil(9 / (cell * 72))                                   # labels that would overlap: every k-th
        for h in range(H):
            r, c = divmod(h, cols)
            x0 = left + c * (m * cell + gap_x)
            y0 = bottom + (rows - 1 - r) * (n * cell + gap_y)
            ax = fig.add_axes((x0 / W, y0 / Hgt, m * cell / W, n * cell / Hgt))
            image = draw_matrix(ax, amap.weights[0, h], [clip_token(t) for t in amap.query_tokens],
                                [clip_token(t) for t in amap.key_tokens], annotate=False, cmap=WEIGHTS, vmin=0.0,
                                vmax=1.0, fontsize=FONT, label_fontsize=9)
            ax.set_xticks(range(0, m, every), [clip_token(t) for t in amap.key_tokens][::every], fontsize=9,
                          rotation=ax.get_xticklabels()[0].get_rotation())
            ax.set_yticks(range(0, n, every), [clip_token(t) for t in amap.query_tokens][::every], fontsize=9)
            if c:
                ax.set_yticklabels([])
            if r < rows - 1 and h + cols < H:
                ax.set_xticklabels([])
            if c == 0 and r == rows - 1:
                ax.set_ylabel("query", fontsize=FONT)
                ax.set_xlabel("key", fontsize=FONT)
            self.titles.append(ax.set_title("", fontsize=9, loc="left", pad=5))   # clear of the thick frame
            self.boxes.append(ax.add_patch(Rectangle((-0.5, -0.5), m, 1, fill=False, edgecolor=HIGHLIGHT,
                                                     lw=1.6, clip_on=False, zorder=3,
                                                     path_effects=highlight_halo(1.6))))
            self.frames.append(ax.add_patch(Rectangle((0, 0), 1, 1, transform=ax.transAxes, fill=False,
                                                      edgecolor="black", lw=3.0, clip_on=False, zorder=3)))
            self.axes.append(ax)
            self.images.append(image)
        self.title = fig.text(0.3 / W, 1 - 0.1 / Hgt, "", fontsize=11, va="top", ha="left")
        self.listing = fig.text(0.3 / W, 1 - 0.42 / Hgt, "", fontsize=FONT, va="top", ha="left")
        # the chosen query's label in red left of each row of the grid (labels may be every other one)
        pad = ScaledTranslation(-rcParams["ytick.major.pad"] / 72, 0, fig.dpi_scale_trans)
        self.row_labels = [ax.text(0, 0, "", transform=blended_transform_factory(ax.transAxes, ax.transData) + pad,
                                   ha="right", va="center", fontsize=9, fontweight="bold", color=HIGHLIGHT,
                                   zorder=4, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})
                           for h, ax in enumerate(self.axes) if h % cols == 0]
        self.view_artists = [*self.images, *self.titles, self.title]
        self.step_artists = [*self.boxes, *self.frames, *self.row_labels, self.listing]

    # update -----------------------------------------------------------------------------------------
    def _list_text(self, layer: int, head: int, token: int) -> str:
        amap = self.amap
        top = top_attended(amap.weights[layer, head, token], amap.key_tokens, self.top)
        query = amap.query_tokens[token]
        if self.all_heads:
            items = ", ".join(f"{clip_token(t)!r} {w:.2f}" for _, t, w in top) or "nothing (its row is all masked)"
            return f"head {head}: query {token} {clip_token(query)!r} attends most to {items}"
        self.list_tokens.set_text("\n".join(f"{clip_token(t)}  ({j})" for j, t, _ in top) or "nothing (row all masked)")
        self.list_weights.set_text("\n".join(f"{w:.2f}" for _, _, w in top))
        return f"query {token}: {clip_token(query, 20)!r}"

    def update(self, layer: int, head: int, token: int) -> PNGFigure:
        """Show ``layer`` and ``head`` (framed in the grid) and highlight query ``token``."""
        amap = self.amap
        check_view(amap, layer, head, token)
        old = self.view
        if self.all_heads:
            if old is None or old[0] != layer:
                for h, (image, title, summary) in enumerate(zip(self.images, self.titles, self.summaries(layer))):
                    image.set_data(amap.weights[layer, h])
                    title.set_text(f"head {h}: {summary.name}")
                self.title.set_text(f"{amap.kind}, layer {layer}: all {amap.heads} heads")
                self.layered.view_changed(key=layer)
            for h, (box, frame) in enumerate(zip(self.boxes, self.frames)):
                box.set_y(token - 0.5)
                frame.set_visible(h == head)
            for label in self.row_labels:
                label.set_y(token)
                label.set_text(clip_token(amap.query_tokens[token]))
        else:
            if old is None or old[:2] != (layer, head):
                summary = self.summaries(layer)[head]
                self.image.set_data(amap.weights[layer, head])
                self.title.set_text(f"{amap.kind}: layer {layer}, head {head}")
                self.summary.set_text(f"head {head} looks like: {summary.name}\n{summary.describe()}")
                self.layered.view_changed(key=(layer, head))
            row = amap.weights[layer, head, token]
            self.row_box.set_y(token - 0.5)
            for j, text in enumerate(self.row_texts):
                text.set_text(_short(row[j]))
                text.set_visible(bool(text.get_text()))                      # blank cells cost nothing
                text.set_y(token)
                text.set_color(text_colour(self.cmap(self.norm(row[j]))))
            self.row_label.set_y(token)
            self.row_label.set_text(clip_token(amap.query_tokens[token]))
        self.listing.set_text(self._list_text(layer, head, token))
        self.view = (layer, head, token)
        return self.figure

    def png(self) -> bytes:
        return self.layered.png()


def draw_attention(amap: AttentionMap, layer: int = 0, head: int = 0, token: int = 0, *, all_heads: bool = False,
                   top: int = 5, dpi: int = FIGURE_DPI) -> PNGFigure:
    """A new figure of ``amap``: head ``head`` of ``layer`` (or all its heads) with query ``token``'s row
    highlighted (see :class:`AttentionPlot`)."""
    return AttentionPlot(amap, all_heads=all_heads, top=top, dpi=dpi).update(layer, head, token)



def mask_figure(panels: Sequence[tuple[str, object, Sequence[str]]]):
    """Attention masks side by side, each ``(title, mask (n, n) bool, tokens)`` (True: the query, a row,
    may read the key, a column); returns ``(figure, alt text)``."""
    import matplotlib.pyplot as plt

    if not panels:
        raise ValueError("mask_figure needs at least one (title, mask, tokens) panel")
    masks = []
    for title, mask, tokens in panels:
        array = np.asarray(mask)
        if array.dtype != bool or array.ndim != 2 or array.shape[0] != array.shape[1] or len(tokens) != len(array):
            raise ValueError(f"{title!r}: a mask must be square booleans (n, n) with n tokens, got "
                             f"{array.dtype} {array.shape} and {len(tokens)} tokens")
        masks.append(array)
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4.2), squeeze=False,
                             gridspec_kw={"width_ratios": [len(m) for m in masks]})
    fig.patch.set_facecolor("white")
    for k, (ax, (title, _, tokens), mask) in enumerate(zip(axes[0], panels, masks)):
        draw_matrix(ax, mask.astype(float), list(tokens), list(tokens), annotate=False, vmin=0, vmax=1, xlabel="key",
                    ylabel="query" if k == 0 else None, title=title)
        ax.grid(False)
    fig.tight_layout()
    alt = (f"{len(panels)} attention masks as grids, query down and key across, dark where a query may read a key: "
           + "; ".join(f"{title}, {int(mask.sum())} of {mask.size} pairs allowed" for (title, _, _), mask in
                       zip(panels, masks)) + ".")
    return fig, alt


def head_shares_figure(shares: dict, *, strong: float = 0.5):
    """:func:`~seqlab.widgets.attention.compute.head_shares`' tables ``{kind: (layers, heads)}`` as heat maps;
    returns ``(figure, alt text)``, the alt text counting the heads above ``strong``."""
    import matplotlib.pyplot as plt

    if not shares:
        raise ValueError("head_shares_figure needs at least one {kind: (layers, heads)} table")
    tables = {kind: np.asarray(table, dtype=float) for kind, table in shares.items()}
    layers, heads = next(iter(tables.values())).shape
    rows = math.ceil(len(tables) / 2)
    fig, axes = plt.subplots(rows, 2, figsize=(12, 3.4 * rows), squeeze=False)
    fig.patch.set_facecolor("white")
    for ax, (kind, table) in zip(axes.flat, tables.items()):
        draw_matrix(ax, table, [str(l) for l in range(layers)], [str(h) for h in range(heads)], vmin=0, vmax=1,
                    cmap="Oranges", fmt=lambda v: f"{v:.1f}", xlabel="head", ylabel="layer", title=f"share on the {kind}",
                    fontsize=9)
        ax.grid(False)
    for ax in list(axes.flat)[len(tables):]:
        ax.axis("off")
    fig.tight_layout()

    def largest(table: np.ndarray) -> str:
        layer, head = np.unravel_index(np.argmax(table), table.shape)
        return f"{table.max():.2f} at layer {layer}, head {head}"

    alt = (f"{len(tables)} heat maps of {layers} × {heads}, layer down and head across, of the share of each head's "
           f"attention that goes to " + ", ".join(f"the {kind}" for kind in tables) + "; the largest share on "
           + "; ".join(f"the {kind}: {largest(table)}" for kind, table in tables.items())
           + f". Heads putting more than {strong:g} on each: "
           + ", ".join(f"{kind} {int((table > strong).sum())}" for kind, table in tables.items())
           + f" of {layers * heads}.")
    return fig, alt
