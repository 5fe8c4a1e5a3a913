"""Backpropagation through time by hand: :func:`scan_fused`, the default path of RNN, LSTM and GRU.

The step runs without a graph (autograd's per-operation cost exceeds the arithmetic at course sizes); per
cell a ``*_backward_prepare`` (all ``t`` at once) and a ``*_step_backward`` (one step back) give the
gradients of ``xw``, ``weight_hh``, ``bias_hh``, the state and the cell weights its :class:`Backward` lists.
Other weights and second derivatives need the plain path. Notebooks 3 and 4 derive it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import NamedTuple

import torch
from torch import Tensor

from seqlab.nn.unroll import State, Step, unroll

__all__ = ["Backward", "BACKWARD", "scan_fused", "check_step_binds_no_grad", "fused_cell_weights", "rnn_step_backward", "rnn_backward_prepare",
           "lstm_step_backward", "lstm_backward_prepare", "gru_step_backward", "gru_backward_prepare"]

# A backward step maps (dL/d new state, cache at step t, W_hh, **the cell's own weights) to
# (dL/d x-projection, dL/d (W_hh h_prev + b_hh), dL/d previous state, {weight name: this step's dL/d weight}).
StepBackward = Callable[..., tuple[Tensor, Tensor, State, dict[str, Tensor]]]
# Before the backward walk, a prepare function adds to the stacked caches ({name: (T, B, .)})
# what can be computed for all steps at once; it also gets the stacked states, (T+1, B, H) each, and
# the cell's own weights by keyword.
Prepare = Callable[..., dict[str, Tensor]]


class _FusedScan(torch.autograd.Function):
    """One layer, one direction: forward without autograd, backward in the three parts marked below.

    Part 3 is ``dL/dW_hh = sum_t d_t^T h_{t-1}`` with ``d_t = dL/d(W_hh h_{t-1} + b_hh)``.
    """

    @staticmethod
    def forward(ctx, xw, weight_hh, bias_hh, mask, fns, *tensors):  # type: ignore[override]
        step, step_backward, prepare, cache_names, hh_grad_is_xw_grad, weight_names = fns
        n_state = len(tensors) - len(weight_names)
        state, weights = tensors[:n_state], tensors[n_state:]
        if weights:
            step = partial(step, **dict(zip(weight_names, weights)))
        outputs, states, caches = unroll(step, xw, state, weight_hh, bias_hh, mask)   # autograd is off here
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
        ctx.hh_grad_is_xw_grad, ctx.weight_names = hh_grad_is_xw_grad, weight_names
        ctx.n_state, ctx.has_bias = len(state), bias_hh is not None
        ctx.save_for_backward(weight_hh, mask, *weights, *stacked_states, *stacked_caches)
        ctx.mark_non_differentiable(*stacked_caches)
        ctx.set_materialize_grads(False)
        return (torch.stack(outputs), *state, *stacked_caches)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out, *grads):  # type: ignore[override]
        weight_hh, mask, *saved = ctx.saved_tensors
        n_weights = len(ctx.weight_names)
        weights = dict(zip(ctx.weight_names, saved[:n_weights]))
        states, caches = saved[n_weights:n_weights + ctx.n_state], saved[n_weights + ctx.n_state:]
        steps = states[0].shape[0] - 1
        zeros = torch.zeros_like(states[0][0])
        grad_state = tuple(zeros if g is None else g for g in grads[:ctx.n_state])   # dL/d final state
        cache = ctx.prepare(dict(zip(ctx.names, caches)), states, **weights)        # part 1
        grad_xw, grad_hh = [None] * steps, [None] * steps
        grad_weights: dict[str, Tensor] = {}
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
            grad_xw[t], grad_hh[t], grad_state, grad_w = ctx.step_backward(grad_new, cache_t, weight_hh, **weights)
            for name, g in grad_w.items():                                          # summed over the steps
                grad_weights[name] = g if name not in grad_weights else grad_weights[name] + g
            if mask is not None:
                grad_state = tuple(g + k for g, k in zip(grad_state, keep))
        grad_xw_all = torch.stack(grad_xw)                                          # (T, B, G*H)
        # RNN and LSTM add W_ih x_t + b_ih and W_hh h_{t-1} + b_hh before any nonlinearity, so the two
        # sums have the same gradient; the GRU's r_t multiplies W_hn h_{t-1} + b_hn, so its differ
        grad_hh_all = grad_xw_all if ctx.hh_grad_is_xw_grad else torch.stack(grad_hh)
        h_prev = states[0][:-1]                                                     # (T, B, H)
        grad_weight_hh = grad_hh_all.flatten(0, 1).t() @ h_prev.flatten(0, 1)       # part 3: (G*H, H)
        grad_bias_hh = grad_hh_all.sum((0, 1)) if ctx.has_bias else None
        missing = [name for name in ctx.weight_names if name not in grad_weights]
        if missing:                                  # a weight without a gradient would silently stay frozen
            raise RuntimeError(f"the fused backward returned no gradient for the cell weight(s) {missing}; "
                               "its step backward must return one for every weight its Backward lists")
        return (grad_xw_all, grad_weight_hh, grad_bias_hh, None, None, *grad_state,
                *(grad_weights[name] for name in ctx.weight_names))


def rnn_backward_prepare(cache: dict[str, Tensor], states: tuple[Tensor, ...],
                         nonlinearity: str = "tanh") -> dict[str, Tensor]:
    """The nonlinearity's derivative at every step, ``(T, B, H)``: tanh' = 1 - h^2, relu' = [a > 0]."""
    if nonlinearity == "tanh":
        h = states[0][1:]                                   # (T, B, H): h_1 ... h_T
        return {"deriv": 1 - h * h}
    return {"deriv": (cache["a"] > 0).to(cache["a"].dtype)}


def rnn_step_backward(grad_state: State, cache: dict[str, Tensor],
                      weight_hh: Tensor) -> tuple[Tensor, Tensor, State, dict[str, Tensor]]:
    """One RNN step back: dL/da_t ``(B, H)`` (twice), ``(dL/dh_{t-1},)``, ``{}``; as ``gradients.bptt_step``."""
    (grad_h,) = grad_state
    grad_a = grad_h * cache["deriv"]                        # (B, H)
    return grad_a, grad_a, (grad_a @ weight_hh,), {}        # a_t = ... + W_hh h_{t-1}


def lstm_backward_prepare(cache: dict[str, Tensor], states: tuple[Tensor, ...],
                          **peephole: Tensor) -> dict[str, Tensor]:
    """The LSTM gradient's factors that need no later step, ``(T, B, H)`` each, for all ``t`` at once.

    ``cache``: ``i, f, g, o, c, tanh_c``; ``states``: ``(h, c)``, each ``(T+1, B, H)``, initial state first.
    """
    i, f, g, o, tanh_c = (cache[k] for k in ("i", "f", "g", "o", "tanh_c"))   # (T, B, H) each
    c_prev = states[1][:-1]                                                    # (T, B, H): c_{t-1}
    prepared = {"dh_dc": o * (1 - tanh_c * tanh_c),      # how c_t moves h_t
                "di_dc": g * i * (1 - i),                # how the input gate's pre-activation moves c_t
                "df_dc": c_prev * f * (1 - f),           # ... the forget gate's
                "dg_dc": i * (1 - g * g),                # ... the candidate's
                "do_dh": tanh_c * o * (1 - o),           # how the output gate's pre-activation moves h_t
                "f": f}
    if peephole:
        prepared |= {"c_prev": c_prev, "c": cache["c"]}
    return prepared


def lstm_step_backward(grad_state: State, cache: dict[str, Tensor], weight_hh: Tensor, *,
                       weight_ci: Tensor | None = None, weight_cf: Tensor | None = None,
                       weight_co: Tensor | None = None) -> tuple[Tensor, Tensor, State, dict[str, Tensor]]:
    """One LSTM step back from ``(dL/dh_t, dL/dc_t)``: dL/d gates ``(B, 4H)`` (twice),
    ``(dL/dh_{t-1}, dL/dc_{t-1})`` and the peepholes' gradients (``{}`` without them)."""
    grad_h, grad_c = grad_state                                       # (B, H), (B, H)
    d_c = torch.addcmul(grad_c, grad_h, cache["dh_dc"])              # c_t reaches L directly and via h_t
    d_o = grad_h * cache["do_dh"]
    if weight_co is not None:                                         # ... and via the output gate's peephole
        d_c = torch.addcmul(d_c, d_o, weight_co)
    d_i = d_c * cache["di_dc"]                                        # (B, H) each
    d_f = d_c * cache["df_dc"]
    d_g = d_c * cache["dg_dc"]
    d_gates = torch.cat([d_i, d_f, d_g, d_o], dim=1)                  # (B, 4H), torch's order i|f|g|o
    grad_h_prev = d_gates @ weight_hh                                 # (B, H): back through W_hh h_{t-1}
    grad_c_prev = d_c * cache["f"]                                    # c_t = f_t c_{t-1} + ...
    if weight_ci is None:
        return d_gates, d_gates, (grad_h_prev, grad_c_prev), {}
    grad_c_prev = grad_c_prev + d_i * weight_ci + d_f * weight_cf     # i_t, f_t peeked at c_{t-1}
    c_prev, c = cache["c_prev"], cache["c"]
    grads = {"weight_ci": (d_i * c_prev).sum(0), "weight_cf": (d_f * c_prev).sum(0), "weight_co": (d_o * c).sum(0)}
    return d_gates, d_gates, (grad_h_prev, grad_c_prev), grads


def gru_backward_prepare(cache: dict[str, Tensor], states: tuple[Tensor, ...]) -> dict[str, Tensor]:
    """The GRU's factors for all ``t``: ``z``; ``local`` ``(T, B, 3H)``, dL/d(r, z, n pre-activations) =
    dL/dh_t * local; ``r_hh`` = ``[1, 1, r]``, which turns those into dL/d(W_hh h_{t-1} + b_hh)."""
    r, z, n, hn = cache["r"], cache["z"], cache["n"], cache["hn"]   # (T, B, H) each
    h_prev = states[0][:-1]                                         # (T, B, H)
    d_n = (1 - z) * (1 - n * n)          # h_t = (1 - z) n + z h_{t-1}; tanh' = 1 - n^2
    d_z = (h_prev - n) * z * (1 - z)     # sigma' = z (1 - z)
    d_r = d_n * hn * r * (1 - r)         # n's pre-activation holds r * hn
    local = torch.cat([d_r, d_z, d_n], dim=-1)
    r_hh = torch.cat([torch.ones_like(r), torch.ones_like(r), r], dim=-1)
    return {"z": z, "local": local, "r_hh": r_hh}


def gru_step_backward(grad_state: State, cache: dict[str, Tensor],
                      weight_hh: Tensor) -> tuple[Tensor, Tensor, State, dict[str, Tensor]]:
    """One GRU step back: dL/d(W_ih x_t + b_ih), dL/d(W_hh h_{t-1} + b_hh) ``(B, 3H)``, ``(dL/dh_{t-1},)``, ``{}``."""
    (grad_h,) = grad_state                                               # (B, H)
    grad_x = torch.cat([grad_h, grad_h, grad_h], dim=1) * cache["local"]  # (B, 3H)
    grad_hh = grad_x * cache["r_hh"]                                     # r_t gates W_hn h_{t-1} + b_hn
    grad_h_prev = grad_h * cache["z"] + grad_hh @ weight_hh              # direct path z h_{t-1}, and via W_hh
    return grad_x, grad_hh, (grad_h_prev,), {}


class Backward(NamedTuple):
    """A mode's hand-written backward and the cell weights it returns gradients for."""

    step_backward: StepBackward
    prepare: Prepare
    cell_weights: frozenset[str] = frozenset()


# Each layer's mode (``RecurrentBase.mode``, torch's names) -> its hand-written backward pass.
BACKWARD: dict[str, Backward] = {
    "RNN_TANH": Backward(rnn_step_backward, partial(rnn_backward_prepare, nonlinearity="tanh")),
    "RNN_RELU": Backward(rnn_step_backward, partial(rnn_backward_prepare, nonlinearity="relu")),
    "LSTM": Backward(lstm_step_backward, lstm_backward_prepare, frozenset({"weight_ci", "weight_cf", "weight_co"})),
    "GRU": Backward(gru_step_backward, gru_backward_prepare),
}


def fused_cell_weights(mode: str) -> frozenset[str]:
    """The cell weights ``mode``'s fused backward gives gradients for; a layer with others runs plain."""
    return BACKWARD[mode].cell_weights


def _bound_tensors(fn: object, where: str, seen: set[int] | None = None) -> Iterator[tuple[str, Tensor]]:
    """``(where, tensor)`` for each tensor ``fn`` carries in partials, closures, defaults (not globals)."""
    seen = set() if seen is None else seen
    if id(fn) in seen:                                                  # e.g. a recursive closure
        return
    seen.add(id(fn))
    if isinstance(fn, Tensor):
        yield where, fn
    elif isinstance(fn, (tuple, list)):
        for k, item in enumerate(fn):
            yield from _bound_tensors(item, f"{where}[{k}]", seen)
    elif isinstance(fn, dict):
        for key, item in fn.items():
            yield from _bound_tensors(item, f"{where}[{key!r}]", seen)
    elif isinstance(fn, torch.nn.Module):
        for name, p in fn.named_parameters():
            yield f"{where}.{name}", p
    elif isinstance(fn, partial):
        name = f"partial({getattr(fn.func, '__qualname__', fn.func)!r})"
        for k, arg in enumerate(fn.args):
            yield from _bound_tensors(arg, f"positional argument {k} of {name}", seen)
        for key, arg in fn.keywords.items():
            yield from _bound_tensors(arg, f"keyword argument {key!r} of {name}", seen)
        yield from _bound_tensors(fn.func, name, seen)
    elif hasattr(fn, "__func__") and hasattr(fn, "__self__"):          # a bound method
        yield from _bound_tensors(fn.__self__, f"{where}.__self__", seen)
        yield from _bound_tensors(fn.__func__, where, seen)
    elif hasattr(fn, "__code__"):                                       # a Python function
        name = fn.__qualname__
        cells = zip(fn.__code__.co_freevars, fn.__closure__ or ())
        for var, cell in cells:
            try:
                value = cell.cell_contents
            except ValueError:                                          # an empty cell
                continue
            yield from _bound_tensors(value, f"closure variable {var!r} of {name}", seen)
        for k, value in enumerate(fn.__defaults__ or ()):
            yield from _bound_tensors(value, f"default {k} of {name}", seen)
        for key, value in (fn.__kwdefaults__ or {}).items():
            yield from _bound_tensors(value, f"default of {key!r} of {name}", seen)


def check_step_binds_no_grad(step: Step) -> None:
    """Refuse a step carrying a tensor that requires grad: the fused backward would give it none."""
    if not torch.is_grad_enabled():
        return
    for where, tensor in _bound_tensors(step, "the step"):
        if tensor.requires_grad:
            raise RuntimeError(
                f"the fused path got a step whose {where} (shape {tuple(tensor.shape)}) requires grad: "
                "its hand-written backward returns gradients for xw, weight_hh, bias_hh, the state and the "
                "cell weights passed to scan_fused only, so this tensor would get none. Use the plain path "
                "(model.fused = False), or declare it as a weight of the cell (RecurrentBase.cell_weight_shapes): "
                "the layer passes it to scan_fused when the mode's Backward lists it, else runs the plain path")


def scan_fused(mode: str, step: Step, xw: Tensor, state: State, weight_hh: Tensor, bias_hh: Tensor | None,
               mask: Tensor | None, cache_names: tuple[str, ...], hh_grad_is_xw_grad: bool,
               cell_weights: Mapping[str, Tensor] | None = None) -> tuple[Tensor, State, dict[str, Tensor]]:
    """:func:`seqlab.nn.unroll.scan_plain` with ``mode``'s hand-written backward.

    ``xw`` ``(T, B, G*H)``, ``state`` ``(B, H)`` each, ``mask`` ``(T, B, 1)`` or None -> outputs
    ``(T, B, H)``, final state, caches ``{name: (T, B, H)}``. ``cell_weights`` (by keyword to ``step``)
    must be listed by ``mode``'s :class:`Backward`, else ValueError.
    """
    check_step_binds_no_grad(step)
    backward = BACKWARD[mode]
    cell_weights = dict(cell_weights or {})
    unknown = sorted(set(cell_weights) - backward.cell_weights)
    if unknown:
        raise ValueError(f"the fused {mode} backward has no gradient for the cell weight(s) {unknown}; it "
                         f"computes {sorted(backward.cell_weights)}. Run the plain path (model.fused = False)")
    fns = (step, backward.step_backward, backward.prepare, cache_names, hh_grad_is_xw_grad, tuple(cell_weights))
    out, *rest = _FusedScan.apply(xw, weight_hh, bias_hh, mask, fns, *state, *cell_weights.values())
    n = len(state)
    return out, tuple(rest[:n]), dict(zip(cache_names, rest[n:]))
