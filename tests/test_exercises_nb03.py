"""Notebook 03's exercises: typical wrong answers get the hint that names what is wrong."""

from __future__ import annotations

import pytest
import torch

from seqlab.exercises import check

from exercise_helpers import failure_message


def step_from(delta_fn, **overrides):
    def step(dh_t, h_t, h_prev, x_t, W_h):
        delta = delta_fn(dh_t, h_t, h_prev)
        out = {"dW_h": delta.T @ h_prev, "dW_x": delta.T @ x_t, "db": delta.sum(0), "dh_prev": delta @ W_h}
        for key, fn in overrides.items():
            out[key] = fn(delta, dh_t, h_t, h_prev, x_t, W_h)
        return out["dW_h"], out["dW_x"], out["db"], out["dh_prev"]
    return step


right = lambda dh, h, hp: dh * (1 - h ** 2)  # noqa: E731


@pytest.mark.parametrize("wrong, hints", [
    (step_from(lambda dh, h, hp: dh), ["dW_h, dW_x, db, dh_prev are wrong", "skipped the tanh derivative"]),
    (step_from(lambda dh, h, hp: dh * (1 - h)), ["square h_t"]),
    (step_from(lambda dh, h, hp: dh * (1 - hp ** 2)), ["not to h_prev"]),
    (step_from(lambda dh, h, hp: dh * (1 - torch.tanh(h) ** 2)), ["without applying tanh again"]),
    (step_from(right, dW_h=lambda d, dh, h, hp, x, W: d.T @ h), ["dW_h is wrong (dW_x, db, dh_prev are right)",
                                                                "state that entered the step"]),
    (step_from(right, dW_h=lambda d, dh, h, hp, x, W: hp.T @ d), ["dW_h is transposed"]),
    (step_from(right, dW_x=lambda d, dh, h, hp, x, W: x.T @ d), ["dW_x should have shape (3, 2), got (2, 3) (transposed?)"]),
    (step_from(right, db=lambda d, dh, h, hp, x, W: d.mean(0)), ["db is wrong", "do not average"]),
    (step_from(right, dh_prev=lambda d, dh, h, hp, x, W: d @ W.T), ["dh_prev is wrong", "W_h, not W_h.T"]),
    (step_from(right, dh_prev=lambda d, dh, h, hp, x, W: dh @ W), ["passes through tanh before W_h"]),
    (step_from(right, db=lambda d, dh, h, hp, x, W: d), ["db should have shape"]),
    (lambda *args: 1.0, ["return a tuple (dW_h, dW_x, db, dh_prev)"]),
])
def test_bptt_step_hints(wrong, hints):
    text = failure_message("bptt_step", wrong)
    for hint in hints:
        assert hint in text, text


def global_norm(grads):
    return torch.sqrt(sum((g ** 2).sum() for g in grads))


@pytest.mark.parametrize("wrong, hint", [
    (lambda grads, c: [g * min(1.0, c / float(g.norm())) for g in grads], "clipped each tensor by its own norm"),
    (lambda grads, c: [g * (c / global_norm(grads)) for g in grads], "already below max_norm"),
    (lambda grads, c: [g.clamp(-c, c) for g in grads], "changes the gradient's direction"),
    (lambda grads, c: [g * min(1.0, c / sum(float(t.norm()) for t in grads)) for g in grads],
     "not the sum of the tensors' norms"),
    (lambda grads, c: [g * max(1.0, float(global_norm(grads)) / c) for g in grads], "scale is upside down"),
    (lambda grads, c: torch.cat([g.flatten() for g in grads]), "return a list of"),
])
def test_clip_grad_norm_hints(wrong, hint):
    assert hint in failure_message("clip_grad_norm", wrong)


def test_clip_grad_norm_accepts_torch_in_place_style():
    def with_torch(grads, c):
        grads = [g.clone() for g in grads]
        params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
        for p, g in zip(params, grads):
            p.grad = g
        torch.nn.utils.clip_grad_norm_(params, c)
        return [p.grad for p in params]
    assert check("clip_grad_norm", with_torch)


@pytest.mark.parametrize("wrong, hints", [
    (lambda z: (1 - torch.tanh(z), torch.sigmoid(z) * (1 - torch.sigmoid(z))), ["d_tanh: square the tanh"]),
    (lambda z: (1 - z ** 2, torch.sigmoid(z) * (1 - torch.sigmoid(z))), ["use tanh(z), not z"]),
    (lambda z: (1 - torch.tanh(z) ** 2, torch.sigmoid(z) * (1 - z)), ["d_sigmoid: use sigma(z) in both"]),
    (lambda z: (1 - torch.tanh(z) ** 2, 1 - torch.sigmoid(z) ** 2), ["pattern of tanh"]),
    (lambda z: (torch.sigmoid(z) * (1 - torch.sigmoid(z)), torch.sigmoid(z)), ["that is the sigmoid's derivative",
                                                                                "multiply by (1 - sigma(z))"]),
    (lambda z: 1 - torch.tanh(z) ** 2, ["return a tuple (d_tanh, d_sigmoid)"]),
])
def test_activation_derivative_hints(wrong, hints):
    text = failure_message("activation_derivatives", wrong)
    for hint in hints:
        assert hint in text, text


def test_gradient_growth_measurement():
    from seqlab.exercises.nb03_bptt import measure_gradient_growth
    m = measure_gradient_growth()
    assert m["tanh_low"] < m["tanh_high"], "a larger spectral radius, a larger gradient 50 steps back"
    assert abs(m["linear_factor"] - (1.1 / 0.9) ** 50) < 0.02 * (1.1 / 0.9) ** 50, "the linear part: (rho'/rho)^k"
    assert 10 < m["factor"] < m["linear_factor"] / 10, "tanh takes back much of the growth"
    for within_ten_times in (m["factor"] * 5, m["factor"] / 5):
        assert check("predict_gradient_growth", lambda: within_ten_times)


@pytest.mark.parametrize("wrong, hint", [
    (0.5, "the gradient grows"),
    (1.22, "compounds over 50 steps"),
    ((1.1 / 0.9) ** 50, "linear part's factor"),
    (1e7, "more than even the linear part"),
    (40.0, "less what tanh' takes back"),
    (-3.0, "a ratio of two norms is positive"),
    ("big", "as a number"),
])
def test_gradient_growth_hints(wrong, hint):
    assert hint in failure_message("predict_gradient_growth", lambda: wrong)
