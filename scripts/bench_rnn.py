"""Time one training step (forward + backward) of seqlab's RNN/LSTM/GRU against torch.nn's.

    python scripts/bench_rnn.py [--batch 32] [--seq 100] [--input 64] [--hidden 128] [--repeats 15]
    python scripts/bench_rnn.py --device cuda        # on a GPU: torch.nn is cuDNN there

For each model the three variants (torch.nn, seqlab's fused default, seqlab's plain autograd
loop ``fused=False``) -- on a GPU a fourth, seqlab's fused scan replayed as CUDA graphs
(``seqlab.nn.cuda_graphed``) -- are timed in turn within every repeat, so that a burst of load from other
processes hits all of them alike; the table shows medians and the ratios to torch.nn measured
in this one run. Thread count is torch's default. On a GPU every step ends with a
synchronisation, so the time is the kernels' time, not only the time to queue them.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
from seqlab.cost import time_interleaved  # the shared timing loop: interleaved, so load hits all alike

from seqlab.nn import GRU, LSTM, RNN, cuda_graphed


def _train_step(model: torch.nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        model.zero_grad(set_to_none=True)
        x.grad = None
        output, _ = model(x)
        output.sum().backward()
        if x.is_cuda:
            torch.cuda.synchronize()
    return step


def bench(batch: int, seq: int, input_size: int, hidden: int, repeats: int, warmup: int = 3,
          device: str = "cpu") -> list[tuple]:
    rows = []
    for name, ours_cls, torch_cls in (("RNN", RNN, torch.nn.RNN), ("LSTM", LSTM, torch.nn.LSTM),
                                      ("GRU", GRU, torch.nn.GRU)):
        torch.manual_seed(0)
        reference = torch_cls(input_size, hidden)
        fused = ours_cls(input_size, hidden)
        fused.load_state_dict(reference.state_dict())
        plain = ours_cls(input_size, hidden)
        plain.load_state_dict(reference.state_dict())
        plain.fused = False
        for model in (reference, fused, plain):
            model.to(device)
        x = torch.randn(seq, batch, input_size, device=device, requires_grad=True)
        steps = {"torch.nn": _train_step(reference, x), "seqlab": _train_step(fused, x),
                 "seqlab plain": _train_step(plain, x)}
        if x.is_cuda:   # the same fused scan, its launches recorded once and replayed as one graph per pass
            graphed = ours_cls(input_size, hidden).to(device)
            graphed.load_state_dict(reference.state_dict())
            steps["seqlab graphed"] = _train_step(cuda_graphed(graphed, x), x)
        times = time_interleaved(steps, warmup=warmup, repeats=repeats)
        med = {key: statistics.median(values) * 1e3 for key, values in times.items()}
        rows.append((name, med["torch.nn"], med["seqlab"], med["seqlab plain"], med.get("seqlab graphed")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=100)
    parser.add_argument("--input", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    args = parser.parse_args()
    device = torch.device(args.device)
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"CPU, {torch.get_num_threads()} threads")
    print(f"forward + backward, batch {args.batch}, seq {args.seq}, input {args.input}, hidden {args.hidden}; "
          f"torch {torch.__version__}, {where}, median of {args.repeats}")
    header = f"{'model':6s} {'torch.nn ms':>12s} {'seqlab ms':>10s} {'ratio':>6s} {'plain loop ms':>14s} {'ratio':>6s}"
    if device.type == "cuda":
        header += f" {'graphed ms':>11s} {'ratio':>6s}"
    print(header)
    print("-" * len(header))
    for name, t_torch, t_fused, t_plain, t_graphed in bench(args.batch, args.seq, args.input, args.hidden,
                                                            args.repeats, device=args.device):
        line = (f"{name:6s} {t_torch:12.2f} {t_fused:10.2f} {t_fused / t_torch:6.2f} {t_plain:14.2f} "
                f"{t_plain / t_torch:6.2f}")
        if t_graphed is not None:
            line += f" {t_graphed:11.2f} {t_graphed / t_torch:6.2f}"
        print(line)


if __name__ == "__main__":
    main()
