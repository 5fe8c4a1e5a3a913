"""Time the course widgets' redraws in the kernel (no browser): what a slider move costs.

    python scripts/bench_widgets.py            # every widget, 20 moves of each kind
    python scripts/bench_widgets.py --moves 50 --threads 2
    python scripts/bench_widgets.py --only attention

For each kind of move (gate explorer: step, units, watched unit, gate, model; attention explorer: token, head,
layer, a head and back, kind, the all-heads toggle, and token, head, layer in the grid; positional-encoding
explorer: dimension, pos, k, d_model, length) it sets the control from
code, as a user's slider move does, and times the whole assignment: the observers, the draw, the PNG encoding and
the numbers panel (``LiveFigure.last_redraw_ms`` is the draw + PNG part alone). Models are the
trained checkpoints where they exist and untrained ones otherwise (timing does not depend on
the weights). Prints the median and the 90th percentile in milliseconds.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np
import torch

SENTENCE = "In 2010, she moved to Paris. Five years later, in 2015, she "   # 60 characters


def _models() -> tuple[dict[str, torch.nn.Module], list[str]]:
    from seqlab import pretrained, recipes

    models, sources = {}, []
    for label, name in (("LSTM", "charlm-lstm"), ("GRU", "charlm-gru"), ("RNN", "charlm-rnn")):
        try:
            models[label], _ = pretrained.load_pretrained(name)
            sources.append(f"{label}: trained")
        except (FileNotFoundError, OSError):
            models[label] = recipes.build_model(name).eval()
            sources.append(f"{label}: untrained")
    return models, sources


def _summary(times: list[float]) -> str:
    a = np.asarray(times)
    return f"median {np.median(a):6.1f} ms   p90 {np.percentile(a, 90):6.1f} ms   (n={len(a)})"


def bench_gate_explorer(moves: int) -> dict[str, list[float]]:
    from seqlab.data import char_lm_data
    from seqlab.widgets.gates import GateExplorer

    models, sources = _models()
    print(f"models: {', '.join(sources)}; text: {len(SENTENCE)} characters")
    started = time.perf_counter()
    explorer = GateExplorer(models, char_lm_data().vocab, SENTENCE)
    print(f"first picture (record + figure + full draw): {(time.perf_counter() - started) * 1000:.0f} ms")
    for label in list(models)[1:]:   # each model's first visit runs it and builds its figure
        started = time.perf_counter()
        explorer.model.value = label
        print(f"first switch to {label} (record + figure + full draw): "
              f"{(time.perf_counter() - started) * 1000:.0f} ms")
    explorer.model.value = "LSTM"    # from here on: the steady state, every model cached
    times: dict[str, list[float]] = {"step": [], "units": [], "watch": [], "gate": [], "model": []}

    def move(kind: str, control, value) -> None:
        started = time.perf_counter()
        control.value = value
        times[kind].append((time.perf_counter() - started) * 1000)

    T = len(SENTENCE)
    for k in range(moves):
        move("step", explorer.step, (explorer.step.value + 7) % T)
    for k in range(moves):
        lo = (k * 5) % 200
        move("units", explorer.units, (lo, lo + 31))
    for k in range(moves):            # the watched unit, within the window: outline and numbers move
        lo, hi = explorer.units.value
        move("watch", explorer.watch, lo + (explorer.watch.value - lo + 3) % (hi - lo + 1))
    for k in range(moves):
        options = [value for _, value in explorer.gate.options]
        move("gate", explorer.gate, options[(options.index(explorer.gate.value) + 1) % len(options)])
    labels = list(models)
    for k in range(moves):
        move("model", explorer.model, labels[(labels.index(explorer.model.value) + 1) % len(labels)])
    return times


def bench_attention_explorer(moves: int) -> dict[str, list[float]]:
    """The attention explorer on the three kinds of an encoder-decoder's attention, at the size the
    notebooks use: 16 source and 14 target tokens, 2 layers, 8 heads (softmax weights of random
    scores: the cost depends on the sizes, not on the numbers)."""
    from seqlab.widgets.attention import AttentionExplorer, attention_from_model

    rng = np.random.default_rng(0)
    S, T, L, H = 16, 14, 2, 8
    source = [f"s{i}" for i in range(S)]
    target = [f"t{i}" for i in range(T)]

    def softmax(shape, causal=False):
        x = 2 * rng.normal(size=shape)
        if causal:
            x = np.where(np.tril(np.ones(shape[-2:], dtype=bool)), x, -np.inf)
        e = np.exp(x - x.max(-1, keepdims=True))
        return torch.tensor(e / e.sum(-1, keepdims=True), dtype=torch.float32)

    weights = {"encoder": softmax((L, 1, H, S, S)), "decoder_self": softmax((L, 1, H, T, T), causal=True),
               "cross": softmax((L, 1, H, T, S))}
    print(f"attention: {S} source and {T} target tokens, {L} layers, {H} heads, 3 kinds")
    started = time.perf_counter()
    explorer = AttentionExplorer(attention_from_model(weights, source, target, index=0))
    print(f"first picture (summaries + figure + full draw): {(time.perf_counter() - started) * 1000:.0f} ms")
    for name, control, value in (("all heads (grid)", explorer.all_heads, True), ("kind, grid", explorer.kind,
                                 "decoder masked self-attention"), ("kind, grid", explorer.kind, "cross-attention"),
                                 ("one head", explorer.all_heads, False), ("kind", explorer.kind,
                                 "decoder masked self-attention"), ("kind", explorer.kind, "encoder self-attention")):
        started = time.perf_counter()
        control.value = value            # each kind and mode's first visit builds and fully draws its figure
        print(f"first visit, {name}: {(time.perf_counter() - started) * 1000:.0f} ms")
    times: dict[str, list[float]] = {k: [] for k in ("token", "head", "layer", "kind", "all heads",
                                                     "grid token", "grid head", "grid layer")}

    def move(kind: str, control, value) -> None:
        started = time.perf_counter()
        control.value = value
        times[kind].append((time.perf_counter() - started) * 1000)

    def sweep(prefix: str = "") -> None:
        for k in range(moves):
            move(prefix + "token", explorer.token, (explorer.token.value + 5) % len(explorer.token.options))
        for k in range(moves):
            move(prefix + "head", explorer.head, (explorer.head.value + 3) % (explorer.head.max + 1))
        for k in range(moves):
            move(prefix + "layer", explorer.layer, (explorer.layer.value + 1) % (explorer.layer.max + 1))

    sweep()
    times["head, back and forth"] = []                 # two heads in turn: their pixels are kept
    for k in range(moves):
        move("head, back and forth", explorer.head, 1 + k % 2)
    kinds = list(explorer.kind.options)
    for k in range(moves):
        move("kind", explorer.kind, kinds[(kinds.index(explorer.kind.value) + 1) % len(kinds)])
    for k in range(moves):
        move("all heads", explorer.all_heads, not explorer.all_heads.value)
    explorer.all_heads.value = True
    sweep("grid ")
    return times


def bench_positional_explorer(moves: int) -> dict[str, list[float]]:
    """The positional-encoding explorer at its defaults (d_model 64, 64 positions): each slider
    stepped as a user drags it; d_model and length change the heatmaps, the others lines and text."""
    from seqlab.widgets.positional import PositionalExplorer

    started = time.perf_counter()
    explorer = PositionalExplorer()
    print(f"first picture (similarities + figure + full draw): {(time.perf_counter() - started) * 1000:.0f} ms")
    times: dict[str, list[float]] = {}
    for name in ("dimension", "pos", "k", "d_model", "length"):
        control = explorer.controls[name]
        start, step = control.value, control.step
        for k in range(moves):
            # back and forth over a few steps, inside the slider's range
            value = start + step * (k % 4 if (k // 4) % 2 == 0 else 4 - k % 4)
            value = min(max(value, control.min), control.max)
            if value == control.value:
                value = control.value - step if control.value - step >= control.min else control.value + step
            started = time.perf_counter()
            control.value = value
            times.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        control.value = start
    return times


# name -> (title, bench): each bench returns {kind of move: [ms per move]}
WIDGETS = {"gates": ("gate explorer", bench_gate_explorer),
           "attention": ("attention explorer", bench_attention_explorer),
           "positional": ("positional-encoding explorer", bench_positional_explorer)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=20, help="redraws timed per kind of move")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--only", action="append", choices=sorted(WIDGETS),
                        help="time only this widget (repeatable; default: all)")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"python {platform.python_version()}, torch {torch.__version__}, matplotlib {matplotlib.__version__}, "
          f"{torch.get_num_threads()} torch threads, {platform.processor() or platform.machine()}")
    for name in args.only or WIDGETS:
        title, bench = WIDGETS[name]
        print(f"{title}, redraw in the kernel (observers + draw + PNG + text):")
        for kind, times in bench(args.moves).items():
            print(f"  {kind:20s} {_summary(times)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
