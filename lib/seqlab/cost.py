"""What a sequence layer costs: FLOPs (2 per multiply-add), memory, sequential steps, time (notebook 17).

Counts and ``count_*`` measurements are deterministic; timings (:func:`best_time`) are illustrations only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from seqlab.device import torch_threads

GATES = {"rnn": 1, "gru": 3, "lstm": 4}   # gate blocks stacked in W_ih / W_hh (torch's layout)

__all__ = ["GATES", "SavedTensorMeter", "attention_flops", "attention_matrix_bytes", "best_time",
           "count_bytes", "count_flops", "count_ops", "count_recurrent_steps", "cuda_peak_bytes", "decoder_flops", "loglog_slope", "recurrent_flops",
           "recurrent_step_flops", "saved_bytes", "sequential_steps", "time_interleaved"]


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


# -- counts -------------------------------------------------------------------------------------------
def recurrent_step_flops(input_size: int, hidden_size: int, *, cell: str = "gru", batch: int = 1) -> int:
    r"""FLOPs of one step of a recurrent layer: :math:`2 B \cdot gH (I + H)`, ``g`` = 1 (RNN), 3 (GRU), 4 (LSTM)."""
    if cell not in GATES:
        raise ValueError(f"cell must be one of {sorted(GATES)}, got {cell!r}")
    for name, value in (("input_size", input_size), ("hidden_size", hidden_size), ("batch", batch)):
        _positive_int(name, value)
    return 2 * batch * GATES[cell] * hidden_size * (input_size + hidden_size)


def recurrent_flops(n: int, input_size: int, hidden_size: int, *, cell: str = "gru", batch: int = 1) -> int:
    r"""FLOPs of one recurrent layer over ``n`` steps: ``n`` times :func:`recurrent_step_flops`, :math:`O(n d^2)`."""
    return _positive_int("n", n) * recurrent_step_flops(input_size, hidden_size, cell=cell, batch=batch)


def attention_flops(n: int, d: int, *, heads: int = 1, batch: int = 1, keys: int | None = None,
                    projections: int = 4) -> int:
    r"""FLOPs of self-attention over ``n`` tokens of width ``d``: :math:`2 B\,(p\, n d^2 + 2\, n m d)`.

    ``projections`` (``p``): ``d x d`` products per token (4 with :math:`W^O`, 3 without). ``keys`` (``m``):
    keys per query, ``n`` (default) or ``2w + 1`` for a sliding window. ``heads`` must divide ``d``.
    """
    for name, value in (("n", n), ("d", d), ("heads", heads), ("batch", batch)):
        _positive_int(name, value)
    if projections < 0:
        raise ValueError(f"projections must be >= 0, got {projections}")
    if d % heads:
        raise ValueError(f"heads must divide d (each head gets d / heads features), got d={d}, heads={heads}")
    m = n if keys is None else _positive_int("keys", keys)
    return 2 * batch * (projections * n * d * d + 2 * n * m * d)


def decoder_flops(new: int, cached: int = 0, *, d: int, layers: int, vocab: int, d_ff: int | None = None,
                  batch: int = 1, read_out: str = "all", scores: str = "full") -> int:
    """FLOPs of a GPT's forward pass over ``new`` tokens with ``cached`` earlier ones in its KV cache.

    Per layer and new token: four ``d x d`` projections, two ``d x d_ff`` products (``d_ff`` = ``4 d`` by
    default), scores and weighted sum against all ``cached + new`` keys; then the ``d x vocab`` read-out.
    ``read_out="last"`` applies the read-out to the last new token only (generation needs no more);
    ``scores="causal"`` counts new token ``i`` against ``cached + i`` keys (the masked pairs skipped), not all of them.
    """
    _positive_int("new", new)
    if isinstance(cached, bool) or not isinstance(cached, int) or cached < 0:
        raise ValueError(f"cached must be an int >= 0, got {cached!r}")
    for name, value in (("d", d), ("layers", layers), ("vocab", vocab), ("batch", batch)):
        _positive_int(name, value)
    if read_out not in ("all", "last"):
        raise ValueError(f"read_out must be 'all' or 'last', got {read_out!r}")
    if scores not in ("full", "causal"):
        raise ValueError(f"scores must be 'full' or 'causal', got {scores!r}")
    d_ff = 4 * d if d_ff is None else _positive_int("d_ff", d_ff)
    pairs = new * (cached + new) if scores == "full" else new * cached + new * (new + 1) // 2   # (query, key) pairs
    per_layer = 2 * (4 * new * d * d + 2 * new * d * d_ff) + 2 * 2 * pairs * d
    read = new if read_out == "all" else 1
    return batch * (layers * per_layer + 2 * read * d * vocab)


def attention_matrix_bytes(n: int, *, heads: int = 1, batch: int = 1, keys: int | None = None,
                           dtype: torch.dtype = torch.float32) -> int:
    """Bytes of the attention weights ``(B, h, n, m)`` in ``dtype``; ``keys`` (``m``) defaults to ``n``."""
    for name, value in (("n", n), ("heads", heads), ("batch", batch)):
        _positive_int(name, value)
    m = n if keys is None else _positive_int("keys", keys)
    return batch * heads * n * m * torch.empty((), dtype=dtype).element_size()


def sequential_steps(layer: str, n: int, *, layers: int = 1) -> int:
    """Steps that must run one after another for ``n`` tokens: ``n`` per recurrent layer, 1 per attention layer."""
    _positive_int("n", n), _positive_int("layers", layers)
    if layer == "recurrent":
        return n * layers
    if layer == "attention":
        return layers
    raise ValueError(f"layer must be 'recurrent' or 'attention', got {layer!r}")


# -- deterministic measurements -------------------------------------------------------------------------
def count_flops(fn: Callable[[], Any]) -> int:
    """The FLOPs ``torch.utils.flop_counter.FlopCounterMode`` counts while ``fn()`` runs (2 per multiply-add)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def count_ops(fn: Callable[[], Any]) -> int:
    """How many tensor operations torch dispatches while ``fn()`` runs (via ``TorchDispatchMode``)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Counter(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
            self.calls += 1
            return func(*args, **(kwargs or {}))

    with _Counter() as counter:
        fn()
    return counter.calls


def count_bytes(fn: Callable[[], Any], *, at_least: int = 0) -> int:
    """Bytes the operations dispatched while ``fn()`` runs read and write, as if no cache helped.

    Views are left out; ``at_least`` counts only tensors of at least that many elements.
    """
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    def tensors(tree: Any) -> list[Tensor]:
        return [t for t in tree_flatten(tree)[0] if isinstance(t, Tensor)]

    def size(ts: list[Tensor]) -> int:
        return sum(t.numel() * t.element_size() for t in ts if t.numel() >= at_least)

    class _Counter(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
            out = func(*args, **(kwargs or {}))
            ins, outs = tensors((args, kwargs)), tensors(out)
            read_from = {t.untyped_storage().data_ptr() for t in ins}
            aliased = any(t.untyped_storage().data_ptr() in read_from for t in outs)
            if func._schema.is_mutable or not aliased:           # a view moves nothing; an in-place op does
                self.total += size(ins) + size(outs)
            return out

    with _Counter() as counter:
        fn()
    return counter.total


def count_recurrent_steps(layer: nn.Module, *inputs: Any, **kwargs: Any) -> int:
    """Run a seqlab ``RNN``/``LSTM``/``GRU`` on ``inputs`` and count its step-function calls."""
    if not hasattr(layer, "_step"):
        raise TypeError(f"count_recurrent_steps needs a seqlab recurrent layer (RNN, LSTM, GRU), got "
                        f"{type(layer).__name__}")
    plain_step = layer._step()
    calls = 0

    def counted_step(*args: Any, **cell_weights: Any) -> Any:
        nonlocal calls
        calls += 1
        return plain_step(*args, **cell_weights)

    layer._step = lambda: counted_step          # an instance attribute shadows the class's method
    try:
        layer(*inputs, **kwargs)
    finally:
        del layer._step                          # back to the class's step function
    return calls


@dataclass
class SavedTensorMeter:
    """Counts the bytes autograd saves for backward inside the ``with`` block (``saved_tensors_hooks``).

    Each storage counts once, at full size; storages of tensors in ``exclude`` are not counted.
    """

    exclude: Iterable[Tensor] = field(default=(), repr=False)
    bytes: int = 0
    tensors: int = 0
    shapes: list[tuple[tuple[int, ...], torch.dtype, int]] = field(default_factory=list, repr=False)

    def __enter__(self) -> SavedTensorMeter:
        self._excluded = {t.untyped_storage().data_ptr() for t in self.exclude}
        self._seen: dict[int, Tensor] = {}      # held until exit, so no address is reused meanwhile
        self.bytes, self.tensors, self.shapes = 0, 0, []
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda saved: saved)
        self._hooks.__enter__()
        return self

    def _pack(self, tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in self._excluded and key not in self._seen and storage.nbytes():
            self._seen[key] = tensor
            self.bytes += storage.nbytes()
            self.tensors += 1
            self.shapes.append((tuple(tensor.shape), tensor.dtype, storage.nbytes()))
        return tensor

    def __exit__(self, *exc: Any) -> None:
        self._hooks.__exit__(*exc)
        self._seen.clear()


def saved_bytes(fn: Callable[[], Any], *, exclude: Iterable[Tensor] = ()) -> int:
    """Bytes autograd keeps for the backward pass of ``fn()``, not counting storages in ``exclude``."""
    with SavedTensorMeter(exclude=list(exclude)) as meter:
        fn()
    return meter.bytes


def cuda_peak_bytes(fn: Callable[[], Any], device: torch.device | str) -> int | None:
    """The CUDA allocator's peak while ``fn()`` runs, above what was allocated before; None on a CPU device."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ``log y`` against ``log x``: ``k`` when ``y`` grows like ``x^k``."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"need two or more (x, y) pairs of equal count, got {len(xs)} x and {len(ys)} y")
    if min(xs) <= 0 or min(ys) <= 0:
        raise ValueError("a log-log slope needs positive x and y")
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    spread = sum((a - mx) ** 2 for a in lx)
    if spread == 0:
        raise ValueError("the x values must not all be equal")
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / spread


# -- timings (illustrations) --------------------------------------------------------------------------
def time_interleaved(steps: Mapping[str, Callable[[], None]], *, warmup: int, repeats: int,
                     clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Seconds per call of each step, ``repeats`` samples each, the steps timed in turn every round."""
    times: dict[str, list[float]] = {key: [] for key in steps}
    for repeat in range(warmup + repeats):
        for key, step in steps.items():
            start = clock()
            step()
            if repeat >= warmup:
                times[key].append(clock() - start)
    return times


def best_time(fn: Callable[[], Any], *, repeats: int = 5, warmup: int = 1, threads: int | None = 1,
              device: torch.device | str = "cpu") -> float:
    """The fastest of ``repeats`` calls of ``fn()`` in seconds, after ``warmup`` untimed calls.

    CPU: process time with ``threads`` torch threads (None leaves them alone); CUDA: wall time, synchronised.
    """
    _positive_int("repeats", repeats)
    device = torch.device(device)
    if device.type == "cuda":
        def step() -> None:
            fn()
            torch.cuda.synchronize(device)
        clock = time.perf_counter
    else:
        step, clock = fn, time.process_time
    with torch_threads(threads):
        return min(time_interleaved({"fn": step}, warmup=warmup, repeats=repeats, clock=clock)["fn"])


def time_by_length(calls: Callable[[int], Mapping[str, Callable[[], Any]]], lengths: Sequence[int], *,
                   repeats: int = 3, device: torch.device | str = "cpu") -> dict[tuple[int, str], float]:
    """:func:`best_time` of each ``calls(n)`` entry for each ``n`` in ``lengths``, keyed ``(n, name)``."""
    return {(n, name): best_time(fn, repeats=repeats, device=device)
            for n in lengths for name, fn in calls(n).items()}


# -- the lectures' table: path lengths, and the models that go beyond n^2 -----------------------------
def path_length(reads: Callable[[int], Iterable[int]], n: int) -> int:
    """Layers until the last of ``n`` positions has read the first, when layer ``l`` reads offsets ``reads(l)``.

    Raises if it never does within ``n`` layers.
    """
    _positive_int("n", n)
    reached = torch.zeros(n, dtype=torch.bool)
    reached[0] = True                                               # the first token, before any layer
    for layer in range(n):
        new = reached.clone()
        for offset in reads(layer):
            if 0 <= offset < n:
                new[offset:] |= reached[:n - offset]
        reached = new
        if reached[-1]:
            return layer + 1
    raise ValueError(f"the last of {n} positions never reads the first: reads(layer) must include an offset >= 1")


#: Waterloo's four families of long-sequence models, one paper each (the lecture names the models; it cites no
#: paper for the hierarchy): model -> (family, paper, what it changes, training work in n, work per generated token).
LONG_SEQUENCE_MODELS: dict[str, tuple[str, str, str, str, str]] = {
    "hierarchical Transformers": ("hierarchy", "e.g. HIBERT, Zhang, Wei and Zhou 2019; HAT, Chalkidis et al. 2022",
                                  "attend within short units (words, sentences), then over their pooled summaries",
                                  "O(n b + (n/b)^2)", "-"),
    "Longformer": ("approximate", "Beltagy, Peters and Cohan 2020",
                   "a sliding window (section 4) plus a few global tokens that attend to all", "O(n w)", "O(w)"),
    "Reformer": ("approximate", "Kitaev, Kaiser and Levskaya 2020",
                 "hash queries and keys (LSH) into buckets; attend within a bucket; reversible layers", "O(n log n)", "-"),
    "Performer": ("approximate", "Choromanski et al. 2021",
                  "approximate the softmax kernel by random features, φ(Q) (φ(K)^T V): no n x n matrix", "O(n)", "O(1)"),
    "Infini-attention": ("finite memory", "Munkhdalai, Faruqui and Gopal 2024",
                         "attention within a segment plus a fixed-size compressive memory of all earlier segments",
                         "O(n)", "O(1)"),
    "S4": ("state space", "Gu, Goel and Ré 2022",
           "a linear recurrence; trained as one long convolution computed by FFT", "O(n log n)", "O(1)"),
    "Mamba": ("state space", "Gu and Dao 2023",
              "an input-dependent (selective) recurrence; trained by a parallel scan", "O(n)", "O(1)"),
    "Jamba": ("state space", "Lieber et al. 2024",
              "a hybrid: one attention layer in eight, the rest Mamba, with mixture-of-experts FFNs",
              "O(n^2) in its few attention layers", "O(n) in those"),
}


def long_sequence_table() -> str:
    """:data:`LONG_SEQUENCE_MODELS` as a markdown table, one row per model."""
    rows = ["| family | model (paper) | what it changes | training work in $n$ | work per generated token |",
            "|---|---|---|---|---|"]
    rows += [f"| {family} | {model} ({paper}) | {change} | {train} | {step} |"
             for model, (family, paper, change, train, step) in LONG_SEQUENCE_MODELS.items()]
    return "\n".join(rows)


def fft_convolve(kernel: Tensor, x: Tensor) -> Tensor:
    r"""Causal convolution :math:`y_t = \sum_{j \le t} K_j x_{t-j}` of ``x`` and ``kernel``, both ``(n,)``, by FFT."""
    if kernel.dim() != 1 or x.dim() != 1 or kernel.shape != x.shape:
        raise ValueError(f"fft_convolve expects a kernel and an input of the same shape (n,), got "
                         f"{tuple(kernel.shape)} and {tuple(x.shape)}")
    n = x.shape[0]
    return torch.fft.irfft(torch.fft.rfft(x, 2 * n) * torch.fft.rfft(kernel, 2 * n), 2 * n)[:n]


# -- figures -------------------------------------------------------------------------------------------
#: One marker and colour per layer, the same in every figure of notebook 17.
LAYER_STYLES = {"GRU": ("s", "C0"), "attention": ("o", "C1"), "fused attention": ("^", "C2"),
                "sliding window": ("D", "C3")}


def loglog_plot(xs: Sequence[float], series: Mapping[str, Sequence[float]], *, xlabel: str, ylabel: str, title: str,
                unit: tuple[float, str] = (1.0, ""), dashed: Iterable[str] = (), fit: int = 3, note: str = "",
                size: tuple[float, float] = (7.0, 4.0)):
    """Log-log plot of each series against ``xs``, with slope 1 and 2 guides; returns ``(figure, alt text)``.

    Legend slopes are fitted over the last ``fit`` points; ``unit`` is ``(divisor, name)`` for the alt text.
    """
    import matplotlib.pyplot as plt

    names, dashed = list(series), set(dashed)
    if not names or any(len(series[name]) != len(xs) for name in names):
        raise ValueError(f"every series needs one value per x ({len(xs)}), got "
                         f"{ {name: len(ys) for name, ys in series.items()} }")
    slopes = {name: loglog_slope(xs[-fit:], list(series[name])[-fit:]) for name in names}
    fig, ax = plt.subplots(figsize=size)
    fig.patch.set_facecolor("white")
    for k, name in enumerate(names):
        marker, colour = LAYER_STYLES.get(name, ("ovs^D"[k % 5], f"C{k + 4}"))
        line = name in dashed                                  # a line that nearly coincides with another
        ax.plot(xs, series[name], marker=marker, color=colour, ls="--" if line else "-", mfc="none" if line else colour,
                ms=9 if line else 6, label=f"{name} (slope {slopes[name]:.2f})")
    top = max(names, key=lambda name: series[name][-1])
    for k, style in ((1, ":"), (2, "--")):
        ax.plot(xs, [series[top][-1] * (x / xs[-1]) ** k for x in xs], "k" + style, lw=1, label=f"guide: slope {k}")
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel, title=title)
    ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.xaxis.set_minor_locator(plt.NullLocator())              # only the measured x values get a label
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    scale, unit_name = unit
    value = lambda v: f"{v / scale:.3g}{' ' + unit_name if unit_name else ''}"
    alt = (f"Log-log plot of {ylabel} against {xlabel} = {xs[0]:g} to {xs[-1]:g}, with guide lines of slope 1 and 2. "
           + "; ".join(f"{name}: from {value(series[name][0])} to {value(series[name][-1])}, slope {slopes[name]:.2f} "
                       f"over the last {fit} points" for name in names) + "." + (f" {note}" if note else ""))
    return fig, alt


def band_figure(weights: Tensor, window: int, tokens: Sequence[str] | None = None, *, title: str = "",
                reference: Tensor | None = None):
    """Sliding-window weights ``(n, 2 window + 1)`` as heat maps (kept, and the ``n x n`` band); ``(figure, alt text)``.

    ``reference`` ``(n, n)`` adds a third map: the band minus full attention's weights.
    """
    import matplotlib.pyplot as plt

    from seqlab.nn.attention import window_to_dense

    weights = weights.detach().double().cpu()
    n = weights.shape[0]
    if weights.dim() != 2 or weights.shape[1] != 2 * window + 1:
        raise ValueError(f"band_figure expects weights of shape (n, 2 * window + 1) = (n, {2 * window + 1}), "
                         f"got {tuple(weights.shape)}")
    if tokens is not None and len(tokens) != n:
        raise ValueError(f"one token per position: {n} positions, got {len(tokens)} tokens")
    if reference is not None and tuple(reference.shape) != (n, n):
        raise ValueError(f"reference must be the full (n, n) = {(n, n)} weights, got {tuple(reference.shape)}")
    dense = window_to_dense(weights, window)
    labels = [repr(t)[1:-1] or " " for t in tokens] if tokens is not None else [str(i) for i in range(n)]
    ratios = [2 * window + 1 + 4, n] + ([n] if reference is not None else [])
    fig, axes = plt.subplots(1, len(ratios), figsize=(8.5 if reference is None else 12.5, 3.4 + 0.06 * n),
                             gridspec_kw={"width_ratios": ratios})
    fig.patch.set_facecolor("white")
    axes[0].imshow(weights.numpy(), cmap="Blues", vmin=0, vmax=1, aspect="auto")
    axes[0].set(title="kept: n × (2w + 1)", xlabel="offset o = j − i", xticks=range(2 * window + 1),
                xticklabels=range(-window, window + 1))
    axes[1].imshow(dense.numpy(), cmap="Blues", vmin=0, vmax=1)
    axes[1].set(title="what it stands for: a band of n × n", xlabel="key j")
    if reference is not None:
        difference = dense - reference.detach().double().cpu()
        image = axes[2].imshow(difference.numpy(), cmap="RdBu_r", vmin=-0.5, vmax=0.5)
        axes[2].set(title="minus full attention in the band", xlabel="key j")
        fig.colorbar(image, ax=axes[2], fraction=0.046, pad=0.04)
    for ax in axes:
        ax.set_yticks(range(n), labels, fontsize=7 if n > 20 else 9)
        ax.grid(False)
    axes[0].set_ylabel("query i")
    for ax in axes[1:]:
        ax.set_xticks(range(n), labels, fontsize=7 if n > 20 else 9)
    fig.suptitle(title or f"sliding-window weights, window {window}, n = {n} (darker = more weight)")
    fig.tight_layout()
    outside = int((dense == 0).sum())
    inside = sum(min(n - 1, i + window) - max(0, i - window) + 1 for i in range(n))       # keys that exist
    alt = (f"{'Three' if reference is not None else 'Two'} heat maps of sliding-window attention weights, window "
           f"{window}, n = {n} (darker = more weight). "
           f"Left, what is kept: {n} queries by {2 * window + 1} offsets, -{window} to +{window}. Middle, the same "
           f"weights placed in the full {n} × {n} matrix: a band {2 * window + 1} wide along the diagonal, "
           f"{inside} of the {n * n} entries; {outside} entries are exactly zero; every row sums to "
           f"{dense.sum(-1).mean().item():.2f}.")
    if reference is not None:
        largest = difference.abs().max().item()
        alt += (f" Right, these weights minus those of full attention masked to the band (red above, blue below, "
                f"white equal): " + ("white everywhere, the same weights to rounding" if largest < 1e-9 else
                                     f"they differ by up to {largest:.2f}") + ".")
    alt += f" Title: {title}." if title else ""
    return fig, alt
