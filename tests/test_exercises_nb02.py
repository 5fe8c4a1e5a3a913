"""Notebook 02's exercises: typical wrong answers get the hint that names what is wrong."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.exercises import check
from seqlab.nn import RNN

from exercise_helpers import failure_message


@pytest.mark.parametrize("wrong, hint", [
    (lambda x, h, W_h, W_x, b: torch.sigmoid(h @ W_h.T + x @ W_x.T + b), "you used the sigmoid"),
    (lambda x, h, W_h, W_x, b: torch.relu(h @ W_h.T + x @ W_x.T + b), "you used ReLU"),
    (lambda x, h, W_h, W_x, b: h @ W_h.T + x @ W_x.T + b, "nonlinearity is missing"),
    (lambda x, h, W_h, W_x, b: torch.tanh(h @ W_h.T + x @ W_x.T), "bias is missing"),
    (lambda x, h, W_h, W_x, b: torch.tanh(h @ W_h.T + x @ W_x.T) + b, "bias belongs inside"),
    (lambda x, h, W_h, W_x, b: torch.tanh(h @ W_h + x @ W_x.T + b), "W_h is not transposed"),
    (lambda x, h, W_h, W_x, b: (h @ W_x.T + x @ W_h.T + b).tanh() if W_h.shape == W_x.shape
        else torch.tanh(h @ W_h.T + x @ W_x.T + b), "swapped roles"),
    (lambda x, h, W_h, W_x, b: torch.tanh(h @ W_h + x @ W_x + b), "x_t @ W_x.T"),
    (lambda x, h, W_h, W_x, b: torch.tanh(h @ W_h.T + x @ W_x.T + b).sum(), "should have shape"),
])
def test_rnn_cell_step_hints(wrong, hint):
    assert hint in failure_message("rnn_cell_step", wrong)


def test_rnn_cell_step_shape_error_gets_the_shape_hint():
    # swapping the matrices runs when I == H but fails when I != H: the hint explains the shapes
    def swapped(x, h, W_h, W_x, b):
        return torch.tanh(h @ W_x.T + x @ W_h.T + b)
    text = failure_message("rnn_cell_step", swapped)
    assert "raised RuntimeError" in text and "W_h multiplies the previous state" not in text
    assert "W_x is (H, I) and multiplies x_t" in text or "x_t @ W_x.T" in text


def stable(z):
    return z - z.max(dim=-1, keepdim=True).values


@pytest.mark.parametrize("wrong, hint", [
    (lambda z, tau: torch.softmax(z * tau, dim=-1), "divide the logits by the temperature"),
    (lambda z, tau: torch.exp(stable(z / tau)), "normalise: divide the exponentials"),
    (lambda z, tau: torch.exp(z / tau) / torch.exp(z / tau).sum(dim=-1, keepdim=True), "overflows"),
    (lambda z, tau: torch.softmax(z, dim=-1) if z.dim() == 1 and tau != 1 else torch.softmax(z / tau, dim=-1),
     "temperature is ignored"),
    (lambda z, tau: torch.softmax(z / tau, dim=0), "normalise each row"),
    (lambda z, tau: torch.softmax(z / tau, dim=-1).tolist(), "return a torch.Tensor"),
])
def test_softmax_temperature_hints(wrong, hint):
    assert hint in failure_message("softmax_temperature", wrong)


def reference_count(I, H, L=1, bi=False):
    return sum(p.numel() for p in RNN(I, H, num_layers=L, bidirectional=bi).parameters())


def test_parameter_count_reference_matches_numel():
    from seqlab.exercises import EXERCISES
    ref = EXERCISES["rnn_parameter_count"].reference
    for args in [(10, 20, 1, False), (64, 256, 1, False), (7, 5, 3, True), (3, 4, 2, False)]:
        assert ref(*args) == reference_count(*args) == sum(
            p.numel() for p in torch.nn.RNN(args[0], args[1], num_layers=args[2], bidirectional=args[3]).parameters())


def one_bias(I, H, L=1, bi=False):
    return reference_count(I, H, L, bi) - H * L * (2 if bi else 1)


def no_bias(I, H, L=1, bi=False):
    return reference_count(I, H, L, bi) - 2 * H * L * (2 if bi else 1)


def same_input_every_layer(I, H, L=1, bi=False):
    return (2 if bi else 1) * L * (H * I + H * H + 2 * H)


def forgot_reverse_input(I, H, L=1, bi=False):
    D = 2 if bi else 1
    return D * (H * I + H * H + 2 * H) + (L - 1) * D * (2 * H * H + 2 * H)


def forgot_directions(I, H, L=1, bi=False):
    return sum(H * (I if layer == 0 else H) + H * H + 2 * H for layer in range(L))


def only_one_layer(I, H, L=1, bi=False):
    return H * I + H * H + 2 * H


@pytest.mark.parametrize("wrong, hint", [
    (one_bias, "two bias vectors"),
    (no_bias, "count the biases"),
    (same_input_every_layer, "only the first layer reads the input"),
    (forgot_reverse_input, "reads both directions"),
    (forgot_directions, "separate set of weights for the reverse direction"),
    (only_one_layer, "count every layer"),
    (lambda I, H, L=1, bi=False: "many", "return an int"),
])
def test_parameter_count_hints(wrong, hint):
    assert hint in failure_message("rnn_parameter_count", wrong)


def test_untrained_loss_is_measured_near_ln_v():
    from seqlab.exercises.nb02_rnn import measure_untrained_loss
    loss, V = measure_untrained_loss()
    assert V == 84 and abs(loss - math.log(V)) < 0.05, loss
    assert check("predict_untrained_loss", lambda: math.log(84))


@pytest.mark.parametrize("wrong, hint", [
    (84, "perplexity of a uniform guess"),
    (math.log2(84), "its bits"),
    (1 / 84, "not a probability"),
    (2.0, "no reason to beat a uniform guess"),
    (6.0, "close to uniform"),
    ("4.4", "a number of nats"),
])
def test_untrained_loss_hints(wrong, hint):
    text = failure_message("predict_untrained_loss", lambda: wrong)
    assert hint in text
    if not isinstance(wrong, str):
        assert "measured 4.4" in text, "the hint quotes the measurement"
