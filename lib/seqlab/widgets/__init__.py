"""Interactive figures: compute (arrays) / draw (matplotlib) / controls (ipywidgets).

Importing this module needs ipywidgets and matplotlib, but no running notebook.
"""

from seqlab.widgets.gates import GateExplorer, GatePlot, GateRecord, draw_gates, gate_record
from seqlab.widgets.live import LiveFigure, figure_to_png

__all__ = ["GateExplorer", "GatePlot", "GateRecord", "LiveFigure", "draw_gates", "figure_to_png", "gate_record"]
