r"""Gate explorer: what the gates, cell state and hidden state of an RNN/LSTM/GRU do over a text.

Three parts, as for every course widget, one module each:

- :mod:`~seqlab.widgets.gates.compute` -- :func:`gate_record` runs a character model once over a
  text and returns a :class:`GateRecord`: the characters and, for every quantity the recurrent
  layer traces, a ``(T, H)`` numpy array (LSTM ``i f g o c h``, GRU ``r z n h``, RNN ``a h``);
  :func:`describe_gates` says what a view's picture shows, in words (alt text, screen readers);
  :func:`strongest_unit` finds the unit that follows a pattern of the text (e.g. :func:`chars_since`).
- :mod:`~seqlab.widgets.gates.draw` -- :func:`draw_gates` turns a record into stacked heatmaps
  (time x units): the chosen gate, the cell state (LSTM only) and the hidden state, with the
  chosen step's column outlined in every panel. :class:`GatePlot` is the same figure kept alive
  and updated in place, which is what makes the widget answer quickly. :func:`draw_text_colours`
  draws one unit as the text itself, each character on its value's colour.
- :mod:`~seqlab.widgets.gates.controls` -- :class:`GateExplorer` joins them with ipywidgets
  (model, gate, units, a unit to watch, step) as a :class:`~seqlab.widgets.base.Widget`, and
  shows the chosen step's numbers for the units around the watched one, whose row is outlined in
  the picture.

    models = {"LSTM": load_pretrained("charlm-lstm")[0], "GRU": load_pretrained("charlm-gru")[0]}
    GateExplorer(models, char_lm_data().vocab, "Yet hold I off. Women are angels, wooing:", units=(117, 132), watch=125)

The GRU's ``z`` is torch's update gate: :math:`h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}`, so
``z`` near 1 *keeps* the old state (the lectures' :math:`z_t` is torch's :math:`1 - z_t`; see
``seqlab.nn.gru``).
"""

from seqlab.widgets.gates.compute import (DEFAULT_GATE, GATES, QUANTITIES, GateRecord, UnitSearch, chars_since,
                                          describe_gates, gate_record, strongest_unit, unit_correlations,
                                          visible_char)
from seqlab.widgets.gates.controls import LEGEND, GateExplorer, gate_legend, shown_units, step_table, text_tape
from seqlab.widgets.gates.draw import GateFigure, GatePlot, draw_gates, draw_text_colours

__all__ = ["DEFAULT_GATE", "GATES", "LEGEND", "QUANTITIES", "GateExplorer", "GateFigure", "GatePlot", "GateRecord",
           "UnitSearch", "chars_since", "describe_gates", "draw_gates", "draw_text_colours", "gate_legend", "gate_record",
           "shown_units", "step_table", "strongest_unit", "text_tape", "unit_correlations", "visible_char"]
