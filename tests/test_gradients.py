"""seqlab.gradients: the hand-written BPTT against autograd, the gradient-norm measurements,
the activation table, input sensitivity, and clear errors for bad input."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from seqlab.gradients import (ACTIVATIONS, autograd_gradient_norms, bptt_step, gradient_norms_through_time,
                              input_sensitivity, linear_gradient_norms, memory_gradient_norms, random_rnn_weights,
                              rnn_backward, rnn_forward, delayed_recall, train_with_bptt,
                              scale_to_spectral_radius, spectral_radius)
from seqlab.nn import RNN
from seqlab.models.charlm import CharLM, CharLMConfig

T, B, I, H = 7, 3, 4, 5


def setup_rnn(seed: int = 0, rho: float = 0.9):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, I, generator=g, dtype=torch.float64)
    h0 = torch.randn(B, H, generator=g, dtype=torch.float64)
    W_h, W_x, b = random_rnn_weights(H, I, rho, seed=seed)
    return x, h0, W_h, W_x, b


def test_forward_is_the_recurrence_and_matches_seqlab_rnn():
    x, h0, W_h, W_x, b = setup_rnn()
    states = rnn_forward(x, W_h, W_x, b, h0)
    assert states.shape == (T + 1, B, H) and torch.equal(states[0], h0)
    assert torch.allclose(states[1], torch.tanh(h0 @ W_h.T + x[0] @ W_x.T + b))
    rnn = RNN(I, H).double()
    with torch.no_grad():
        rnn.weight_hh_l0.copy_(W_h), rnn.weight_ih_l0.copy_(W_x), rnn.bias_ih_l0.copy_(b), rnn.bias_hh_l0.zero_()
        output, _ = rnn(x, h0[None])
    assert torch.allclose(states[1:], output, atol=1e-12)
    assert torch.equal(rnn_forward(x, W_h, W_x, b)[0], torch.zeros(B, H, dtype=torch.float64))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hand_written_bptt_equals_autograd(seed):
    x, h0, W_h, W_x, b = setup_rnn(seed, rho=1.3)
    U = torch.randn(6, H, generator=torch.Generator().manual_seed(seed + 10), dtype=torch.float64)

    def loss_fn(states):  # a loss that reads every state
        return (states[1:] @ U.T).sin().sum()

    leaves = [t.clone().requires_grad_() for t in (W_h, W_x, b, h0)]
    expected = torch.autograd.grad(loss_fn(rnn_forward(x, *leaves[:3], leaves[3])), leaves)

    states = rnn_forward(x, W_h, W_x, b, h0)
    states_leaf = states.clone().requires_grad_()
    (direct,) = torch.autograd.grad(loss_fn(states_leaf), states_leaf)
    grads = rnn_backward(x, states, W_h, direct[1:])
    for got, want in zip((grads.W_h, grads.W_x, grads.b, grads.h0), expected):
        assert torch.allclose(got, want, atol=1e-12)
    assert torch.equal(grads.dh[0], grads.h0) and grads.dh.shape == (T + 1, B, H)


def test_bptt_step_shapes_and_values():
    g = torch.Generator().manual_seed(0)
    dh, h, h_prev = (torch.randn(B, H, generator=g) for _ in range(3))
    h, h_prev = torch.tanh(h), torch.tanh(h_prev)
    x_t, W_h = torch.randn(B, I, generator=g), torch.randn(H, H, generator=g)
    dW_h, dW_x, db, dh_prev = bptt_step(dh, h, h_prev, x_t, W_h)
    assert (dW_h.shape, dW_x.shape, db.shape, dh_prev.shape) == ((H, H), (H, I), (H,), (B, H))
    delta = dh * (1 - h ** 2)
    assert torch.allclose(dh_prev, torch.einsum("ij,bi->bj", W_h, delta))


def test_spectral_radius_and_rescaling():
    W = torch.diag(torch.tensor([0.5, -2.0, 1.0]))
    assert spectral_radius(W) == pytest.approx(2.0)
    assert spectral_radius(scale_to_spectral_radius(W, 0.7)) == pytest.approx(0.7)
    W_h, _, _ = random_rnn_weights(16, 3, 1.7, seed=4)
    assert spectral_radius(W_h) == pytest.approx(1.7)
    with pytest.raises(ValueError, match="spectral radius 0"):
        scale_to_spectral_radius(torch.zeros(3, 3), 1.0)
    with pytest.raises(ValueError, match="square matrix"):
        spectral_radius(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="rho should be a finite number"):
        scale_to_spectral_radius(W, -1.0)


def test_gradient_norms_vanish_below_one_and_explode_well_above():
    x = torch.randn(40, 8, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    norms = {}
    for rho in (0.5, 3.0):
        W_h, W_x, b = random_rnn_weights(32, 4, rho, seed=0)
        norms[rho] = gradient_norms_through_time(x, W_h, W_x, b)
        assert norms[rho].shape == (41,) and norms[rho][0] == pytest.approx(1.0)
    assert norms[0.5][40] < 1e-10 and norms[3.0][40] > 1e3
    # the linear part alone grows like rho^k
    W_h, _, _ = random_rnn_weights(32, 4, 1.2, seed=0)
    linear = linear_gradient_norms(W_h, 80)
    assert linear[80] ** (1 / 80) == pytest.approx(1.2, rel=0.05)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_derivatives_match_autograd(name):
    act = ACTIVATIONS[name]
    z = torch.linspace(-6, 6, 241, dtype=torch.float64).requires_grad_()
    (expected,) = torch.autograd.grad(act.f(z).sum(), z)
    assert torch.allclose(act.df(z.detach()), expected, atol=1e-12)


def test_activation_derivative_bounds():
    z = torch.linspace(-10, 10, 20001, dtype=torch.float64)
    assert ACTIVATIONS["sigmoid"].df(z).max().item() == pytest.approx(0.25)
    assert ACTIVATIONS["tanh"].df(z).max().item() == pytest.approx(1.0)
    assert ACTIVATIONS["GELU"].df(z).max().item() == pytest.approx(1.1289, abs=1e-3)


def test_input_sensitivity_is_the_gradient_of_the_last_loss():
    torch.manual_seed(0)
    model = CharLM(CharLMConfig(vocab_size=11, cell="rnn", embed_size=6, hidden_size=8))
    g = torch.Generator().manual_seed(0)
    x, y = torch.randint(0, 11, (3, 9), generator=g), torch.randint(0, 11, (3, 9), generator=g)
    model.train()
    sens = input_sensitivity(model, x, y)
    assert sens.shape == (9,) and model.training, "returns one value per distance and restores the mode"
    e = model.embed(x).detach().requires_grad_()
    out, _ = model.rnn(e)
    loss = F.cross_entropy(model.head(out[:, -1]), y[:, -1], reduction="sum")
    (grad,) = torch.autograd.grad(loss, e)
    assert torch.allclose(sens, grad.norm(dim=-1).mean(0).flip(0), atol=1e-6)
    assert all(p.grad is None for p in model.parameters()), "measuring leaves the parameters' gradients alone"


def _char_model(cell: str, **kwargs) -> tuple[CharLM, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = CharLM(CharLMConfig(vocab_size=11, cell=cell, embed_size=6, hidden_size=8, **kwargs)).double()
    g = torch.Generator().manual_seed(1)
    return model, torch.randint(0, 11, (3, 9), generator=g), torch.randint(0, 11, (3, 9), generator=g)


def test_memory_gradient_of_an_rnn_is_the_hand_written_bptt():
    model, x, y = _char_model("rnn")
    model.train()
    norms = memory_gradient_norms(model, x, y)
    assert norms.shape == (9,) and model.training, "one value per distance, and the mode comes back"
    assert all(p.grad is None for p in model.parameters()), "measuring leaves the parameters' gradients alone"
    rnn = model.rnn
    e = model.embed(x).detach().transpose(0, 1)                                  # (T, B, E)
    states = rnn_forward(e, rnn.weight_hh_l0.detach(), rnn.weight_ih_l0.detach(),
                         (rnn.bias_ih_l0 + rnn.bias_hh_l0).detach())             # (T+1, B, H)
    p = torch.softmax(model.head(states[-1]), dim=-1).detach()
    dL_dh = torch.zeros_like(states[1:])
    dL_dh[-1] = (p - F.one_hot(y[:, -1], 11)) @ model.head.weight.detach()       # cross-entropy through the head
    dh = rnn_backward(e, states, rnn.weight_hh_l0.detach(), dL_dh).dh             # (T+1, B, H), t = 0 .. T
    assert torch.allclose(norms, dh[1:].norm(dim=-1).mean(1).flip(0), rtol=1e-9, atol=1e-12)


def test_memory_gradient_of_an_lstm_is_taken_at_the_cell_state():
    model, x, y = _char_model("lstm")
    norms = memory_gradient_norms(model, x, y)
    out, _, trace = model.rnn(model.embed(x), return_trace=True)
    o_T, c_T = trace.get("o")[:, -1], trace.get("c")[:, -1]                       # (B, H)
    p = torch.softmax(model.head(out[:, -1]), dim=-1)
    dL_dh = (p - F.one_hot(y[:, -1], 11)) @ model.head.weight                    # (B, H)
    dL_dc = dL_dh * o_T * (1 - torch.tanh(c_T) ** 2)                              # h_T = o_T tanh(c_T)
    assert torch.allclose(norms[0], dL_dc.norm(dim=-1).mean().detach(), rtol=1e-9)
    assert (norms > 0).all() and norms.shape == (9,)


def test_memory_gradient_names_what_it_measures():
    model, x, y = _char_model("gru")
    with pytest.raises(ValueError, match="one-layer, one-direction LSTM or tanh RNN, got 'GRU'"):
        memory_gradient_norms(model, x, y)
    model, x, y = _char_model("lstm", num_layers=2)
    with pytest.raises(ValueError, match="with 2 layer"):
        memory_gradient_norms(model, x, y)
    with pytest.raises(ValueError, match="ids of shape"):
        memory_gradient_norms(model, x.float(), y)


@pytest.mark.parametrize("bad, match", [
    (dict(x=torch.zeros(3, 4)), r"x should have shape \(T, B, I\)"),
    (dict(W_x=torch.zeros(5, 3)), r"W_x should have shape \(H, I\) = \(5, 4\)"),
    (dict(W_h=torch.zeros(5, 4)), r"W_h should be square"),
    (dict(b=torch.zeros(4)), r"b should have shape \(H,\) = \(5,\)"),
    (dict(h0=torch.zeros(2, 5)), r"h0 should have shape \(B, H\) = \(3, 5\)"),
    (dict(x=torch.zeros(0, 3, 4)), r"at least one time step"),
    (dict(x=torch.zeros(7, 3, 4, dtype=torch.long)), r"floating-point tensor, got dtype torch.int64"),
    (dict(x=torch.zeros(7, 3, 4, dtype=torch.float64)), r"share one dtype"),
])
def test_bad_input_names_expected_and_actual(bad, match):
    args = dict(x=torch.zeros(7, 3, 4), W_h=torch.zeros(5, 5), W_x=torch.zeros(5, 4), b=torch.zeros(5), h0=None)
    args.update(bad)
    with pytest.raises((ValueError, TypeError), match=match):
        rnn_forward(args["x"], args["W_h"], args["W_x"], args["b"], args["h0"])


def test_backward_and_sensitivity_shape_errors():
    x, h0, W_h, W_x, b = setup_rnn()
    states = rnn_forward(x, W_h, W_x, b, h0)
    with pytest.raises(ValueError, match=r"dL_dh should be \(T, B, H\) = \(7, 3, 5\)"):
        rnn_backward(x, states, W_h, torch.zeros_like(states))
    with pytest.raises(ValueError, match=r"states should be \(T\+1, B, H\)"):
        rnn_backward(x, states[1:], W_h, torch.zeros_like(states[1:]))
    model = CharLM(CharLMConfig(vocab_size=5, cell="rnn", embed_size=3, hidden_size=4))
    with pytest.raises(ValueError, match="ids of shape"):
        input_sensitivity(model, torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="same shape"):
        input_sensitivity(model, torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))
    assert math.isfinite(float(linear_gradient_norms(torch.eye(3), 0)[0]))


def test_a_replacement_step_runs_the_loop_and_autograd_measures_the_same_norms():
    x, h0, W_h, W_x, b = setup_rnn(rho=1.2)
    by_hand = gradient_norms_through_time(x, W_h, W_x, b, h0=h0)
    same_step = gradient_norms_through_time(x, W_h, W_x, b, h0=h0, step=lambda *args: bptt_step(*args))
    assert torch.equal(by_hand, same_step) and by_hand.shape == (T + 1,)
    assert torch.allclose(autograd_gradient_norms(x, W_h, W_x, b, h0=h0), by_hand, rtol=1e-12, atol=0)

    def no_tanh_derivative(dh_t, h_t, h_prev, x_t, W_h):       # a usual slip: delta = dh_t
        return dh_t.T @ h_prev, dh_t.T @ x_t, dh_t.sum(0), dh_t @ W_h
    slipped = gradient_norms_through_time(x, W_h, W_x, b, h0=h0, step=no_tanh_derivative)
    assert slipped[0] == by_hand[0] and (slipped[1:] > by_hand[1:]).all()     # tanh' <= 1 no longer damps it

    def transposed(dh_t, h_t, h_prev, x_t, W_h):
        dW_h, dW_x, db, dh_prev = bptt_step(dh_t, h_t, h_prev, x_t, W_h)
        return dW_h, dW_x.T, db, dh_prev
    with pytest.raises(ValueError, match=r"should return dW_x of shape \(5, 4\), got \(4, 5\)"):
        gradient_norms_through_time(x, W_h, W_x, b, step=transposed)


# -- a tiny RNN trained by a BPTT step (notebook 03's watch) ------------------------------------------------
def test_delayed_recall_targets_are_the_symbols_read_delay_steps_earlier():
    x, y = delayed_recall(5, length=9, symbols=3, delay=2, seed=1)
    assert x.shape == (9, 5, 3) and x.dtype == torch.float64 and y.shape == (9, 5)
    assert (y[:2] == -100).all() and torch.equal(y[2:], x.argmax(-1)[:-2])
    with pytest.raises(ValueError, match="delay should be between 1 and length - 1"):
        delayed_recall(2, length=4, delay=4)


def _slip_transposed(dh_t, h_t, h_prev, x_t, W_h):
    delta = dh_t * (1 - h_t ** 2)
    return delta.T @ h_prev, delta.T @ x_t, delta.sum(0), delta @ W_h.T


def _slip_tanh_at_h_prev(dh_t, h_t, h_prev, x_t, W_h):
    delta = dh_t * (1 - h_prev ** 2)
    return delta.T @ h_prev, delta.T @ x_t, delta.sum(0), delta @ W_h


def _slip_db_mean(dh_t, h_t, h_prev, x_t, W_h):
    delta = dh_t * (1 - h_t ** 2)
    return delta.T @ h_prev, delta.T @ x_t, delta.mean(0), delta @ W_h


def test_training_with_the_reference_step_is_autograds_run_and_two_slips_fall_behind():
    exact, reference = train_with_bptt(steps=150), train_with_bptt(bptt_step, steps=150)
    assert max(abs(a - b) for a, b in zip(exact.losses, reference.losses)) < 1e-9
    assert reference.accuracy > 0.95 and max(reference.first_step_error.values()) < 1e-12
    learned = sum(reference.losses[-50:]) / 50
    for slip in (_slip_transposed, _slip_tanh_at_h_prev):
        run = train_with_bptt(slip, steps=150)
        assert sum(run.losses[-50:]) / 50 > 4 * learned and min(run.first_step_error.values()) > 0.1, slip.__name__


def test_a_slip_that_training_hides_still_shows_in_the_first_step_error():
    run = train_with_bptt(_slip_db_mean, steps=5, batch=32)
    errors = run.first_step_error
    assert abs(errors["b"] - (1 - 1 / 32)) < 1e-9 and max(errors["W_h"], errors["W_x"], errors["h_0"]) < 1e-12


def test_a_step_that_blows_up_ends_the_run_with_nan_and_no_recall():
    def no_tanh_slope(dh_t, h_t, h_prev, x_t, W_h):
        return dh_t.T @ h_prev, dh_t.T @ x_t, dh_t.sum(0), dh_t @ W_h

    run = train_with_bptt(no_tanh_slope, steps=150)
    assert len(run.losses) == 150 and math.isnan(run.losses[-1]) and run.accuracy == 0.0
