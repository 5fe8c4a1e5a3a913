"""Notebook 04 — LSTM: write the cell, split torch's weight matrix into gates, and predict how far back a
vanilla RNN can carry the adding problem's first value (checked against a measurement).

:func:`seqlab.models.continue_with_cell` is the "watch" of the cell exercise: it runs the trained character
LSTM with the student's cell in place of seqlab's step, so that a correct cell writes Shakespeare and a mistake shows.

The cell checker compares with seqlab's own step (:func:`seqlab.nn.lstm.lstm_step`) and, when
the answer is wrong, recomputes the cell with each usual mistake (a gate with the wrong
squashing function, i and f swapped, no output gate, h_t and c_t returned the wrong way round,
...) to say which part differs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, register, tensors_close
from seqlab.experiments.rnn_horizon import measure_rnn_horizon

GATE_ORDER = "ifgo"          # torch's order of the four row blocks
ATOL = 1e-5


# --------------------------------------------------------------------------------------------
# Exercise 1: the LSTM cell
# --------------------------------------------------------------------------------------------

def _lstm_cell(x: Tensor, h: Tensor, c: Tensor, W_ih: Tensor, W_hh: Tensor, b_ih: Tensor,
               b_hh: Tensor) -> tuple[Tensor, Tensor]:
    """Reference: seqlab's LSTM step. Shapes x (B, I), h and c (B, H), W_ih (4H, I), W_hh (4H, H)."""
    from seqlab.nn.lstm import lstm_step

    (h_t, c_t), _ = lstm_step(x @ W_ih.T + b_ih, (h, c), W_hh, b_hh)
    return h_t, c_t


@torch.no_grad()
def _variant(x, h, c, W_ih, W_hh, b_ih, b_hh, *, order: str = GATE_ORDER,
             act: dict[str, Callable] | None = None, forget: bool = True, input_gate: bool = True,
             output_gate: bool = True, tanh_c: bool = True, new_c_in_h: bool = True,
             biases: tuple[bool, bool] = (True, True)) -> tuple[Tensor, Tensor]:
    """The LSTM cell computed with one deliberate mistake (for diagnosis)."""
    act = {"i": torch.sigmoid, "f": torch.sigmoid, "g": torch.tanh, "o": torch.sigmoid} | (act or {})
    pre = x @ W_ih.T + h @ W_hh.T
    if biases[0]:
        pre = pre + b_ih
    if biases[1]:
        pre = pre + b_hh
    blocks = dict(zip(order, pre.chunk(4, dim=-1)))          # the student's reading of the rows
    i, f, g, o = (act[k](blocks[k]) for k in GATE_ORDER)
    c_t = (f * c if forget else c) + (i * g if input_gate else g)
    cell = c_t if new_c_in_h else c
    h_t = (o if output_gate else 1.0) * (torch.tanh(cell) if tanh_c else cell)
    return h_t, c_t


def _close(a: Any, b: Tensor) -> bool:
    return tensors_close(a, b, atol=ATOL, rtol=1e-4)


def _same_pair(got: Any, expected: tuple[Tensor, Tensor]) -> bool:
    return isinstance(got, (tuple, list)) and len(got) == 2 and all(_close(g, e) for g, e in zip(got, expected))


_ROWS = ("0:H", "H:2H", "2H:3H", "3H:4H")
_NAMES = {"i": "input gate i", "f": "forget gate f", "g": "candidate g (c~)", "o": "output gate o"}

# (variant keyword arguments, hint); the first that reproduces the student's answer is reported
_LSTM_MISTAKES: list[tuple[dict, str]] = [
    ({"act": {"f": torch.tanh}}, "the forget gate f_t differs: it should be a sigmoid (a fraction in (0, 1) of the "
                                 "old cell to keep), and you used tanh."),
    ({"act": {"i": torch.tanh}}, "the input gate i_t differs: it should be a sigmoid, and you used tanh."),
    ({"act": {"o": torch.tanh}}, "the output gate o_t differs: it should be a sigmoid, and you used tanh."),
    ({"act": {"g": torch.sigmoid}}, "the candidate c~_t (block g) differs: it uses tanh, so that it can write "
                                    "negative values too; you used a sigmoid."),
    ({"act": {"i": torch.tanh, "f": torch.tanh, "o": torch.tanh, "g": torch.sigmoid}},
     "the squashing functions are the wrong way round: the gates i, f, o use sigmoid, the candidate g uses tanh."),
    ({"output_gate": False}, "h_t differs: you forgot the output gate, h_t = o_t * tanh(c_t)."),
    ({"tanh_c": False}, "h_t differs: squash the cell state before the output gate, h_t = o_t * tanh(c_t), "
                        "not o_t * c_t."),
    ({"new_c_in_h": False}, "h_t differs: it should use the new cell state c_t, not c_{t-1}."),
    ({"forget": False}, "c_t differs: you forgot the forget gate, c_t = f_t * c_{t-1} + i_t * g_t."),
    ({"input_gate": False}, "c_t differs: you forgot the input gate, c_t = f_t * c_{t-1} + i_t * g_t."),
    ({"biases": (True, False)}, "you left out b_hh: torch adds two biases, W_ih x + b_ih + W_hh h + b_hh."),
    ({"biases": (False, True)}, "you left out b_ih: torch adds two biases, W_ih x + b_ih + W_hh h + b_hh."),
    ({"biases": (False, False)}, "you left out both biases b_ih and b_hh."),
]


def _diagnose_lstm_cell(args: tuple, got: Any, expected: tuple[Tensor, Tensor]) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != 2 or not all(isinstance(t, Tensor) for t in got):
        return "return a tuple (h_t, c_t) of two tensors, each of shape (B, H)."
    h_exp, c_exp = expected
    if any(t.shape != h_exp.shape for t in got):
        return (f"h_t and c_t should each have shape {tuple(h_exp.shape)} (B, H); got "
                f"{tuple(got[0].shape)} and {tuple(got[1].shape)}. Split the 4H pre-activations into four "
                "blocks of H along the last dimension.")
    if _close(got[0], c_exp) and _close(got[1], h_exp):
        return "you returned (c_t, h_t); return (h_t, c_t), as torch.nn.LSTMCell does."
    for kwargs, hint in _LSTM_MISTAKES:
        if _same_pair(got, _variant(*args, **kwargs)):
            return hint
    for perm in itertools.permutations(GATE_ORDER):
        order = "".join(perm)
        if order != GATE_ORDER and _same_pair(got, _variant(*args, order=order)):
            wrong = [f"rows {_ROWS[k]} hold the {_NAMES[GATE_ORDER[k]]}" for k in range(4) if order[k] != GATE_ORDER[k]]
            return (f"you read the four row blocks in the order {'|'.join(order)}; torch stacks them i|f|g|o ("
                    + "; ".join(wrong) + ").")
    if _close(got[1], c_exp):
        return "c_t is right but h_t is not: h_t = o_t * tanh(c_t), with o_t from rows 3H:4H."
    if _close(got[0], h_exp):
        return "h_t is right but the c_t you return is not: return the new cell state c_t."
    return None


def _lstm_case(seed: int, batch: int, inputs: int, hidden: int, zero_state: bool = False) -> tuple:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, inputs, generator=g)
    h = torch.zeros(batch, hidden) if zero_state else 0.8 * torch.randn(batch, hidden, generator=g)
    c = torch.zeros(batch, hidden) if zero_state else 1.5 * torch.randn(batch, hidden, generator=g)
    W_ih = 0.8 * torch.randn(4 * hidden, inputs, generator=g)
    W_hh = 0.8 * torch.randn(4 * hidden, hidden, generator=g)
    b_ih = 0.5 * torch.randn(4 * hidden, generator=g)
    b_hh = 0.5 * torch.randn(4 * hidden, generator=g)
    return (x, h, c, W_ih, W_hh, b_ih, b_hh)


register(Exercise(
    name="lstm_cell",
    hidden=lambda seed: [Case(_lstm_case(seed, 3, 4, 5), "a batch of 3, 4 inputs, 5 units")],
    mistakes=tuple(hint for _, hint in _LSTM_MISTAKES),
    forbidden=("LSTMCell", "nn.LSTM", "torch.lstm_cell", "_VF"),
    signature="lstm_cell(x, h, c, W_ih, W_hh, b_ih, b_hh) -> (h_t, c_t); x (B, I), h and c (B, H), "
              "W_ih (4H, I), W_hh (4H, H), b_ih and b_hh (4H,), gate rows in torch's order i|f|g|o",
    reference=_lstm_cell,
    cases=[
        Case(_lstm_case(0, 1, 3, 2), "one sequence, 3 inputs, 2 units, a state carried from before"),
        Case(_lstm_case(1, 4, 5, 3), "a batch of 4, 5 inputs, 3 units"),
        Case(_lstm_case(2, 2, 3, 4, zero_state=True), "the first step: h and c start at zero"),
    ],
    hint="pre = x @ W_ih.T + b_ih + h @ W_hh.T + b_hh; split it into i, f, g, o (H columns each); "
         "i, f, o = sigmoid, g = tanh; c_t = f * c + i * g; h_t = o * tanh(c_t).",
    diagnose=_diagnose_lstm_cell,
    same=_same_pair,
))


# --------------------------------------------------------------------------------------------
# Exercise 2: split torch's stacked weight matrix into the four gates
# --------------------------------------------------------------------------------------------

def _split_lstm_weights(weight: Tensor) -> dict[str, Tensor]:
    H = weight.shape[0] // 4
    return {gate: weight[k * H:(k + 1) * H] for k, gate in enumerate(GATE_ORDER)}


def _same_split(got: Any, expected: dict[str, Tensor]) -> bool:
    return (isinstance(got, dict) and set(got) == set(expected)
            and all(isinstance(got[k], Tensor) and got[k].shape == v.shape and torch.equal(got[k], v)
                    for k, v in expected.items()))


def _diagnose_split(args: tuple, got: Any, expected: dict[str, Tensor]) -> str | None:
    (weight,) = args
    rows, cols = weight.shape
    H = rows // 4
    if not isinstance(got, dict):
        return f"return a dict {{'i': ..., 'f': ..., 'g': ..., 'o': ...}}, not a {type(got).__name__}."
    if got and all(isinstance(v, Tensor) and v.dim() == 2 and v.shape[0] == rows and v.shape[1] < cols
                   for v in got.values()):
        return (f"you split the columns; the gates are stacked along the rows: the matrix is (4H, I) = "
                f"{tuple(weight.shape)}, so each gate is a block of H = {H} rows (dim 0).")
    if len(got) == 3 and all(isinstance(v, Tensor) and v.shape == (rows // 3, cols) for v in got.values()):
        return "an LSTM stacks four blocks (i, f, g, o), not three: each gate has rows // 4 rows."
    if set(got) != set(GATE_ORDER):
        return f"the keys should be 'i', 'f', 'g', 'o' (torch's names); got {sorted(map(str, got))}."
    if not all(isinstance(v, Tensor) for v in got.values()):
        return "each value should be a tensor (a block of rows of the weight matrix)."
    shapes = {k: tuple(v.shape) for k, v in got.items()}
    if any(s != (H, cols) for s in shapes.values()):
        return f"each gate's block should have shape (H, I) = ({H}, {cols}); got {shapes}."
    blocks = [weight[k * H:(k + 1) * H] for k in range(4)]
    found = {}
    for gate, value in got.items():
        for k, block in enumerate(blocks):
            if torch.equal(value, block):
                found[gate] = k
    if len(found) == 4:
        wrong = [f"'{gate}' should be rows {k * H}:{(k + 1) * H} (block {k + 1}), you took block {found[gate] + 1}"
                 for k, gate in enumerate(GATE_ORDER) if found[gate] != k]
        return "torch's order is i|f|g|o: " + "; ".join(wrong) + "."
    return None


def _weight_case(rows_per_gate: int, cols: int) -> tuple:
    # every entry tells where it comes from: 100 * row + column
    r = torch.arange(4 * rows_per_gate, dtype=torch.float32)[:, None]
    c = torch.arange(cols, dtype=torch.float32)[None, :]
    return (100 * r + c,)


register(Exercise(
    name="split_lstm_weights",
    forbidden=("nn.LSTM",),
    signature="split_lstm_weights(weight) -> {'i': W_i, 'f': W_f, 'g': W_g, 'o': W_o}; weight is torch's "
              "weight_ih_l0 (4H, I) or weight_hh_l0 (4H, H); each block (H, I) or (H, H)",
    reference=_split_lstm_weights,
    cases=[
        Case(_weight_case(2, 3), "H = 2 units, I = 3 inputs"),
        Case(_weight_case(3, 2), "H = 3 units, I = 2 inputs"),
        Case(_weight_case(4, 4), "a square weight_hh of H = 4 units"),
    ],
    hidden=lambda seed: [Case(_weight_case(5 + seed % 3, 3), "H = 5 to 7 units, I = 3 inputs")],
    hint="H = weight.shape[0] // 4; gate k (in the order i, f, g, o) is weight[k*H:(k+1)*H].",
    diagnose=_diagnose_split,
    same=_same_split,
))


# --------------------------------------------------------------------------------------------
# Exercise 3: predict, then measure -- how far back can the vanilla RNN reach?
# --------------------------------------------------------------------------------------------

LEARNED_BELOW = 0.2             # "learns the task": validation MSE below a fifth of the mean-guessing baseline's
# (why a fifth: the margins measured over seeds and machines, in seqlab.experiments.rnn_horizon)


def learned(run: Any) -> bool:
    """Whether an adding-problem run (a :class:`seqlab.long_range.MemoryRun`) learned the task: its final
    validation MSE is below ``LEARNED_BELOW`` times that of always answering the mean."""
    return run.mse < LEARNED_BELOW * run.baseline["mse"]


def _horizon_answer() -> dict[int, bool]:
    return {T: learned(run) for T, run in measure_rnn_horizon().items()}


def _same_answer(got: Any, expected: dict[int, bool]) -> bool:
    return isinstance(got, dict) and set(got) == set(expected) and all(got[T] is expected[T] for T in expected)


def _diagnose_horizon(args: tuple, got: Any, expected: dict[int, bool]) -> str | None:
    if not isinstance(got, dict) or set(got) != set(expected) or not all(isinstance(v, bool) for v in got.values()):
        shown = sorted(got) if isinstance(got, dict) else type(got).__name__
        return (f"answer with a dict {{10: True or False, 30: True or False}} (does the RNN learn the task at that "
                f"length?); got {shown}.")
    runs = measure_rnn_horizon()
    measured = "; ".join(f"T = {T}: MSE {run.mse:.4f} against the baseline's {run.baseline['mse']:.3f}, "
                         f"{'learned' if learned(run) else 'not learned'}" for T, run in runs.items())
    why = []
    for T in expected:
        if got[T] and not expected[T]:
            why.append(f"at T = {T} it does not: the first marker lies {T // 2} to {T} steps before the answer, and the "
                       f"signal from it shrinks at every step it travels (notebook 3)")
        elif expected[T] and not got[T]:
            why.append(f"at T = {T} it does: from {T // 2} to {T} steps back enough of the signal still arrives, so "
                       f"T = 50 failed because of the distance, not because adding is too hard for an RNN")
    return f"measured: {measured}. " + "; ".join(why) + "."


register(Exercise(
    name="predict_rnn_horizon",
    signature="predict_rnn_horizon() -> {10: bool, 30: bool}: does the vanilla RNN of section 6 learn the adding "
              "problem (MSE below a fifth of the baseline's) with sequences of T = 10 and of T = 30 steps "
              "(checked against a measurement)",
    reference=_horizon_answer,
    cases=[Case((), "the RNN of section 6 trained on sequences of T = 10 and T = 30 steps")],
    hint="the first marker lies in the first half, T/2 to T steps before the answer the loss judges.",
    diagnose=_diagnose_horizon,
    same=_same_answer,
))
