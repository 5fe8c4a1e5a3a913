"""Time one training step (forward + backward) of seqlab's MultiheadAttention against torch.nn's.

    python scripts/bench_attention.py [--batch 8] [--seq 256] [--width 256] [--heads 8] [--repeats 20]
    python scripts/bench_attention.py --device cuda      # on a GPU (TF32 off, as in the parity tests)

Causal self-attention in training mode (dropout 0), like with like:

- **explicit**: ``need_weights=True`` on both sides. torch then runs its own explicit path (one
  ``baddbmm`` of the float mask and the scaled queries, softmax, ``bmm``); seqlab runs
  :func:`seqlab.nn.attention.attend` (``q k^T``, scale, mask, softmax, weighted sum).
- **fused**: ``need_weights=False``. torch then calls ``scaled_dot_product_attention`` with
  ``is_causal=True`` (it drops the mask, trusting the hint); seqlab with ``fused=True`` calls
  ``scaled_dot_product_attention`` too, with the boolean causal mask.

Both sides get the same inputs (``attn_mask`` = the causal mask, ``is_causal=True``). The four
variants are timed in turn within every repeat, so that a burst of load from other processes hits
all of them alike; the table shows the *minimum* over repeats (the least-disturbed run) and the
ratios measured in this one run. The thread count is fixed (``--threads``, default 1). On the CPU
the clock is the process's CPU time by default (``--clock cpu``), which leaves out the time other
processes hold the cores on a shared machine; ``--clock wall`` gives elapsed time. On a GPU the
clock is wall time and every step ends with a synchronisation.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from seqlab.cost import time_interleaved  # the shared timing loop: interleaved, so load hits all alike

from seqlab.nn.multihead import MultiheadAttention


def _train_step(model: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor, need_weights: bool) -> Callable[[], None]:
    def step() -> None:
        model.zero_grad(set_to_none=True)
        x.grad = None
        output, _ = model(x, x, x, attn_mask=mask, is_causal=True, need_weights=need_weights)
        output.sum().backward()
        if x.is_cuda:
            torch.cuda.synchronize()
    return step


def bench(batch: int, seq: int, width: int, heads: int, repeats: int, warmup: int = 3,
          device: str = "cpu", clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Minimum milliseconds per training step of each variant, timed with ``clock``."""
    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(width, heads, batch_first=True, device=device).train()
    explicit = MultiheadAttention(width, heads, batch_first=True, device=device).train()
    fused = MultiheadAttention(width, heads, batch_first=True, device=device, fused=True).train()
    explicit.load_state_dict(reference.state_dict())
    fused.load_state_dict(reference.state_dict())
    x = torch.randn(batch, seq, width, device=device, requires_grad=True)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(seq, device=device, dtype=torch.bool)  # True = blocked
    steps = {"torch explicit": _train_step(reference, x, mask, need_weights=True),
             "seqlab explicit": _train_step(explicit, x, mask, need_weights=True),
             "torch fused": _train_step(reference, x, mask, need_weights=False),
             "seqlab fused": _train_step(fused, x, mask, need_weights=False)}
    times = time_interleaved(steps, warmup=warmup, repeats=repeats, clock=clock)
    return {key: min(values) * 1e3 for key, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (fixed, for comparable runs)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--clock", choices=["cpu", "wall"], default=None,
                        help="cpu: this process's CPU time (default on the CPU: on a shared machine it leaves out "
                             "the time other processes hold the cores); wall: elapsed time (always on a GPU)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"CPU, {torch.get_num_threads()} thread(s)")
    clock = args.clock or ("wall" if device.type == "cuda" else "cpu")
    if clock == "cpu" and device.type == "cuda":
        parser.error("--clock cpu cannot time GPU kernels; use --clock wall")
    print(f"multi-head attention, forward + backward, causal, training mode: batch {args.batch}, "
          f"{args.seq} tokens, width {args.width}, {args.heads} heads; torch {torch.__version__}, {where}, "
          f"min of {args.repeats} repeats, {clock} clock")
    ms = bench(args.batch, args.seq, args.width, args.heads, args.repeats, device=args.device,
               clock=time.process_time if clock == "cpu" else time.perf_counter)
    runs = {"explicit": ("baddbmm + softmax + bmm (need_weights=True)", "attend(): q k^T, mask, softmax, @ v"),
            "fused": ("scaled_dot_product_attention(is_causal=True)",
                      "scaled_dot_product_attention(attn_mask=causal)")}
    header = f"{'path':9s} {'torch.nn ms':>12s} {'seqlab ms':>10s} {'ratio':>6s}   what runs (torch | seqlab)"
    print(header)
    print("-" * len(header))
    for path, (theirs, ours) in runs.items():
        t_torch, t_ours = ms[f"torch {path}"], ms[f"seqlab {path}"]
        print(f"{path:9s} {t_torch:12.2f} {t_ours:10.2f} {t_ours / t_torch:6.2f}   {theirs} | {ours}")


if __name__ == "__main__":
    main()
