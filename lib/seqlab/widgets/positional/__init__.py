r"""Positional-encoding explorer: the sinusoidal table, one dimension's wave, every registered encoding by its
hook, and PE(pos+k) = R_k PE(pos). Three parts, as for every course widget, one module each:

- :mod:`~seqlab.widgets.positional.compute` -- arrays in, arrays out: the sinusoidal table's wave and
  rotation, and one :class:`EncodingView` per encoding of :data:`seqlab.nn.positional.ENCODING_CLASSES`,
  drawn by the hook it overrides (:data:`HOOK_VIEWS`); :func:`describe_positional`, the alt text.
- :mod:`~seqlab.widgets.positional.draw` -- :class:`PositionalPlot`, one figure kept alive, updated in place.
- :mod:`~seqlab.widgets.positional.controls` -- :class:`PositionalExplorer`: ``d_model``, ``length``,
  ``dimension``, ``pos``, ``k``.

An encoding added to the registry gets a panel by itself. The learned panel shows a table as it starts
(random, :math:`\mathcal N(0, 0.02^2)`) unless ``learned=`` passes a trained one.
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
