"""Colours everyone sees (issue 18): the course's maps and colour sets (seqlab.colours) pass the thresholds of
scripts/colour_check.py under normal vision and simulated protanopia, deuteranopia and tritanopia; no two
series are told apart by red against green alone; and every figure the library draws has an opaque
background, so its black labels stay readable in a dark theme."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402

from seqlab import colours  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("colour_check", ROOT / "scripts" / "colour_check.py")
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


# -- the measuring stick --------------------------------------------------------------------------------------

def test_cam02ucs_and_the_simulation_give_colorspacious_numbers():
    # values from colorspacious 1.1.2: cspace_convert(rgb, "sRGB1", "CAM02-UCS"), and its "sRGB1+CVD" at 100
    rgb = np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.862745, 0.078431, 0.235294], [0.121569, 0.466667, 0.705882]])
    expected = [[99.998717, -1.912009, -1.151449], [0, 0, 0], [53.260355, 37.379205, 13.594417],
                [48.966485, -12.822364, -23.816692]]
    np.testing.assert_allclose(check.cam02ucs(rgb), expected, atol=1e-5)
    np.testing.assert_allclose(check.simulate(rgb[2], "deuteranopia"), [0.545511, 0.492651, 0.207903], atol=1e-6)
    np.testing.assert_array_equal(check.simulate(rgb, "normal"), rgb)
    with pytest.raises(ValueError, match=r"vision must be one of .*got 'achromatopsia'"):
        check.simulate(rgb, "achromatopsia")


def test_agrees_with_colorspacious_on_random_colours():
    import colorspacious                  # pinned in the test extra: missing, it fails, never skips
    rgb = np.random.default_rng(0).random((500, 3))
    np.testing.assert_allclose(check.cam02ucs(rgb), colorspacious.cspace_convert(rgb, "sRGB1", "CAM02-UCS"),
                               atol=1e-9)
    for vision, cvd_type in [("protanopia", "protanomaly"), ("deuteranopia", "deuteranomaly"),
                             ("tritanopia", "tritanomaly")]:
        theirs = colorspacious.cspace_convert(rgb, {"name": "sRGB1+CVD", "cvd_type": cvd_type, "severity": 100},
                                              "sRGB1")
        np.testing.assert_allclose(check.simulate(rgb, vision), np.clip(theirs, 0, 1), atol=1e-12)


def test_the_thresholds_bite():
    """Maps and pairs the course avoids fail: jet's lightness goes up and down, Greys' steps are uneven
    (sRGB interpolation), RdYlGn's two signs and red against green in one line style look alike to a
    deuteranope, a crimson line alone vanishes on dark orange for a tritanope."""
    assert any("lightness reverses" in f for f in check.failures(check.map_report("jet")))
    assert any("uneven" in f for f in check.failures(check.map_report("Greys")))
    red_yellow_green = check.map_report("RdYlGn", diverging=True)          # the sign is red against green
    assert red_yellow_green["deuteranopia"][0] < 2 and "deuteranopia: sides 1 apart" in check.failures(red_yellow_green)
    red_green = check.series_report("red/green", [("tab:red", "o"), ("tab:green", "o")])
    assert red_green["deuteranopia"] < 6 and check.failures(red_green)
    assert not check.failures(check.series_report("red/green", [("tab:red", "o"), ("tab:green", "s")]))
    crimson_alone = check.mark_report("crimson line", ("crimson",), (colours.WEIGHTS,))
    assert crimson_alone["tritanopia"] < 5 and check.failures(crimson_alone)   # hence the white halo


# -- the course's colours ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("cmap, diverging", colours.MAPS.items())
def test_every_course_map_passes(cmap, diverging):
    report = check.map_report(cmap, diverging)
    assert check.failures(report) == []
    assert report["reversal"] == 0.0                    # measured: every course map is strictly monotonic
    if diverging:                                       # light, neutral middle at the value 0
        J = check.cam02ucs(check.samples(cmap, 256))[:, 0]
        assert abs(int(J.argmax()) - 128) <= 1
        middle = check.cam02ucs(np.array(matplotlib.colormaps[cmap](0.5)[:3]))
        assert np.hypot(*middle[1:]) < 3                # chroma; measured 1.9 for RdBu_r


@pytest.mark.parametrize("name", colours.MARKS)
def test_highlights_and_masked_cells_show_on_every_map_they_are_drawn_on(name):
    assert check.failures(check.mark_report(name, *colours.MARKS[name])) == []


@pytest.mark.parametrize("name", colours.SERIES)
def test_series_drawn_together_differ_in_shape_or_clearly_in_colour(name):
    assert check.failures(check.series_report(name, colours.SERIES[name])) == []


def test_model_styles_never_pair_red_and_green_alone():
    styles = list(colours.MODEL_STYLES.values())
    assert len({marker for _, marker in styles}) == len(styles)       # every model its own marker


def test_the_table_runs_and_passes(capsys):
    assert check.main([]) == 0
    out = capsys.readouterr().out
    assert all(cmap in out for cmap in colours.MAPS) and "highlight" in out


# -- dark theme: opaque figures -----------------------------------------------------------------------------------

def _alpha(png: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(png)).convert("RGBA")
    return np.asarray(image)[..., 3]


def _lstm_and_vocab():
    import torch

    from seqlab.data import Vocab
    from seqlab.models.charlm import CharLM, CharLMConfig

    vocab = Vocab.chars("abcdefghijklmnopqrstuvwxyz ")
    torch.manual_seed(0)
    return CharLM(CharLMConfig(vocab_size=len(vocab), cell="lstm", embed_size=4, hidden_size=6)).eval(), vocab


def _figures() -> dict:
    """Every kind of figure the library draws, as PNG bytes (small inputs, untrained models)."""
    from seqlab.notebook import setup
    from seqlab.widgets import AttentionExplorer, AttentionStepper, GateExplorer, PositionalExplorer
    from seqlab.widgets.live import figure_to_png

    setup(seed=0)
    tokens = "the cat sat on the mat".split()
    weights = np.full((6, 6), 1 / 6)
    X, W_V = np.array([[1.0, 0.0], [0.5, 1.0], [0.0, 1.0]]), np.array([[1.0, 0.5], [0.0, 1.0]])
    lstm, vocab = _lstm_and_vocab()
    explorers = {"attention": AttentionExplorer(weights, tokens, token=1),
                 "stepper": AttentionStepper(X, np.eye(2), np.eye(2), W_V, tokens=["I", "like", "pizza"], causal=True),
                 "positional": PositionalExplorer(),
                 "gates": GateExplorer({"LSTM": lstm}, vocab, "the cat sat")}
    pngs = {f"{name} (static)": figure_to_png(w.static_figure()) for name, w in explorers.items()}
    pngs |= {f"{name} (live)": w.live.image.value for name, w in explorers.items()}
    fig, ax = plt.subplots()                                    # a notebook's own figure after setup()
    ax.plot([0, 1], [1, 0])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    pngs["pyplot after setup()"] = buffer.getvalue()
    return pngs


def test_every_figure_has_an_opaque_background():
    """A transparent PNG shows the notebook's page through it: black labels on JupyterLab's dark theme."""
    fig = plt.figure()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", transparent=True)            # what the check catches
    plt.close(fig)
    assert _alpha(buffer.getvalue()).min() < 255
    for name, png in _figures().items():
        alpha = _alpha(png)
        assert alpha.min() == 255, f"{name}: {np.mean(alpha < 255):.1%} of its pixels are not opaque"


def test_html_that_sets_a_background_sets_its_text_colour_too():
    """The gate explorer's step table and text tape: a light background under the theme's text colour would
    put a dark theme's light text on light pink."""
    import re

    from seqlab.widgets.gates import gate_record, step_table, text_tape

    lstm, vocab = _lstm_and_vocab()
    record = gate_record(lstm, vocab, "the cat sat")
    for html in (step_table(record, 3, (0, 6), gate="f", mark=2), text_tape(record, 3)):
        styles = re.findall(r"style='([^']*)'", html)
        assert any("background" in s for s in styles)
        for style in styles:
            if "background" in style:
                assert re.search(r"(^|;)color:", style), f"a background without a text colour: {style!r}"
