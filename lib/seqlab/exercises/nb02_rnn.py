"""Notebook 02 — the vanilla RNN: one cell step, softmax with temperature, counting parameters, and a
prediction of an untrained model's loss."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, randn64, register, tensor_hint, tensors_close
from seqlab.experiments.untrained_loss import measure_untrained_loss


_randn, _tensor_hint = randn64, tensor_hint


def _same_tensor(got: Any, expected: Tensor) -> bool:
    return tensors_close(got, expected, rtol=1e-6, atol=1e-9)


# -- 1. one step of the RNN cell ----------------------------------------------------------------
def _rnn_cell_step(x_t: Tensor, h_prev: Tensor, W_h: Tensor, W_x: Tensor, b: Tensor) -> Tensor:
    return torch.tanh(h_prev @ W_h.T + x_t @ W_x.T + b)


def _cell_case(B: int, I: int, H: int, seed: int) -> tuple:
    g = seed * 10
    return _randn(B, I, seed=g), torch.tanh(_randn(B, H, seed=g + 1)), 0.5 * _randn(H, H, seed=g + 2), \
        0.5 * _randn(H, I, seed=g + 3), _randn(H, seed=g + 4)


def _diagnose_cell(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = _tensor_hint(got, expected)
    if hint:
        return hint
    x_t, h_prev, W_h, W_x, b = args
    a = h_prev @ W_h.T + x_t @ W_x.T + b
    candidates = {
        "the nonlinearity is wrong: you used the sigmoid; the vanilla RNN of the lectures uses tanh.": torch.sigmoid(a),
        "the nonlinearity is wrong: you used ReLU; the lectures' RNN (and torch's default) uses tanh.": torch.relu(a),
        "the nonlinearity is missing: h_t = tanh(W_h h_{t-1} + W_x x_t + b).": a,
        "the bias is missing: add b inside the tanh.": torch.tanh(a - b),
        "the bias belongs inside the tanh: tanh(W_h h_{t-1} + W_x x_t + b), not tanh(...) + b.": torch.tanh(a - b) + b,
    }
    candidates["W_h is not transposed: with one sequence per row, W_h h_{t-1} is h_prev @ W_h.T."] = \
        torch.tanh(h_prev @ W_h + x_t @ W_x.T + b)
    if W_h.shape == W_x.shape:  # only then do swapped or untransposed W_x run at all
        candidates |= {
            "W_h and W_x swapped roles: W_h multiplies the previous state h_{t-1}, W_x the input x_t.":
                torch.tanh(h_prev @ W_x.T + x_t @ W_h.T + b),
            "W_x is not transposed: with one sequence per row, W_x x_t is x_t @ W_x.T.":
                torch.tanh(h_prev @ W_h.T + x_t @ W_x + b),
            "W_h and W_x are both not transposed: with one sequence per row, W h is h @ W.T.":
                torch.tanh(h_prev @ W_h + x_t @ W_x + b),
        }
    for message, value in candidates.items():
        if _same_tensor(got, value):
            return message
    return None


register(Exercise(
    name="rnn_cell_step",
    hidden=lambda seed: [Case(_cell_case(3, 4, 5, seed=seed), "a batch of 3, 4 input features, 5 units")],
    forbidden=("RNNCell", "nn.RNN", "torch.rnn_tanh_cell", "_VF"),
    signature="rnn_cell_step(x_t, h_prev, W_h, W_x, b) -> h_t; x_t: (B, I), h_prev: (B, H), W_h: (H, H), "
              "W_x: (H, I), b: (H,), h_t: (B, H)",
    reference=_rnn_cell_step,
    cases=[
        Case(_cell_case(1, 2, 3, seed=0), "one sequence, 2 input features, 3 units"),
        Case(_cell_case(4, 3, 3, seed=1), "a batch of 4, as many input features as units (I = H = 3)"),
        Case(_cell_case(2, 5, 4, seed=2), "a batch of 2, 5 input features, 4 units",
             hint="with I != H the shapes tell the matrices apart: W_x is (H, I) and multiplies x_t, W_h is "
                  "(H, H) and multiplies h_prev; with one sequence per row, W x is x @ W.T."),
    ],
    hint="h_t = tanh(W_h h_{t-1} + W_x x_t + b); with one sequence per row: "
         "torch.tanh(h_prev @ W_h.T + x_t @ W_x.T + b).",
    diagnose=_diagnose_cell,
    same=_same_tensor,
))


# -- 2. softmax with temperature ----------------------------------------------------------------
def _softmax_temperature(logits: Tensor, tau: float) -> Tensor:
    z = logits / tau
    z = z - z.max(dim=-1, keepdim=True).values      # exp of large numbers overflows; softmax is shift-invariant
    e = torch.exp(z)
    return e / e.sum(dim=-1, keepdim=True)


def _diagnose_softmax(args: tuple, got: Any, expected: Tensor) -> str | None:
    hint = _tensor_hint(got, expected)
    if hint:
        return hint
    logits, tau = args
    if torch.isnan(got).any() or torch.isinf(got).any():
        return ("exp(1000) overflows to inf, and inf / inf is nan. Softmax does not change when you subtract "
                "the same number from every logit: subtract the largest one first.")
    if _same_tensor(got, _softmax_temperature(logits * tau, 1.0)):
        return "divide the logits by the temperature, z / tau, rather than multiply: tau < 1 should sharpen."
    if _same_tensor(got, torch.exp(logits / tau)) or _same_tensor(
            got, torch.exp(logits / tau - (logits / tau).max(dim=-1, keepdim=True).values)):
        return "normalise: divide the exponentials by their sum so that the probabilities add up to 1."
    if logits.dim() == 2:
        e = torch.exp(logits / tau - (logits / tau).max())
        if _same_tensor(got, e / e.sum(dim=0, keepdim=True)) or _same_tensor(got, e / e.sum()):
            return "normalise each row on its own: sum over the last dimension (dim=-1, keepdim=True)."
    if _same_tensor(got, _softmax_temperature(logits, 1.0)):
        return "the temperature is ignored: divide the logits by tau before the softmax."
    return None


register(Exercise(
    name="softmax_temperature",
    signature="softmax_temperature(logits: Tensor, tau: float) -> Tensor, probabilities over the last dimension",
    reference=_softmax_temperature,
    cases=[
        Case((torch.tensor([2.0, 1.0, 0.1], dtype=torch.float64), 1.0), "tau = 1, the plain softmax"),
        Case((torch.tensor([2.0, 1.0, 0.1], dtype=torch.float64), 0.5), "tau = 0.5 sharpens"),
        Case((torch.tensor([2.0, 1.0, 0.1], dtype=torch.float64), 2.0), "tau = 2 flattens"),
        Case((torch.tensor([[1.0, 2.0, 3.0], [3.0, 0.0, -3.0]], dtype=torch.float64), 0.7), "a batch of two rows"),
        Case((torch.tensor([1000.0, 999.0, 0.0], dtype=torch.float64), 1.0), "large logits"),
    ],
    hidden=lambda seed: [Case((randn64(2, 5, seed=seed) * 3, 0.8), "a batch of two rows of five logits, tau = 0.8")],
    hint="p_i = exp(z_i / tau) / sum_j exp(z_j / tau), over the last dimension.",
    diagnose=_diagnose_softmax,
    same=_same_tensor,
))


# -- 3. counting the parameters of an RNN layer ---------------------------------------------------
def _rnn_parameter_count(input_size: int, hidden_size: int, num_layers: int = 1, bidirectional: bool = False) -> int:
    directions = 2 if bidirectional else 1
    total = 0
    for layer in range(num_layers):
        layer_input = input_size if layer == 0 else hidden_size * directions
        per_direction = hidden_size * layer_input + hidden_size * hidden_size + 2 * hidden_size   # W_ih, W_hh, b_ih, b_hh
        total += directions * per_direction
    return total


def _diagnose_count(args: tuple, got: Any, expected: int) -> str | None:
    I, H, L, bi = args
    D = 2 if bi else 1
    if not isinstance(got, int) or isinstance(got, bool):
        if isinstance(got, Tensor) and got.numel() == 1:
            return "return a plain int: int(...) of your tensor."
        if not isinstance(got, float) or got != int(got):
            return f"return an int, not a {type(got).__name__}."
    if got == expected - H * L * D:
        return "torch.nn.RNN keeps two bias vectors per layer and direction, b_ih and b_hh (their sum is b)."
    if got == expected - 2 * H * L * D:
        return "count the biases too: two vectors of H per layer and direction (b_ih and b_hh)."
    if got == sum(H * I + H * H + 2 * H for _ in range(L)) * D and L > 1:
        return "only the first layer reads the input; the layers above read the layer below, H * D features."
    if D == 2 and L > 1 and got == D * (H * I + H * H + 2 * H) + (L - 1) * D * (H * H + H * H + 2 * H):
        return "a layer above a bidirectional layer reads both directions: its input has 2 * H features."
    if D == 2 and got * 2 == expected:
        return "a bidirectional layer has a second, separate set of weights for the reverse direction."
    if got == H * I + H * H + 2 * H and L > 1:
        return "count every layer: num_layers layers, each with its own weights."
    return None


register(Exercise(
    name="rnn_parameter_count",
    signature="rnn_parameter_count(input_size, hidden_size, num_layers=1, bidirectional=False) -> int, "
              "as torch.nn.RNN counts them",
    reference=_rnn_parameter_count,
    cases=[
        Case((10, 20, 1, False), "one layer"),
        Case((64, 256, 1, False), "the RNN layer of the Shakespeare model"),
        Case((10, 20, 2, False), "two stacked layers"),
        Case((10, 20, 1, True), "one bidirectional layer"),
        Case((10, 20, 3, True), "three bidirectional layers"),
    ],
    hidden=lambda seed: [Case((7 + seed % 5, 13, 2, True), "two bidirectional layers of 13 units")],
    hint="per layer and direction: W_ih (H x layer input) + W_hh (H x H) + b_ih (H) + b_hh (H); the first "
         "layer's input is input_size, the others' is hidden_size * num_directions.",
    diagnose=_diagnose_count,
))


# -- 4. predict, then measure: the loss of a model that has not been trained -----------------------------
UNTRAINED_TOLERANCE = 0.1        # nats


def _untrained_loss() -> float:
    return measure_untrained_loss()[0]


def _same_loss(got: Any, expected: float) -> bool:
    return (isinstance(got, (int, float)) and not isinstance(got, bool)
            and abs(float(got) - expected) <= UNTRAINED_TOLERANCE)


def _diagnose_untrained(args: tuple, got: Any, expected: float) -> str | None:
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return f"give your prediction as a number of nats (a float), not a {type(got).__name__}."
    got = float(got)
    V = measure_untrained_loss()[1]
    said = f"measured {expected:.3f} nats, you predicted {got:.3f}"
    if abs(got - V) < 1 or abs(got - math.log2(V)) < 0.05:
        return (f"{said}. {V} is the perplexity of a uniform guess and log2 {V} = {math.log2(V):.2f} its bits; "
                f"the loss is in nats: -ln(1/{V}) = ln {V} = {math.log(V):.3f}.")
    if got <= 0 or abs(got - 1 / V) < 0.05:
        return (f"{said}. The loss is -ln p(target), not a probability: with p = 1/{V} for every character it "
                f"is -ln(1/{V}) = {math.log(V):.2f}.")
    if got > expected:
        return (f"{said}. Small random weights give small logits, so the softmax is close to uniform over the "
                f"{V} characters: about ln {V} = {math.log(V):.3f}.")
    return (f"{said}. Before training the model knows nothing about the text, so it has no reason to beat a "
            f"uniform guess over {V} characters, ln {V} = {math.log(V):.3f}; the random logits add a little on top.")


register(Exercise(
    name="predict_untrained_loss",
    signature="predict_untrained_loss() -> float: the validation loss in nats of the character RNN before any "
              f"training step (checked against a measurement, +-{UNTRAINED_TOLERANCE})",
    reference=_untrained_loss,
    cases=[Case((), "CharLM(rnn, 64, 256) just initialised, one validation batch of 32 x 64 characters")],
    hint="an untrained model spreads its bet almost evenly over the V characters; the loss is -ln p(target).",
    diagnose=_diagnose_untrained,
    same=_same_loss,
))
