"""Time the course widgets' redraws in the kernel (no browser): what a slider move costs.

    python scripts/bench_widgets.py            # gate explorer, 20 moves of each kind
    python scripts/bench_widgets.py --moves 50 --threads 2

For each kind of move (step, units, gate, model) it sets the control from code, as a user's
slider move does, and times the whole assignment: the observers, the draw, the PNG encoding and
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
    from seqlab import pretrained

    models, sources = {}, []
    for label, name in (("LSTM", "charlm-lstm"), ("GRU", "charlm-gru"), ("RNN", "charlm-rnn")):
        try:
            models[label], _ = pretrained.load_pretrained(name)
            sources.append(f"{label}: trained")
        except (FileNotFoundError, OSError):
            models[label] = pretrained.build_model(name).eval()
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
    times: dict[str, list[float]] = {"step": [], "units": [], "gate": [], "model": []}

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
    for k in range(moves):
        options = [value for _, value in explorer.gate.options]
        move("gate", explorer.gate, options[(options.index(explorer.gate.value) + 1) % len(options)])
    labels = list(models)
    for k in range(moves):
        move("model", explorer.model, labels[(labels.index(explorer.model.value) + 1) % len(labels)])
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=20, help="redraws timed per kind of move")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"python {platform.python_version()}, torch {torch.__version__}, matplotlib {matplotlib.__version__}, "
          f"{torch.get_num_threads()} torch threads, {platform.processor() or platform.machine()}")
    print("gate explorer, redraw in the kernel (observers + draw + PNG + numbers):")
    for kind, times in bench_gate_explorer(args.moves).items():
        print(f"  {kind:6s} {_summary(times)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
