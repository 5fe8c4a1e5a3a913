"""Notebook 05's exercises: the usual wrong answers, and the other GRU form, get the hint that names them."""

from __future__ import annotations

import pytest
import torch

from seqlab.exercises import check
from seqlab.exercises.nb05_gru import _recurrent_param_count


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
    result = check("gru_cell", fn)
    assert not result
    return repr(result)


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


@pytest.mark.parametrize("cell, module", [("rnn", torch.nn.RNN), ("gru", torch.nn.GRU), ("lstm", torch.nn.LSTM)])
def test_param_count_matches_numel_of_torch_and_seqlab(cell, module):
    import seqlab.nn as snn

    ours = {"rnn": snn.RNN, "gru": snn.GRU, "lstm": snn.LSTM}[cell]
    for I, H in ((10, 20), (2, 32), (64, 256)):
        want = _recurrent_param_count(cell, I, H)
        assert want == sum(p.numel() for p in module(I, H).parameters())
        assert want == sum(p.numel() for p in ours(I, H).parameters())


@pytest.mark.parametrize("fn, words", [
    (lambda cell, I, H: 4 * (H * I + H * H + 2 * H), "you counted 4 block(s) of weights for 'gru'"),
    (lambda cell, I, H: {"rnn": 1, "gru": 3, "lstm": 3}[cell] * (H * I + H * H + 2 * H), "it has 4: i, f, g and o"),
    (lambda cell, I, H: {"rnn": 1, "gru": 3, "lstm": 4}[cell] * (H * I + H * H + H), "two bias vectors"),
    (lambda cell, I, H: {"rnn": 1, "gru": 3, "lstm": 4}[cell] * (H * I + H * H), "left out the biases"),
    (lambda cell, I, H: {"rnn": 1, "gru": 3, "lstm": 4}[cell] * (H * I + 2 * H), "recurrent weights"),
    (lambda cell, I, H: "many", "return an int"),
])
def test_param_count_mistakes(fn, words):
    result = check("recurrent_param_count", fn)
    assert not result and words in repr(result), repr(result)
