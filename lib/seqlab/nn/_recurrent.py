"""Machinery shared by RNN, LSTM and GRU: layers, directions, padding, checks, the fused scan.

The three concept modules (``rnn.py``, ``lstm.py``, ``gru.py``) each define one *step*: a
function that takes the input projection of one time step and the previous state and returns
the new state. Everything that does not depend on which cell it is lives here:

- ``RecurrentBase``: the ``torch.nn.RNN``/``LSTM``/``GRU``-compatible layer. It owns the
  parameters (torch's names, shapes, gate order and initialisation), checks inputs, stacks
  layers, runs the reverse direction, applies dropout between layers, handles ``lengths`` and
  ``PackedSequence`` input, and assembles the optional ``RecurrentTrace``.
- ``CellBase``: the same for the single-step ``*Cell`` modules.
- ``recurrent_layer`` (with ``CELLS``): build a batch-first RNN / LSTM / GRU by name, seqlab's or
  torch.nn's; the task models of :mod:`seqlab.models` all get their recurrent part from it.
- Two ways to run one layer in one direction over time (``_scan_reference`` and
  ``_FusedScan``). Both first compute ``W_ih x_t + b`` for all time steps in one matrix
  product (it does not depend on the recurrence), then give the same numbers:

  * the *reference* path loops over time calling the step function under autograd. It is the
    lecture's "unrolled network" and what a student should read first.
  * the *fused* path (the default) runs the same step function without recording a graph and
    computes the gradients with a hand-written backpropagation through time (each concept
    module holds the derivative of its own step). Recording ~10 small operations per time step
    for autograd, and replaying them, costs more than the arithmetic at course sizes: an LSTM
    training step (batch 32, 100 steps, hidden 128) takes about half the time of the reference
    path. ``scripts/bench_rnn.py`` measures both against torch.nn. The hand-written backward is
    not itself differentiable: for second derivatives use the reference path.

  Set ``model.fused = False`` to run the reference path; the tests check both against torch.nn.

Variable lengths: with ``lengths`` (or a PackedSequence), sequence ``b`` is real up to
``lengths[b]`` and padding after. The state stops changing after the last real step, outputs at
padded positions are zero, and the reverse direction reads each sequence backwards from its own
last real element: we reverse each sequence within its own length, run the forward scan, and
reverse the outputs back. This is exactly what ``torch.nn`` computes for a packed sequence.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

# A step maps (x-projection of step t, previous state, W_hh, b_hh) to (new state, cache).
# The state is a tuple: (h,) for RNN and GRU, (h, c) for LSTM. The cache holds the quantities
# the backward step needs and the trace shows (gates, pre-activations), each (B, H).
State = tuple[Tensor, ...]
Step = Callable[[Tensor, State, Tensor, Tensor | None], tuple[State, dict[str, Tensor]]]
# A backward step maps (dL/d new state, cache at step t, W_hh) to
# (dL/d x-projection, dL/d (W_hh h_prev + b_hh), dL/d previous state).
StepBackward = Callable[[State, dict[str, Tensor], Tensor], tuple[Tensor, Tensor, State]]
# Before the backward walk, a prepare function adds to the stacked caches ({name: (T, B, .)})
# what can be computed for all steps at once; it also gets the stacked states, (T+1, B, H) each.
Prepare = Callable[[dict[str, Tensor], tuple[Tensor, ...]], dict[str, Tensor]]

DIRECTIONS = ("forward", "reverse")


# --------------------------------------------------------------------------------------------
# The trace: what happened inside, per layer, direction and time step
# --------------------------------------------------------------------------------------------

@dataclass
class RecurrentTrace:
    """Internals of one forward pass, recorded when ``forward(..., return_trace=True)``.

    ``layers[l][direction][name]`` is a tensor of shape ``(B, T, H)`` -- batch first whatever
    ``batch_first`` says, ``B = 1`` for unbatched input -- where ``direction`` is ``'forward'``
    or (bidirectional models only) ``'reverse'``, and ``name`` is one of ``names``:

    ====== ==================================================================
    model  names
    ====== ==================================================================
    RNN    ``a`` (pre-activation W_ih x_t + b_ih + W_hh h_{t-1} + b_hh), ``h``
    LSTM   ``i``, ``f``, ``g`` (the candidate c~_t), ``o``, ``c``, ``h``
    GRU    ``r``, ``z``, ``n`` (the candidate), ``h``
    ====== ==================================================================

    Time index ``t`` is the position in the input sequence for both directions: the reverse
    direction's entry at ``t`` is the step that read ``x_t`` (having read ``x_{t+1}`` ... before
    it). Entries at padded positions (``t >= lengths[b]``) are zero. Tensors are detached
    copies: reading a trace never changes gradients.
    """

    mode: str                                   # 'RNN_TANH', 'RNN_RELU', 'LSTM' or 'GRU'
    names: tuple[str, ...]                      # quantities recorded at each step
    layers: list[dict[str, dict[str, Tensor]]] = field(default_factory=list)
    lengths: Tensor | None = None               # (B,) real lengths, or None when all are T

    def get(self, name: str, layer: int = 0, direction: str = "forward") -> Tensor:
        """Shortcut for ``layers[layer][direction][name]``, shape ``(B, T, H)``."""
        if name not in self.names:
            raise KeyError(f"{self.mode} trace records {self.names}, not {name!r}")
        return self.layers[layer][direction][name]


# --------------------------------------------------------------------------------------------
# Running one layer in one direction over time
# --------------------------------------------------------------------------------------------

def _unroll(step: Step, xw: Tensor, state: State, weight_hh: Tensor, bias_hh: Tensor | None,
            mask: Tensor | None) -> tuple[list[Tensor], list[State], list[dict[str, Tensor]]]:
    """Apply ``step`` at t = 0 .. T-1: the unrolled network, one step per time step.

    ``xw`` is ``(T, B, G*H)``, ``mask`` is ``(T, B, 1)`` (True at real steps) or None. Returns
    per step the outputs h_t ``(B, H)``, the states (initial state first) and the caches.
    """
    outputs, states, caches = [], [state], []
    for t in range(xw.shape[0]):
        new_state, cache = step(xw[t], state, weight_hh, bias_hh)
        if mask is None:
            state, h_t = new_state, new_state[0]
        else:  # padded step: keep the old state, output zero
            state = tuple(torch.where(mask[t], new, old) for new, old in zip(new_state, state))
            h_t = torch.where(mask[t], new_state[0], 0.0)
        outputs.append(h_t)
        states.append(state)
        caches.append(cache)
    return outputs, states, caches


def _scan_reference(step: Step, xw: Tensor, state: State, weight_hh: Tensor, bias_hh: Tensor | None,
                    mask: Tensor | None) -> tuple[Tensor, State, dict[str, Tensor]]:
    """Unroll with autograd recording every operation (the plain path).

    Returns outputs ``(T, B, H)``, the final state, and the stacked caches ``{name: (T, B, H)}``.
    """
    outputs, states, caches = _unroll(step, xw, state, weight_hh, bias_hh, mask)
    stacked = {name: torch.stack([c[name] for c in caches]) for name in caches[0]}
    return torch.stack(outputs), states[-1], stacked


class _FusedScan(torch.autograd.Function):
    """One layer, one direction, with a hand-written backward pass (BPTT).

    Forward: the step function runs without autograd; states and per-step caches are kept.
    Backward, in three parts:

    1. ``prepare`` computes, for all time steps at once, every derivative that does not depend
       on later steps (e.g. sigma'(x) = s (1 - s) of each gate): a few large tensor operations
       instead of many small ones.
    2. Walk time in reverse; ``step_backward`` carries dL/dh (and dL/dc) one step back.
    3. The weight gradient is one matrix product over all steps,
       ``dL/dW_hh = sum_t d_t^T h_{t-1}`` with ``d_t = dL/d(W_hh h_{t-1} + b_hh)``.
    """

    @staticmethod
    def forward(ctx, xw, weight_hh, bias_hh, mask, fns, *state):  # type: ignore[override]
        step, step_backward, prepare, cache_names, hh_grad_is_xw_grad = fns
        outputs, states, caches = _unroll(step, xw, state, weight_hh, bias_hh, mask)   # autograd is off here
        names = tuple(caches[0])
        if names != cache_names:
            # the caches come back as a tuple of tensors, labelled with cache_names by the caller: a
            # different order would silently mislabel the trace on this path only
            raise RuntimeError(f"the step function's cache keys {names} differ from the layer's "
                               f"cache_names {cache_names}; keep them identical, in the same order")
        stacked_states = [torch.stack([s[k] for s in states]) for k in range(len(state))]  # (T+1, B, H)
        state = states[-1]
        stacked_caches = [torch.stack([c[name] for c in caches]) for name in names]        # (T, B, H)
        ctx.step_backward, ctx.prepare, ctx.names = step_backward, prepare, names
        ctx.hh_grad_is_xw_grad = hh_grad_is_xw_grad
        ctx.n_state, ctx.has_bias = len(state), bias_hh is not None
        ctx.save_for_backward(weight_hh, mask, *stacked_states, *stacked_caches)
        ctx.mark_non_differentiable(*stacked_caches)
        ctx.set_materialize_grads(False)
        return (torch.stack(outputs), *state, *stacked_caches)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out, *grads):  # type: ignore[override]
        weight_hh, mask, *saved = ctx.saved_tensors
        states, caches = saved[:ctx.n_state], saved[ctx.n_state:]
        steps = states[0].shape[0] - 1
        zeros = torch.zeros_like(states[0][0])
        grad_state = tuple(zeros if g is None else g for g in grads[:ctx.n_state])   # dL/d final state
        cache = ctx.prepare(dict(zip(ctx.names, caches)), states)                   # part 1
        grad_xw, grad_hh = [None] * steps, [None] * steps
        for t in reversed(range(steps)):                                            # part 2
            # the output h_t and the carried state are the same new hidden state
            grad_h = grad_state[0] if grad_out is None else grad_state[0] + grad_out[t]
            grad_new = (grad_h, *grad_state[1:])
            if mask is not None:
                # a padded step copies the state, s_t = s_{t-1}, and outputs 0: there dL/ds_{t-1} = dL/ds_t
                # (kept aside, added back below) and the step itself gets no gradient (grad_new = 0)
                keep = [torch.where(mask[t], 0.0, g) for g in grad_state]
                grad_new = tuple(torch.where(mask[t], g, 0.0) for g in grad_new)
            cache_t = {name: tensor[t] for name, tensor in cache.items()}
            grad_xw[t], grad_hh[t], grad_state = ctx.step_backward(grad_new, cache_t, weight_hh)
            if mask is not None:
                grad_state = tuple(g + k for g, k in zip(grad_state, keep))
        grad_xw_all = torch.stack(grad_xw)                                          # (T, B, G*H)
        # RNN and LSTM add W_ih x_t + b_ih and W_hh h_{t-1} + b_hh before any nonlinearity, so the two
        # sums have the same gradient; the GRU's r_t multiplies W_hn h_{t-1} + b_hn, so its differ
        grad_hh_all = grad_xw_all if ctx.hh_grad_is_xw_grad else torch.stack(grad_hh)
        h_prev = states[0][:-1]                                                     # (T, B, H)
        grad_weight_hh = grad_hh_all.flatten(0, 1).t() @ h_prev.flatten(0, 1)       # part 3: (G*H, H)
        grad_bias_hh = grad_hh_all.sum((0, 1)) if ctx.has_bias else None
        return (grad_xw_all, grad_weight_hh, grad_bias_hh, None, None, *grad_state)


def _reverse_index(lengths: Tensor | None, steps: int, batch: int, device: torch.device) -> Tensor | None:
    """Index ``(T, B)`` that reverses each sequence within its own length (padding stays put)."""
    if lengths is None:
        return None
    t = torch.arange(steps, device=device).unsqueeze(1)            # (T, 1)
    last = lengths.to(device).unsqueeze(0) - 1                     # (1, B)
    return torch.where(t <= last, last - t, t)                     # (T, B)


def _flip(x: Tensor, index: Tensor | None) -> Tensor:
    """Reverse time in ``x`` (T, B, F): whole sequences, or each within its length."""
    if index is None:
        return x.flip(0)
    return x.gather(0, index.unsqueeze(-1).expand_as(x))


# --------------------------------------------------------------------------------------------
# Checks shared by layers and cells
# --------------------------------------------------------------------------------------------

def _shape(t: Tensor | Sequence[int]) -> str:
    dims = tuple(t.shape) if isinstance(t, Tensor) else tuple(t)
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def _check_sizes(name: str, input_size: int, hidden_size: int, bias: bool) -> None:
    for arg, value in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} {arg} should be an int, got {type(value).__name__}")
        if value <= 0:
            raise ValueError(f"{name} {arg} must be greater than zero, got {value}")
    if not isinstance(bias, bool):
        raise TypeError(f"{name} bias should be a bool, got {type(bias).__name__}")


def _check_tensor_matches(name: str, what: str, tensor: Tensor, reference: Tensor) -> None:
    """Same device and dtype as the parameters, with a message that says how to fix it."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name} expected {what} to be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device != reference.device:
        raise RuntimeError(f"{name} {what} is on {tensor.device} but the parameters are on {reference.device}; "
                           f"move one of them, e.g. {what}.to({str(reference.device)!r})")
    if tensor.dtype != reference.dtype:
        hint = " (token ids? embed them first, e.g. with nn.Embedding)" if not tensor.is_floating_point() else ""
        raise TypeError(f"{name} expected {what} of dtype {reference.dtype} (the parameters' dtype), "
                        f"got {tensor.dtype}{hint}")


def _check_lengths(name: str, lengths: Tensor | Sequence[int], batch: int, steps: int) -> Tensor:
    """Validate ``lengths`` and return it as a CPU int64 tensor of shape (B,)."""
    if isinstance(lengths, Tensor):
        if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
            raise TypeError(f"{name} expected integer lengths, got dtype {lengths.dtype}")
    else:
        lengths = torch.as_tensor(lengths)
        if lengths.is_floating_point():
            raise TypeError(f"{name} expected integer lengths, got floats {lengths.tolist()}")
    lengths = lengths.to("cpu", torch.int64)
    if lengths.dim() != 1:
        raise ValueError(f"{name} expected lengths of shape (B,) = ({batch},), got {_shape(lengths)}")
    if lengths.shape[0] != batch:
        raise ValueError(f"{name} expected one length per batch element: {batch} lengths, got {lengths.shape[0]}")
    if batch and int(lengths.min()) < 1:
        b = int(lengths.argmin())
        raise ValueError(f"{name} expected every length >= 1, got lengths[{b}] = {int(lengths[b])}")
    if batch and int(lengths.max()) > steps:
        b = int(lengths.argmax())
        raise ValueError(f"{name} expected every length <= T = {steps} (the padded sequence length), "
                         f"got lengths[{b}] = {int(lengths[b])}")
    return lengths


def _uniform_init(module: nn.Module, hidden_size: int) -> None:
    """torch's initialisation: every weight and bias ~ U(-1/sqrt(H), 1/sqrt(H))."""
    bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
    for weight in module.parameters():
        nn.init.uniform_(weight, -bound, bound)


# --------------------------------------------------------------------------------------------
# The multi-layer, optionally bidirectional layer
# --------------------------------------------------------------------------------------------

class RecurrentBase(nn.Module):
    """Base class of ``RNN``, ``LSTM`` and ``GRU``; subclasses set the class attributes below.

    ``model.fused`` (default True) picks the fused path; set it to False on an instance to run
    the plain autograd loop (see the module docstring).
    """

    gate_count: int = 1                  # G: rows of W_ih are G*H (LSTM 4, GRU 3, RNN 1)
    state_names: tuple[str, ...] = ("h",)
    trace_names: tuple[str, ...] = ("h",)
    cache_names: tuple[str, ...] = ()    # keys of the step's cache, in the order it builds them
    fold_hh_bias: bool = True            # b_hh can be added to W_ih x_t + b_ih once (not GRU)
    fused: bool = True                   # False: the plain autograd loop (see module docstring)

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        name = type(self).__name__
        _check_sizes(name, input_size, hidden_size, bias)
        if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers <= 0:
            raise ValueError(f"{name} num_layers must be an int greater than zero, got {num_layers!r}")
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout < 1):  # type: ignore[operator]
            raise ValueError(f"{name} dropout must be a number in [0, 1) (the probability of zeroing "
                             f"an element), got {dropout!r}")
        if dropout > 0 and num_layers == 1:  # type: ignore[operator]
            warnings.warn(f"{name}: dropout is applied between layers only, so dropout={dropout} "
                          "does nothing with num_layers=1", stacklevel=3)
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first = bias, bool(batch_first)
        self.dropout, self.bidirectional = float(dropout), bool(bidirectional)
        self.proj_size = 0  # torch.nn.LSTM's projection is not built here
        factory = {"device": device, "dtype": dtype}
        rows = self.gate_count * hidden_size
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * self.num_directions
            for suffix in ("", "_reverse")[: self.num_directions]:
                shapes = {f"weight_ih_l{layer}{suffix}": (rows, layer_input),
                          f"weight_hh_l{layer}{suffix}": (rows, hidden_size)}
                if bias:
                    shapes |= {f"bias_ih_l{layer}{suffix}": (rows,), f"bias_hh_l{layer}{suffix}": (rows,)}
                for pname, shape in shapes.items():
                    self.register_parameter(pname, nn.Parameter(torch.empty(shape, **factory)))
                    self._flat_weights_names.append(pname)
        self.reset_parameters()

    # torch.nn API --------------------------------------------------------------------------
    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    def reset_parameters(self) -> None:
        _uniform_init(self, self.hidden_size)

    def flatten_parameters(self) -> None:
        """No-op, for code written for torch.nn (cuDNN weight packing does not apply here)."""

    @property
    def all_weights(self) -> list[list[Tensor]]:
        per = 4 if self.bias else 2
        weights = [getattr(self, n) for n in self._flat_weights_names]
        return [weights[i:i + per] for i in range(0, len(weights), per)]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.mode == "RNN_RELU":   # torch.nn.RNN leaves this out of its repr; we show it
            s += ", nonlinearity='relu'"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s

    # hooks the concept modules fill in ------------------------------------------------------
    def _step(self) -> Step:
        raise NotImplementedError

    def _step_backward(self) -> StepBackward:
        raise NotImplementedError

    def _prepare_backward(self) -> Prepare:
        raise NotImplementedError

    # checks ---------------------------------------------------------------------------------
    def _layout(self) -> str:
        return "(B, T, {})" if self.batch_first else "(T, B, {})"

    def _check_input(self, x: Tensor) -> None:
        name, layout = type(self).__name__, f"[batch_first={self.batch_first}]"
        ref = self.weight_ih_l0
        _check_tensor_matches(name, "input", x, ref)
        if x.dim() not in (2, 3):
            raise ValueError(f"{name} expected input of rank 3, shape {self._layout().format(self.input_size)} "
                             f"{layout}, or rank 2, shape (T, {self.input_size}) [unbatched]; "
                             f"got rank {x.dim()}, shape {_shape(x)}")
        if x.shape[-1] != self.input_size:
            expected = self._layout().format(self.input_size) + f" {layout}" if x.dim() == 3 \
                else f"(T, {self.input_size}) [unbatched]"
            raise ValueError(f"{name} expected input of shape {expected}, got {_shape(x)}")

    def _check_state(self, what: str, state: Tensor, batch: int | None) -> None:
        name = type(self).__name__
        _check_tensor_matches(name, what, state, self.weight_ih_l0)
        rows = self.num_layers * self.num_directions
        if batch is None:
            expected, meaning = (rows, self.hidden_size), "[num_layers * num_directions, hidden_size], unbatched"
        else:
            expected, meaning = (rows, batch, self.hidden_size), "[num_layers * num_directions, B, hidden_size]"
        if tuple(state.shape) != expected:
            raise ValueError(f"{name} expected {what} of shape {_shape(expected)} {meaning}, got {_shape(state)}")

    def _split_hx(self, hx: object) -> tuple[Tensor, ...] | None:
        """``hx`` as a tuple of state tensors (h0,) or (h0, c0), checking its type."""
        name = type(self).__name__
        if hx is None:
            return None
        if len(self.state_names) == 1:
            if not isinstance(hx, Tensor):
                raise TypeError(f"{name} expected hx to be a tensor h0, got {type(hx).__name__}")
            return (hx,)
        if not isinstance(hx, (tuple, list)) or len(hx) != len(self.state_names):
            raise TypeError(f"{name} expected hx to be a tuple (h0, c0), got {type(hx).__name__}"
                            + (f" of length {len(hx)}" if isinstance(hx, (tuple, list)) else ""))
        return tuple(hx)

    # forward --------------------------------------------------------------------------------
    def _forward(self, input: Tensor | PackedSequence, hx: object, lengths: Tensor | Sequence[int] | None,
                 return_trace: bool) -> tuple:
        name = type(self).__name__
        packed = input if isinstance(input, PackedSequence) else None
        if packed is not None:
            if lengths is not None:
                raise ValueError(f"{name}: a PackedSequence carries its own lengths; do not pass lengths too")
            input, lengths = pad_packed_sequence(packed, batch_first=False)   # (T, B, I)
            batched = True
            if input.shape[-1] != self.input_size:
                raise ValueError(f"{name} expected a PackedSequence of {self.input_size} features, "
                                 f"got {input.shape[-1]}")
            _check_tensor_matches(name, "input", input, self.weight_ih_l0)
        else:
            self._check_input(input)
            batched = input.dim() == 3
            if batched and self.batch_first:
                input = input.transpose(0, 1)
            elif not batched:
                if lengths is not None:
                    raise ValueError(f"{name} lengths is for batched input; got unbatched input of shape "
                                     f"{_shape(input)}")
                input = input.unsqueeze(1)
        x = input                                                   # (T, B, I)
        steps, batch = x.shape[0], x.shape[1]
        if steps == 0:
            raise ValueError(f"{name} expected at least one time step, got input of shape {_shape(x)} (T = 0)")
        if lengths is not None:
            lengths = _check_lengths(name, lengths, batch, steps)
        states = self._split_hx(hx)
        if states is None:
            zeros = x.new_zeros(self.num_layers * self.num_directions, batch, self.hidden_size)
            states = tuple(zeros for _ in self.state_names)
        else:
            for what, s in zip((n + "0" for n in self.state_names), states):
                self._check_state(what, s, batch if batched else None)
            if not batched:
                states = tuple(s.unsqueeze(1) for s in states)

        output, finals, trace = self._run_layers(x, states, lengths, return_trace)

        if packed is not None:
            output = _repack(output, packed)
        elif not batched:
            output, finals = output.squeeze(1), tuple(s.squeeze(1) for s in finals)
        elif self.batch_first:
            output = output.transpose(0, 1)
        state_out = finals[0] if len(finals) == 1 else finals
        return (output, state_out, trace) if return_trace else (output, state_out)

    def _run_layers(self, x: Tensor, states: State, lengths: Tensor | None,
                    return_trace: bool) -> tuple[Tensor, State, RecurrentTrace | None]:
        steps, batch = x.shape[0], x.shape[1]
        mask = None
        if lengths is not None:
            mask = (torch.arange(steps).unsqueeze(1) < lengths.unsqueeze(0)).to(x.device).unsqueeze(-1)  # (T, B, 1)
        reverse_index = _reverse_index(lengths, steps, batch, x.device)
        trace = RecurrentTrace(self.mode, self.trace_names, lengths=lengths) if return_trace else None
        finals: list[list[Tensor]] = [[] for _ in self.state_names]
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, training=True)
            outputs, layer_trace = [], {}
            for direction in range(self.num_directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                k = layer * self.num_directions + direction
                x_dir = _flip(x, reverse_index) if direction else x
                out, final, cache = self._run_direction(x_dir, tuple(s[k] for s in states), suffix, mask)
                if direction:
                    out = _flip(out, reverse_index)
                    cache = {n: _flip(c, reverse_index) for n, c in cache.items()}
                outputs.append(out)
                for store, s in zip(finals, final):
                    store.append(s)
                if trace is not None:
                    layer_trace[DIRECTIONS[direction]] = self._trace_entry(out, cache, mask)
            x = outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=-1)   # (T, B, D*H)
            if trace is not None:
                trace.layers.append(layer_trace)
        return x, tuple(torch.stack(f) for f in finals), trace

    def _run_direction(self, x: Tensor, state: State, suffix: str,
                       mask: Tensor | None) -> tuple[Tensor, State, dict[str, Tensor]]:
        weight_ih, weight_hh = getattr(self, "weight_ih" + suffix), getattr(self, "weight_hh" + suffix)
        bias_ih = getattr(self, "bias_ih" + suffix) if self.bias else None
        bias_hh = getattr(self, "bias_hh" + suffix) if self.bias else None
        if bias_hh is not None and self.fold_hh_bias:   # add b_hh once, not at every step
            bias_ih, bias_hh = bias_ih + bias_hh, None
        xw = F.linear(x, weight_ih, bias_ih)           # (T, B, G*H): W_ih x_t + b for every t at once
        if not self.fused:
            return _scan_reference(self._step(), xw, state, weight_hh, bias_hh, mask)
        # b_hh can be folded into the input projection exactly when W_hh h + b_hh enters additively,
        # which is also when its gradient equals the input projection's (see _FusedScan.backward)
        fns = (self._step(), self._step_backward(), self._prepare_backward(), self.cache_names, self.fold_hh_bias)
        out, *rest = _FusedScan.apply(xw, weight_hh, bias_hh, mask, fns, *state)
        n = len(state)
        return out, tuple(rest[:n]), dict(zip(self.cache_names, rest[n:]))

    def _trace_entry(self, out: Tensor, cache: dict[str, Tensor], mask: Tensor | None) -> dict[str, Tensor]:
        entry = {}
        for name in self.trace_names:
            value = out if name == "h" else cache[name]
            if mask is not None:
                value = torch.where(mask, value, 0.0)
            entry[name] = value.detach().transpose(0, 1).clone()   # (B, T, H)
        return entry


def _repack(output: Tensor, packed: PackedSequence) -> PackedSequence:
    """Pack the padded ``output`` (T, B, F) with the same layout as the input ``packed``."""
    batch_sizes = packed.batch_sizes
    order = packed.sorted_indices
    if order is None:
        order = torch.arange(int(batch_sizes[0]), device=output.device)
    time_index = torch.repeat_interleave(torch.arange(len(batch_sizes)), batch_sizes).to(output.device)
    batch_index = torch.cat([order[:int(n)] for n in batch_sizes])
    return PackedSequence(output[time_index, batch_index], batch_sizes, packed.sorted_indices,
                          packed.unsorted_indices)


# --------------------------------------------------------------------------------------------
# Single-step cells
# --------------------------------------------------------------------------------------------

class CellBase(nn.Module):
    """Base class of ``RNNCell``, ``LSTMCell``, ``GRUCell``: parameters and input checks."""

    gate_count: int = 1
    state_names: tuple[str, ...] = ("h",)

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        _check_sizes(type(self).__name__, input_size, hidden_size, bias)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        factory = {"device": device, "dtype": dtype}
        rows = self.gate_count * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size, **factory))
        self.weight_hh = nn.Parameter(torch.empty(rows, hidden_size, **factory))
        if bias:
            self.bias_ih = nn.Parameter(torch.empty(rows, **factory))
            self.bias_hh = nn.Parameter(torch.empty(rows, **factory))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _uniform_init(self, self.hidden_size)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"          # torch's format, unquoted
        return s

    def _prepare(self, x: Tensor, hx: object) -> tuple[Tensor, State, bool]:
        """Check ``x`` and ``hx``; return x as (B, I), the state as (B, H) tensors, and whether batched."""
        name = type(self).__name__
        _check_tensor_matches(name, "input", x, self.weight_ih)
        if x.dim() not in (1, 2) or x.shape[-1] != self.input_size:
            raise ValueError(f"{name} expected input of shape (B, {self.input_size}) or ({self.input_size},) "
                             f"[unbatched], got {_shape(x)}")
        batched = x.dim() == 2
        if not batched:
            x = x.unsqueeze(0)
        if hx is None:
            zeros = x.new_zeros(x.shape[0], self.hidden_size)
            return x, tuple(zeros for _ in self.state_names), batched
        if len(self.state_names) == 1:
            if not isinstance(hx, Tensor):
                raise TypeError(f"{name} expected hx to be a tensor h, got {type(hx).__name__}")
            states: tuple = (hx,)
        else:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"{name} expected hx to be a tuple (h, c), got {type(hx).__name__}")
            states = tuple(hx)
        expected = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        for what, s in zip(self.state_names, states):
            _check_tensor_matches(name, what, s, self.weight_ih)
            if tuple(s.shape) != expected:
                raise ValueError(f"{name} expected {what} of shape {_shape(expected)}, got {_shape(s)}")
        if not batched:
            states = tuple(s.unsqueeze(0) for s in states)
        return x, states, batched


# -- one factory for the task models -----------------------------------------------------------
CELLS = ("rnn", "lstm", "gru")


def recurrent_layer(cell: str, input_size: int, hidden_size: int, num_layers: int = 1, dropout: float = 0.0,
                    *, bidirectional: bool = False, reference: bool = False, **kwargs) -> nn.Module:
    """A batch-first recurrent layer by name: seqlab's ``RNN``/``LSTM``/``GRU``, or torch.nn's twin.

    ``cell`` is one of :data:`CELLS`. Every task model in :mod:`seqlab.models` (CharLM, Seq2Seq,
    the taggers, the regressor) builds its recurrent part here; ``reference=True`` gives the
    ``torch.nn`` class with the same arguments, for comparisons. Further keyword arguments
    (``bias``, ``nonlinearity``, ...) go to the class unchanged.
    """
    if cell not in CELLS:
        raise ValueError(f"cell must be one of {CELLS}, got {cell!r}")
    if reference:
        module = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}[cell]
    else:
        # Imported here: rnn.py, lstm.py and gru.py import this module, so a top-level import would be circular.
        from seqlab.nn.gru import GRU
        from seqlab.nn.lstm import LSTM
        from seqlab.nn.rnn import RNN

        module = {"rnn": RNN, "lstm": LSTM, "gru": GRU}[cell]
    return module(input_size, hidden_size, num_layers=num_layers, dropout=dropout, batch_first=True,
                  bidirectional=bidirectional, **kwargs)
