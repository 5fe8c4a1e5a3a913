"""seqlab.widgets.LiveFigure without a display: controls drive redraws, PNG bytes change."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from seqlab.widgets import LiveFigure  # noqa: E402


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
    assert live.last_redraw_ms > 0 and "ms" in live.status.value


def test_redraws_do_not_leak_figures():
    live = LiveFigure(_draw_line, {"slope": widgets.FloatSlider(value=1.0)})
    for value in (0.1, 0.2, 0.3):
        live.controls["slope"].value = value
    assert plt.get_fignums() == []
