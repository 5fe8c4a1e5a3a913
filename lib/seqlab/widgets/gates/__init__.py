r"""Gate explorer: what the gates, cell state and hidden state of an RNN/LSTM/GRU do over a text.

Parts: ``compute`` (:func:`gate_record`, :func:`strongest_unit`, alt text), ``draw`` (:func:`draw_gates`,
:class:`GatePlot`, :func:`draw_text_colours`), ``controls`` (:class:`GateExplorer`)::

    models = {"LSTM": load_pretrained("charlm-lstm")[0], "GRU": load_pretrained("charlm-gru")[0]}
    GateExplorer(models, char_lm_data().vocab, "Yet hold I off. Women are angels, wooing:", units=(117, 132), watch=125)

The GRU's ``z`` is torch's update gate, :math:`h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}`: the
lectures' :math:`z_t` is torch's :math:`1 - z_t` (see ``seqlab.nn.gru``).
"""

from seqlab.widgets.gates.compute import (DEFAULT_GATE, GATES, QUANTITIES, GateRecord, UnitSearch, chars_since,
                                          describe_gates, gate_record, strongest_unit, unit_correlations,
                                          visible_char)
from seqlab.widgets.gates.controls import LEGEND, GateExplorer, gate_legend, shown_units, step_table, text_tape
from seqlab.widgets.gates.draw import GateFigure, GatePlot, draw_gates, draw_text_colours

__all__ = ["DEFAULT_GATE", "GATES", "LEGEND", "QUANTITIES", "GateExplorer", "GateFigure", "GatePlot", "GateRecord",
           "UnitSearch", "chars_since", "describe_gates", "draw_gates", "draw_text_colours", "gate_legend", "gate_record",
           "shown_units", "step_table", "strongest_unit", "text_tape", "unit_correlations", "visible_char"]
