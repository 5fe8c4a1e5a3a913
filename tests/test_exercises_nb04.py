"""Notebook 04's exercises: the usual wrong answers get the hint that names what is wrong."""

from __future__ import annotations

import pytest
import torch

from exercise_helpers import failure_message

from seqlab.exercises import check
from seqlab.exercises.nb04_lstm import GATE_ORDER, learned, measure_rnn_horizon
from seqlab.experiments.rnn_horizon import HORIZON_LENGTHS


# -- the LSTM cell ---------------------------------------------------------------------------------

def make_cell(*, order="ifgo", act=None, forget=True, input_gate=True, output_gate=True, tanh_c=True,
              new_c=True, biases=(True, True), swap_outputs=False):
    act = {"i": torch.sigmoid, "f": torch.sigmoid, "g": torch.tanh, "o": torch.sigmoid} | (act or {})

    def cell(x, h, c, W_ih, W_hh, b_ih, b_hh):
        pre = x @ W_ih.T + h @ W_hh.T + (b_ih if biases[0] else 0) + (b_hh if biases[1] else 0)
        blocks = dict(zip(order, pre.chunk(4, dim=1)))
        i, f, g, o = (act[k](blocks[k]) for k in "ifgo")
        c_t = (f * c if forget else c) + (i * g if input_gate else g)
        inner = torch.tanh(c_t if new_c else c) if tanh_c else c_t
        h_t = o * inner if output_gate else inner
        return (c_t, h_t) if swap_outputs else (h_t, c_t)
    return cell


def feedback(fn) -> str:
    return failure_message("lstm_cell", fn)


def test_a_correct_cell_passes_and_matches_torch():
    assert check("lstm_cell", make_cell())
    torch.manual_seed(0)
    ref = torch.nn.LSTMCell(3, 5)
    x, h, c = torch.randn(2, 3), torch.randn(2, 5), torch.randn(2, 5)
    got = make_cell()(x, h, c, *(p.detach() for p in ref.parameters()))
    want = ref(x, (h, c))
    assert all(torch.allclose(g, w, atol=1e-6) for g, w in zip(got, want))


# The typical mistakes, as make_cell arguments, and words of the hint each gets (the grader's tests reuse it).
LSTM_MISTAKES = [
    ({"act": {"f": torch.tanh}}, "forget gate f_t differs"),
    ({"act": {"i": torch.tanh}}, "input gate i_t differs"),
    ({"act": {"o": torch.tanh}}, "output gate o_t differs"),
    ({"act": {"g": torch.sigmoid}}, "candidate c~_t (block g) differs"),
    ({"output_gate": False}, "forgot the output gate"),
    ({"tanh_c": False}, "not o_t * c_t"),
    ({"new_c": False}, "not c_{t-1}"),
    ({"forget": False}, "forgot the forget gate"),
    ({"input_gate": False}, "forgot the input gate"),
    ({"biases": (True, False)}, "left out b_hh"),
    ({"swap_outputs": True}, "you returned (c_t, h_t)"),
]


@pytest.mark.parametrize("kwargs, words", LSTM_MISTAKES)
def test_each_typical_mistake_gets_its_own_hint(kwargs, words):
    assert words in feedback(make_cell(**kwargs))


def test_swapped_gate_blocks_are_named():
    message = feedback(make_cell(order="figo"))
    assert "order f|i|g|o" in message and "rows 0:H hold the input gate i" in message
    assert "rows H:2H hold the forget gate f" in message and "2H:3H" not in message
    message = feedback(make_cell(order="ifog"))
    assert "order i|f|o|g" in message and "rows 2H:3H hold the candidate g" in message


def test_wrong_shapes_and_types_are_explained():
    assert "return a tuple (h_t, c_t)" in feedback(lambda *a: make_cell()(*a)[0])

    def whole(x, h, c, W_ih, W_hh, b_ih, b_hh):
        pre = x @ W_ih.T + b_ih + h @ W_hh.T + b_hh
        return pre, pre
    assert "shape" in feedback(whole)


def test_unknown_mistake_falls_back_to_the_equations():
    message = feedback(lambda *a: tuple(t + 1 for t in make_cell()(*a)))
    assert "c_t = f * c + i * g" in message


# -- splitting the weight matrix -------------------------------------------------------------------

def split_feedback(fn) -> str:
    return failure_message("split_lstm_weights", fn)


def test_split_reference_agrees_with_torch_layout():
    lstm = torch.nn.LSTM(3, 2)
    x, h, c = torch.randn(1, 3), torch.zeros(1, 1, 2), torch.zeros(1, 1, 2)
    from seqlab.exercises.nb04_lstm import _split_lstm_weights
    W = _split_lstm_weights(lstm.weight_ih_l0.detach())
    b = _split_lstm_weights((lstm.bias_ih_l0 + lstm.bias_hh_l0).detach()[:, None])
    i = torch.sigmoid(x @ W["i"].T + b["i"].T)
    g = torch.tanh(x @ W["g"].T + b["g"].T)
    o = torch.sigmoid(x @ W["o"].T + b["o"].T)
    out, _ = lstm(x[None], (h, c))
    assert torch.allclose(out[0], o * torch.tanh(i * g), atol=1e-6)


def test_split_mistakes():
    assert "split the columns" in split_feedback(lambda w: dict(zip("ifgo", w.chunk(4, dim=1))))
    assert "four blocks" in split_feedback(lambda w: dict(zip("ifgo", w.split(w.shape[0] // 3))))
    message = split_feedback(lambda w: dict(zip("figo", w.chunk(4))))
    assert "torch's order is i|f|g|o" in message and "'i' should be rows 0:" in message
    assert "keys" in split_feedback(lambda w: dict(zip(["W_i", "W_f", "W_g", "W_o"], w.chunk(4))))
    assert "return a dict" in split_feedback(lambda w: list(w.chunk(4)))
    assert check("split_lstm_weights", lambda w: dict(zip(GATE_ORDER, w.chunk(4))))


# -- predict, then measure: the RNN's reach on the adding problem ----------------------------------

def test_horizon_measurement_is_the_rnn_trained_as_in_section_6_leaving_the_generator_alone():
    before = torch.random.get_rng_state()
    runs = measure_rnn_horizon()                     # trained here, the first time in this process
    assert torch.equal(torch.random.get_rng_state(), before)
    assert tuple(runs) == HORIZON_LENGTHS == (10, 30)
    for T, run in runs.items():
        assert run.cell == "rnn" and run.config.length == T and run.config.steps == 1000 and run.config.seed == 0
        assert run.config.hidden_size == 32 and run.config.eval_every == 100
    assert learned(runs[10]) and not learned(runs[30]), {T: run.summary() for T, run in runs.items()}
    assert measure_rnn_horizon() is runs                     # measured once, then reused


def test_the_measured_answer_passes():
    assert check("predict_rnn_horizon", lambda: {10: True, 30: False})


@pytest.mark.parametrize("wrong, words", [
    ({10: True, 30: True}, "at T = 30 it does not: the first marker lies 15 to 30 steps"),
    ({10: False, 30: False}, "at T = 10 it does"),
    ({10: False, 30: True}, "at T = 10 it does"),
    ({10: 1, 30: 0}, "answer with a dict"),
    ("10", "answer with a dict"),
    ({10: True}, "answer with a dict"),
])
def test_wrong_predictions_are_told_the_measurement_and_why(wrong, words):
    message = failure_message("predict_rnn_horizon", lambda: wrong)
    assert words in message, message
    if isinstance(wrong, dict) and len(wrong) == 2 and all(isinstance(v, bool) for v in wrong.values()):
        assert "measured: T = 10: MSE" in message and "not learned" in message
