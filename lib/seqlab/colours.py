"""The course's colours in one place, held to ``scripts/colour_check.py``'s thresholds by tests/test_colours.py.

A map's lightness runs one way (a diverging map's both ways from a light middle); series drawn together
differ in marker or line style too; a highlight is a shape first, with a white halo.
"""

from __future__ import annotations

__all__ = ["DIVERGING", "HIGHLIGHT", "HIGHLIGHT_BACKGROUND", "MAPS", "MARKS", "MASKED", "MODEL_STYLES", "SEQUENTIAL",
           "SERIES", "VALUES", "WEIGHTS", "highlight_halo"]

WEIGHTS = "Oranges"     # attention weights in [0, 1]: white = ignored, dark = attended
VALUES = "Blues"        # other unsigned values in a matrix (draw_matrix's default)
SEQUENTIAL = "viridis"  # gate activations in [0, 1] beside the diverging panels of the gate explorer
DIVERGING = "RdBu_r"    # signed values with vmin = -vmax: blue < 0 < red, white at 0

MASKED = "#bdbdbd"      # cells that are -inf (masked) or nan: grey, whatever the map (and "−∞" where annotated)
HIGHLIGHT = "crimson"   # the chosen row's outline and label (outlines: with highlight_halo)
# behind highlighted HTML text (the gate explorer's watched unit); the text on it must set its own dark colour,
# or a dark theme's light text vanishes on it
HIGHLIGHT_BACKGROUND = "#fde2e2"

# one colour and one marker per model, so curves differ in shape as well as hue
MODEL_STYLES = {"rnn": ("tab:gray", "v"), "lstm": ("tab:blue", "o"), "gru": ("tab:green", "s"),
                "gpt": ("tab:purple", "D")}

# what scripts/colour_check.py measures: each map (True: diverging); marks drawn on maps (the mark's colours,
# e.g. a line and its halo, and the maps it is drawn on); series of colours drawn together
MAPS = {WEIGHTS: False, VALUES: False, SEQUENTIAL: False, DIVERGING: True}
MARKS = {"highlight outline + halo": ((HIGHLIGHT, "white"), (WEIGHTS, VALUES)),
         "masked cell": ((MASKED,), (WEIGHTS, VALUES, DIVERGING))}
SERIES = {"model curves": list(MODEL_STYLES.values())}


def highlight_halo(linewidth: float) -> list:
    """Path effects for a highlight outline ``linewidth`` points wide: a white halo under the line."""
    from matplotlib import patheffects

    return [patheffects.Stroke(linewidth=linewidth + 2.5, foreground="white"), patheffects.Normal()]
