"""What RNN, LSTM and GRU share around each concept module's step: ``RecurrentBase``, the
``torch.nn.RNN``/``LSTM``/``GRU``-compatible layer, and ``CellBase``. One layer and direction runs in
:mod:`seqlab.nn.bptt` (the default) or :mod:`seqlab.nn.unroll` (``model.fused = False``).
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

from seqlab.nn.bptt import fused_cell_weights, scan_fused
from seqlab.nn.recurrent_checks import check_lengths, check_sizes, check_tensor_matches, shape_str, split_hx
from seqlab.nn.unroll import State, Step, flip, padding_mask, repack, reverse_index, scan_plain

DIRECTIONS = ("forward", "reverse")


@dataclass
class RecurrentTrace:
    """What ``forward(..., return_trace=True)`` records: ``layers[l][direction][name]``, ``(B, T, H)``, detached.

    ``direction``: ``'forward'`` or ``'reverse'``; ``t`` is the input position in both; padding is zero.
    ``names``: RNN ``a`` (pre-activation), ``h``; LSTM ``i, f, g, o, c, h``; GRU ``r, z, n, h``.
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


def uniform_init(module: nn.Module, hidden_size: int) -> None:
    """torch's initialisation: every weight and bias ~ U(-1/sqrt(H), 1/sqrt(H))."""
    bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
    for weight in module.parameters():
        nn.init.uniform_(weight, -bound, bound)


@dataclass
class InputLayout:
    """How the caller laid out the input, to give the output back the same way (see ``_time_major``)."""

    batch_first: bool
    batched: bool                         # False: unbatched (T, I) input, run as B = 1
    packed: PackedSequence | None         # the input, when it came packed
    lengths: Tensor | None                # (B,) real lengths, CPU int64; None when all are T

    def restore(self, output: Tensor, finals: State, trace: RecurrentTrace | None) -> tuple:
        """``output`` (T, B, F) and ``finals`` (rows, B, .) in the caller's layout, torch's return value."""
        if self.packed is not None:
            output = repack(output, self.packed)
        elif not self.batched:
            output, finals = output.squeeze(1), tuple(s.squeeze(1) for s in finals)
        elif self.batch_first:
            output = output.transpose(0, 1)
        state_out = finals[0] if len(finals) == 1 else finals
        return (output, state_out) if trace is None else (output, state_out, trace)


class RecurrentBase(nn.Module):
    """Base of ``RNN``, ``LSTM``, ``GRU``; ``model.fused = False`` runs the plain autograd loop."""

    gate_count: int = 1                  # G: rows of W_ih are G*H (LSTM 4, GRU 3, RNN 1)
    state_names: tuple[str, ...] = ("h",)
    trace_names: tuple[str, ...] = ("h",)
    cache_names: tuple[str, ...] = ()    # keys of the step's cache, in the order it builds them
    fold_hh_bias: bool = True            # b_hh can be added to W_ih x_t + b_ih once (not GRU)
    fused: bool = True                   # False: the plain autograd loop (always, for cell weights bptt has no gradient for)

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        name = type(self).__name__
        check_sizes(name, input_size, hidden_size, bias)
        if not isinstance(proj_size, int) or isinstance(proj_size, bool) or not 0 <= proj_size < hidden_size:
            raise ValueError(f"{name} proj_size must be an int in [0, hidden_size) = [0, {hidden_size}) "
                             f"(0: no projection), got {proj_size!r}")
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
        self.proj_size = proj_size        # LSTM only: h_t = W_hr (o_t * tanh c_t) has proj_size units
        factory = {"device": device, "dtype": dtype}
        rows, h_size = self.gate_count * hidden_size, self.output_size
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else h_size * self.num_directions
            for suffix in ("", "_reverse")[: self.num_directions]:
                shapes = {f"weight_ih_l{layer}{suffix}": (rows, layer_input),
                          f"weight_hh_l{layer}{suffix}": (rows, h_size)}
                if bias:
                    shapes |= {f"bias_ih_l{layer}{suffix}": (rows,), f"bias_hh_l{layer}{suffix}": (rows,)}
                shapes |= {f"{n}_l{layer}{suffix}": shape for n, shape in self.cell_weight_shapes().items()}
                for pname, shape in shapes.items():
                    self.register_parameter(pname, nn.Parameter(torch.empty(shape, **factory)))
                    self._flat_weights_names.append(pname)
        self.reset_parameters()

    # torch.nn API --------------------------------------------------------------------------
    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def output_size(self) -> int:
        """Units of h_t: ``proj_size`` if set, else ``hidden_size``."""
        return self.proj_size or self.hidden_size

    def _state_size(self, state_name: str) -> int:
        return self.output_size if state_name == "h" else self.hidden_size   # c keeps hidden_size units

    def reset_parameters(self) -> None:
        uniform_init(self, self.hidden_size)

    def flatten_parameters(self) -> None:
        """No-op, for code written for torch.nn (cuDNN weight packing does not apply here)."""

    @property
    def all_weights(self) -> list[list[Tensor]]:
        per = (4 if self.bias else 2) + len(self.cell_weight_shapes())
        weights = [getattr(self, n) for n in self._flat_weights_names]
        return [weights[i:i + per] for i in range(0, len(weights), per)]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
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

    # the concept module's step ---------------------------------------------------------------
    def _step(self) -> Step:
        """The cell's step function (``rnn_step``, ``lstm_step``, ``gru_step``)."""
        raise NotImplementedError

    def cell_weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """The cell's extra weights ``{name: shape}``, registered as ``{name}_l{k}[_reverse]``."""
        return {}

    def _cell_weights(self, suffix: str) -> dict[str, Tensor]:
        return {name: getattr(self, name + suffix) for name in self.cell_weight_shapes()}

    # input in, output out ---------------------------------------------------------------------
    def _time_major(self, input: Tensor | PackedSequence, hx: object,
                    lengths: Tensor | Sequence[int] | None) -> tuple[Tensor, State, InputLayout]:
        """Check the arguments: x ``(T, B, I)``, initial states ``(L*D, B, H)`` (zeros if not given), layout."""
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
            check_tensor_matches(name, "input", input, self.weight_ih_l0)
        else:
            self._check_input(input)
            batched = input.dim() == 3
            if batched and self.batch_first:
                input = input.transpose(0, 1)
            elif not batched:
                if lengths is not None:
                    raise ValueError(f"{name} lengths is for batched input; got unbatched input of shape "
                                     f"{shape_str(input)}")
                input = input.unsqueeze(1)
        x = input                                                   # (T, B, I)
        steps, batch = x.shape[0], x.shape[1]
        if steps == 0:
            raise ValueError(f"{name} expected at least one time step, got input of shape {shape_str(x)} (T = 0)")
        if lengths is not None:
            lengths = check_lengths(name, lengths, batch, steps)
        states = split_hx(name, hx, self.state_names, suffix="0")
        rows = self.num_layers * self.num_directions
        if states is None:
            states = tuple(x.new_zeros(rows, batch, self._state_size(n)) for n in self.state_names)
        else:
            for state_name, s in zip(self.state_names, states):
                self._check_state(state_name, s, batch if batched else None)
            if not batched:
                states = tuple(s.unsqueeze(1) for s in states)
        return x, states, InputLayout(self.batch_first, batched, packed, lengths)

    def _layout(self) -> str:
        return "(B, T, {})" if self.batch_first else "(T, B, {})"

    def _check_input(self, x: Tensor) -> None:
        name, layout = type(self).__name__, f"[batch_first={self.batch_first}]"
        check_tensor_matches(name, "input", x, self.weight_ih_l0)
        if x.dim() not in (2, 3):
            raise ValueError(f"{name} expected input of rank 3, shape {self._layout().format(self.input_size)} "
                             f"{layout}, or rank 2, shape (T, {self.input_size}) [unbatched]; "
                             f"got rank {x.dim()}, shape {shape_str(x)}")
        if x.shape[-1] != self.input_size:
            expected = self._layout().format(self.input_size) + f" {layout}" if x.dim() == 3 \
                else f"(T, {self.input_size}) [unbatched]"
            raise ValueError(f"{name} expected input of shape {expected}, got {shape_str(x)}")

    def _check_state(self, state_name: str, state: Tensor, batch: int | None) -> None:
        name, what = type(self).__name__, state_name + "0"
        check_tensor_matches(name, what, state, self.weight_ih_l0)
        rows, size = self.num_layers * self.num_directions, self._state_size(state_name)
        units = "proj_size" if size != self.hidden_size else "hidden_size"
        if batch is None:
            expected, meaning = (rows, size), f"[num_layers * num_directions, {units}], unbatched"
        else:
            expected, meaning = (rows, batch, size), f"[num_layers * num_directions, B, {units}]"
        if tuple(state.shape) != expected:
            raise ValueError(f"{name} expected {what} of shape {shape_str(expected)} {meaning}, got {shape_str(state)}")

    # layers and directions ----------------------------------------------------------------------
    def _layers(self, x: Tensor, states: State, lengths: Tensor | None,
                return_trace: bool) -> tuple[Tensor, State, RecurrentTrace | None]:
        """All layers and directions: ``x`` ``(T, B, I)``, states ``(L*D, B, H)`` (row ``layer * D + direction``)
        -> output ``(T, B, D*H)``, final states, trace."""
        steps = x.shape[0]
        mask = padding_mask(lengths, steps, x.device)                           # (T, B, 1) or None
        backwards = reverse_index(lengths, steps, x.device)                     # (T, B) or None
        trace = RecurrentTrace(self.mode, self.trace_names, lengths=lengths) if return_trace else None
        finals: list[list[Tensor]] = [[] for _ in self.state_names]
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, training=True)
            outputs, layer_trace = [], {}
            for direction in range(self.num_directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                k = layer * self.num_directions + direction
                x_dir = flip(x, backwards) if direction else x               # the reverse reads x_T first
                out, final, cache = self._run_direction(x_dir, tuple(s[k] for s in states), suffix, mask)
                if direction:
                    out = flip(out, backwards)
                    cache = {n: flip(c, backwards) for n, c in cache.items()}
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
        """One layer, one direction: ``W_ih x_t + b`` for all t at once, then the step at t = 0 .. T-1."""
        weight_ih, weight_hh = getattr(self, "weight_ih" + suffix), getattr(self, "weight_hh" + suffix)
        bias_ih = getattr(self, "bias_ih" + suffix) if self.bias else None
        bias_hh = getattr(self, "bias_hh" + suffix) if self.bias else None
        if bias_hh is not None and self.fold_hh_bias:   # add b_hh once, not at every step
            bias_ih, bias_hh = bias_ih + bias_hh, None
        xw = F.linear(x, weight_ih, bias_ih)           # (T, B, G*H): W_ih x_t + b for every t at once
        step, cell_weights = self._step(), self._cell_weights(suffix)
        if not self.fused or not set(cell_weights) <= fused_cell_weights(self.mode):   # no hand-written gradient
            return scan_plain(partial(step, **cell_weights), xw, state, weight_hh, bias_hh, mask)
        # b_hh can be folded into the input projection exactly when W_hh h + b_hh enters additively,
        # which is also when its gradient equals the input projection's
        return scan_fused(self.mode, step, xw, state, weight_hh, bias_hh, mask, self.cache_names,
                          hh_grad_is_xw_grad=self.fold_hh_bias, cell_weights=cell_weights)

    def _trace_entry(self, out: Tensor, cache: dict[str, Tensor], mask: Tensor | None) -> dict[str, Tensor]:
        entry = {}
        for name in self.trace_names:
            value = out if name == "h" else cache[name]
            if mask is not None:
                value = torch.where(mask, value, 0.0)
            entry[name] = value.detach().transpose(0, 1).clone()   # (B, T, H)
        return entry


class CellBase(nn.Module):
    """Base class of ``RNNCell``, ``LSTMCell``, ``GRUCell``: parameters and input checks."""

    gate_count: int = 1
    state_names: tuple[str, ...] = ("h",)

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        check_sizes(type(self).__name__, input_size, hidden_size, bias)
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
        uniform_init(self, self.hidden_size)

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
        check_tensor_matches(name, "input", x, self.weight_ih)
        if x.dim() not in (1, 2) or x.shape[-1] != self.input_size:
            raise ValueError(f"{name} expected input of shape (B, {self.input_size}) or ({self.input_size},) "
                             f"[unbatched], got {shape_str(x)}")
        batched = x.dim() == 2
        if not batched:
            x = x.unsqueeze(0)
        states = split_hx(name, hx, self.state_names)
        if states is None:
            zeros = x.new_zeros(x.shape[0], self.hidden_size)
            return x, tuple(zeros for _ in self.state_names), batched
        expected = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        for what, s in zip(self.state_names, states):
            check_tensor_matches(name, what, s, self.weight_ih)
            if tuple(s.shape) != expected:
                raise ValueError(f"{name} expected {what} of shape {shape_str(expected)}, got {shape_str(s)}")
        if not batched:
            states = tuple(s.unsqueeze(0) for s in states)
        return x, states, batched
