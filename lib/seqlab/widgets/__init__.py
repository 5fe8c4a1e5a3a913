"""Interactive figures: compute (arrays) / draw (matplotlib) / controls (ipywidgets).

Importing this module needs ipywidgets and matplotlib, but no running notebook.
"""

from seqlab.widgets.attention import AttentionExplorer, AttentionMap, attention_from_model, attention_map, draw_attention
from seqlab.widgets.base import Widget, draw_matrix
from seqlab.widgets.gates import GateExplorer, GatePlot, GateRecord, draw_gates, gate_record
from seqlab.widgets.layered import LayeredFigure
from seqlab.widgets.live import LiveFigure, PNGFigure, figure_to_png
from seqlab.widgets.positional import PositionalExplorer, PositionalPlot, shift_rotation
from seqlab.widgets.stepper import AttentionStepper, attention_steps, describe_stage, draw_attention_stage

__all__ = ["AttentionStepper", "GateExplorer", "GatePlot", "GateRecord", "LiveFigure", "attention_steps",
           "describe_stage", "draw_attention_stage", "draw_gates",
           "figure_to_png", "gate_record"]
__all__ += ["LayeredFigure", "PNGFigure", "Widget", "draw_matrix"]
__all__ += ["AttentionExplorer", "AttentionMap", "attention_from_model", "attention_map", "draw_attention"]
__all__ += ["PositionalExplorer", "PositionalPlot", "shift_rotation"]
