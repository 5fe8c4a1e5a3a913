"""Notebook 05 — GRU: write the cell (torch's form), and predict what the trained GRU's word-boundary unit does
with its two gates at a space (checked against a measurement).

The cell checker compares with seqlab's own step (:func:`seqlab.nn.gru.gru_step`) and, when the
answer is wrong, recomputes the cell with each usual mistake to say which part differs. One of
them is not a slip but the other textbook form: the reset gate applied *before* the matrix
product, :math:`W_{hn}(r_t \\odot h_{t-1})` (Cho et al., 2014), where torch applies it after,
:math:`r_t \\odot (W_{hn} h_{t-1} + b_{hn})`. The checker recognises it and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, register, tensors_close
from seqlab.experiments.gates import measure_space_gates

GATE_ORDER = "rzn"          # torch's order of the three row blocks
ATOL = 1e-5


# --------------------------------------------------------------------------------------------
# Exercise 1: the GRU cell
# --------------------------------------------------------------------------------------------

def _gru_cell(x: Tensor, h: Tensor, W_ih: Tensor, W_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> Tensor:
    """Reference: seqlab's GRU step (torch's form). x (B, I), h (B, H), W_ih (3H, I), W_hh (3H, H)."""
    from seqlab.nn.gru import gru_step

    (h_t,), _ = gru_step(x @ W_ih.T + b_ih, (h,), W_hh, b_hh)
    return h_t


def _variant(x, h, W_ih, W_hh, b_ih, b_hh, *, order: str = GATE_ORDER, act: dict[str, Callable] | None = None,
             reset: str = "after", lecture_update: bool = False, output: str = "h") -> Tensor:
    """The GRU cell computed with one deliberate mistake (for diagnosis).

    ``reset``: 'after' (torch), 'before' (W (r * h)), 'after-no-bias' (r * (W h) + b_hn), 'none'.
    """
    act = {"r": torch.sigmoid, "z": torch.sigmoid, "n": torch.tanh} | (act or {})
    gx = dict(zip(order, (x @ W_ih.T + b_ih).chunk(3, dim=-1)))      # W_i* x + b_i*
    gh = dict(zip(order, (h @ W_hh.T).chunk(3, dim=-1)))             # W_h* h
    bh = dict(zip(order, b_hh.chunk(3)))                             # b_h*
    W_hn = dict(zip(order, W_hh.chunk(3)))["n"]
    r = act["r"](gx["r"] + gh["r"] + bh["r"])
    z = act["z"](gx["z"] + gh["z"] + bh["z"])
    recurrent = {"after": r * (gh["n"] + bh["n"]), "before": (r * h) @ W_hn.T + bh["n"],
                 "after-no-bias": r * gh["n"] + bh["n"], "none": gh["n"] + bh["n"]}[reset]
    n = act["n"](gx["n"] + recurrent)
    if output == "n":
        return n
    return z * n + (1 - z) * h if lecture_update else (1 - z) * n + z * h


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, atol=ATOL, rtol=1e-4)


_GRU_MISTAKES: list[tuple[dict, str]] = [
    ({"reset": "before"},
     "that is the other textbook GRU: the reset gate applied before the product, W_hn (r * h) (Cho et al. 2014, "
     "the 'RNN to Transformer' article). torch and seqlab apply it after: n_t = tanh(W_in x + b_in + "
     "r_t * (W_hn h + b_hn)). Both are GRUs, but different functions: torch's weights only fit torch's form."),
    ({"lecture_update": True},
     "h_t differs: you used the lectures' convention h_t = (1 - z) * h + z * n. In torch's convention z_t "
     "keeps the old state: h_t = (1 - z_t) * n_t + z_t * h_{t-1}. (The two differ only in which of z and 1 - z "
     "is called the update gate; torch's weights need torch's.)"),
    ({"reset": "after-no-bias"},
     "the candidate n_t differs: b_hn belongs inside the reset gate's product, r_t * (W_hn h + b_hn)."),
    ({"reset": "none"}, "the candidate n_t differs: you forgot the reset gate, n_t = tanh(W_in x + b_in + "
                        "r_t * (W_hn h + b_hn))."),
    ({"order": "zrn"}, "the reset and update gates are swapped: torch stacks the rows r|z|n (rows 0:H are r, "
                       "H:2H are z)."),
    ({"act": {"n": torch.sigmoid}}, "the candidate n_t differs: it uses tanh, not a sigmoid."),
    ({"act": {"r": torch.tanh}}, "the reset gate r_t differs: it should be a sigmoid, and you used tanh."),
    ({"act": {"z": torch.tanh}}, "the update gate z_t differs: it should be a sigmoid, and you used tanh."),
    ({"output": "n"}, "you returned the candidate n_t; return the new state h_t = (1 - z_t) * n_t + z_t * h_{t-1}."),
]


def _diagnose_gru_cell(args: tuple, got: Any, expected: Tensor) -> str | None:
    if not isinstance(got, Tensor):
        return f"return one tensor h_t of shape (B, H), not a {type(got).__name__}."
    if got.shape != expected.shape:
        return f"h_t should have shape {tuple(expected.shape)} (B, H); got {tuple(got.shape)}."
    for kwargs, hint in _GRU_MISTAKES:
        if _close(got, _variant(*args, **kwargs)):
            return hint
    if _close(got, _variant(*args, reset="before", lecture_update=True)):
        return ("two differences: you used the W_hn (r * h) form of the candidate (torch: r * (W_hn h + b_hn)) "
                "and the lectures' update h = (1 - z) h + z n (torch: h = (1 - z) n + z h).")
    return None


def _gru_case(seed: int, batch: int, inputs: int, hidden: int, zero_state: bool = False) -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, inputs, generator=g)
    h = torch.zeros(batch, hidden) if zero_state else 0.9 * torch.randn(batch, hidden, generator=g)
    W_ih = 0.8 * torch.randn(3 * hidden, inputs, generator=g)
    W_hh = 0.8 * torch.randn(3 * hidden, hidden, generator=g)
    b_ih = 0.5 * torch.randn(3 * hidden, generator=g)
    b_hh = 0.5 * torch.randn(3 * hidden, generator=g)
    return (x, h, W_ih, W_hh, b_ih, b_hh)


register(Exercise(
    name="gru_cell",
    hidden=lambda seed: [Case(_gru_case(seed, 3, 4, 5), "a batch of 3, 4 inputs, 5 units")],
    mistakes=tuple(hint for _, hint in _GRU_MISTAKES),
    forbidden=("GRUCell", "nn.GRU", "torch.gru_cell", "_VF"),
    signature="gru_cell(x, h, W_ih, W_hh, b_ih, b_hh) -> h_t; x (B, I), h (B, H), W_ih (3H, I), W_hh (3H, H), "
              "b_ih and b_hh (3H,), gate rows in torch's order r|z|n",
    reference=_gru_cell,
    cases=[
        Case(_gru_case(0, 1, 3, 2), "one sequence, 3 inputs, 2 units, a state carried from before"),
        Case(_gru_case(1, 4, 5, 3), "a batch of 4, 5 inputs, 3 units"),
        Case(_gru_case(2, 2, 3, 4, zero_state=True), "the first step: h starts at zero"),
    ],
    hint="gx = x @ W_ih.T + b_ih and gh = h @ W_hh.T + b_hh, each split into r, z, n (H columns each); "
         "r, z = sigmoid(gx_r + gh_r), sigmoid(gx_z + gh_z); n = tanh(gx_n + r * gh_n); h_t = (1 - z) * n + z * h.",
    diagnose=_diagnose_gru_cell,
    same=_close,
))


# --------------------------------------------------------------------------------------------
# Exercise 2: predict, then measure -- what the GRU's word-boundary unit does with its two gates at a space
# --------------------------------------------------------------------------------------------

GATE_LEVELS = ("low", "high")  # a gate's mean at spaces below or above 0.5


def _space_gates_answer() -> dict[str, str]:
    measured = measure_space_gates()
    return {g: "low" if measured[g][0] < 0.5 else "high" for g in "zr"}


_MEANING = {
    ("z", "low"): "z near 0 takes the candidate n_t and drops the old h_{t-1} (torch's z: 1 keeps)",
    ("z", "high"): "z near 1 keeps the old h_{t-1} and ignores the candidate (torch's z: 1 keeps)",
    ("r", "low"): "r near 0 builds the candidate from the input alone, without the old state",
    ("r", "high"): "r near 1 lets the old state's W_hn h_{t-1} into the candidate",
}


def _diagnose_space_gates(args: tuple, got: Any, expected: dict[str, str]) -> str | None:
    if not isinstance(got, dict) or set(got) != {"z", "r"} or not all(v in GATE_LEVELS for v in got.values()):
        shown = {k: got[k] for k in sorted(got)} if isinstance(got, dict) else type(got).__name__
        return f"answer with a dict {{'z': 'low' or 'high', 'r': 'low' or 'high'}}; got {shown}."
    measured = measure_space_gates()
    said = ", ".join(f"{g} {measured[g][0]:.2f} at spaces and {measured[g][1]:.2f} elsewhere" for g in "zr")
    wrong = [f"{g} is {expected[g]}: {_MEANING[g, expected[g]]}" for g in "zr" if got[g] != expected[g]]
    return (f"measured for unit {measured['unit']}: {said}. " + "; ".join(wrong)
            + ". Together: at a space the unit starts afresh, as notebook 4's LSTM unit did with f near 0 and i near 1.")


register(Exercise(
    name="predict_space_gates",
    signature="predict_space_gates() -> {'z': 'low' or 'high', 'r': 'low' or 'high'}: the mean of torch's update "
              "gate z and of the reset gate r of the GRU's word-boundary unit at spaces, below or above 0.5 "
              "(checked against a measurement)",
    reference=_space_gates_answer,
    cases=[Case((), "the GRU's word-boundary unit over 4,000 characters of validation text")],
    hint="h_t = (1 - z) * n + z * h_{t-1}, and n = tanh(W_in x + b_in + r * (W_hn h_{t-1} + b_hn)): which values "
         "make a unit forget the word it just read?",
    diagnose=_diagnose_space_gates,
))
