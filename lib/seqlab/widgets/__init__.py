"""Interactive figures: compute (arrays) / draw (matplotlib) / controls (ipywidgets).

Importing this module needs ipywidgets and matplotlib, but no running notebook.
"""

from seqlab.widgets.live import LiveFigure, figure_to_png

__all__ = ["LiveFigure", "figure_to_png"]
