"""Notebook 03 — BPTT and gradients: one backward step, clipping by global norm, tanh' and sigmoid', and a
prediction of how the gradient 50 steps back moves with the spectral radius."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import torch
from torch import Tensor

from seqlab.exercises._core import Case, Exercise, randn64, register, tensors_close
from seqlab.gradients import bptt_step as _bptt_step


def _tensors(*shapes: tuple[int, ...], seed: int) -> list[Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g, dtype=torch.float64) for shape in shapes]


def _close(a: Any, b: Tensor, atol: float = 1e-8) -> bool:
    return tensors_close(a, b, rtol=1e-5, atol=atol)


def _same_tensors(got: Any, expected: tuple | list) -> bool:
    if not isinstance(got, (tuple, list)) or len(got) != len(expected):
        return False
    return all(_close(g, e) for g, e in zip(got, expected))


def _as_tuple(got: Any, n: int, what: str) -> str | None:
    """A hint when ``got`` is not a tuple/list of ``n`` tensors, else None."""
    if not isinstance(got, (tuple, list)) or len(got) != n:
        kind = f"a {type(got).__name__}" + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else "")
        return f"return {what}, got {kind}."
    bad = [i for i, g in enumerate(got) if not isinstance(g, Tensor)]
    if bad:
        return f"every item should be a torch.Tensor; item {bad[0]} is a {type(got[bad[0]]).__name__}."
    return None


# -- 1. one step of BPTT ------------------------------------------------------------------------
BPTT_NAMES = ("dW_h", "dW_x", "db", "dh_prev")


def _bptt_case(B: int, H: int, I: int, seed: int) -> tuple:
    dh_t, a_t, h_prev, x_t, W_h = _tensors((B, H), (B, H), (B, H), (B, I), (H, H), seed=seed)
    return dh_t, torch.tanh(a_t), torch.tanh(h_prev), x_t, W_h


def _diagnose_bptt(args: tuple, got: Any, expected: tuple) -> str | None:
    shape_hint = _as_tuple(got, 4, "a tuple (dW_h, dW_x, db, dh_prev)")
    if shape_hint:
        return shape_hint
    dh_t, h_t, h_prev, x_t, W_h = args
    for name, g, e in zip(BPTT_NAMES, got, expected):
        if g.shape != e.shape:
            transposed = " (transposed?)" if g.dim() == 2 and g.shape == e.shape[::-1] else ""
            return f"{name} should have shape {tuple(e.shape)}, got {tuple(g.shape)}{transposed}."
    wrong = [name for name, g, e in zip(BPTT_NAMES, got, expected) if not _close(g, e)]
    right = [name for name in BPTT_NAMES if name not in wrong]
    which = f"{', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} wrong" + (
        f" ({', '.join(right)} {'is' if len(right) == 1 else 'are'} right)" if right else "")

    def step_with(delta: Tensor) -> tuple[Tensor, ...]:
        return delta.T @ h_prev, delta.T @ x_t, delta.sum(0), delta @ W_h

    wrong_deltas = {
        "you skipped the tanh derivative: first delta = dh_t * (1 - h_t**2), the gradient at the "
        "pre-activation a_t; every gradient of this step is built from it.": dh_t,
        "tanh'(a_t) = 1 - tanh(a_t)^2 = 1 - h_t**2: square h_t.": dh_t * (1 - h_t),
        "the derivative belongs to the state this step produced, h_t, not to h_prev: "
        "delta = dh_t * (1 - h_t**2).": dh_t * (1 - h_prev ** 2),
        "h_t already is tanh(a_t); tanh'(a_t) = 1 - h_t**2, without applying tanh again.": dh_t * (1 - torch.tanh(h_t) ** 2),
    }
    for hint, delta in wrong_deltas.items():
        if _same_tensors(got, step_with(delta)):
            return f"{which}. {hint}"
    delta = dh_t * (1 - h_t ** 2)
    if "dW_h" in wrong:
        if _close(got[0], delta.T @ h_t):
            return f"{which}. dW_h pairs delta_t with the state that entered the step, h_prev: delta.T @ h_prev."
        if _close(got[0], h_prev.T @ delta):
            return (f"{which}. dW_h is transposed: dW_h[i, j] = sum over the batch of delta[b, i] * h_prev[b, j], "
                    f"that is delta.T @ h_prev.")
        return f"{which}. a_t = W_h h_prev + ..., so dL/dW_h = delta_t h_prev^T, summed over the batch: delta.T @ h_prev."
    if "dW_x" in wrong:
        if _close(got[1], x_t.T @ delta):
            return f"{which}. dW_x has shape (H, I): delta.T @ x_t, not x_t.T @ delta."
        return f"{which}. a_t = ... + W_x x_t + b, so dL/dW_x = delta_t x_t^T, summed over the batch: delta.T @ x_t."
    if "db" in wrong:
        if _close(got[2], delta.mean(0)):
            return f"{which}. sum the bias gradient over the batch, do not average it (the loss is a sum)."
        return f"{which}. dL/db = delta_t, summed over the batch: delta.sum(0)."
    if _close(got[3], delta @ W_h.T):
        return (f"{which}. dL/dh_prev = W_h^T delta_t for each sequence; with one sequence per row that is "
                f"delta @ W_h (W_h, not W_h.T).")
    if _close(got[3], dh_t @ W_h):
        return f"{which}. the gradient passes through tanh before W_h: dh_prev = delta @ W_h with delta = dh_t * (1 - h_t**2)."
    return f"{which}. dL/dh_prev = W_h^T delta_t per sequence: delta @ W_h."


register(Exercise(
    name="bptt_step",
    hidden=lambda seed: [Case(_bptt_case(3, 5, 4, seed=seed), "a batch of 3, 5 units, 4 input features")],
    forbidden=("backward", "torch.autograd", "seqlab.gradients"),
    signature="bptt_step(dh_t, h_t, h_prev, x_t, W_h) -> (dW_h, dW_x, db, dh_prev); dh_t, h_t, h_prev: (B, H), "
              "x_t: (B, I), W_h: (H, H)",
    reference=_bptt_step,
    cases=[
        Case(_bptt_case(1, 3, 2, seed=0), "one sequence, 3 units, 2 input features"),
        Case(_bptt_case(4, 3, 2, seed=1), "a batch of 4 sequences"),
        Case(_bptt_case(5, 6, 4, seed=2), "a batch of 5, 6 units, 4 input features"),
    ],
    hint="delta = dh_t * (1 - h_t**2); dW_h = delta.T @ h_prev; dW_x = delta.T @ x_t; db = delta.sum(0); "
         "dh_prev = delta @ W_h.",
    diagnose=_diagnose_bptt,
    same=_same_tensors,
))


# -- 2. clipping by global norm -----------------------------------------------------------------
def _clip_grad_norm(grads: list[Tensor], max_norm: float) -> list[Tensor]:
    norm = torch.sqrt(sum((g ** 2).sum() for g in grads))
    scale = max_norm / norm if norm > max_norm else 1.0
    return [g * scale for g in grads]


def _clip_case(shapes: list[tuple[int, ...]], scale: float, max_norm: float, seed: int) -> tuple:
    return [t * scale for t in _tensors(*shapes, seed=seed)], max_norm


def _diagnose_clip(args: tuple, got: Any, expected: list) -> str | None:
    grads, max_norm = args
    hint = _as_tuple(got, len(grads), f"a list of {len(grads)} tensors, one per gradient, in the same order")
    if hint:
        return hint
    for i, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape:
            return f"tensor {i} should keep its shape {tuple(e.shape)}, got {tuple(g.shape)}."
    norm = float(torch.sqrt(sum((g ** 2).sum() for g in grads)))
    per_tensor = [g * min(1.0, max_norm / float(g.norm())) for g in grads]
    if _same_tensors(got, per_tensor):
        return ("you clipped each tensor by its own norm. Clip by the *global* norm: one scale for all tensors, "
                "computed from sqrt(sum over all tensors of their squared entries); it keeps the direction.")
    if norm <= max_norm and _same_tensors(got, [g * (max_norm / norm) for g in grads]):
        return f"the global norm ({norm:.3g}) is already below max_norm ({max_norm:g}): leave the gradients as they are."
    if _same_tensors(got, [g.clamp(-max_norm, max_norm) for g in grads]):
        return ("clamping each entry to [-max_norm, max_norm] changes the gradient's direction. Multiply every "
                "tensor by max_norm / global_norm instead.")
    summed = sum(float(g.norm()) for g in grads)
    if summed > max_norm and _same_tensors(got, [g * (max_norm / summed) for g in grads]):
        return ("the global norm is sqrt(sum of the squared norms), not the sum of the tensors' norms: "
                "torch.sqrt(sum((g ** 2).sum() for g in grads)).")
    if norm > max_norm and _same_tensors(got, [g * (norm / max_norm) for g in grads]):
        return "the scale is upside down: multiply by max_norm / norm (< 1), not norm / max_norm."
    return None


register(Exercise(
    name="clip_grad_norm",
    forbidden=("clip_grad_norm_", "utils.clip_grad_norm"),
    signature="clip_grad_norm(grads: list[Tensor], max_norm: float) -> list[Tensor], the gradients scaled "
              "so that their global norm is at most max_norm",
    reference=_clip_grad_norm,
    cases=[
        Case(_clip_case([(3, 3), (3,)], 0.1, 5.0, seed=0), "small gradients, already below max_norm"),
        Case(_clip_case([(4, 4)], 10.0, 1.0, seed=1), "one large gradient"),
        Case(_clip_case([(2, 3), (3, 3), (3,)], 1.0, 3.0, seed=2),
             "three tensors, each below max_norm, together above it"),
        Case(_clip_case([(8, 8), (8,)], 100.0, 1.0, seed=3), "an exploding gradient"),
    ],
    hidden=lambda seed: [Case(_clip_case([(2, 5), (5,)], 4.0, 1.5, seed=seed), "two gradients, max_norm = 1.5")],
    hint="norm = sqrt(sum of squares of every entry of every tensor); if norm > max_norm multiply every "
         "tensor by max_norm / norm, else return them unchanged.",
    diagnose=_diagnose_clip,
    same=_same_tensors,
))


# -- 3. the derivatives of tanh and sigmoid -----------------------------------------------------
def _activation_derivatives(z: Tensor) -> tuple[Tensor, Tensor]:
    s = torch.sigmoid(z)
    return 1 - torch.tanh(z) ** 2, s * (1 - s)


def _diagnose_derivatives(args: tuple, got: Any, expected: tuple) -> str | None:
    hint = _as_tuple(got, 2, "a tuple (d_tanh, d_sigmoid)")
    if hint:
        return hint
    (z,) = args
    d_tanh, d_sigmoid = got
    if d_tanh.shape != z.shape or d_sigmoid.shape != z.shape:
        return f"both derivatives are elementwise: shape {tuple(z.shape)}, like z."
    t, s = torch.tanh(z), torch.sigmoid(z)
    hints = []
    if not _close(d_tanh, expected[0]):
        if _close(d_tanh, 1 - t):
            hints.append("d_tanh: square the tanh: 1 - tanh(z)**2.")
        elif _close(d_tanh, 1 - z ** 2):
            hints.append("d_tanh: use tanh(z), not z: 1 - tanh(z)**2.")
        elif _close(d_tanh, s * (1 - s)):
            hints.append("d_tanh: that is the sigmoid's derivative; tanh'(z) = 1 - tanh(z)**2.")
        else:
            hints.append("d_tanh is wrong: tanh'(z) = 1 - tanh(z)**2 (its largest value is 1, at z = 0).")
    if not _close(d_sigmoid, expected[1]):
        if _close(d_sigmoid, s * (1 - z)):
            hints.append("d_sigmoid: use sigma(z) in both factors: sigma(z) * (1 - sigma(z)).")
        elif _close(d_sigmoid, 1 - s ** 2):
            hints.append("d_sigmoid: 1 - sigma^2 is the pattern of tanh; the sigmoid's is sigma(z) * (1 - sigma(z)).")
        elif _close(d_sigmoid, s):
            hints.append("d_sigmoid: multiply by (1 - sigma(z)).")
        else:
            hints.append("d_sigmoid is wrong: sigma'(z) = sigma(z) * (1 - sigma(z)) (its largest value is 1/4).")
    return " ".join(hints) or None


register(Exercise(
    name="activation_derivatives",
    forbidden=("backward", "torch.autograd"),
    signature="activation_derivatives(z: Tensor) -> (d_tanh, d_sigmoid), the derivatives of tanh and of the "
              "sigmoid at every entry of z",
    reference=_activation_derivatives,
    cases=[
        Case((torch.linspace(-3, 3, 7, dtype=torch.float64),), "z from -3 to 3"),
        Case((torch.tensor([[-20.0, 0.5], [2.0, 20.0]], dtype=torch.float64),), "saturated units (|z| = 20) in a matrix"),
        Case((torch.tensor([0.0]),), "z = 0, where both derivatives are largest"),
    ],
    hidden=lambda seed: [Case((randn64(3, 4, seed=seed) * 3,), "a 3 x 4 matrix of pre-activations")],
    hint="tanh'(z) = 1 - tanh(z)**2 and sigma'(z) = sigma(z) * (1 - sigma(z)); use torch.tanh and torch.sigmoid.",
    diagnose=_diagnose_derivatives,
    same=_same_tensors,
))


# -- 4. predict, then measure: the gradient 50 steps back, at rho = 0.9 and at rho = 1.1 -------------------
GROWTH_DISTANCE, GROWTH_RHOS = 50, (0.9, 1.1)


@lru_cache(maxsize=1)
def measure_gradient_growth() -> dict[str, float]:
    """Notebook 3's set-up (64 tanh units, 8 inputs, 60 steps of random inputs, 16 sequences, float64,
    ``random_rnn_weights(64, 8, rho, seed=0)``): ``||dL_T/dh_{T-50}||`` at rho = 0.9 and 1.1 for the tanh
    RNN, and the factor from the first to the second, for the tanh RNN and for its linear part."""
    from seqlab.gradients import gradient_norms_through_time, linear_gradient_norms, random_rnn_weights

    x = torch.randn(60, 16, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    norms = {}
    for rho in GROWTH_RHOS:
        W_h, W_x, b = random_rnn_weights(64, 8, rho, seed=0)
        norms[rho] = (float(gradient_norms_through_time(x, W_h, W_x, b)[GROWTH_DISTANCE]),
                      float(linear_gradient_norms(W_h, 60)[GROWTH_DISTANCE]))
    low, high = GROWTH_RHOS
    return {"tanh_low": norms[low][0], "tanh_high": norms[high][0], "factor": norms[high][0] / norms[low][0],
            "linear_factor": norms[high][1] / norms[low][1]}


def _gradient_factor() -> float:
    return measure_gradient_growth()["factor"]


def _within_ten_times(got: Any, expected: float) -> bool:
    return (isinstance(got, (int, float)) and not isinstance(got, bool) and got > 0
            and abs(math.log10(got) - math.log10(expected)) <= 1)


def _diagnose_growth(args: tuple, got: Any, expected: float) -> str | None:
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return f"give the factor as a number, not a {type(got).__name__}."
    if got <= 0:
        return f"a ratio of two norms is positive; you predicted {got:g}."
    m = measure_gradient_growth()
    said = (f"measured {m['tanh_low']:.1e} at rho = 0.9 and {m['tanh_high']:.1e} at rho = 1.1, a factor of "
            f"{expected:.0f}; you predicted {got:.3g}")
    if got <= 1:
        return f"{said}. A larger rho makes every one of the 50 factors larger: the gradient grows."
    if got < 10:
        return f"{said}. The change is small per step (1.1 / 0.9 = 1.22) but it compounds over 50 steps."
    if got > expected and abs(math.log10(got) - math.log10(m["linear_factor"])) <= 0.5:
        return (f"{said}. (1.1 / 0.9)^50 = {m['linear_factor']:.1e} is the linear part's factor; with tanh, "
                f"larger states saturate more units, and their tanh' < 1 holds the product back.")
    if got > expected:
        return f"{said}: more than even the linear part's (1.1 / 0.9)^50 = {m['linear_factor']:.1e}."
    return f"{said}. Each of the 50 steps scales by about 1.1 / 0.9 = 1.22 more, less what tanh' takes back."


register(Exercise(
    name="predict_gradient_growth",
    signature="predict_gradient_growth() -> float: by what factor ||dL_T/dh_{T-50}|| grows when rho(W_h) goes "
              "from 0.9 to 1.1 in section 3's tanh RNN (checked against a measurement, within 10 times)",
    reference=_gradient_factor,
    cases=[Case((), "64 tanh units, random inputs, distance 50, rho 0.9 -> 1.1")],
    hint="the linear part scales like rho^k; tanh' <= 1 can only take some of that growth back.",
    diagnose=_diagnose_growth,
    same=_within_ten_times,
))
