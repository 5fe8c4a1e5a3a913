"""Time and memory of one training step against sequence length: a GRU, explicit and fused attention, a sliding window.

    python scripts/bench_cost.py [--lengths 256 512 1024 2048 4096] [--width 64] [--heads 4] [--window 32]
    python scripts/bench_cost.py --device cuda        # on a GPU: also the allocator's peak per step
    python scripts/bench_cost.py --device cuda --layers attention "fused attention" --lengths 8192 32768 65536
                                                      # where the explicit n x n matrices run out of memory

Notebook 17 draws these curves up to 2,048 tokens, forward passes only, on one thread, within its time
budget; this script goes further (training steps: forward and backward, longer sequences, a GPU). For
each layer and length it prints the milliseconds of one training step (the minimum over ``--repeats``,
the layers timed in turn within each repeat, as every bench script does: ``seqlab.cost.time_interleaved``),
the bytes autograd keeps for backward (``seqlab.cost.saved_bytes``: deterministic, exact) and, on CUDA,
the peak allocation of the step; then the log-log slope of each column over the lengths, to compare
with O(n d^2) and O(n^2 d). On the CPU the clock is the process's CPU time by default (``--clock cpu``).
A layer whose step runs out of memory at a length shows ``OOM`` there and is dropped from longer lengths.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from seqlab.cost import time_interleaved  # the shared timing loop: interleaved, so load hits all alike

from seqlab.cost import cuda_peak_bytes, loglog_slope, saved_bytes
from seqlab.nn import GRU, MultiheadAttention
from seqlab.nn.attention import sliding_window_attend

LAYERS = ("GRU", "attention", "fused attention", "sliding window")


def make_steps(n: int, width: int, heads: int, window: int, device: torch.device,
               layers: tuple[str, ...] = LAYERS) -> dict[str, tuple]:
    """For each of ``layers``: (a training step, a forward pass whose saved bytes to count, the tensors not to count)."""
    torch.manual_seed(0)
    gru = GRU(width, width).to(device)
    explicit = MultiheadAttention(width, heads).to(device)
    fused = MultiheadAttention(width, heads, fused=True).to(device)
    fused.load_state_dict(explicit.state_dict())
    x = torch.randn(n, 1, width, device=device, requires_grad=True)                  # (n, B, d), sequence-first
    q, k, v = (torch.randn(1, heads, n, width // heads, device=device, requires_grad=True) for _ in range(3))

    def train_step(forward: Callable[[], torch.Tensor]) -> Callable[[], None]:
        def step() -> None:
            forward().sum().backward()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        return step

    forwards = {"GRU": (lambda: gru(x)[0], [x, *gru.parameters()]),
                "attention": (lambda: explicit(x, x, x, need_weights=False)[0], [x, *explicit.parameters()]),
                "fused attention": (lambda: fused(x, x, x, need_weights=False)[0], [x, *fused.parameters()]),
                "sliding window": (lambda: sliding_window_attend(q, k, v, window)[0], [q, k, v])}
    return {name: (train_step(forward), forward, exclude) for name, (forward, exclude) in forwards.items()
            if name in layers}


def _out_of_memory(err: BaseException) -> bool:
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--window", type=int, default=32, help="keys on each side of a query (sliding window)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (fixed, for comparable runs)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--clock", choices=["cpu", "wall"], default=None,
                        help="cpu: this process's CPU time (default on the CPU); wall: elapsed time (always on a GPU)")
    parser.add_argument("--layers", nargs="+", choices=LAYERS, default=list(LAYERS), help="default: all four")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    clock = time.perf_counter if device.type == "cuda" or args.clock == "wall" else time.process_time
    print(f"one training step (forward + backward), batch 1, width {args.width}, {args.heads} heads, "
          f"window ±{args.window}, {device}, {args.threads} thread(s), {'wall' if clock is time.perf_counter else 'CPU'} time")
    layers, ms, kept, peak, oom = tuple(args.layers), {}, {}, {}, {}
    for n in args.lengths:
        alive = tuple(name for name in layers if name not in oom)
        if not alive:
            break
        try:
            steps = make_steps(n, args.width, args.heads, args.window, device, alive)
        except Exception as err:
            if not _out_of_memory(err):
                raise
            oom.update({name: n for name in alive})
            steps = {}
        for name in list(steps):   # one trial step each: a layer that runs out of memory here is dropped
            try:
                steps[name][0]()
            except Exception as err:
                if not _out_of_memory(err):
                    raise
                oom[name] = n
                del steps[name]
                if device.type == "cuda":
                    torch.cuda.empty_cache()
        if steps:
            times = time_interleaved({name: s[0] for name, s in steps.items()}, warmup=1, repeats=args.repeats,
                                     clock=clock)
        for name, (step, forward, exclude) in steps.items():
            ms[n, name] = min(times[name]) * 1e3
            kept[n, name] = saved_bytes(forward, exclude=exclude)
            peak[n, name] = cuda_peak_bytes(step, device)
        del steps
        if device.type == "cuda":
            torch.cuda.empty_cache()

        def cell(table: dict, name: str, scale: float, width: int, digits: int) -> str:
            if (n, name) in table:
                return f"{table[n, name] / scale:{width}.{digits}f}"
            return f"{'OOM' if oom.get(name, n + 1) <= n else '-':>{width}}"
        if n == args.lengths[0]:
            print(f"{'n':>6} | " + " ".join(f"{name + ' ms':>18}" for name in layers) + " | "
                  + " ".join(f"{name + ' MiB kept':>24}" for name in layers)
                  + (" | " + " ".join(f"{name + ' MiB peak':>24}" for name in layers) if device.type == "cuda" else ""))
        print(f"{n:6} | " + " ".join(cell(ms, name, 1, 18, 2) for name in layers) + " | "
              + " ".join(cell(kept, name, 2**20, 24, 2) for name in layers)
              + (" | " + " ".join(cell(peak, name, 2**20, 24, 1) for name in layers) if device.type == "cuda" else ""),
              flush=True)
    if len(args.lengths) >= 2:
        print("log-log slopes over all lengths (time / kept for backward" + (" / CUDA peak):" if device.type == "cuda" else "):"))
        for name in layers:
            lengths = [n for n in args.lengths if (n, name) in ms]
            if len(lengths) < 2:
                continue
            slopes = [loglog_slope(lengths, [ms[n, name] for n in lengths]),
                      loglog_slope(lengths, [kept[n, name] for n in lengths])]
            if device.type == "cuda":
                slopes.append(loglog_slope(lengths, [max(peak[n, name], 1) for n in lengths]))
            print(f"  {name:16} " + " / ".join(f"{s:.2f}" for s in slopes))


if __name__ == "__main__":
    main()
