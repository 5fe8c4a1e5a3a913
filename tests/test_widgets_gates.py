"""seqlab.widgets.gates: the record's numbers obey the cell equations, the figure shows the chosen
view, and the explorer's controls redraw the picture and the step's numbers. No display needed."""

from __future__ import annotations

import html
import io
import re

import ipywidgets as widgets
import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from PIL import Image  # noqa: E402

from seqlab.data import Vocab  # noqa: E402
from seqlab.models.charlm import CharLM, CharLMConfig  # noqa: E402
from seqlab.widgets import GateExplorer, GatePlot, GateRecord, Widget, draw_gates, gate_record  # noqa: E402
from seqlab.widgets.gates import LEGEND, QUANTITIES, describe_gates, shown_units, step_table, text_tape  # noqa: E402

TEXT = "In 2010, she moved to Paris.\nFive years later"
VOCAB = Vocab.chars("".join(chr(c) for c in range(32, 127)) + "\n")
HIDDEN = 20


def _model(cell: str, hidden: int = HIDDEN, **kwargs) -> CharLM:
    torch.manual_seed({"lstm": 0, "gru": 1, "rnn": 2}[cell])
    config = CharLMConfig(vocab_size=len(VOCAB), cell=cell, embed_size=8, hidden_size=hidden, **kwargs)
    return CharLM(config).eval()


@pytest.fixture(scope="module")
def models() -> dict[str, CharLM]:
    return {"LSTM": _model("lstm"), "GRU": _model("gru"), "RNN": _model("rnn", hidden=12)}


@pytest.fixture(scope="module")
def records(models) -> dict[str, GateRecord]:
    return {name: gate_record(model, VOCAB, TEXT) for name, model in models.items()}


def _shifted(x: np.ndarray) -> np.ndarray:
    """x_{t-1} for every t, with the zero initial state first."""
    return np.vstack([np.zeros_like(x[:1]), x[:-1]])


# -- compute -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, names", [("LSTM", "ifgoch"), ("GRU", "rznh"), ("RNN", "ah")])
def test_record_has_every_traced_quantity_as_time_by_units(records, name, names):
    record = records[name]
    hidden = 12 if name == "RNN" else HIDDEN
    assert record.chars == tuple(TEXT) and record.text == TEXT and record.steps == len(TEXT)
    assert record.cell == name.lower() and set(record.values) == set(names)
    for array in record.values.values():
        assert isinstance(array, np.ndarray) and array.shape == (len(TEXT), hidden)
    assert len(record.top_next) == len(TEXT) and all(len(top) == 3 for top in record.top_next)


def test_lstm_record_obeys_the_cell_equations(records):
    r = records["LSTM"]
    np.testing.assert_allclose(r["c"], r["f"] * _shifted(r["c"]) + r["i"] * r["g"], atol=1e-5)
    np.testing.assert_allclose(r["h"], r["o"] * np.tanh(r["c"]), atol=1e-5)
    for gate in "ifo":
        assert r[gate].min() >= 0 and r[gate].max() <= 1
    assert np.abs(r["g"]).max() <= 1


def test_gru_record_obeys_torchs_update_rule(records):
    # torch's z keeps the old state: h_t = (1 - z) n + z h_{t-1}; the lectures' z is 1 - z
    r = records["GRU"]
    np.testing.assert_allclose(r["h"], (1 - r["z"]) * r["n"] + r["z"] * _shifted(r["h"]), atol=1e-5)
    for gate in "rz":
        assert r[gate].min() >= 0 and r[gate].max() <= 1


def test_rnn_record_is_tanh_of_the_preactivation(records):
    np.testing.assert_allclose(records["RNN"]["h"], np.tanh(records["RNN"]["a"]), atol=1e-5)


def test_record_hidden_state_is_the_models_output_and_its_guess_the_softmax(models, records):
    model, record = models["LSTM"], records["LSTM"]
    with torch.no_grad():
        ids = VOCAB.encode(TEXT)[None]
        output, _ = model.rnn(model.embed(ids))
        probs = torch.softmax(model(ids)[0][0], dim=-1)
    np.testing.assert_allclose(record["h"], output[0].numpy(), atol=1e-6)
    best = probs.argmax(-1)
    assert [top[0][0] for top in record.top_next] == [VOCAB.itos[int(i)] for i in best]
    assert record.top_next[5][0][1] == pytest.approx(float(probs[5].max()), abs=1e-6)


def test_record_of_a_deeper_layer_and_training_flag_restored():
    model = _model("gru", num_layers=2).train()
    record = gate_record(model, VOCAB, "abc", layer=1)
    assert record.layer == 1 and record["h"].shape == (3, HIDDEN) and model.training
    with pytest.raises(ValueError, match="layer must be in 0..1"):
        gate_record(model, VOCAB, "abc", layer=2)


def test_record_errors_are_clear(models):
    with pytest.raises(ValueError, match="outside the model's vocabulary.*'é'"):
        gate_record(models["LSTM"], VOCAB, "café")
    with pytest.raises(ValueError, match="empty"):
        gate_record(models["LSTM"], VOCAB, "")
    reference = CharLM(CharLMConfig(vocab_size=len(VOCAB), cell="lstm", embed_size=8, hidden_size=4),
                       reference=True)
    with pytest.raises(TypeError, match="LSTM.*records no gate trace"):
        gate_record(reference, VOCAB, "abc")
    with pytest.raises(TypeError, match="records no gate trace"):
        gate_record(torch.nn.Linear(2, 2), VOCAB, "abc")


# -- draw ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, panels", [("LSTM", 3), ("GRU", 2), ("RNN", 2)])
def test_draw_has_a_panel_and_colour_bar_per_quantity_and_the_step_outlined(records, name, panels):
    record = records[name]
    fig = draw_gates(record, step=7, units=(2, 10))
    assert isinstance(fig, matplotlib.figure.Figure) and fig._repr_png_()[:4] == b"\x89PNG"   # a cell's value
    assert len(fig.axes) == 2 * panels and plt.get_fignums() == []
    heatmaps = [ax for ax in fig.axes if ax.images and ax.get_ylabel() == "unit"]
    assert len(heatmaps) == panels
    for ax in heatmaps:
        outlines = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_visible()]   # no unit marked
        assert outlines and all(p.get_x() == pytest.approx(6.5) and p.get_width() == 1 for p in outlines)
        assert ax.images[0].get_array().shape == (8, len(TEXT))     # (units, time)
    labels = [t.get_text() for t in heatmaps[-1].get_xticklabels()]
    assert labels == [{" ": "␣", "\n": "↵"}.get(ch, ch) for ch in TEXT]


def test_draw_colour_maps_sequential_for_gates_diverging_for_states(records):
    fig = draw_gates(records["LSTM"], gate="f")
    gate, cell, hidden = (ax.images[0] for ax in fig.axes if ax.get_ylabel() == "unit")
    assert gate.get_clim() == (0.0, 1.0) and gate.get_cmap().name == "viridis"
    for image in (cell, hidden):
        lo, hi = image.get_clim()
        assert hi == -lo > 0 and image.get_cmap().name == "RdBu_r"
    g = next(ax for ax in draw_gates(records["LSTM"], gate="g").axes if ax.get_ylabel() == "unit").images[0]
    assert g.get_clim() == (-1.0, 1.0) and g.get_cmap().name == "RdBu_r"
    np.testing.assert_array_equal(gate.get_array(), records["LSTM"]["f"][:, :HIDDEN].T)


def test_draw_rejects_a_view_outside_the_record(records):
    with pytest.raises(ValueError, match="gate must be one of"):
        draw_gates(records["GRU"], gate="f")
    with pytest.raises(ValueError, match="units"):
        draw_gates(records["GRU"], units=(5, 5))
    with pytest.raises(ValueError, match="step"):
        draw_gates(records["GRU"], step=len(TEXT))


# -- which unit follows a pattern -----------------------------------------------------------------

def test_chars_since_counts_the_position_in_the_line():
    from seqlab.widgets.gates import chars_since

    assert chars_since("ab\ncd\n\ne").tolist() == [1, 2, 0, 1, 2, 0, 0, 1]
    assert chars_since("a b", mark=" ").tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match="one character"):
        chars_since("abc", mark="ab")


def test_strongest_unit_finds_the_planted_unit_and_its_runner_up(records):
    from seqlab.widgets.gates import strongest_unit, unit_correlations

    record = records["LSTM"]
    rng = np.random.default_rng(0)
    signal = rng.normal(size=record.steps)
    values = rng.normal(size=(record.steps, HIDDEN))
    values[:, 7] = -2 * signal + 0.1 * rng.normal(size=record.steps)      # follows the signal, with the sign flipped
    values[:, 3] = signal + 1.0 * rng.normal(size=record.steps)           # follows it loosely
    values[:, 5] = 1.0                                                    # constant: correlation 0, not nan
    planted = GateRecord(record.chars, record.cell, record.mode, record.values | {"c": values})
    found = strongest_unit(planted, signal, "c")
    assert (found.unit, found.runner_up) == (7, 3) and found.correlation < -0.99
    assert 0.3 < found.runner_up_correlation < 0.9 and found.margin == pytest.approx(
        abs(found.correlation) - abs(found.runner_up_correlation))
    expected = [np.corrcoef(values[:, u], signal)[0, 1] for u in (7, 3)]
    assert np.allclose(found.correlations[[7, 3]], expected) and found.correlations[5] == 0
    assert np.allclose(unit_correlations(record["h"], signal),
                       [np.corrcoef(record["h"][:, u], signal)[0, 1] for u in range(HIDDEN)])


def test_strongest_unit_errors_are_clear(records):
    from seqlab.widgets.gates import strongest_unit

    record = records["LSTM"]
    with pytest.raises(ValueError, match="one value per character"):
        strongest_unit(record, np.zeros(3))
    with pytest.raises(ValueError, match="must be one of"):
        strongest_unit(record, np.arange(record.steps), "z")
    with pytest.raises(ValueError, match="constant"):
        strongest_unit(record, np.ones(record.steps))


def test_text_colours_draw_every_character_on_its_values_colour():
    from seqlab.colours import DIVERGING
    from seqlab.widgets.gates import draw_text_colours

    text = "ab\ncde"
    values = np.array([-1.0, 0.0, 2.0, 1.0, 0.5, -2.0])
    fig = draw_text_colours(text, values, vmax=2.0, label="cell state")
    ax = fig.axes[0]
    grid = np.asarray(ax.images[0].get_array())
    assert grid.shape == (2, 3) and not np.isnan(grid).any()
    assert grid[0].tolist() == [-1.0, 0.0, 2.0] and grid[1].tolist() == [1.0, 0.5, -2.0]
    assert [t.get_text() for t in ax.texts] == ["a", "b", "↵", "c", "d", "e"]
    assert ax.images[0].get_cmap().name.startswith(DIVERGING) and ax.images[0].norm.vmin == -2.0
    letters = {t.get_text(): t.get_color() for t in ax.texts}
    assert letters["e"] == "white" and letters["b"] == "black"        # dark blue under e, white under b
    assert fig.axes[1].get_xlabel() == "cell state"
    plt.close(fig)
    with pytest.raises(ValueError, match="one number per character"):
        draw_text_colours("abc", np.zeros(2))


def test_long_text_labels_every_kth_character():
    record = gate_record(_model("rnn", hidden=4), VOCAB, "abcdefghij" * 20)
    labels = draw_gates(record).axes[-2].get_xticklabels()
    assert 40 <= len(labels) <= 80


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)))


def test_fast_redraw_paints_the_same_picture_as_a_full_one(records):
    record = records["LSTM"]
    live = GatePlot(record)
    views = [("f", (0, 20), 0, None), ("f", (0, 20), 9, None), ("o", (3, 11), 9, 5), ("o", (3, 11), len(TEXT) - 1, 5),
             ("g", (3, 11), 4, 7), ("i", (3, 11), 4, 7), ("i", (12, 20), 4, 7), ("g", (0, 2), 0, 1),
             ("g", (0, 2), 0, None)]
    # step-only moves reuse the kept picture; a gate change redraws one panel (and, from a sigmoid
    # gate to g, its colour bar), a units or mark change every panel (a mark outside the units: no outline)
    for view in views:
        live.update(*view)
        fresh = GatePlot(record)
        fresh.update(*view)
        np.testing.assert_array_equal(_pixels(live.png()), _pixels(fresh.png()))
        # and the layers add up to matplotlib's own full picture, but for a few antialiased
        # pixels where the step's outline is drawn over a heatmap's frame in another order
        full = io.BytesIO()
        live.figure.savefig(full, format="png", dpi=live.figure.dpi)
        differing = (_pixels(live.png()) != _pixels(full.getvalue())[..., :3]).any(axis=-1).sum()
        assert differing < 50, f"{view}: {differing} pixels differ from savefig's picture"


# -- controls ------------------------------------------------------------------------------------

def _numbers(html: str) -> dict[tuple[str, int], float]:
    cells = re.findall(r"data-name='(\w)' data-unit='(\d+)'>([+-]\d+\.\d+)<", html)
    return {(name, int(unit)): float(value) for name, unit, value in cells}


def _assert_numbers_match(explorer: GateExplorer, record: GateRecord) -> None:
    step, (lo, hi) = explorer.step.value, explorer.units.value
    numbers = _numbers(explorer.numbers.value)
    units = shown_units((lo, hi + 1), explorer.watch.value, GateExplorer.TABLE_UNITS)
    assert explorer.watch.value in units
    assert {unit for _, unit in numbers} == set(units)
    assert {name for name, _ in numbers} == set(record.values)
    for (name, unit), value in numbers.items():
        assert value == pytest.approx(float(record[name][step, unit]), abs=5e-4)
    assert f"t = {step}</b>" in explorer.numbers.value


@pytest.fixture
def explorer(models) -> GateExplorer:
    return GateExplorer(models, VOCAB, TEXT, units=(0, 11))


def test_explorer_shows_a_picture_and_the_steps_numbers(explorer, records):
    assert explorer.live.image.value[:8] == b"\x89PNG\r\n\x1a\n" and explorer.redraws == 1
    assert isinstance(explorer.widget, widgets.VBox) and hasattr(explorer, "_ipython_display_")
    side_by_side = explorer.widget.children[4]
    assert side_by_side.children == (explorer.live.image, explorer.numbers)      # picture and numbers in one row
    assert explorer.legend in explorer.widget.children and explorer.tape in explorer.widget.children
    assert [value for _, value in explorer.gate.options] == ["i", "f", "g", "o"] and explorer.gate.value == "f"
    assert explorer.step.max == len(TEXT) - 1 and explorer.units.max == HIDDEN - 1
    _assert_numbers_match(explorer, records["LSTM"])
    assert "units 0–4 of the selected 0–11" in explorer.numbers.value and explorer.watch.value == 0


@pytest.mark.parametrize("control, value", [("step", 9), ("units", (4, 6)), ("gate", "o"), ("watch", 7)])
def test_moving_a_control_redraws_and_updates_the_numbers(explorer, records, control, value):
    before, count = explorer.live.image.value, explorer.redraws
    getattr(explorer, control).value = value
    assert explorer.redraws == count + 1 and explorer.live.image.value != before
    assert explorer.live.last_values[control] == value
    _assert_numbers_match(explorer, records["LSTM"])


def test_switching_model_follows_its_cell_type_and_redraws_once(explorer, records):
    explorer.step.value = 20
    count = explorer.redraws
    explorer.model.value = "GRU"
    assert [value for _, value in explorer.gate.options] == ["r", "z", "n"] and explorer.gate.value == "z"
    assert explorer.redraws == count + 1 and explorer.live.last_values["gate"] == "z"
    _assert_numbers_match(explorer, records["GRU"])
    explorer.model.value = "RNN"   # 12 units: the units slider shrinks to fit
    assert [value for _, value in explorer.gate.options] == ["a"]
    assert explorer.units.max == 11 and explorer.units.value == (0, 11)
    _assert_numbers_match(explorer, records["RNN"])
    explorer.model.value = "LSTM"
    assert explorer.gate.value == "f" and explorer.units.max == HIDDEN - 1
    _assert_numbers_match(explorer, records["LSTM"])


def test_each_model_runs_once_however_often_it_is_redrawn(models):
    calls = {name: 0 for name in models}
    hooks = [model.rnn.register_forward_hook(lambda *_, name=name: calls.__setitem__(name, calls[name] + 1))
             for name, model in models.items()]
    try:
        explorer = GateExplorer(models, VOCAB, TEXT)
        for step in (3, 4, 5):
            explorer.step.value = step
        for name in ("GRU", "LSTM", "GRU", "RNN", "LSTM"):
            explorer.model.value = name
        explorer.gate.value = "i"
    finally:
        for hook in hooks:
            hook.remove()
    assert calls == {"LSTM": 1, "GRU": 1, "RNN": 1}


def test_redraws_do_not_leak_figures(explorer):
    for step in range(5):
        explorer.step.value = step
    explorer.model.value = "GRU"
    explorer.figure()
    assert plt.get_fignums() == []


def test_the_explorer_is_a_widget_whose_static_figure_is_its_first_view(explorer):
    assert isinstance(explorer, Widget)
    first = explorer.static_figure()
    explorer.step.value, explorer.gate.value = 7, "o"
    now = explorer.figure()                                      # the view shown now
    assert "step t = 0 reads" in first.texts[-1].get_text() and "step t = 7 reads" in now.texts[-1].get_text()
    assert explorer.static_figure(step=7, gate="o").texts[-1].get_text() == now.texts[-1].get_text()
    assert plt.get_fignums() == []


def test_step_table_shows_at_most_max_units(records):
    html = step_table(records["GRU"], 3, (0, HIDDEN), max_units=5)
    assert {unit for _, unit in _numbers(html)} == set(range(5)) and "'2'" in html


@pytest.mark.parametrize("units, mark, shown", [((0, 20), None, [0, 1, 2, 3, 4]), ((0, 20), 10, [8, 9, 10, 11, 12]),
                                                ((0, 20), 1, [0, 1, 2, 3, 4]), ((0, 20), 19, [15, 16, 17, 18, 19]),
                                                ((4, 7), 5, [4, 5, 6]), ((4, 10), 12, [4, 5, 6, 7, 8])])
def test_the_table_centres_on_the_watched_unit(units, mark, shown):
    assert shown_units(units, mark, 5) == shown


def test_step_table_highlights_the_watched_units_column(records):
    html = step_table(records["LSTM"], 3, (0, HIDDEN), max_units=5, mark=12)
    assert {unit for _, unit in _numbers(html)} == {10, 11, 12, 13, 14}
    assert html.count("background:#fde2e2") == 1 + len(records["LSTM"].values)     # its header and every row
    assert "units 10–14 of the selected 0–19" in html


# -- the watched unit, the legend, the text along the step axis, the size on a slide ---------------

def test_draw_outlines_the_marked_units_row_in_every_panel(records):
    fig = draw_gates(records["LSTM"], units=(4, 12), mark=9)
    heatmaps = [ax for ax in fig.axes if ax.get_ylabel() == "unit"]
    for ax in heatmaps:
        rows = [p for p in ax.patches if p.get_width() == len(TEXT)]
        assert len(rows) == 2 and all(p.get_visible() and p.get_y() == 8.5 and p.get_height() == 1 for p in rows)
    assert "outlined: unit 9" in fig.texts[-1].get_text()
    hidden = draw_gates(records["LSTM"], units=(4, 12), mark=15)            # not among the units shown
    assert not any(p.get_visible() for ax in hidden.axes for p in ax.patches if p.get_width() == len(TEXT))
    assert "outlined" not in hidden.texts[-1].get_text()
    with pytest.raises(ValueError, match="mark must be a unit in 0..19"):
        draw_gates(records["LSTM"], mark=HIDDEN)


def test_explorer_watches_the_unit_it_is_given(models, records):
    explorer = GateExplorer(models, VOCAB, TEXT, units=(4, 15), watch=10, step=3)
    assert explorer.watch.value == 10 and set(unit for _, unit in _numbers(explorer.numbers.value)) == {8, 9, 10, 11, 12}
    _assert_numbers_match(explorer, records["LSTM"])
    plot = explorer.plot("LSTM")
    assert all(p.get_visible() and p.get_y() == 9.5 for marks in plot.row_marks for p in marks)
    assert "outlined: unit 10" in plot.header.get_text()
    static = explorer.figure()
    assert "outlined: unit 10" in static.texts[-1].get_text()
    with pytest.raises(ValueError, match="outside units"):
        GateExplorer(models, VOCAB, TEXT, units=(4, 15), watch=2)
    with pytest.raises(ValueError, match="watch must be a unit in 0..19"):
        GateExplorer(models, VOCAB, TEXT, watch=HIDDEN)


def test_the_watched_unit_and_the_window_follow_each_other_with_one_redraw(models):
    explorer = GateExplorer(models, VOCAB, TEXT, units=(4, 9), watch=6)
    count = explorer.redraws
    explorer.units.value = (10, 15)                 # the window leaves the watched unit: it moves to the edge
    assert explorer.watch.value == 10 and explorer.redraws == count + 1
    explorer.watch.value = 2                        # typed outside the window: the window (6 units) centres on it
    assert explorer.units.value == (0, 5) and explorer.redraws == count + 2
    explorer.watch.value = 19
    assert explorer.units.value == (14, 19) and explorer.redraws == count + 3
    assert explorer.live.last_values["units"] == (14, 19) and explorer.live.last_values["watch"] == 19
    explorer.model.value = "RNN"                    # 12 units: window and watched unit shrink to fit
    assert explorer.units.value == (11, 11) and explorer.watch.value == 11 and explorer.watch.max == 11


def test_gate_labels_are_short_and_the_legend_says_what_the_gate_does(explorer):
    labels = [label for label, _ in explorer.gate.options]
    assert labels == ["i: input gate", "f: forget gate", "g: candidate", "o: output gate"]
    assert "1 keeps it, 0 erases it" in explorer.legend.value
    explorer.model.value = "GRU"
    assert max(len(label) for label, _ in explorer.gate.options) <= 16       # fits the dropdown, never cut
    assert "1 keeps the old h_{t-1}" in explorer.legend.value and "<b>z</b> (update gate)" in explorer.legend.value
    explorer.gate.value = "r"
    assert html.escape(LEGEND["r"]) in explorer.legend.value
    assert set(LEGEND) == {g for gates in ("ifgo", "rzn", "a") for g in gates} and set(LEGEND) <= set(QUANTITIES)


def test_the_text_is_written_along_the_step_slider(explorer):
    explorer.step.value = 2                          # TEXT[2] is the space before "2010"
    tape = explorer.tape.value
    assert re.search(r"<b style='[^']*'>␣</b>2010", tape) and tape.count("<b ") == 1
    assert re.sub("<[^>]+>", "", tape) == "text: " + TEXT.replace(" ", "␣").replace("\n", "↵")
    explorer.step.value = 4
    assert re.search(r"2<b style='[^']*'>0</b>10", explorer.tape.value)


def test_a_long_text_shows_a_window_around_the_step(records):
    record = gate_record(_model("rnn", hidden=4), VOCAB, "abcdefghij" * 30)
    tape = re.sub("<[^>]+>", "", text_tape(record, 150))
    assert tape.startswith("text: …") and tape.endswith("…") and len(tape) == len("text: …") + 100 + 1


@pytest.mark.parametrize("name, height", [("LSTM", 388), ("GRU", 284)])
def test_the_picture_fits_beside_the_numbers_on_a_slide(records, name, height):
    # at the course's 80 dpi: 672 px wide, so that the numbers (370 px) fit beside it in a 1280 px slide,
    # and at most 388 px tall, so that with the controls (about 130 px) the widget stays under 600 px
    plot = GatePlot(records[name])
    plot.update(plot.record.gates[0], (0, 12), 0)
    width, tall = Image.open(io.BytesIO(plot.png())).size
    assert (width, tall) == (672, height)


# -- describe: the picture in words (alt text, screen readers) -------------------------------------------

def test_description_names_the_gate_its_range_and_where_a_unit_saturates():
    text = "ab cd e"
    f = np.full((len(text), 4), 0.5, dtype=np.float32)
    f[:, 1] = [0.99 if ch != " " else 0.01 for ch in text]            # unit 1 shuts at spaces, open elsewhere
    values = {name: np.zeros((len(text), 4), dtype=np.float32) for name in "igoch"} | {"f": f}
    record = GateRecord(tuple(text), "lstm", "LSTM", values)
    described = describe_gates(record, "f", (0, 4), 2, mark=1)
    assert described.startswith("Heatmaps of LSTM layer 0, the 7 characters of the text across and units 0–3 down: "
                                "f_t (forget gate), c_t (cell state), h_t; the column of step t = 2 (reading '␣') "
                                "and unit 1's row outlined.")
    assert f"f_t runs from 0.01 to 0.99, mean {f.mean():.2f}; 25% of its cells are below 0.05 or above 0.95." in described
    assert ("Unit 1: f_t = 0.01 at this step, below 0.05 at 2 of 7 steps (reading '␣' ×2) and above 0.95 at 5 "
            "of 7 steps (reading 'a' ×1, 'b' ×1, 'c' ×1).") in described
    unmarked = describe_gates(record, "f", (2, 4), 2, mark=1)
    assert "Unit 1" not in unmarked and "no cell is below 0.05 or above 0.95" in unmarked


def test_explorer_static_figure_and_live_region_describe_the_view(models):
    explorer = GateExplorer(models, VOCAB, TEXT, units=(0, 9), watch=3, step=4)
    record = explorer.record("LSTM")
    static = explorer.static_figure(gate="i")
    assert static.alt == describe_gates(record, "i", (0, 10), 4, 3) and "i_t (input gate)" in static.alt
    explorer.step.value = 7
    explorer.model.value = "RNN"                                   # a gate without saturation: the range only
    assert explorer.live.last_description == explorer.describe(**explorer.values())
    assert "a_t (pre-activation), h_t" in explorer.live.last_description and "step t = 7" in explorer.live.last_description
