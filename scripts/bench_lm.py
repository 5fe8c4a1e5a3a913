"""Character language models on one training budget: validation loss against seconds of training.

    python scripts/bench_lm.py                          # 60 CPU-seconds each, 1 thread: nanogpt-baby, charlm-gpt, lstm
    python scripts/bench_lm.py --seconds 120 --recipes nanogpt-baby charlm-gpt lstm gru rnn
    python scripts/bench_lm.py --clock wall --threads 2 # wall-clock seconds on 2 threads instead
    python scripts/bench_lm.py --out data/bench/lm-60s.json
    python scripts/bench_lm.py --gpt d_model=96 --gpt num_layers=3 --lr 2e-3   # try a variant of charlm-gpt
    python scripts/bench_lm.py --jobs 3                 # the recipes in 3 processes at once (CPU clock)
    python scripts/bench_lm.py --device cuda --seconds 200 --recurrent-kernel torch \
        --recurrent num_layers=2 --recurrent hidden_size=512 --recurrent-train batch_size=128
                                                        # on a GPU, wall-clock seconds, each model at its fastest

Every recipe trains on the course's Shakespeare split (seqlab.data.char_lm_data: the first 90% of
the text) and is scored on the course's validation windows (seqlab.pretrained.validation_batches,
the windows every checkpoint's recorded loss is measured on). The recipes:

- ``nanogpt-baby``: nanoGPT's README "baby GPT" for a CPU, built from **torch.nn** modules as
  nanoGPT builds it: 4 layers, 4 heads, 128 channels, context 64, batch 12, pre-norm GELU blocks
  without biases, learned positions, the output layer tied to the embedding, no dropout, AdamW
  (lr 1e-3, betas 0.9/0.99, weight decay 0.1 on matrices) with 100 warm-up steps and a cosine
  decay to 1e-4 over 2,000 steps, gradient clipping at 1.0, GPT-2's initialisation.
- ``charlm-gpt``: seqlab's :class:`seqlab.models.gpt.GPT` with the recipe of the ``charlm-gpt``
  checkpoint (seqlab.recipes.CHECKPOINTS), its learning rate decayed to the end of the budget.
- ``lstm`` / ``gru`` / ``rnn``: seqlab's CharLM with the ``charlm-lstm`` (``-gru``, ``-rnn``)
  checkpoints' recipe: embedding 64, 256 units, sequence 64, batch 32, Adam 3e-3, clipping 1.0.

**The schedule.** A rate that decays to the end of the budget buys a lower final loss than a constant
one, so a comparison in which only one model decays is not fair. By default (``--schedule cosine``)
the recurrent recipes get the same treatment as ``charlm-gpt``: a cosine decay of the rate to 0.1 of
its start at the end of the budget (no warm-up: Adam at 3e-3 needs none for these models).
``--schedule constant`` keeps their checkpoints' constant rate. ``--train KEY=VALUE`` changes a field
of ``charlm-gpt``'s training set-up (``batch_size``, ``seq_len``, ``warmup_steps``, ``lr``...), and
``--label`` names the variant in the table and the JSON.

**The clock.** By default the budget is CPU time of this process (``time.process_time``) with
``torch.set_num_threads(1)``: "quality per CPU-second", which stays meaningful while other programs
share the machine (wall-clock time would charge their work to ours). ``--clock wall --threads 2``
measures wall-clock seconds on 2 threads instead. Evaluations are excluded from the budget: the
clock runs only around training steps. During training the validation loss is measured at
``--points`` evenly spaced moments on a fixed subset (the first ``--subset`` validation batches);
the final figure is on all of validation_batches. Every recipe starts from the same seed, one after
the other in one process (or, with ``--jobs``, side by side in worker processes, each timing its own
CPU), so the table's differences are measured in one run.

**Budgets in steps.** A CPU-second buys fewer steps on a busy machine than on a quiet one (other
programs share the caches and the memory bus), so a CPU-time budget is only comparable between runs
made on quiet machines. ``--steps N`` fixes the work instead: data/bench/budget-steps/ holds runs whose
step counts are 300 CPU-seconds' worth of each recipe at the rate its quiet 20-minute record measured
(steps per CPU-second: LSTM 16.26, GRU 18.92, RNN 52.92, charlm-gpt 24.17), every rate decayed to the
end of its own budget. Their results do not depend on what else the machine was doing.

**On a GPU** (``--device cuda``) the clock is wall-clock time with the GPU's queue drained before each
reading (``torch.cuda.synchronize``), and a GPU affords larger models: ``--recurrent KEY=VALUE`` changes a
field of the recurrent recipes' CharLMConfig (``hidden_size``, ``num_layers``, ``dropout``...),
``--recurrent-train KEY=VALUE`` their ``batch_size``, ``seq_len`` or ``lr``, and ``--recurrent-kernel torch``
runs their recurrence with torch.nn's cuDNN kernel instead of seqlab's step-by-step scan (launch-bound on a
GPU: about 15 times cuDNN's time per step, ``scripts/bench_rnn.py``), so that each architecture trains at
the speed its best implementation allows. The GPT's attention is seqlab's own; ``--gpt fused=true`` (the
charlm-gpt recipe's setting) computes it with torch's fused kernel.

``--out FILE`` writes the curves, the table and the set-up (machine, threads, clock, date,
command) as JSON; data/bench/ holds a recorded run that notebook 15 draws.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from seqlab import pretrained, recipes
from seqlab.data import LMBatches, char_lm_data
from seqlab.data.batching import forever
from seqlab.models.charlm import CharLM, CharLMConfig
from seqlab.models.gpt import gpt2_init_
from seqlab.train import evaluate, lm_loss, set_lr_factor, warmup_cosine

DEFAULT_RECIPES = ("nanogpt-baby", "charlm-gpt", "lstm")
ALL_RECIPES = ("nanogpt-baby", "charlm-gpt", "lstm", "gru", "rnn")
SEED = 0


# -- nanoGPT's baby GPT, from torch.nn modules --------------------------------------------------------
class NanoGPT(nn.Module):
    """nanoGPT's model from torch.nn parts: token + learned position embeddings, pre-norm GELU blocks, tied head.

    ids ``(B, T)`` -> logits ``(B, T, V)``. The blocks are ``torch.nn.TransformerEncoderLayer`` (the same
    computation as nanoGPT's Block: x + attn(ln_1(x)), x + mlp(ln_2(x)), 4x MLP with GELU, no biases) under
    a causal mask; initialisation as nanoGPT's (N(0, 0.02), residual projections 0.02 / sqrt(2 n_layer)).
    """

    def __init__(self, vocab_size: int, context: int = 64, n_layer: int = 4, n_head: int = 4, n_embd: int = 128,
                 dropout: float = 0.0, bias: bool = False):
        super().__init__()
        self.context = context
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(context, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(n_embd, n_head, 4 * n_embd, dropout, activation="gelu", batch_first=True,
                                       norm_first=True, bias=bias) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, bias=bias)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight                                    # weight tying
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(context), persistent=False)
        gpt2_init_(self, self.blocks)                                           # nanoGPT's (GPT-2's) initialisation

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.shape[1]
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(T, device=ids.device)))
        for block in self.blocks:
            x = block(x, src_mask=self.mask[:T, :T], is_causal=True)
        return self.lm_head(self.ln_f(x))


def nanogpt_optimizer(model: nn.Module, lr: float = 1e-3, weight_decay: float = 0.1) -> torch.optim.Optimizer:
    """nanoGPT's configure_optimizers: AdamW, weight decay on the matrices (dim >= 2) only, betas (0.9, 0.99)."""
    params = list({id(p): p for p in model.parameters()}.values())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99))


def nanogpt_schedule(warmup_iters: int = 100, lr_decay_iters: int = 2000, floor: float = 0.1) -> Callable:
    """nanoGPT's get_lr as a factor on lr: linear warm-up, cosine to min_lr = lr / 10 by step 2,000, then flat."""
    def schedule(step: int, progress: float) -> float:
        if step < warmup_iters:
            return (step + 1) / (warmup_iters + 1)
        if step > lr_decay_iters:
            return floor
        ratio = (step - warmup_iters) / (lr_decay_iters - warmup_iters)
        return floor + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (1.0 - floor)
    return schedule


# -- the recipes --------------------------------------------------------------------------------------
@dataclass
class Recipe:
    name: str
    model: nn.Module
    optimizer: torch.optim.Optimizer
    batch_size: int
    seq_len: int
    clip_norm: float | None
    schedule: Callable[[int, float], float] | None
    description: dict = field(default_factory=dict)


RECURRENT_SCHEDULES = {"cosine": "cosine to 0.1 x lr at the end of the budget", "constant": "constant"}


RECURRENT_TRAIN = {"batch_size": recipes.BATCH_SIZE, "seq_len": recipes.SEQ_LEN, "lr": 3e-3}   # their checkpoints'


def make_recipe(name: str, vocab_size: int, gpt_overrides: dict | None = None, lr: float | None = None,
                train_overrides: dict | None = None, schedule: str = "cosine", recurrent_overrides: dict | None = None,
                recurrent_train: dict | None = None, recurrent_kernel: str = "seqlab",
                device: str = "cpu") -> Recipe:
    """Build recipe ``name``'s model (on ``device``) and optimizer from seed SEED (the same start on every run).

    ``train_overrides`` change charlm-gpt's training set-up; ``schedule`` is the recurrent recipes' rate
    schedule (``"cosine"`` as charlm-gpt's, without warm-up, or ``"constant"`` as their checkpoints');
    ``recurrent_overrides`` change their CharLMConfig, ``recurrent_train`` their batch size, sequence length
    and rate, and ``recurrent_kernel="torch"`` runs their recurrence with torch.nn's kernel.
    """
    torch.manual_seed(SEED)
    if name == "nanogpt-baby":
        model = NanoGPT(vocab_size).to(device)
        return Recipe(name, model, nanogpt_optimizer(model), batch_size=12, seq_len=64, clip_norm=1.0,
                      schedule=nanogpt_schedule(),
                      description={"built_from": "torch.nn", "n_layer": 4, "n_head": 4, "n_embd": 128, "context": 64,
                                   "bias": False, "tied": True, "batch_size": 12, "optimizer": "AdamW lr 1e-3 "
                                   "betas (0.9, 0.99) weight decay 0.1 (matrices)", "schedule": "warm-up 100 steps, "
                                   "cosine to 1e-4 at step 2000", "clip_norm": 1.0,
                                   "parameters": sum(p.numel() for p in model.parameters())})
    if name == "charlm-gpt":
        spec = recipes.CHECKPOINTS["charlm-gpt"]
        model = recipes.build_model("charlm-gpt", **(gpt_overrides or {})).to(device)
        setup = {**spec["training"], **(train_overrides or {}), **({"lr": lr} if lr is not None else {})}
        if setup["seq_len"] > model.config.max_len:
            raise ValueError(f"seq_len {setup['seq_len']} is longer than the GPT's max_len {model.config.max_len}")
        optimizer, schedule = recipes.gpt_optimizer(model, setup)
        return Recipe(name, model, optimizer, batch_size=setup["batch_size"], seq_len=setup["seq_len"],
                      clip_norm=setup["clip_norm"], schedule=schedule,
                      description={"built_from": "seqlab (seqlab.models.gpt.GPT)", "config": model.config.to_dict(),
                                   "training": setup, "parameters": model.num_parameters(),
                                   "schedule": "decays to the end of the budget"})
    if name in ("lstm", "gru", "rnn"):
        if schedule not in RECURRENT_SCHEDULES:
            raise ValueError(f"schedule must be one of {sorted(RECURRENT_SCHEDULES)}, got {schedule!r}")
        if recurrent_kernel not in ("seqlab", "torch"):
            raise ValueError(f"recurrent_kernel must be 'seqlab' or 'torch', got {recurrent_kernel!r}")
        unknown = set(recurrent_train or {}) - set(RECURRENT_TRAIN)
        if unknown:
            raise ValueError(f"--recurrent-train takes {sorted(RECURRENT_TRAIN)}, got {sorted(unknown)}")
        setup = {**RECURRENT_TRAIN, **(recurrent_train or {})}
        config = CharLMConfig(vocab_size=vocab_size, cell=name, **(recurrent_overrides or {}))
        model = CharLM(config, reference=recurrent_kernel == "torch").to(device)
        built_from = ("seqlab (seqlab.models.charlm.CharLM)" if recurrent_kernel == "seqlab" else
                      "seqlab's CharLM around torch.nn's recurrent layer (CharLM(reference=True))")
        return Recipe(name, model, torch.optim.Adam(model.parameters(), lr=setup["lr"]), batch_size=setup["batch_size"],
                      seq_len=setup["seq_len"], clip_norm=1.0,
                      schedule=warmup_cosine(0, 0.1) if schedule == "cosine" else None,
                      description={"built_from": built_from, "config": config.to_dict(),
                                   "batch_size": setup["batch_size"], "seq_len": setup["seq_len"],
                                   "optimizer": f"Adam lr {setup['lr']:g}", "schedule": RECURRENT_SCHEDULES[schedule],
                                   "clip_norm": 1.0,
                                   "parameters": sum(p.numel() for p in model.parameters())})
    raise ValueError(f"unknown recipe {name!r}; expected some of {ALL_RECIPES}")


# -- one run ------------------------------------------------------------------------------------------
def run(recipe: Recipe, train_ids: torch.Tensor, subset: list, full: list, *, seconds: float | None,
        steps: int | None = None, clock: Callable[[], float] = time.process_time, points: int = 8,
        log: Callable[[str], None] = print) -> dict:
    """Train ``recipe`` for ``seconds`` on ``clock`` (or ``steps``), evaluating at ``points`` evenly spaced moments.

    Only training steps run the clock; the evaluations between them do not. Returns the curve
    (seconds, steps, validation loss on ``subset``) and the final loss on ``full``.
    """
    model, optimizer = recipe.model, recipe.optimizer
    device = next(model.parameters()).device
    subset = [(x.to(device), y.to(device)) for x, y in subset]
    full = [(x.to(device), y.to(device)) for x, y in full]
    batches = forever(LMBatches(train_ids, recipe.batch_size, recipe.seq_len, seed=SEED))
    torch.manual_seed(SEED)
    budget = seconds if seconds is not None else float(steps)
    marks = [budget * k / points for k in range(1, points + 1)]
    curve = {"seconds": [0.0], "steps": [0], "val_loss": [evaluate(model, subset).loss]}
    spent, step, train_losses = 0.0, 0, []
    model.train()
    while True:
        used = spent if seconds is not None else step
        if used >= budget:
            break
        start = clock()
        x, y = (t.to(device, non_blocking=True) for t in next(batches))
        loss = lm_loss(model, (x, y))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if recipe.schedule is not None:
            set_lr_factor(optimizer, recipe.schedule(step, min(used / budget, 1.0)))
        if recipe.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip_norm)
        optimizer.step()
        spent += clock() - start
        step += 1
        train_losses.append(loss.item())
        used = spent if seconds is not None else step
        if marks and used >= marks[0]:
            while marks and used >= marks[0]:
                marks.pop(0)
            curve["seconds"].append(round(spent, 3))
            curve["steps"].append(step)
            curve["val_loss"].append(round(evaluate(model, subset).loss, 5))
            log(f"  {recipe.name:>13}: {spent:7.1f} s  step {step:6d}  validation (subset) {curve['val_loss'][-1]:.4f}")
    final = evaluate(model, full).loss
    curve["val_loss"][0] = round(curve["val_loss"][0], 5)
    return {"recipe": recipe.name, "setup": recipe.description, "seconds": round(spent, 2), "steps": step,
            "seconds_per_step": round(spent / max(step, 1), 5), "tokens_per_second": round(
                step * recipe.batch_size * recipe.seq_len / max(spent, 1e-9), 1),
            "final_train_loss_avg50": round(sum(train_losses[-50:]) / max(1, len(train_losses[-50:])), 4),
            "val_loss": round(final, 5), "curve": curve}


def gpu_clock() -> float:
    """Wall-clock seconds once the GPU has finished the work queued so far (kernels run asynchronously)."""
    torch.cuda.synchronize()
    return time.perf_counter()


def run_one(name: str, settings: dict, data=None, full: list | None = None) -> dict:
    """Build and run one recipe with the script's settings (also in a worker process, see --jobs)."""
    torch.set_num_threads(settings["threads"])
    data = data if data is not None else char_lm_data()
    full = full if full is not None else pretrained.validation_batches()[:settings["full"]]
    gpt = name == "charlm-gpt"
    recipe = make_recipe(name, len(data.vocab), settings["overrides"] if gpt else None, settings["lr"] if gpt else None,
                         settings["train"] if gpt else None, settings["schedule"], settings["recurrent"],
                         settings["recurrent_train"], settings["recurrent_kernel"], settings["device"])
    clocks = {"cpu": time.process_time, "wall": time.perf_counter, "gpu": gpu_clock}
    if gpt and settings["label"]:
        recipe.name = settings["label"]
    return run(recipe, data.train, full[:settings["subset"]], full, seconds=settings["seconds"],
               steps=settings["steps"], clock=clocks[settings["clock"]],
               points=settings["points"], log=lambda line: print(line, flush=True))


def table(results: list[dict], clock_name: str) -> str:
    unit = "CPU-s" if clock_name == "cpu" else "s"
    lines = [f"{'recipe':>13}  {'params':>9}  {'steps':>6}  {unit:>6}  {'tokens/s':>9}  {'val loss':>8}  {'ppl':>6}",
             "-" * 70]
    for r in results:
        lines.append(f"{r['recipe']:>13}  {r['setup']['parameters']:>9,}  {r['steps']:>6}  {r['seconds']:>6.1f}  "
                     f"{r['tokens_per_second']:>9,.0f}  {r['val_loss']:>8.4f}  {math.exp(r['val_loss']):>6.2f}")
    return "\n".join(lines)


def comparisons(results: list[dict]) -> dict[str, float]:
    """Differences of the final validation losses (nats/char, positive = the first is worse) and step-cost ratios."""
    by = {r["recipe"]: r for r in results}
    out = {}
    for a, b in [("nanogpt-baby", "charlm-gpt"), ("charlm-gpt", "lstm"), ("nanogpt-baby", "lstm")]:
        if a in by and b in by:
            out[f"{a} - {b} (nats/char)"] = round(by[a]["val_loss"] - by[b]["val_loss"], 4)
            out[f"{a} / {b} tokens per second"] = round(by[a]["tokens_per_second"] / by[b]["tokens_per_second"], 3)
    return out


def parse_overrides(pairs: list[str]) -> dict:
    """``["d_model=96", "positional=rope", "fused=true"]`` -> GPTConfig overrides with their types."""
    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if not _:
            raise SystemExit(f"--gpt expects KEY=VALUE, got {pair!r}")
        low = value.lower()
        out[key] = True if low == "true" else False if low == "false" else (
            int(value) if value.lstrip("-").isdigit() else float(value) if value.replace(".", "", 1).replace(
                "e-", "", 1).isdigit() else value)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="training budget per recipe (default 60)")
    parser.add_argument("--steps", type=int, help="a step budget instead of seconds (for quick checks)")
    parser.add_argument("--clock", choices=("cpu", "wall"),
                        help="cpu: this process's CPU time (the default on the CPU); wall: wall-clock time (on a GPU: "
                             "the only choice, read after the GPU's queue is drained)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the models train (default cpu)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--recipes", nargs="+", default=list(DEFAULT_RECIPES), choices=ALL_RECIPES)
    parser.add_argument("--points", type=int, default=8, help="evaluations along the curve (default 8)")
    parser.add_argument("--subset", type=int, default=10,
                        help="validation batches for the curve's points (default 10; the final figure uses all)")
    parser.add_argument("--full", type=int, default=pretrained.VAL_BATCHES,
                        help=f"validation batches for the final figure (default all {pretrained.VAL_BATCHES})")
    parser.add_argument("--gpt", action="append", default=[], metavar="KEY=VALUE",
                        help="override a GPTConfig field of the charlm-gpt recipe, e.g. num_layers=3, nhead=2, "
                             "max_len=128, positional=rope (repeatable)")
    parser.add_argument("--lr", type=float, help="override the charlm-gpt recipe's learning rate")
    parser.add_argument("--train", action="append", default=[], metavar="KEY=VALUE",
                        help="override a field of the charlm-gpt recipe's training set-up, e.g. batch_size=32 (repeatable)")
    parser.add_argument("--label", help="the name of the charlm-gpt variant in the table and the JSON")
    parser.add_argument("--schedule", choices=sorted(RECURRENT_SCHEDULES), default="cosine",
                        help="the recurrent recipes' rate: cosine decay to the end of the budget, as charlm-gpt's "
                             "(default), or constant, as their checkpoints'")
    parser.add_argument("--recurrent", action="append", default=[], metavar="KEY=VALUE",
                        help="override a CharLMConfig field of the recurrent recipes, e.g. hidden_size=512 (repeatable)")
    parser.add_argument("--recurrent-train", action="append", default=[], metavar="KEY=VALUE",
                        help="override the recurrent recipes' batch_size, seq_len or lr (repeatable)")
    parser.add_argument("--recurrent-kernel", choices=("seqlab", "torch"), default="seqlab",
                        help="the recurrent recipes' recurrence: seqlab's scan (default) or torch.nn's kernel")
    parser.add_argument("--jobs", type=int, default=1,
                        help="run the recipes in this many processes at once (CPU clock only; default 1)")
    parser.add_argument("--out", type=Path, help="write the curves and the table as JSON")
    args = parser.parse_args(argv)
    if args.device == "cuda":
        if args.clock == "cpu":
            parser.error("--device cuda needs the wall clock: the CPU time of the process does not see the GPU's work")
        if not torch.cuda.is_available():
            parser.error("--device cuda: torch sees no CUDA device here")
        args.clock = "gpu"
    args.clock = args.clock or "cpu"
    if args.jobs > 1 and args.clock != "cpu":
        parser.error("--jobs > 1 needs --clock cpu: parallel recipes would share the wall clock's seconds")
    torch.set_num_threads(args.threads)
    data = char_lm_data()
    full = pretrained.validation_batches()[:args.full]
    subset = full[:args.subset]
    overrides = parse_overrides(args.gpt)
    budget = f"{args.steps} steps" if args.steps else f"{args.seconds:g} {'CPU-' if args.clock == 'cpu' else 'GPU-' if args.clock == 'gpu' else ''}seconds"
    print(f"budget {budget} per recipe, {args.threads} thread(s), clock={args.clock}; "
          f"curve on {len(subset)} validation batches, final on {len(full)}", flush=True)
    settings = {"seconds": None if args.steps else args.seconds, "steps": args.steps, "clock": args.clock,
                "threads": args.threads, "points": args.points, "subset": args.subset, "full": args.full,
                "overrides": overrides, "lr": args.lr, "train": parse_overrides(args.train), "label": args.label,
                "schedule": args.schedule, "recurrent": parse_overrides(args.recurrent),
                "recurrent_train": parse_overrides(args.recurrent_train), "recurrent_kernel": args.recurrent_kernel,
                "device": args.device}
    if args.jobs > 1:           # one process per recipe; each measures its own CPU time
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            results = list(pool.map(run_one, args.recipes, [settings] * len(args.recipes)))
    else:
        results = [run_one(name, settings, data=data, full=full) for name in args.recipes]
    print()
    print(table(results, args.clock))
    diffs = comparisons(results)
    for key, value in diffs.items():
        print(f"{key}: {value:+.4f}" if "nats" in key else f"{key}: {value:.3f}")
    if args.out:
        record = {
            "what": "validation loss (nats/char, seqlab.pretrained.validation_batches) against training budget",
            "budget": {"seconds": None if args.steps else args.seconds, "steps": args.steps, "clock": args.clock,
                       "jobs": args.jobs,
                       "clock_meaning": {"cpu": "CPU time of the process (time.process_time), evaluations excluded",
                                         "wall": "wall-clock time, evaluations excluded",
                                         "gpu": "wall-clock time with the GPU's queue drained at each reading, "
                                                "evaluations excluded"}[args.clock],
                       "device": args.device,
                       "threads": args.threads},
            "validation": {"curve_batches": len(subset), "final_batches": len(full),
                           "batch": [recipes.BATCH_SIZE, recipes.SEQ_LEN]},
            "results": results,
            "comparisons": diffs,
            "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": args.threads,
                        "processor": platform.processor() or platform.machine(), "cpus": _cpu_model(),
                        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
                        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
            "command": "python scripts/bench_lm.py " + " ".join(argv),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
