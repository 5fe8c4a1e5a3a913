"""Positional-encoding explorer: the sinusoidal table, one dimension's wave, every registered encoding by its
hook, and PE(pos+k) = R_k PE(pos). Parts: ``compute`` (arrays, :func:`describe_positional`), ``draw``
(:class:`PositionalPlot`), ``controls`` (:class:`PositionalExplorer`).
"""

from seqlab.widgets.positional.compute import (HOOK_VIEWS, EncodingView, HookView, ShiftRotation, as_table,
                                               describe_positional, dimension_wave, encoding_view, encoding_views,
                                               random_learned_table, rope_similarity, shift_rotation, shown_encodings,
                                               sinusoidal_similarity, table_similarity)
from seqlab.widgets.positional.controls import PositionalExplorer
from seqlab.widgets.positional.draw import PositionalPlot

__all__ = ["HOOK_VIEWS", "EncodingView", "HookView", "PositionalExplorer", "PositionalPlot", "ShiftRotation",
           "as_table", "describe_positional", "dimension_wave", "encoding_view", "encoding_views",
           "random_learned_table", "rope_similarity", "shift_rotation", "shown_encodings", "sinusoidal_similarity",
           "table_similarity"]
