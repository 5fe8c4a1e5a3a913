"""seqlab.widgets.LiveFigure without a display: controls drive redraws, PNG bytes change."""

from __future__ import annotations

import ipywidgets as widgets
import pytest
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from seqlab.widgets import LiveFigure  # noqa: E402
from seqlab.widgets.live import LiveRegion  # noqa: E402


def _draw_line(slope: float):
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, slope])
    return fig


def test_moving_a_control_redraws_a_new_picture():
    slider = widgets.FloatSlider(value=1.0, min=0.0, max=3.0)
    live = LiveFigure(_draw_line, {"slope": slider})
    first = live.image.value
    assert first[:8] == b"\x89PNG\r\n\x1a\n" and live.redraws == 1
    slider.value = 2.5
    assert live.redraws == 2 and live.last_values == {"slope": 2.5}
    assert live.image.value != first
    assert live.last_redraw_ms > 0 and "ms" in live.status.value and "data-redraws='2'" in live.status.value
    slider.value = 2.5                       # no change, no redraw
    assert live.redraws == 2


def test_redraws_do_not_leak_figures():
    before = set(plt.get_fignums())          # another test module in this worker may have left one open
    live = LiveFigure(_draw_line, {"slope": widgets.FloatSlider(value=1.0)})
    for value in (0.1, 0.2, 0.3):
        live.controls["slope"].value = value
    assert set(plt.get_fignums()) == before


def test_held_changes_several_controls_with_one_redraw_and_render_replaces_draw():
    import ipywidgets as widgets

    calls = []

    def render(a, b):
        calls.append((a, b))
        return b"\x89PNG fake"

    live = LiveFigure(None, {"a": widgets.IntSlider(value=1), "b": widgets.IntSlider(value=2)}, render=render)
    assert calls == [(1, 2)] and live.image.value == b"\x89PNG fake"
    with live.held():
        live.controls["a"].value = 5
        live.controls["b"].value = 6
    assert calls == [(1, 2), (5, 6)] and live.redraws == 2
    with pytest.raises(ValueError, match="exactly one of draw"):
        LiveFigure(None, {"a": widgets.IntSlider()})


def test_a_describe_function_fills_a_polite_live_region_at_every_redraw():
    slider = widgets.FloatSlider(value=1.0, min=0.0, max=3.0)
    live = LiveFigure(_draw_line, {"slope": slider}, describe=lambda slope: f"A line rising to {slope:.1f} <at> x = 1.")
    assert live.description in live.widget.children
    slider.value = 2.5
    assert live.last_description == "A line rising to 2.5 <at> x = 1."
    # plain text (the browser sets it as textContent: no markup is parsed), in a region made once per view
    assert isinstance(live.description, LiveRegion) and live.description.text == "A line rising to 2.5 <at> x = 1."
    for attribute in ('"role", "status"', '"aria-live", "polite"', '"aria-atomic", "true"'):
        assert f"region.setAttribute({attribute})" in LiveRegion._esm
    plain = LiveFigure(_draw_line, {"slope": widgets.FloatSlider(value=1.0)})
    assert plain.description is None and len(plain.widget.children) == 3       # controls, picture, status
