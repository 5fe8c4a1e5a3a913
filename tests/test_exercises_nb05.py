"""Notebook 05's exercises: the usual wrong answers, and the other GRU form, get the hint that names them."""

from __future__ import annotations

import pytest
import torch

from exercise_helpers import failure_message

from seqlab.exercises import check
from seqlab.exercises.nb05_gru import measure_space_gates


def make_cell(*, order="rzn", act=None, reset="after", lecture_update=False, output="h"):
    act = {"r": torch.sigmoid, "z": torch.sigmoid, "n": torch.tanh} | (act or {})

    def cell(x, h, W_ih, W_hh, b_ih, b_hh):
        H = h.shape[1]
        Wi = dict(zip(order, W_ih.split(H)))
        Wh = dict(zip(order, W_hh.split(H)))
        bi = dict(zip(order, b_ih.split(H)))
        bh = dict(zip(order, b_hh.split(H)))
        r = act["r"](x @ Wi["r"].T + bi["r"] + h @ Wh["r"].T + bh["r"])
        z = act["z"](x @ Wi["z"].T + bi["z"] + h @ Wh["z"].T + bh["z"])
        if reset == "after":
            rec = r * (h @ Wh["n"].T + bh["n"])
        elif reset == "before":
            rec = (r * h) @ Wh["n"].T + bh["n"]
        elif reset == "after-no-bias":
            rec = r * (h @ Wh["n"].T) + bh["n"]
        else:
            rec = h @ Wh["n"].T + bh["n"]
        n = act["n"](x @ Wi["n"].T + bi["n"] + rec)
        if output == "n":
            return n
        return z * n + (1 - z) * h if lecture_update else (1 - z) * n + z * h
    return cell


def feedback(fn) -> str:
    return failure_message("gru_cell", fn)


def test_a_correct_cell_passes_and_matches_torch():
    assert check("gru_cell", make_cell())
    torch.manual_seed(0)
    ref = torch.nn.GRUCell(3, 4)
    x, h = torch.randn(2, 3), torch.randn(2, 4)
    got = make_cell()(x, h, *(p.detach() for p in ref.parameters()))
    assert torch.allclose(got, ref(x, h), atol=1e-6)


def test_the_other_textbook_form_is_recognised_and_named():
    message = feedback(make_cell(reset="before"))
    assert "other textbook GRU" in message and "W_hn (r * h)" in message and "r_t * (W_hn h + b_hn)" in message


def test_both_lecture_conventions_at_once_are_named():
    message = feedback(make_cell(reset="before", lecture_update=True))
    assert "two differences" in message


@pytest.mark.parametrize("kwargs, words", [
    ({"lecture_update": True}, "lectures' convention"),
    ({"reset": "after-no-bias"}, "b_hn belongs inside"),
    ({"reset": "none"}, "forgot the reset gate"),
    ({"order": "zrn"}, "swapped"),
    ({"act": {"n": torch.sigmoid}}, "it uses tanh"),
    ({"act": {"r": torch.tanh}}, "reset gate r_t differs"),
    ({"act": {"z": torch.tanh}}, "update gate z_t differs"),
    ({"output": "n"}, "returned the candidate"),
])
def test_each_typical_mistake_gets_its_own_hint(kwargs, words):
    assert words in feedback(make_cell(**kwargs))


def test_wrong_return_types_are_explained():
    assert "return one tensor" in feedback(lambda *a: (make_cell()(*a),))
    assert "shape" in feedback(lambda *a: make_cell()(*a).T)


# -- predict, then measure: the word-boundary unit's gates at a space --------------------------------

def test_space_gate_measurement():
    measured = measure_space_gates()
    assert measured["unit"] == 105 and measured["score"] < -1.2, measured     # notebook 5's unit
    (z_space, z_else), (r_space, r_else) = measured["z"], measured["r"]
    assert z_space < 0.3 < 0.7 < z_else and r_space < 0.3 < 0.5 < r_else, measured
    assert measure_space_gates() is measured


def test_space_gate_measurement_leaves_the_global_generator_alone():
    measure_space_gates.cache_clear()
    before = torch.random.get_rng_state()
    measure_space_gates()
    assert torch.equal(torch.random.get_rng_state(), before)


def test_the_measured_answer_passes():
    assert check("predict_space_gates", lambda: {"z": "low", "r": "low"})


@pytest.mark.parametrize("wrong, words", [
    ({"z": "high", "r": "low"}, "z is low: z near 0 takes the candidate"),
    ({"z": "low", "r": "high"}, "r is low: r near 0 builds the candidate from the input alone"),
    ({"z": "high", "r": "high"}, "starts afresh"),
    ({"z": "0", "r": "low"}, "answer with a dict"),
    ({"z": "low"}, "answer with a dict"),
    (["low", "low"], "answer with a dict"),
])
def test_wrong_predictions_are_told_the_measurement_and_why(wrong, words):
    message = failure_message("predict_space_gates", lambda: wrong)
    assert words in message, message
    if isinstance(wrong, dict) and len(wrong) == 2 and wrong["z"] in ("low", "high"):
        assert "measured for unit 105: z 0.18 at spaces" in message
