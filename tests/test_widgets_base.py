"""seqlab.widgets.base: the annotated heatmap every widget draws with, the layered figure, and the
widget base class (controls -> picture, static figure of the default state). No display needed."""

from __future__ import annotations

import io

import ipywidgets as widgets
import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402
from PIL import Image  # noqa: E402

from seqlab.widgets import LayeredFigure, PNGFigure, Widget, draw_matrix  # noqa: E402
from seqlab.colours import MASKED  # noqa: E402
from seqlab.widgets.base import format_number, text_colour  # noqa: E402

TOKENS = ["the", "cat", "sat"]


def _axes(width: float = 4.0, height: float = 4.0):
    fig = PNGFigure(figsize=(width, height), dpi=80)
    ax = fig.add_subplot()
    return fig, ax


def _cell_texts(ax) -> dict[tuple[int, int], matplotlib.text.Text]:
    return {(round(t.get_position()[1]), round(t.get_position()[0])): t for t in ax.texts}


# -- draw_matrix -------------------------------------------------------------------------------------

def test_format_number_writes_infinities_whole_numbers_and_two_decimals():
    assert [format_number(v) for v in (-np.inf, np.inf, np.nan, 1.0, -0.001, 0.256, -1.5)] == \
        ["−∞", "∞", "", "1", "0", "0.26", "-1.50"]
    assert format_number(0.256, ".3f") == "0.256" and format_number(0.25, "{:.0%}") == "25%"
    assert format_number(2.0, lambda v: f"<{v}>") == "<2.0>"


def test_text_colour_is_white_on_dark_cells_and_black_on_light_ones():
    assert text_colour((0.05, 0.1, 0.4, 1.0)) == "white" and text_colour((0.95, 0.95, 0.8, 1.0)) == "black"


def test_matrix_shows_every_number_labels_both_axes_and_masked_cells_grey():
    scores = np.array([[0.5, -np.inf, -np.inf], [1.0, 2.25, -np.inf], [0.0, 1.0, 3.0]])
    fig, ax = _axes()
    image = draw_matrix(ax, scores, TOKENS, TOKENS, annotate=True, xlabel="key", ylabel="query", title="scores")
    texts = _cell_texts(ax)
    assert {k: t.get_text() for k, t in texts.items()} == {
        (0, 0): "0.50", (0, 1): "−∞", (0, 2): "−∞", (1, 0): "1", (1, 1): "2.25", (1, 2): "−∞",
        (2, 0): "0", (2, 1): "1", (2, 2): "3"}
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS == [t.get_text() for t in ax.get_yticklabels()]
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query" and ax.get_title() == "scores"
    assert all(t.get_fontsize() >= 9 for t in [*ax.texts, *ax.get_xticklabels(), *ax.get_yticklabels()])
    # -inf is masked in the image (drawn in the grey "bad" colour), finite limits come from the finite values
    assert image.get_array().mask[0, 1] and not image.get_array().mask[0, 0]
    assert image.get_clim() == (0.0, 3.0)
    assert matplotlib.colors.to_hex(image.get_cmap().get_bad()) == MASKED
    # text colour follows the cell: white on the darkest (3.0), black on the lightest (0.0) and on grey
    assert texts[(2, 2)].get_color() == "white" and texts[(2, 0)].get_color() == "black"
    assert texts[(0, 1)].get_color() == "black"
    assert plt.get_fignums() == []


def test_matrix_takes_torch_tensors_and_a_highlighted_row_is_outlined_and_bold():
    fig, ax = _axes()
    draw_matrix(ax, torch.eye(3), TOKENS, TOKENS, highlight_row=1, cmap="Oranges", vmin=0, vmax=1)
    outline = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(outline) == 1 and outline[0].get_xy() == (-0.5, 0.5) and outline[0].get_width() == 3
    labels = ax.get_yticklabels()
    assert labels[1].get_fontweight() == "bold" and labels[0].get_fontweight() == "normal"


def test_auto_annotation_writes_numbers_only_when_they_fit_in_their_cells():
    rng = np.random.default_rng(0)
    fig, ax = _axes(4, 4)
    draw_matrix(ax, rng.random((4, 4)), annotate="auto")
    assert len(ax.texts) == 16
    fig, ax = _axes(4, 4)
    draw_matrix(ax, rng.random((30, 30)), annotate="auto")
    assert len(ax.texts) == 0
    fig, ax = _axes(4, 4)
    draw_matrix(ax, rng.random((4, 4)), annotate=False)
    assert len(ax.texts) == 0


def test_long_column_labels_turn_vertical_short_ones_stay_level():
    fig, ax = _axes(4, 4)
    draw_matrix(ax, np.zeros((2, 8)), col_labels=[f"token{j}" for j in range(8)])
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {90.0}
    fig, ax = _axes(4, 4)
    draw_matrix(ax, np.zeros((2, 3)), col_labels=["a", "b", "c"])
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}


def test_tick_labels_are_all_kept_when_they_fit_else_every_kth():
    fig, ax = _axes(4, 4)
    draw_matrix(ax, np.zeros((12, 12)), [f"t{i}" for i in range(12)], [f"t{j}" for j in range(12)])
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"t{i}" for i in range(12)]
    assert len(ax.get_xticklabels()) == 12
    fig, ax = _axes(4, 4)                     # 64 rows in ~220 pt: 3.5 pt a row, a 10 pt label spans 3 rows
    draw_matrix(ax, np.zeros((64, 64)), annotate=False, highlight_row=6)
    assert [t.get_text() for t in ax.get_yticklabels()] == [str(i) for i in range(0, 64, 3)]
    assert list(ax.get_xticks()) == list(range(0, 64, 3)) and len(ax.texts) == 0
    assert ax.get_yticklabels()[2].get_fontweight() == "bold"      # row 6's label
    fig, ax = _axes(4, 4)
    draw_matrix(ax, np.zeros((64, 64)), annotate=False, highlight_row=7)   # not labelled: no error


def test_matrix_errors_name_what_was_expected():
    fig, ax = _axes()
    with pytest.raises(ValueError, match=r"values must be a matrix \(rows, columns\), got shape \(2, 2, 2\)"):
        draw_matrix(ax, np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="row_labels needs one label per row: got 3 labels for 2 rows"):
        draw_matrix(ax, np.zeros((2, 4)), TOKENS)
    with pytest.raises(ValueError, match="col_labels needs one label per column: got 3 labels for 4 columns"):
        draw_matrix(ax, np.zeros((2, 4)), None, TOKENS)
    with pytest.raises(ValueError, match=r"highlight_row must be in 0..1, got 2"):
        draw_matrix(ax, np.zeros((2, 4)), highlight_row=2)
    with pytest.raises(ValueError, match="annotate must be True, False or 'auto'"):
        draw_matrix(ax, np.zeros((2, 4)), annotate="yes")


# -- LayeredFigure -----------------------------------------------------------------------------------

def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)))[..., :3]


def test_layered_figure_paints_what_a_full_draw_paints():
    fig, ax = _axes()
    image = draw_matrix(ax, np.zeros((3, 3)), TOKENS, TOKENS, annotate=False, vmin=0, vmax=1)
    marker = ax.add_patch(Rectangle((-0.5, -0.5), 3, 1, fill=False, edgecolor="red", lw=2,
                                         zorder=3))
    layered = LayeredFigure(fig, view_artists=[image], step_artists=[marker])
    rng = np.random.default_rng(1)
    for view in range(3):
        image.set_data(rng.random((3, 3)))
        layered.view_changed()
        for row in range(3):
            marker.set_y(row - 0.5)
            full = io.BytesIO()
            fig.savefig(full, format="png", dpi=fig.dpi)
            np.testing.assert_array_equal(_pixels(layered.png()), _pixels(full.getvalue()))
    assert not image.get_animated() and not marker.get_animated()      # savefig still draws them


def test_layered_figure_keeps_the_last_views_pixels_by_key():
    fig, ax = _axes()
    image = draw_matrix(ax, np.zeros((3, 3)), annotate=False, vmin=0, vmax=1)
    layered = LayeredFigure(fig, view_artists=[image], keep_views=2)
    data = {key: np.random.default_rng(key).random((3, 3)) for key in range(3)}
    drawn = []
    original = fig.draw_artist
    fig.draw_artist = lambda artist: (drawn.append(artist), original(artist))
    pictures, redrawn = {}, []
    for key in (0, 1, 0, 2, 1, 0):           # keep 2: the 2nd visit of 0 is kept; 2 pushes 1 out, 1 then 0, 0 then 2
        image.set_data(data[key])
        layered.view_changed(key=key)
        before = drawn.count(image)
        png = layered.png()
        redrawn.append(drawn.count(image) > before)
        assert png == pictures.setdefault(key, png)      # the same pixels whether kept or drawn again
    assert redrawn == [True, True, False, True, True, True]
    assert list(layered._views) == [1, 0]              # the two most recently used, oldest first


def test_layered_figure_keeps_the_last_static_layers_by_key():
    fig, ax = _axes()
    image = draw_matrix(ax, np.zeros((3, 3)), annotate=False, vmin=0, vmax=1)
    layered = LayeredFigure(fig, keep_statics=2)
    data = {key: np.random.default_rng(key).random((3, 3)) for key in range(3)}
    draws = []
    original = layered.canvas.draw
    layered.canvas.draw = lambda: (draws.append(1), original())
    for key in (0, 1, 0, 2, 1):              # keep 2: 0 is kept; 2 pushes 1 out
        image.set_data(data[key])
        ax.set_title(f"state {key}")
        layered.restyle(key=key)
        before = len(draws)
        png = layered.png()
        full = io.BytesIO()
        fig.savefig(full, format="png", dpi=fig.dpi)
        np.testing.assert_array_equal(_pixels(png), _pixels(full.getvalue()))
        draws.append(("redrawn", len(draws) > before))
    assert [d[1] for d in draws if isinstance(d, tuple)] == [True, True, False, True, True]


def test_layered_figure_in_panels_redraws_only_the_changed_panels_band():
    fig = PNGFigure(figsize=(3, 5), dpi=80)
    top, bottom = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
    images = [draw_matrix(ax, np.zeros((3, 3)), annotate=False, vmin=0, vmax=1) for ax in (top, bottom)]
    titles = [ax.set_title("") for ax in (top, bottom)]
    # the bands meet a quarter of the way down the gap: the lower panel's title is inside its own band
    split = bottom.bbox.y1 + 0.75 * (top.bbox.y0 - bottom.bbox.y1)
    bands = [Bbox.from_extents(0, split, fig.bbox.x1, fig.bbox.y1), Bbox.from_extents(0, 0, fig.bbox.x1, split)]
    layered = LayeredFigure(fig, panels=[([images[0], titles[0]], bands[0]), ([images[1], titles[1]], bands[1])])
    with pytest.raises(ValueError, match="either as view_artists or as panels"):
        LayeredFigure(fig, view_artists=[images[0]], panels=[([images[1]], bands[1])])
    drawn = []
    original = fig.draw_artist
    fig.draw_artist = lambda artist: (drawn.append(artist), original(artist))
    rng = np.random.default_rng(2)
    for panels in (None, [1], [0], [0, 1], [1]):
        for p in panels or (0, 1):
            images[p].set_data(rng.random((3, 3)))
            titles[p].set_text(f"panel {p}: {rng.random():.3f}")
        layered.view_changed(panels=panels)
        drawn.clear()
        png = layered.png()
        assert {id(a) for a in drawn} == {id(a) for p in (panels or (0, 1)) for a in (images[p], titles[p])} | {
            id(spine) for p in (panels or (0, 1)) for spine in (top, bottom)[p].spines.values() if spine.get_visible()}
        full = io.BytesIO()
        fig.savefig(full, format="png", dpi=fig.dpi)
        np.testing.assert_array_equal(_pixels(png), _pixels(full.getvalue()))


# -- Widget --------------------------------------------------------------------------------------------

class _Wave(Widget):
    def __init__(self):
        self.figures = 0
        self.readout = widgets.Label()
        super().__init__({"frequency": widgets.FloatSlider(value=2.0, min=0.5, max=8.0),
                          "phase": widgets.Checkbox(value=False)}, rows=[["frequency", self.readout], ["phase"]])

    def update_text(self, frequency, phase):
        self.readout.value = f"f = {frequency}"

    def describe(self, frequency, phase):
        return f"One sine wave over one second, {frequency:g} cycles, starting at {1 if phase else 0} (phase {phase})."

    def figure(self, frequency, phase):
        self.figures += 1
        fig = PNGFigure(figsize=(2, 2), dpi=80)
        t = np.linspace(0, 1, 50)
        fig.add_subplot().plot(t, np.sin(2 * np.pi * frequency * t + (np.pi / 2 if phase else 0)))
        return fig


def test_widget_lays_out_controls_picture_and_timing_and_redraws_on_every_control():
    wave = _Wave()
    assert wave.redraws == 1 and wave.live.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    first_row, second_row, image, description, status = wave.widget.children
    assert first_row.children == (wave.controls["frequency"], wave.readout)
    assert second_row.children == (wave.controls["phase"],) and image is wave.live.image
    assert description is wave.live.description
    assert "ms" in status.value and wave.readout.value == "f = 2.0"
    before = wave.live.image.value
    wave.controls["frequency"].value = 3.0
    wave.controls["phase"].value = True
    assert wave.redraws == 3 and wave.live.image.value != before and wave.readout.value == "f = 3.0"
    with wave.held():
        wave.controls["frequency"].value = 4.0
        wave.controls["phase"].value = False
    assert wave.redraws == 4 and wave.values() == {"frequency": 4.0, "phase": False}
    assert hasattr(wave, "_ipython_display_") and plt.get_fignums() == []


def test_static_figure_is_the_default_state_whatever_the_controls_show_now():
    wave = _Wave()
    default_png = wave.live.image.value
    wave.controls["frequency"].value = 6.0
    fig = wave.static_figure()
    assert isinstance(fig, PNGFigure)
    from seqlab.widgets.live import figure_to_png
    assert figure_to_png(fig, dpi=80) == default_png
    changed = wave.static_figure(phase=True)
    assert changed.axes[0].lines[0].get_ydata()[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"unknown controls \['speed'\]"):
        wave.static_figure(speed=1)


def test_static_figure_carries_the_description_of_its_state_as_alt_text():
    from IPython.core.formatters import DisplayFormatter

    wave = _Wave()
    wave.controls["frequency"].value = 6.0
    fig = wave.static_figure(phase=True)
    alt = wave.describe(frequency=2.0, phase=True)
    assert fig.alt == alt and "2 cycles" in alt
    # what a notebook stores: IPython merges the metadata with the PNG that _repr_png_ makes, unchanged
    data, metadata = DisplayFormatter().format(fig)
    assert metadata == {"image/png": {"alt": alt}} and data["image/png"] == fig._repr_png_()
    assert DisplayFormatter().format(PNGFigure(figsize=(1, 1)))[1] == {}       # no alt, no metadata


def test_after_each_move_the_live_region_says_the_new_state():
    wave = _Wave()
    region = wave.live.description
    assert wave.live.last_description == wave.describe(frequency=2.0, phase=False)
    for name, value in (("frequency", 3.5), ("phase", True)):
        wave.controls[name].value = value
        expected = wave.describe(**wave.values())
        assert wave.live.last_description == expected and "3.5 cycles" in expected
        assert region.text == expected and wave.live.description is region     # the same region, new text
    with wave.held():
        wave.controls["frequency"].value = 5.0
        wave.controls["phase"].value = False
    assert wave.live.last_description == wave.describe(frequency=5.0, phase=False)


def test_widget_errors():
    class Bare(Widget):
        pass

    class Mute(Widget):
        def figure(self, a):
            return PNGFigure(figsize=(1, 1))

    with pytest.raises(NotImplementedError, match="Bare must implement figure"):
        Bare({"a": widgets.IntSlider()})
    with pytest.raises(NotImplementedError, match=r"Mute must implement describe\(\*\*values\)"):
        Mute({"a": widgets.IntSlider()})

    with pytest.raises(ValueError, match=r"rows name controls that do not exist: \['speed'\]"):
        Bare({"frequency": widgets.FloatSlider(value=1.0)}, rows=[["frequency", "speed"]])
