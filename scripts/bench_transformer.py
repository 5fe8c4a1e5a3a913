"""Time one training step (forward + backward) of seqlab's TransformerEncoderLayer against torch.nn's.

    python scripts/bench_transformer.py [--batch 8] [--seq 256] [--d-model 256] [--heads 8] [--d-ff 1024]
                                        [--repeats 20] [--threads 1] [--causal]
    python scripts/bench_transformer.py --device cuda      # on a GPU (every step ends with a synchronisation)

Training mode (dropout 0.1, as the layers' default), post-norm, ReLU. Three variants share one
set of weights: torch.nn.TransformerEncoderLayer, seqlab's with the explicit attention (the
default, the path that can return weights) and seqlab's with ``fused=True``
(``scaled_dot_product_attention``). They are timed in turn within every repeat, after a warm-up,
so that a burst of load from other processes hits all of them alike; the table shows the
*minimum* over the repeats (the least disturbed run) and the ratios to torch.nn measured in this
one run. The CPU thread count is fixed (``--threads``) so that runs are comparable.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from seqlab.cost import time_interleaved  # the shared timing loop: interleaved, so load hits all alike

from seqlab.nn.transformer import Transformer, TransformerEncoderLayer


def _train_step(layer: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor | None) -> Callable[[], None]:
    def step() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        out = layer(x, src_mask=mask, is_causal=mask is not None)
        out.sum().backward()
        if x.is_cuda:
            torch.cuda.synchronize()
    return step


def bench(batch: int, seq: int, d_model: int, heads: int, d_ff: int, repeats: int, warmup: int = 3,
          device: str = "cpu", causal: bool = False) -> dict[str, float]:
    """Minimum milliseconds per training step for each variant."""
    torch.manual_seed(0)
    kwargs = dict(d_model=d_model, nhead=heads, dim_feedforward=d_ff, dropout=0.1, batch_first=True)
    reference = torch.nn.TransformerEncoderLayer(**kwargs)
    explicit = TransformerEncoderLayer(**kwargs)
    fused = TransformerEncoderLayer(**kwargs, fused=True)
    for layer in (explicit, fused):
        layer.load_state_dict(reference.state_dict(), strict=True)
    for layer in (reference, explicit, fused):
        layer.to(device).train()
    x = torch.randn(batch, seq, d_model, device=device, requires_grad=True)
    mask = Transformer.generate_square_subsequent_mask(seq, device=device) if causal else None
    steps = {"torch.nn": _train_step(reference, x, mask), "seqlab": _train_step(explicit, x, mask),
             "seqlab fused": _train_step(fused, x, mask)}
    times = time_interleaved(steps, warmup=warmup, repeats=repeats)
    return {key: min(values) * 1e3 for key, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (fixed, so that runs compare)")
    parser.add_argument("--causal", action="store_true", help="a causal src_mask (is_causal=True)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    args, _ = parser.parse_known_args()      # `make bench ARGS` go to every bench script
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"CPU, {torch.get_num_threads()} thread{'s' if torch.get_num_threads() > 1 else ''}")
    print(f"TransformerEncoderLayer, training step (forward + backward), batch {args.batch}, {args.seq} tokens, "
          f"d_model {args.d_model}, {args.heads} heads, d_ff {args.d_ff}, dropout 0.1"
          f"{', causal' if args.causal else ''}; torch {torch.__version__}, {where}, min of {args.repeats}")
    ms = bench(args.batch, args.seq, args.d_model, args.heads, args.d_ff, args.repeats, device=args.device,
               causal=args.causal)
    header = f"{'variant':14s} {'ms':>9s} {'ratio to torch.nn':>18s}"
    print(header)
    print("-" * len(header))
    for key, value in ms.items():
        print(f"{key:14s} {value:9.2f} {value / ms['torch.nn']:18.2f}")


if __name__ == "__main__":
    main()
