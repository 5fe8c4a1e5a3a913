r"""Positional-encoding explorer: the sinusoidal table, one dimension's wave, similarity by distance, PE(pos+k) = R_k PE(pos).

- **compute** -- arrays in, arrays out, unit-tested: :func:`sinusoidal_similarity` (cosine of
  :math:`PE_m` and :math:`PE_n`), :func:`table_similarity` (the same for any table, e.g. a learned
  one), :func:`rope_similarity` (:math:`(R_m u)\cdot(R_n u)/|u|^2` for a fixed vector ``u``),
  :func:`dimension_wave` (one column of the table as a wave) and :func:`shift_rotation` (the 2x2
  block of :math:`R_k` for one frequency, and the largest error of :math:`R_k PE_{pos}` against
  :math:`PE_{pos+k}` over all dimensions); :func:`describe_positional` says it in words (the
  picture's alt text).
- **draw** -- :class:`PositionalPlot`: one figure kept alive, updated in place; the heatmaps and
  frames are redrawn only when ``d_model`` or ``length`` change, and a move of the dimension,
  position or shift redraws a few lines, texts and the 2x2 block (:class:`~seqlab.widgets.layered.LayeredFigure`).
- **controls** -- :class:`PositionalExplorer`: ``d_model``, ``length``, ``dimension``, ``pos``, ``k``.

What the "learned" panel shows: by default a table as a learned encoding *starts*, random
:math:`\mathcal N(0, 0.02^2)` (:class:`~seqlab.nn.positional.LearnedPositionalEncoding`'s
initialisation), whose positions are unrelated to each other; pass ``learned=`` a trained table
(e.g. ``model.positional.weight`` of notebook 11's model) to see what training made of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import ipywidgets as widgets
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from seqlab.nn.positional import frequencies, rotate_pairs, sinusoidal_rotation, sinusoidal_table
from seqlab.colours import DIVERGING
from seqlab.notebook import FIGURE_DPI
from seqlab.widgets.base import Widget, draw_matrix, text_colour
from seqlab.widgets.layered import LayeredFigure
from seqlab.widgets.live import PNGFigure

__all__ = ["PositionalExplorer", "PositionalPlot", "ShiftRotation", "describe_positional", "dimension_wave",
           "random_learned_table",
           "rope_similarity", "shift_rotation", "sinusoidal_similarity", "table_similarity"]


# -- compute -----------------------------------------------------------------------------------------
def _check_sizes(d_model: int, length: int) -> None:
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be even and >= 2 (sin/cos pairs), got d_model={d_model}")
    if length < 1:
        raise ValueError(f"length must be >= 1, got length={length}")


def table_similarity(table) -> np.ndarray:
    r"""``(n, n)`` cosine similarities of the rows of ``table`` ``(n, d)``: :math:`\cos(P_m, P_n)`."""
    if hasattr(table, "detach"):
        table = table.detach().cpu().double().numpy()
    table = np.asarray(table, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"a position table must be a matrix (positions, d), got shape {table.shape}")
    unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    return unit @ unit.T


@lru_cache(maxsize=32)
def sinusoidal_similarity(length: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    r"""``(length, length)``: :math:`\cos(PE_m, PE_n) = \frac{2}{d}\sum_i \cos((m-n)\,\omega_i)`, a function of :math:`m - n` only.

    (Every :math:`PE_{pos}` has length :math:`\sqrt{d/2}`, so the dot product is this times :math:`d/2`.)
    """
    _check_sizes(d_model, length)
    result = table_similarity(sinusoidal_table(length, d_model, base=base, dtype=torch.float64).numpy())
    result.setflags(write=False)                       # cached: shared by every caller
    return result


@lru_cache(maxsize=32)
def rope_similarity(length: int, head_dim: int, base: float = 10000.0, seed: int = 0) -> np.ndarray:
    r"""``(length, length)``: the RoPE score of one vector against itself at positions ``m`` and ``n``.

    :math:`(R_m u)^\top (R_n u) / |u|^2` for a fixed random ``u`` (``seed``): with query = key = ``u``,
    what RoPE alone contributes to the score, a function of :math:`m - n` only. It equals
    :math:`\sum_i w_i \cos((m-n)\theta_i)` with weights :math:`w_i` from ``u``'s pairs: the
    frequencies of the sinusoidal table, weighted by the query and key a model learns.
    """
    _check_sizes(head_dim, length)
    u = torch.randn(head_dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    rotated = rotate_pairs(u.expand(length, head_dim), torch.arange(length), frequencies(head_dim, base))  # (L, d)
    result = (rotated @ rotated.T / (u @ u)).numpy()
    result.setflags(write=False)
    return result


@lru_cache(maxsize=32)
def random_learned_table(length: int, d_model: int, seed: int = 0, std: float = 0.02) -> np.ndarray:
    """``(length, d_model)``: a learned position table as it starts, before training (N(0, std^2))."""
    _check_sizes(d_model, length)
    table = torch.randn(length, d_model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * std
    result = table.numpy()
    result.setflags(write=False)
    return result


def dimension_wave(d_model: int, dimension: int, length: int, *, samples: int = 400,
                   base: float = 10000.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    r"""Column ``dimension`` of the sinusoidal table as a wave: ``(x, y, values, wavelength)``.

    ``x`` ``(samples,)`` spans positions ``0 .. length - 1`` and ``y`` is the continuous
    :math:`\sin(x\,\omega_i)` (even dimension ``2i``) or :math:`\cos(x\,\omega_i)` (odd ``2i+1``);
    ``values`` ``(length,)`` are the table's entries at the integer positions; the wavelength is
    :math:`2\pi/\omega_i` positions.
    """
    _check_sizes(d_model, length)
    if not 0 <= dimension < d_model:
        raise ValueError(f"dimension must be in 0..{d_model - 1} for d_model={d_model}, got {dimension}")
    omega = float(frequencies(d_model, base)[dimension // 2])
    wave = np.sin if dimension % 2 == 0 else np.cos
    x = np.linspace(0.0, max(length - 1, 1), samples)
    return x, wave(x * omega), wave(np.arange(length) * omega), 2 * math.pi / omega


@dataclass(frozen=True)
class ShiftRotation:
    """One frequency's part of :math:`PE_{pos+k} = R_k PE_{pos}`, and the check over all dimensions."""

    pair: int                # i: dimensions 2i (sin) and 2i+1 (cos)
    omega: float             # omega_i
    block: np.ndarray        # (2, 2) the block of R_k acting on that pair
    pe_pos: np.ndarray       # (2,) PE(pos)[2i : 2i+2]
    pe_shifted: np.ndarray   # (2,) PE(pos + k)[2i : 2i+2]
    rotated: np.ndarray      # (2,) block @ pe_pos
    max_error: float         # max over all d_model dimensions of |R_k PE(pos) - PE(pos + k)|


def shift_rotation(d_model: int, pos: int, k: int, pair: int, *, base: float = 10000.0) -> ShiftRotation:
    r""":math:`R_k`'s 2x2 block for frequency ``pair`` and how well :math:`R_k PE_{pos}` gives :math:`PE_{pos+k}`.

    The block, :math:`\begin{bmatrix}\cos\omega_i k & \sin\omega_i k\\ -\sin\omega_i k & \cos\omega_i k\end{bmatrix}`,
    does not depend on ``pos``. Computed in float64.
    """
    _check_sizes(d_model, 1)
    if not 0 <= pair < d_model // 2:
        raise ValueError(f"pair must be in 0..{d_model // 2 - 1} for d_model={d_model}, got {pair}")
    if pos < 0 or pos + k < 0:
        raise ValueError(f"positions must be >= 0, got pos={pos} and pos + k={pos + k}")
    R = sinusoidal_rotation(k, d_model, base=base).numpy()                            # (d, d)
    table = sinusoidal_table(max(pos, pos + k) + 1, d_model, base=base, dtype=torch.float64).numpy()
    pe_pos, pe_shifted = table[pos], table[pos + k]
    rotated_all = R @ pe_pos
    s = slice(2 * pair, 2 * pair + 2)
    return ShiftRotation(pair, float(frequencies(d_model, base)[pair]), R[s, s].copy(), pe_pos[s].copy(),
                         pe_shifted[s].copy(), rotated_all[s].copy(), float(np.abs(rotated_all - pe_shifted).max()))


def describe_positional(d_model: int, length: int, dimension: int, pos: int, k: int, *, learned=None,
                        learned_label: str = "untrained (random init)", base: float = 10000.0) -> str:
    """The explorer's picture of a state in words (its alt text): the panels, the chosen dimension's
    wave, how similar position ``pos`` is to ``pos + 1`` and ``pos + k`` under each encoding, and the
    check of :math:`PE_{pos+k} = R_k PE_{pos}`. ``learned``: the table shown, or None for a random one."""
    _, _, _, wavelength = dimension_wave(d_model, dimension, length, base=base)
    table = random_learned_table(length, d_model) if learned is None else _as_table(learned)[:length]
    similarities = {"sinusoidal": sinusoidal_similarity(length, d_model, base), f"learned, {learned_label},":
                    table_similarity(table), "RoPE": rope_similarity(length, d_model, base)}
    near = sorted({p for p in (pos + 1, pos + k) if p < length})
    falls = "; ".join(f"{name} " + " and ".join(f"{sim[pos, p]:.2f}" if p < len(sim) else "(no row)" for p in near)
                      for name, sim in similarities.items())
    rot = shift_rotation(d_model, pos, k, dimension // 2, base=base)
    error = "1e-12" if rot.max_error < 1e-12 else f"{rot.max_error:.1e}"
    wavelength = float(f"{wavelength:.3g}")                       # 3 significant digits, no exponent
    return (f"Sinusoidal position table ({length} positions by d_model = {d_model}) as a heatmap, dimension "
            f"{dimension} a {'sin' if dimension % 2 == 0 else 'cos'} wave of wavelength {wavelength:,g} positions; "
            f"cosine similarity between positions for sinusoidal, learned and RoPE encodings, row {pos} marked; and "
            f"R_{k}'s 2×2 block. " + (f"Similarity of position {pos} to {' and '.join(map(str, near))}: {falls}. "
                                    if near else "")
            + f"R_{k} PE({pos}) equals PE({pos + k}) to within {error} in all {d_model} dimensions.")


# -- draw --------------------------------------------------------------------------------------------
def _nice_ticks(ax, rows: int, cols: int) -> None:
    """Round tick positions (every index up to 16, else about six) for a matrix of ``rows x cols``."""
    for axis, size in ((ax.xaxis, cols), (ax.yaxis, rows)):
        if size > 16:
            ticks = [int(t) for t in MaxNLocator(nbins=6, integer=True).tick_values(0, size - 1) if 0 <= t <= size - 1]
        else:
            ticks = list(range(0, size, 1 if size <= 8 else 2))
        axis.set_ticks(ticks, [str(t) for t in ticks])
        for label in axis.get_ticklabels():
            label.set_rotation(0)


def _replace_matrix(ax, values: np.ndarray, title: str) -> None:
    """New values, of any shape, for a heatmap that draw_matrix drew on ``ax`` (its style kept)."""
    rows, cols = values.shape
    image = ax.images[0]
    image.set_data(values)
    image.set_extent((-0.5, cols - 0.5, rows - 0.5, -0.5))
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_title(title, fontsize=ax.title.get_fontsize(), y=1.0)


def _as_table(learned) -> np.ndarray:
    if hasattr(learned, "detach"):
        learned = learned.detach().cpu().double().numpy()
    learned = np.asarray(learned, dtype=np.float64)
    if learned.ndim != 2:
        raise ValueError(f"learned must be a position table (max_len, d), got shape {learned.shape}")
    return learned


class PositionalPlot:
    """The explorer's figure, kept alive: :meth:`update` then :meth:`png`.

    Panels: the sinusoidal table (positions x dimensions) with the chosen dimension and the rows
    ``pos`` and ``pos + k`` marked; that dimension's wave; cosine similarity between positions for
    sinusoidal, learned and RoPE, row ``pos`` marked; and :math:`R_k`'s block for the chosen
    dimension's frequency with the numbers of :math:`PE_{pos+k} = R_k PE_{pos}`.
    ``learned``: a trained table ``(max_len, d)``, or None for a random one as at initialisation.
    """

    FONTSIZE = 10

    def __init__(self, *, learned=None, learned_label: str | None = None, base: float = 10000.0,
                 dpi: int = FIGURE_DPI):
        self.base = base
        self.learned = None if learned is None else _as_table(learned)
        self.learned_label = learned_label or ("trained" if learned is not None else "untrained (random init)")
        self.figure = PNGFigure(figsize=(12.0, 6.7), dpi=dpi)
        grid = self.figure.add_gridspec(2, 4, height_ratios=[1.0, 1.0], hspace=0.5, wspace=0.35,
                                        left=0.05, right=0.985, top=0.94, bottom=0.07)
        self.ax_pe = self.figure.add_subplot(grid[0, :2])
        self.ax_wave = self.figure.add_subplot(grid[0, 2:])
        self.ax_sim = [self.figure.add_subplot(grid[1, j]) for j in range(3)]
        corner = grid[1, 3].subgridspec(2, 1, height_ratios=[1.0, 0.8], hspace=0.45)
        self.ax_rot = self.figure.add_subplot(corner[0])
        self.ax_info = self.figure.add_subplot(corner[1])
        self.ax_info.axis("off")
        self.sizes: tuple[int, int] | None = None
        self.state: dict[str, int] = {}
        # a slider dragged back and forth revisits sizes: their static pixels are kept (about 2 MB each)
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
        if self.learned is None:
            learned = random_learned_table(length, d_model)
            learned_title = f"learned, {self.learned_label}"
        else:
            learned = self.learned[:length]
            shown = f"first {len(learned)} of {len(self.learned)}" if len(self.learned) > length else \
                f"all {len(learned)}"
            learned_title = f"learned, {self.learned_label}\n({shown} rows, d = {learned.shape[1]})"
        panels = [(self.ax_pe, table, f"sinusoidal PE: {length} positions × d_model = {d_model}"),
                  (self.ax_sim[0], sinusoidal_similarity(length, d_model, self.base), "sinusoidal: cos(PE_m, PE_n)"),
                  (self.ax_sim[1], table_similarity(learned), learned_title),
                  (self.ax_sim[2], rope_similarity(length, d_model, self.base), "RoPE: (R_m u)·(R_n u) / |u|²")]
        for ax, values, title in panels:
            if self.sizes is None:               # the first picture: draw_matrix sets the style ...
                labels = ("dimension", "position") if ax is self.ax_pe else ("position n", "position m")
                draw_matrix(ax, values, annotate=False, cmap=DIVERGING, vmin=-1, vmax=1, xlabel=labels[0],
                            ylabel=labels[1], title=title, fontsize=fs)
                ax.set_title(title, fontsize=fs, y=1.0)
            else:                                # ... later sizes only swap the numbers (much faster)
                _replace_matrix(ax, values, title)
            _nice_ticks(ax, *values.shape)
        self.ax_pe.set_aspect("auto")
        self.ax_wave.set_xlim(-0.5, max(length - 1, 1) + 0.5)
        self.ax_wave.set_ylim(-1.15, 1.15)
        if self.sizes is None:
            self.ax_wave.set_xlabel("position", fontsize=fs)
            self.ax_wave.tick_params(labelsize=fs)
            self.figure.suptitle("cosine similarity of positions m and n (red = alike, blue = opposite); "
                                 "PE(pos + k) = R_k PE(pos)", x=0.5, y=0.49, fontsize=fs)
        self.sizes = (d_model, length)
        self.layers.restyle(key=(d_model, length))

    def update(self, d_model: int, length: int, dimension: int, pos: int, k: int) -> None:
        """Show the state (``dimension`` of ``d_model``, the rows ``pos`` and ``pos + k``)."""
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


# -- controls ----------------------------------------------------------------------------------------
class PositionalExplorer(Widget):
    """Controls: ``d_model`` (even, 8..128), ``length`` (8..128), ``dimension``, ``pos`` and the shift ``k``.

    >>> explorer = PositionalExplorer()                      # learned panel: a random table as at init
    >>> PositionalExplorer(learned=model.positional.weight, learned_label="trained in section 7")

    A move of ``dimension``, ``pos`` or ``k`` redraws lines, texts and the 2x2 block over kept
    pixels; ``d_model`` and ``length`` redraw the heatmaps (their similarity matrices are cached,
    and the last 8 sizes' pictures are kept: going back to one draws no heatmap).
    """

    def __init__(self, d_model: int = 64, length: int = 64, *, dimension: int = 8, pos: int = 10, k: int = 5,
                 learned=None, learned_label: str | None = None, base: float = 10000.0, dpi: int = FIGURE_DPI):
        _check_sizes(d_model, length)
        self._plot_args = {"learned": learned, "learned_label": learned_label, "base": base, "dpi": dpi}
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
        return describe_positional(d_model, length, dimension, pos, k, learned=self.plot.learned,
                                   learned_label=self.plot.learned_label, base=self.plot.base)

    def figure(self, d_model: int, length: int, dimension: int, pos: int, k: int) -> Figure:
        plot = PositionalPlot(**self._plot_args)
        plot.update(d_model, length, dimension, pos, k)
        return plot.figure
