"""seqlab.widgets.positional: the compute functions' numbers, and the explorer's controls. No display needed."""

from __future__ import annotations

import io
import math

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402

from seqlab.nn.positional import PositionalEncoding, frequencies, sinusoidal_rotation, sinusoidal_table  # noqa: E402
from seqlab.widgets.positional import (  # noqa: E402
    PositionalExplorer,
    PositionalPlot,
    describe_positional,
    dimension_wave,
    random_learned_table,
    rope_similarity,
    shift_rotation,
    sinusoidal_similarity,
    table_similarity,
)


def _is_toeplitz(matrix: np.ndarray, atol: float = 1e-9) -> bool:
    n = len(matrix)
    return all(np.allclose(np.diagonal(matrix, k), np.diagonal(matrix, k)[0], atol=atol) for k in range(-n + 1, n))


# -- compute ---------------------------------------------------------------------------------------
def test_sinusoidal_similarity_is_the_mean_cosine_of_the_angle_differences():
    sim = sinusoidal_similarity(20, 16)
    omega = frequencies(16).numpy()
    for m, n in [(0, 0), (3, 7), (19, 2)]:
        assert sim[m, n] == pytest.approx(np.mean(np.cos((m - n) * omega)), abs=1e-12)
    assert _is_toeplitz(sim) and np.allclose(np.diag(sim), 1.0)
    assert not sim.flags.writeable                       # cached: nobody may change it


def test_rope_similarity_depends_on_the_offset_only_and_is_one_at_zero():
    sim = rope_similarity(24, 8)
    assert sim.shape == (24, 24) and _is_toeplitz(sim) and np.allclose(np.diag(sim), 1.0)
    assert np.allclose(sim, sim.T)                       # q = k = u: symmetric
    assert not np.allclose(sim, rope_similarity(24, 8, seed=1))   # the weights come from u


def test_table_similarity_is_the_cosine_of_rows():
    table = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    sim = table_similarity(table)
    assert np.allclose(sim, [[1, 0, 1 / math.sqrt(2)], [0, 1, 1 / math.sqrt(2)], [1 / math.sqrt(2), 1 / math.sqrt(2), 1]])
    assert np.allclose(table_similarity(torch.tensor(table)), sim)
    with pytest.raises(ValueError, match=r"\(positions, d\), got shape \(3,\)"):
        table_similarity(np.ones(3))
    random = table_similarity(random_learned_table(64, 64))
    off_diagonal = random[~np.eye(64, dtype=bool)]
    assert np.abs(off_diagonal).max() < 0.6 and abs(off_diagonal.mean()) < 0.05   # no structure at init


def test_dimension_wave_is_the_tables_column():
    table = sinusoidal_table(30, 16, dtype=torch.float64).numpy()
    for dim in (0, 1, 6, 15):
        x, y, values, wavelength = dimension_wave(16, dim, 30)
        assert np.allclose(values, table[:, dim])
        omega = float(frequencies(16)[dim // 2])
        assert wavelength == pytest.approx(2 * math.pi / omega)
        assert np.allclose(y, (np.sin if dim % 2 == 0 else np.cos)(x * omega))
        assert x[0] == 0 and x[-1] == 29
    assert dimension_wave(16, 0, 30)[3] == pytest.approx(2 * math.pi)
    with pytest.raises(ValueError, match="dimension must be in 0..15 for d_model=16, got 16"):
        dimension_wave(16, 16, 30)
    with pytest.raises(ValueError, match="even"):
        dimension_wave(15, 0, 30)


def test_shift_rotation_block_is_fixed_and_maps_pe_pos_to_pe_pos_plus_k():
    for pos in (0, 7, 40):
        rot = shift_rotation(32, pos, 5, 3)
        R = sinusoidal_rotation(5, 32).numpy()
        assert np.allclose(rot.block, R[6:8, 6:8]) and np.allclose(rot.block, shift_rotation(32, 0, 5, 3).block)
        assert np.allclose(rot.rotated, rot.pe_shifted, atol=1e-12)
        table = sinusoidal_table(pos + 6, 32, dtype=torch.float64).numpy()
        assert np.allclose(rot.pe_pos, table[pos, 6:8]) and np.allclose(rot.pe_shifted, table[pos + 5, 6:8])
        assert rot.max_error < 1e-12 and rot.omega == pytest.approx(10000 ** (-6 / 32))
    with pytest.raises(ValueError, match="pair must be in 0..15"):
        shift_rotation(32, 0, 1, 16)


# -- draw and controls -----------------------------------------------------------------------------
def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)))[..., :3]


def test_fast_redraw_paints_the_same_picture_as_a_fresh_figure():
    plot = PositionalPlot()
    states = [(64, 64, 8, 10, 5), (64, 64, 8, 20, 5), (64, 64, 9, 20, 5), (64, 64, 9, 20, 30),
              (32, 64, 9, 20, 30), (32, 16, 9, 3, 2), (64, 64, 8, 10, 5)]
    for state in states:
        plot.update(*state)
        fresh = PositionalPlot()
        fresh.update(*state)
        np.testing.assert_array_equal(_pixels(plot.png()), _pixels(fresh.png()), err_msg=str(state))
    assert plot.state == dict(zip(["d_model", "length", "dimension", "pos", "k"], states[-1]))


@pytest.fixture
def explorer() -> PositionalExplorer:
    return PositionalExplorer()


def test_explorer_shows_its_default_state(explorer):
    assert explorer.live.image.value[:8] == b"\x89PNG\r\n\x1a\n" and explorer.redraws == 1
    assert explorer.values() == {"d_model": 64, "length": 64, "dimension": 8, "pos": 10, "k": 5}
    assert explorer.plot.rotation.max_error < 1e-12
    width, height = Image.open(io.BytesIO(explorer.live.image.value)).size
    assert width <= 1280 and height <= 600                     # with the controls, fits a 1280x720 screen
    static = explorer.static_figure()
    # savefig draws every artist in z-order; the layers draw the lines after the heatmaps: a few
    # antialiased pixels where a line crosses a frame differ
    differing = (_pixels(static._repr_png_()) != _pixels(explorer.live.image.value)).any(axis=-1).sum()
    assert differing < 300, f"{differing} pixels differ from the static figure's"


@pytest.mark.parametrize("control, value", [("dimension", 13), ("pos", 40), ("k", 1), ("d_model", 32), ("length", 24)])
def test_each_control_redraws_once(explorer, control, value):
    before, count = explorer.live.image.value, explorer.redraws
    explorer.controls[control].value = value
    assert explorer.redraws == count + 1 and explorer.live.image.value != before
    assert explorer.plot.state[control] == value


def test_smaller_sizes_pull_the_other_sliders_in_with_one_redraw(explorer):
    with explorer.held():
        explorer.dimension.value, explorer.pos.value, explorer.k.value = 60, 60, 50
    count = explorer.redraws
    explorer.d_model.value = 16
    assert explorer.redraws == count + 1 and explorer.dimension.max == 15 and explorer.dimension.value == 15
    explorer.length.value = 16
    assert explorer.redraws == count + 2 and explorer.pos.value == 15 and explorer.k.value == 15
    assert explorer.plot.state == {"d_model": 16, "length": 16, "dimension": 15, "pos": 15, "k": 15}


def test_a_trained_table_is_shown_and_labelled():
    torch.manual_seed(0)
    table = torch.randn(100, 12)
    explorer = PositionalExplorer(learned=table, learned_label="trained in section 7", length=32)
    title = explorer.plot.ax_sim[1].get_title()
    assert "trained in section 7" in title and "first 32 of 100 rows, d = 12" in title
    assert np.allclose(explorer.plot.ax_sim[1].images[0].get_array(), table_similarity(table[:32]))
    assert "untrained (random init)" in PositionalExplorer(length=16).plot.ax_sim[1].get_title()
    with pytest.raises(ValueError, match=r"\(max_len, d\)"):
        PositionalExplorer(learned=torch.zeros(5))


def test_redraws_do_not_leak_figures(explorer):
    for dim in range(5):
        explorer.dimension.value = dim
    explorer.d_model.value = 16
    explorer.static_figure()
    assert plt.get_fignums() == []


def test_description_says_the_wave_the_similarities_and_the_rotation_check():
    text = describe_positional(64, 64, 8, 10, 5)
    *_, wavelength = dimension_wave(64, 8, 64)
    sim = sinusoidal_similarity(64, 64)
    assert text.startswith("Sinusoidal position table (64 positions by d_model = 64) as a heatmap, dimension 8 a sin wave")
    assert f"wavelength {float(f'{wavelength:.3g}'):,g} positions" in text and "R_5's 2×2 block" in text
    assert f"Similarity of position 10 to 11 and 15: sinusoidal {sim[10, 11]:.2f} and {sim[10, 15]:.2f};" in text
    assert f"RoPE {rope_similarity(64, 64)[10, 11]:.2f}" in text
    assert text.endswith("R_5 PE(10) equals PE(15) to within 1e-12 in all 64 dimensions.")
    assert describe_positional(64, 64, 9, 10, 5) != text and "a cos wave" in describe_positional(64, 64, 9, 10, 5)
    # a trained table with fewer rows than positions: its panel has no row for them
    short = describe_positional(64, 64, 8, 20, 5, learned=np.ones((16, 64)), learned_label="trained")
    assert "learned, trained, (no row) and (no row)" in short


def test_explorer_static_figure_and_live_region_describe_the_state(explorer):
    assert explorer.static_figure().alt == describe_positional(64, 64, 8, 10, 5)
    explorer.pos.value = 40
    explorer.length.value = 24                                   # pulls pos and k in
    assert explorer.live.last_description == explorer.describe(**explorer.values())
    assert f"row {explorer.pos.value} marked" in explorer.live.last_description


# -- the registry drives the bottom row ------------------------------------------------------------
def test_each_encoding_that_puts_position_in_gets_a_panel_in_course_order():
    from seqlab.nn.positional import ENCODING_CLASSES
    from seqlab.widgets.positional import encoding_views, shown_encodings

    assert shown_encodings() == tuple(name for name, cls in ENCODING_CLASSES.items() if cls.hooks())  # not NoPE
    assert "none" not in shown_encodings()
    views = encoding_views(32, 16)
    assert [(v.name, v.hook) for v in views] == [(name, hook) for name in shown_encodings()
                                                 for hook in ENCODING_CLASSES[name].hooks()]
    by_name = {v.name: v for v in views}
    sinusoidal, learned, rope, alibi = (by_name[n] for n in ("sinusoidal", "learned", "rope", "alibi"))
    assert [(v.hook) for v in (sinusoidal, learned, rope, alibi)] == ["forward", "forward", "rotate", "score_bias"]
    assert np.allclose(sinusoidal.values, sinusoidal_similarity(32, 16), atol=1e-6)   # the float32 table's cosines
    assert np.allclose(rope.values, rope_similarity(32, 16), atol=1e-12)             # one head of width d_model
    distance = np.abs(np.arange(32)[:, None] - np.arange(32)[None, :])
    assert np.allclose(alibi.values, -distance / 256) and alibi.limit == pytest.approx(31 / 256)   # one head's slope
    assert learned.title == "learned, untrained (random init)" and np.allclose(np.diag(learned.values), 1.0)
    assert np.array_equal(encoding_views(32, 16)[1].values, learned.values)          # the same init every time
    explorer = PositionalExplorer(length=16)
    assert [ax.get_title().split(":")[0].split(",")[0] for ax in explorer.plot.ax_sim] == [v.label for v in views]
    assert [v.label for v in views][:4] == ["sinusoidal", "learned", "RoPE", "ALiBi"]


class _ToyBias(PositionalEncoding):
    """A toy encoding for the test: a score bias of -log(1 + |i - j|), the same for every head."""

    label = "log bias"

    @classmethod
    def build(cls, d_model, num_heads, max_len):
        return cls()

    def score_bias(self, n, m, *, device=None, dtype=torch.float32):
        i, j = torch.arange(m - n, m)[:, None], torch.arange(m)[None, :]
        return -torch.log1p((i - j).abs().to(dtype))[None]


def test_an_encoding_added_to_the_registry_shows_up_drawn_by_its_hook(monkeypatch):
    from seqlab.nn import positional
    from seqlab.widgets.positional import encoding_views

    monkeypatch.setitem(positional.ENCODING_CLASSES, "log", _ToyBias)
    explorer = PositionalExplorer(length=16)
    toy = explorer.plot.views[-1]
    assert (toy.name, toy.hook, toy.title) == ("log", "score_bias", "log bias: bias b(m, n), 1 head")
    assert len(explorer.plot.ax_sim) == len(encoding_views(16, 64)) and toy.values[3, 5] == pytest.approx(-math.log(3))
    text = explorer.describe(**explorer.values())
    assert "the score bias of ALiBi and log bias" in text and f"log bias bias {-math.log(2):.3f} and" in text
    width, _ = Image.open(io.BytesIO(explorer.live.image.value)).size
    assert width <= 1280
