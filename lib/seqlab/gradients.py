r"""A vanilla RNN's backpropagation through time by hand, and measurements built on it (notebook 03 derives it).

:math:`h_t = \tanh(W_h h_{t-1} + W_x x_t + b)`. Shapes: ``x`` ``(T, B, I)``, states ``(T+1, B, H)``
holding :math:`h_0 \dots h_T`, ``W_h`` ``(H, H)``, ``W_x`` ``(H, I)``, ``b`` ``(H,)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from seqlab.device import torch_threads
from seqlab.modes import evaluating

__all__ = [
    "ACTIVATIONS", "Activation", "BPTTGrads", "BPTTStep", "BPTTTraining", "autograd_gradient_norms", "bptt_step",
    "delayed_recall", "train_with_bptt",
    "gradient_norms_through_time", "input_sensitivity", "linear_gradient_norms", "memory_gradient_norms",
    "random_rnn_weights", "rnn_backward", "rnn_forward", "scale_to_spectral_radius", "spectral_radius",
]


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------

def _shape(t: Tensor) -> str:
    return "(" + ", ".join(str(d) for d in t.shape) + ("," if t.dim() == 1 else "") + ")"


def _check_rnn(x: Tensor, W_h: Tensor, W_x: Tensor, b: Tensor | None, h0: Tensor | None = None) -> None:
    """Clear errors for the shapes and dtypes of a vanilla RNN's inputs and weights."""
    for name, t in (("x", x), ("W_h", W_h), ("W_x", W_x)) + ((("b", b),) if b is not None else ()):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} should be a torch.Tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"{name} should be a floating-point tensor, got dtype {t.dtype}")
    if W_h.dim() != 2 or W_h.shape[0] != W_h.shape[1]:
        raise ValueError(f"W_h should be square, (H, H), got {_shape(W_h)}")
    H = W_h.shape[0]
    if x.dim() != 3:
        raise ValueError(f"x should have shape (T, B, I) (time, batch, features), got {_shape(x)}")
    T, B, I = x.shape
    if T == 0:
        raise ValueError(f"x should hold at least one time step, got {_shape(x)}")
    if tuple(W_x.shape) != (H, I):
        raise ValueError(f"W_x should have shape (H, I) = ({H}, {I}) for H = {H} units and inputs of "
                         f"{I} features, got {_shape(W_x)}")
    if b is not None and tuple(b.shape) != (H,):
        raise ValueError(f"b should have shape (H,) = ({H},), got {_shape(b)}")
    if h0 is not None and tuple(h0.shape) != (B, H):
        raise ValueError(f"h0 should have shape (B, H) = ({B}, {H}), got {_shape(h0)}")
    dtypes = {t.dtype for t in (x, W_h, W_x, b, h0) if t is not None}
    if len(dtypes) > 1:
        raise TypeError(f"x, W_h, W_x, b and h0 should share one dtype, got {sorted(str(d) for d in dtypes)}")


# --------------------------------------------------------------------------------------------
# BPTT by hand
# --------------------------------------------------------------------------------------------

def rnn_forward(x: Tensor, W_h: Tensor, W_x: Tensor, b: Tensor, h0: Tensor | None = None) -> Tensor:
    """The forward pass, keeping every state: ``x`` ``(T, B, I)`` -> states ``(T+1, B, H)``, ``h_0`` first.

    ``h_0`` is zeros unless ``h0`` is given; ``x[t - 1]`` is the lectures' :math:`x_t`.
    """
    _check_rnn(x, W_h, W_x, b, h0)
    h = x.new_zeros(x.shape[1], W_h.shape[0]) if h0 is None else h0        # (B, H)
    states = [h]
    for x_t in x:                                                          # x_t: (B, I)
        h = torch.tanh(h @ W_h.T + x_t @ W_x.T + b)                        # (B, H)
        states.append(h)
    return torch.stack(states)                                             # (T+1, B, H)


def bptt_step(dh_t: Tensor, h_t: Tensor, h_prev: Tensor, x_t: Tensor,
              W_h: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One step of BPTT for ``h_t = tanh(W_h h_{t-1} + W_x x_t + b)``.

    ``dh_t`` ``(B, H)`` is the total gradient dL/dh_t. Returns this step's contributions to
    dL/dW_h ``(H, H)``, dL/dW_x ``(H, I)`` and dL/db ``(H,)`` (summed over the batch), and the
    gradient that flows on to the previous state, dL/dh_{t-1} ``(B, H)``.
    """
    delta = dh_t * (1 - h_t ** 2)          # (B, H): dL/da_t, since tanh'(a_t) = 1 - h_t^2
    dW_h = delta.T @ h_prev                # (H, H): a_t = W_h h_{t-1} + ...
    dW_x = delta.T @ x_t                   # (H, I): a_t = ... + W_x x_t + ...
    db = delta.sum(0)                      # (H,)
    dh_prev = delta @ W_h                  # (B, H): W_h^T delta_t, one row per sequence
    return dW_h, dW_x, db, dh_prev


@dataclass
class BPTTGrads:
    """The result of :func:`rnn_backward`: the weights' gradients and dL/dh_t at every step."""

    W_h: Tensor   # (H, H)
    W_x: Tensor   # (H, I)
    b: Tensor     # (H,)
    h0: Tensor    # (B, H): dL/dh_0, the gradient with respect to the initial state
    dh: Tensor    # (T+1, B, H): total dL/dh_t for t = 0 .. T (dh[0] is dL/dh_0)


BPTTStep = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], tuple[Tensor, Tensor, Tensor, Tensor]]


def rnn_backward(x: Tensor, states: Tensor, W_h: Tensor, dL_dh: Tensor, *, step: BPTTStep | None = None) -> BPTTGrads:
    """Backpropagation through time, one :func:`bptt_step` per step from ``t = T`` down to 1.

    ``states`` ``(T+1, B, H)`` come from :func:`rnn_forward`. ``dL_dh`` ``(T, B, H)`` holds the
    gradient that the loss sends *directly* to each ``h_1 .. h_T`` (e.g. through an output layer
    at every step; zeros where the loss does not read a state). The gradient flowing back from
    later steps is added on the way. ``step`` replaces :func:`bptt_step` (same signature), e.g. by one
    written in notebook 03's exercise.
    """
    if states.dim() != 3 or states.shape[0] != x.shape[0] + 1 or states.shape[1] != x.shape[1]:
        raise ValueError(f"states should be (T+1, B, H) = ({x.shape[0] + 1}, {x.shape[1]}, H) for x of shape "
                         f"{_shape(x)}, got {_shape(states)}")
    if dL_dh.shape != states[1:].shape:
        raise ValueError(f"dL_dh should be (T, B, H) = {_shape(states[1:])}, one gradient per state h_1 .. h_T, "
                         f"got {_shape(dL_dh)}")
    T = x.shape[0]
    step = bptt_step if step is None else step
    dW_h, dW_x, db = torch.zeros_like(W_h), x.new_zeros(W_h.shape[0], x.shape[2]), x.new_zeros(W_h.shape[0])
    dh = [None] * (T + 1)
    carried = torch.zeros_like(states[0])                      # dL/dh_T from later steps: none
    for t in range(T, 0, -1):                                  # t = T, ..., 1
        dh[t] = dL_dh[t - 1] + carried                         # total dL/dh_t
        g_Wh, g_Wx, g_b, carried = step(dh[t], states[t], states[t - 1], x[t - 1], W_h)
        if step is not bptt_step:
            _check_step_result((g_Wh, g_Wx, g_b, carried), (dW_h, dW_x, db, states[0]))
        dW_h, dW_x, db = dW_h + g_Wh, dW_x + g_Wx, db + g_b    # weight sharing: sum over steps
    dh[0] = carried
    return BPTTGrads(W_h=dW_h, W_x=dW_x, b=db, h0=carried, dh=torch.stack(dh))


def _check_step_result(got: tuple, like: tuple[Tensor, ...]) -> None:
    """A clear error when a replacement BPTT step returns tensors of the wrong shapes."""
    for name, g, e in zip(("dW_h", "dW_x", "db", "dh_prev"), got, like):
        if not isinstance(g, Tensor) or g.shape != e.shape:
            found = _shape(g) if isinstance(g, Tensor) else type(g).__name__
            raise ValueError(f"the BPTT step should return {name} of shape {_shape(e)}, got {found}")


# --------------------------------------------------------------------------------------------
# A tiny RNN trained by a BPTT step: what a wrong step does to learning
# --------------------------------------------------------------------------------------------

def delayed_recall(n: int, *, length: int = 12, symbols: int = 4, delay: int = 3,
                   seed: int = 0) -> tuple[Tensor, Tensor]:
    """A memory task: from step ``delay`` on, name the symbol read ``delay`` steps ago.

    Returns ``x`` ``(length, n, symbols)`` one-hot float64 and ``y`` ``(length, n)``, -100 for the first
    ``delay`` steps.
    """
    if not 1 <= delay < length:
        raise ValueError(f"delay should be between 1 and length - 1 = {length - 1}, got {delay}")
    ids = torch.randint(0, symbols, (length, n), generator=torch.Generator().manual_seed(seed))
    y = torch.full((length, n), -100)
    y[delay:] = ids[:-delay]
    return F.one_hot(ids, symbols).to(torch.float64), y


@dataclass
class BPTTTraining:
    """The result of :func:`train_with_bptt`."""

    losses: list[float]            # training loss (nats) at each step; nan from the step it diverged
    accuracy: float                # share of 1,000 fresh sequences' targets recalled after training
    first_step_error: dict[str, float]   # ||g - g_autograd|| / ||g_autograd|| at step 1, for W_h, W_x, b, h_0


def _readout_loss(states: Tensor, y: Tensor, W_y: Tensor, b_y: Tensor) -> tuple[Tensor, Tensor]:
    """Mean cross-entropy of the read-out softmax(W_y h_t + b_y) over the targets; and its logits."""
    logits = states[1:] @ W_y.T + b_y                                     # (T, B, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)), logits


def _gradients(x: Tensor, y: Tensor, weights: list[Tensor], step: BPTTStep | None) -> tuple[Tensor, list[Tensor]]:
    """Loss and gradients for W_h, W_x, b, W_y, b_y, h_0: by autograd if ``step`` is None, else by ``step``."""
    W_h, W_x, b, W_y, b_y = weights
    h0 = x.new_zeros(x.shape[1], W_h.shape[0])
    if step is None:
        leaves = [w.clone().requires_grad_() for w in weights] + [h0.requires_grad_()]
        with torch.enable_grad():
            loss, _ = _readout_loss(rnn_forward(x, *leaves[:3], leaves[5]), y, *leaves[3:5])
            grads = list(torch.autograd.grad(loss, leaves))
        return loss.detach(), grads
    states = rnn_forward(x, W_h, W_x, b, h0)
    loss, logits = _readout_loss(states, y, W_y, b_y)
    counted = (y != -100)
    dlogits = (torch.softmax(logits, -1) - F.one_hot(y.clamp(min=0), W_y.shape[0])) * counted[..., None] / counted.sum()
    dW_y, db_y = torch.einsum("tbv,tbh->vh", dlogits, states[1:]), dlogits.sum((0, 1))
    bptt = rnn_backward(x, states, W_h, dlogits @ W_y, step=step)        # dL/dh_t from the read-out, then back
    return loss, [bptt.W_h, bptt.W_x, bptt.b, dW_y, db_y, bptt.h0]


def train_with_bptt(step: BPTTStep | None = None, *, steps: int = 300, hidden_size: int = 16, symbols: int = 4,
                    length: int = 12, delay: int = 3, batch: int = 32, lr: float = 0.05, momentum: float = 0.9,
                    seed: int = 0) -> BPTTTraining:
    """Train a tiny tanh RNN (float64) on :func:`delayed_recall` with gradients from a BPTT ``step``.

    ``step`` has :func:`bptt_step`'s signature; ``None`` uses autograd throughout (the yardstick). The same
    seed gives the same weights and batches, so a correct step reproduces autograd's run to rounding.
    Runs on one CPU thread.
    """
    with torch_threads(1):
        return _train_with_bptt(step, steps=steps, hidden_size=hidden_size, symbols=symbols, length=length,
                                delay=delay, batch=batch, lr=lr, momentum=momentum, seed=seed)


def _train_with_bptt(step: BPTTStep | None, *, steps: int, hidden_size: int, symbols: int, length: int, delay: int,
                     batch: int, lr: float, momentum: float, seed: int) -> BPTTTraining:
    g = torch.Generator().manual_seed(seed)
    weights = [torch.randn(hidden_size, hidden_size, generator=g, dtype=torch.float64) * 0.5 / hidden_size ** 0.5,
               torch.randn(hidden_size, symbols, generator=g, dtype=torch.float64) * 0.5,
               torch.zeros(hidden_size, dtype=torch.float64),
               torch.randn(symbols, hidden_size, generator=g, dtype=torch.float64) * 0.1,
               torch.zeros(symbols, dtype=torch.float64)]                # W_h, W_x, b, W_y, b_y
    task = dict(length=length, symbols=symbols, delay=delay)
    x, y = delayed_recall(batch, seed=seed * 100_003 + 1, **task)
    _, mine = _gradients(x, y, weights, step)
    _, exact = _gradients(x, y, weights, None)
    first_step_error = {name: float((mine[k] - exact[k]).norm() / exact[k].norm())
                        for name, k in (("W_h", 0), ("W_x", 1), ("b", 2), ("h_0", 5))}
    velocity = [torch.zeros_like(w) for w in weights]
    losses: list[float] = []
    for k in range(steps):
        x, y = delayed_recall(batch, seed=seed * 100_003 + 1 + k, **task)
        loss, grads = _gradients(x, y, weights, step)
        losses.append(float(loss))
        if not math.isfinite(losses[-1]):
            losses += [math.nan] * (steps - k - 1)
            break
        for w, v, grad in zip(weights, velocity, grads[:5]):
            v.mul_(momentum).add_(grad)
            w.sub_(lr * v)
    x, y = delayed_recall(1000, seed=seed * 100_003 + 99_991, **task)
    _, logits = _readout_loss(rnn_forward(x, *weights[:3]), y, *weights[3:])
    counted = y != -100
    accuracy = float((logits.argmax(-1)[counted] == y[counted]).double().mean()) if math.isfinite(losses[-1]) else 0.0
    return BPTTTraining(losses=losses, accuracy=accuracy, first_step_error=first_step_error)


# --------------------------------------------------------------------------------------------
# Spectral radius and gradient norms through time
# --------------------------------------------------------------------------------------------

def spectral_radius(W: Tensor) -> float:
    """The largest absolute eigenvalue of a square matrix, rho(W)."""
    if not isinstance(W, Tensor) or W.dim() != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"spectral_radius expects a square matrix, got "
                         f"{_shape(W) if isinstance(W, Tensor) else type(W).__name__}")
    return float(torch.linalg.eigvals(W.double()).abs().max())


def scale_to_spectral_radius(W: Tensor, rho: float) -> Tensor:
    """``W`` rescaled so that its spectral radius is ``rho`` (same eigenvectors)."""
    if not (isinstance(rho, (int, float)) and math.isfinite(rho) and rho >= 0):
        raise ValueError(f"rho should be a finite number >= 0, got {rho!r}")
    current = spectral_radius(W)
    if current == 0:
        raise ValueError("W has spectral radius 0 (it is nilpotent, e.g. all zeros); it cannot be rescaled")
    return W * (rho / current)


def random_rnn_weights(hidden_size: int, input_size: int, rho: float, *, seed: int = 0,
                       dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor, Tensor]:
    """Random ``W_h`` of spectral radius ``rho`` (one direction per seed), and ``W_x``, ``b`` drawn as torch.nn.RNN does."""
    for name, value in (("hidden_size", hidden_size), ("input_size", input_size)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} should be a positive int, got {value!r}")
    g = torch.Generator().manual_seed(seed)
    W_h = scale_to_spectral_radius(torch.randn(hidden_size, hidden_size, generator=g, dtype=dtype), rho)
    bound = 1 / math.sqrt(hidden_size)
    W_x = (torch.rand(hidden_size, input_size, generator=g, dtype=dtype) * 2 - 1) * bound
    b = (torch.rand(hidden_size, generator=g, dtype=dtype) * 2 - 1) * bound
    return W_h, W_x, b


def _unit_gradient(states: Tensor, seed: int) -> Tensor:
    """dL/dh_T for ``L = v . h_T``: a fixed random unit vector ``v`` per sequence, ``(B, H)``."""
    v = torch.randn(states.shape[1:], generator=torch.Generator().manual_seed(seed), dtype=states.dtype)
    return v / v.norm(dim=-1, keepdim=True)


def _geometric_mean_by_distance(dh: Tensor) -> Tensor:
    """``(T+1, B, H)`` gradients at h_0 .. h_T -> ``(T+1,)`` norms by distance k = T - t, geometric mean over B."""
    return dh.norm(dim=-1).log().mean(dim=1).exp().flip(0)


def gradient_norms_through_time(x: Tensor, W_h: Tensor, W_x: Tensor, b: Tensor, *,
                                h0: Tensor | None = None, seed: int = 0, step: BPTTStep | None = None) -> Tensor:
    """Norm of the gradient of ``L = v . h_T`` (``v`` a random unit vector) at each state, by :func:`rnn_backward`.

    Returns ``(T+1,)``: entry ``k`` is ||dL/dh_{T-k}||, geometric mean over the batch.
    """
    states = rnn_forward(x, W_h, W_x, b, h0)
    dL_dh = torch.zeros_like(states[1:])
    dL_dh[-1] = _unit_gradient(states, seed)
    grads = rnn_backward(x, states, W_h, dL_dh, step=step)
    return _geometric_mean_by_distance(grads.dh)                          # index k = T - t


def autograd_gradient_norms(x: Tensor, W_h: Tensor, W_x: Tensor, b: Tensor, *,
                            h0: Tensor | None = None, seed: int = 0) -> Tensor:
    """:func:`gradient_norms_through_time` by autograd: the same loss ``v . h_T``, the same ``(T+1,)`` norms."""
    _check_rnn(x, W_h, W_x, b, h0)
    with torch.enable_grad():
        h = x.new_zeros(x.shape[1], W_h.shape[0]) if h0 is None else h0.detach()
        h = h.requires_grad_()
        states = [h]
        for x_t in x:                                                      # the forward pass, kept in the graph
            states.append(torch.tanh(states[-1] @ W_h.T + x_t @ W_x.T + b))
        v = _unit_gradient(torch.stack(states).detach(), seed)
        dh = torch.autograd.grad((states[-1] * v).sum(), states)          # dL/dh_t for t = 0 .. T
    return _geometric_mean_by_distance(torch.stack(dh))


def linear_gradient_norms(W_h: Tensor, steps: int, *, batch: int = 16, seed: int = 0) -> Tensor:
    """BPTT's linear part alone: entry ``k`` of ``(steps+1,)`` is ||(W_h^T)^k v||, geometric mean over ``batch`` ``v``."""
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps should be an int >= 0, got {steps!r}")
    if not isinstance(W_h, Tensor) or W_h.dim() != 2 or W_h.shape[0] != W_h.shape[1]:
        raise ValueError(f"W_h should be a square matrix (H, H), got "
                         f"{_shape(W_h) if isinstance(W_h, Tensor) else type(W_h).__name__}")
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(batch, W_h.shape[0], generator=g, dtype=W_h.dtype)
    v = v / v.norm(dim=-1, keepdim=True)                                    # (batch, H), unit rows
    norms = [v.norm(dim=-1)]
    for _ in range(steps):
        v = v @ W_h                                                         # W_h^T v, one row per vector
        norms.append(v.norm(dim=-1))
    return torch.stack(norms).log().mean(dim=1).exp()


# --------------------------------------------------------------------------------------------
# The activation functions of the lectures, with their derivatives
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Activation:
    """An activation function ``f``, its derivative ``df`` (written out, not autograd) and formulas."""

    name: str
    f: Callable[[Tensor], Tensor]
    df: Callable[[Tensor], Tensor]
    formula: str       # LaTeX
    derivative: str    # LaTeX


LEAKY_SLOPE = 0.1    # gamma of leaky ReLU (torch's default is 0.01; 0.1 is easier to see in a plot)
SOFTPLUS_BETA = 1.0


def _gelu_df(z: Tensor) -> Tensor:
    cdf = 0.5 * (1 + torch.erf(z / math.sqrt(2)))                  # Phi(z)
    pdf = torch.exp(-0.5 * z ** 2) / math.sqrt(2 * math.pi)        # phi(z)
    return cdf + z * pdf


ACTIVATIONS: dict[str, Activation] = {a.name: a for a in (
    Activation("sigmoid", torch.sigmoid, lambda z: torch.sigmoid(z) * (1 - torch.sigmoid(z)),
               r"\sigma(z) = \frac{1}{1 + e^{-z}}", r"\sigma(z)\,(1 - \sigma(z))"),
    Activation("tanh", torch.tanh, lambda z: 1 - torch.tanh(z) ** 2,
               r"\tanh(z) = \frac{e^z - e^{-z}}{e^z + e^{-z}}", r"1 - \tanh^2(z)"),
    Activation("ReLU", torch.relu, lambda z: (z > 0).to(z.dtype),
               r"\max(0, z)", r"[z > 0]"),
    Activation("leaky ReLU", lambda z: F.leaky_relu(z, LEAKY_SLOPE),
               lambda z: torch.where(z > 0, torch.ones_like(z), torch.full_like(z, LEAKY_SLOPE)),
               rf"\max(z, \gamma z),\ \gamma = {LEAKY_SLOPE}", r"1 \text{ if } z > 0 \text{ else } \gamma"),
    Activation("GELU", F.gelu, _gelu_df,
               r"\frac{z}{2}\left[1 + \mathrm{erf}(z/\sqrt{2})\right] = z\,\Phi(z)", r"\Phi(z) + z\,\varphi(z)"),
    Activation("softplus", lambda z: F.softplus(z, beta=SOFTPLUS_BETA),
               lambda z: torch.sigmoid(SOFTPLUS_BETA * z),
               rf"\frac{{1}}{{\beta}}\log(1 + e^{{\beta z}}),\ \beta = {SOFTPLUS_BETA:g}", r"\sigma(\beta z)"),
)}


# --------------------------------------------------------------------------------------------
# Which inputs does a trained model's loss depend on?
# --------------------------------------------------------------------------------------------

def _check_inputs_and_targets(x: Tensor, y: Tensor) -> None:
    """A ValueError unless ``x`` and ``y`` are torch.long ids of one shape ``(B, T)``."""
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, Tensor) or t.dim() != 2 or t.dtype != torch.long:
            got = f"{t.dtype} tensor of shape {_shape(t)}" if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} should be ids of shape (B, T) and dtype torch.long, got {got}")
    if x.shape != y.shape:
        raise ValueError(f"x and y should have the same shape (B, T), got {_shape(x)} and {_shape(y)}")


def input_sensitivity(model: torch.nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """||dL_T / de_{T-k}||: how the last step's loss depends on the embedded input ``k`` steps back, ``(T,)``.

    ``model`` is a :class:`seqlab.models.charlm.CharLM`; ``x``, ``y`` ``(B, T)`` ids. Averaged over the batch.
    """
    _check_inputs_and_targets(x, y)
    with evaluating(model), torch.enable_grad():
        e = model.embed(x).detach().requires_grad_()              # (B, T, E)
        output, _ = model.rnn(e)                                  # (B, T, H)
        logits = model.head(output[:, -1])                        # (B, V): the last prediction only
        loss = F.cross_entropy(logits, y[:, -1], reduction="sum")   # one loss per sequence, summed
        (grad,) = torch.autograd.grad(loss, e)                    # (B, T, E)
    return grad.norm(dim=-1).mean(dim=0).flip(0)                  # (T,), index k = distance from the end


def memory_gradient_norms(model: torch.nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """||dL_T / dm_{T-k}||: how the last step's loss depends on the memory ``k`` steps back, ``(T,)``.

    ``model`` is a one-layer :class:`seqlab.models.charlm.CharLM` with an LSTM (memory ``c_t``) or a tanh
    RNN (``h_t``); ``x``, ``y`` ``(B, T)`` ids. Averaged over the batch.
    """
    from seqlab.nn.lstm import lstm_step
    from seqlab.nn.rnn import rnn_step

    _check_inputs_and_targets(x, y)
    rnn = model.rnn
    steps = {"LSTM": (lstm_step, 2), "RNN_TANH": (rnn_step, 1)}
    if getattr(rnn, "mode", None) not in steps or rnn.num_layers != 1 or rnn.bidirectional:
        raise ValueError(f"expected a one-layer, one-direction LSTM or tanh RNN, got {getattr(rnn, 'mode', rnn)!r} "
                         f"with {rnn.num_layers} layer(s)")
    step, n_states = steps[rnn.mode]
    with evaluating(model), torch.enable_grad():
        xw = model.embed(x) @ rnn.weight_ih_l0.t() + rnn.bias_ih_l0 + rnn.bias_hh_l0   # (B, T, 4H or H)
        state = tuple(xw.new_zeros(x.shape[0], rnn.hidden_size) for _ in range(n_states))   # (h,) or (h, c)
        memories = []
        for t in range(x.shape[1]):
            state, _ = step(xw[:, t], state, rnn.weight_hh_l0)
            memories.append(state[-1])                            # c_t for the LSTM, h_t for the RNN
        loss = F.cross_entropy(model.head(state[0]), y[:, -1], reduction="sum")   # state[0] is h_T
        grads = torch.autograd.grad(loss, memories)               # T tensors (B, H)
    return torch.stack([g.norm(dim=-1).mean() for g in grads]).flip(0)   # (T,), index k = distance from the end
