"""Train the small checkpoints that notebooks load ("what N minutes of training gives").

    python scripts/make_checkpoints.py                      # all of them, their default step budgets
    python scripts/make_checkpoints.py charlm-lstm --steps 500
    python scripts/make_checkpoints.py charlm-lstm --minutes 2      # a time budget instead
    python scripts/make_checkpoints.py --rescore            # re-measure the recorded validation loss
    python scripts/make_checkpoints.py reverser-transformer # one of the digit reversers of notebook 13
    python scripts/make_checkpoints.py charlm-gpt --minutes 1       # the GPT, 60 CPU-seconds on one thread

Each checkpoint is written to data/checkpoints/NAME.safetensors with NAME.json beside it: the
configuration, how long and how many steps it trained, the machine, and its validation loss on
a fixed slice of the validation text (seqlab.pretrained.validation_batches).
tests/test_checkpoints.py loads each one and re-measures that figure. The GPT (charlm-gpt) has its
own recipe (AdamW, warm-up, cosine decay to the end of the budget), is timed in CPU-seconds on one
thread, and its record also holds its validation loss along the way. The names, models and
training set-up are in seqlab.pretrained, which the notebooks load them through.

The digit reversers (REVERSERS below) are notebook 7's GRU encoder-decoder (and the same trained
with scheduled sampling), notebook 8's attentional one and notebook 13's Transformer, which
notebooks 7, 8 and 13 load and compare; all are trained on the same budget
(800 steps of 64 pairs, Adam at 5e-3, clipping at 1.0, the same data in the same order): their
records hold the configuration, the training set-up and the share of digits in the right place
by source length on the fixed test strings; tests/test_checkpoints_reversers.py re-measures it.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

from collections import defaultdict

import torch

from seqlab import pretrained, recipes
from seqlab.data import LMBatches, char_lm_data, make_reversals, manifest
from seqlab.data.pairs import PairBatches, pair_vocabs
from seqlab.device import seed_everything
from seqlab.models.seq2seq import ScheduledSampling, linear_schedule, seq2seq_loss, translate
from seqlab.train import lm_loss, save_checkpoint, train

SEQ_LEN, LR, CLIP, SEED = recipes.SEQ_LEN, 3e-3, 1.0, 0

# Notebook 13: three digit reversers on one budget (notebook 8's recipe, section 5). The GRU ones
# are notebooks 7 and 8's models exactly; the Transformer is seqlab's, pre-norm (it trains without
# a learning-rate warm-up, notebook 12 section 5). Its weights are stored in float16 to keep the file
# under 1 MB; every recorded figure is measured on the stored weights, loaded back into float32.
REVERSAL = {"train": {"n": 50_000, "min_len": 2, "max_len": 24, "seed": 0},
            "test": {"n": 3_000, "min_len": 2, "max_len": 24, "seed": 1},
            "steps": 800, "batch_size": 64, "lr": 5e-3, "clip_norm": 1.0, "seed": 0}
REVERSERS: dict[str, dict] = {
    "reverser-gru": {"model": "Seq2Seq", "config": {"cell": "gru", "embed_size": 16, "hidden_size": 64}},
    "reverser-gru-dot": {"model": "Seq2Seq",
                         "config": {"cell": "gru", "embed_size": 16, "hidden_size": 64, "attention": "dot"}},
    # notebook 7's remedy for exposure bias: the same GRU model and budget, trained with scheduled sampling
    # (the probability of reading its own previous digit rises linearly from 0 to 0.25 over the 800 steps)
    "reverser-gru-sampled": {"model": "Seq2Seq", "config": {"cell": "gru", "embed_size": 16, "hidden_size": 64},
                             "scheduled_sampling": {"final": 0.25, "seed": 0}},
    "reverser-transformer": {"model": "TransformerSeq2Seq", "store_dtype": "float16",
                             "config": {"d_model": 64, "nhead": 4, "num_encoder_layers": 3, "num_decoder_layers": 3,
                                        "dim_feedforward": 256, "dropout": 0.0, "norm_first": True}},
}


def provenance(name: str, steps: int | None, minutes: float | None) -> dict:
    """The part of a character model's record that says what it was made from, where and by which command."""
    return {
        "corpus": {"name": "shakespeare", "sha256": manifest()["shakespeare"]["sha256"],
                   "split": "first 90% train, last 10% validation"},
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "processor": platform.machine(), "date": time.strftime("%Y-%m-%d")},
        "made_by": "python scripts/make_checkpoints.py " + name
                   + (f" --steps {steps}" if steps is not None else "") + (f" --minutes {minutes:g}" if minutes is not None else ""),
    }


def last_hundred_mean(losses: list[float]) -> float:
    """The training loss averaged over the last 100 steps (or all, if fewer), as records keep it."""
    return round(sum(losses[-100:]) / min(100, len(losses)), 4)


def make(name: str, steps: int | None, minutes: float | None) -> dict:
    if recipes.CHECKPOINTS[name].get("model") == "GPT":
        return make_gpt(name, steps, minutes)
    data = char_lm_data()
    seed_everything(SEED)
    model = recipes.build_model(name)
    batches = LMBatches(data.train, recipes.BATCH_SIZE, SEQ_LEN, seed=SEED)
    history = train(model, batches, lm_loss, lr=LR, clip_norm=CLIP, max_steps=steps,
                    time_budget_s=None if minutes is None else minutes * 60, description=name)
    val_loss = pretrained.validation_loss(model)
    record = {
        "name": name,
        "config": model.config.to_dict(),
        "training": {"seq_len": SEQ_LEN, "batch_size": recipes.BATCH_SIZE, "lr": LR, "clip_norm": CLIP, "seed": SEED,
                     "optimizer": "Adam", "steps": len(history.steps), "seconds": round(history.seconds, 1),
                     "steps_budget": steps, "minutes_budget": minutes, "final_train_loss_avg100": last_hundred_mean(history.train_loss)},
        "validation": {"loss": round(val_loss, 5), "batches": pretrained.VAL_BATCHES},
        **provenance(name, steps, minutes),
    }
    write(name, model, record)
    return record


CURVE_POINTS, CURVE_BATCHES = 16, 10


def make_gpt(name: str, steps: int | None, minutes: float | None) -> dict:
    """A GPT checkpoint: its own recipe (recipes.CHECKPOINTS[name]), timed in CPU-seconds on one thread.

    The learning rate warms up, then decays to the end of the budget (steps, or CPU-minutes). The record
    keeps the validation loss at CURVE_POINTS moments on the first CURVE_BATCHES validation batches, with
    the steps and CPU-seconds of training before each (evaluations excluded): the trend as the budget grows.
    """
    spec = recipes.CHECKPOINTS[name]
    setup = spec["training"]
    torch.set_num_threads(1)                        # CPU-seconds on one thread: comparable under load
    data = char_lm_data()
    seed_everything(setup["seed"])
    model = recipes.build_model(name)
    optimizer, schedule = recipes.gpt_optimizer(model, setup)
    batches = LMBatches(data.train, setup["batch_size"], setup["seq_len"], seed=setup["seed"])
    curve_batches = pretrained.validation_batches()[:CURVE_BATCHES]
    every = max(1, steps // CURVE_POINTS) if steps is not None else None
    history = train(model, batches, lm_loss, optimizer=optimizer, clip_norm=setup["clip_norm"], max_steps=steps,
                    time_budget_s=None if minutes is None else minutes * 60, lr_schedule=schedule,
                    clock=time.process_time, eval_batches=curve_batches, eval_every=every,
                    eval_max_batches=None, description=name)
    stored = spec.get("store_dtype", "float32")
    if stored == "float16":                         # measure what is stored: round, then back to float32
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.half().float())
    val_loss = pretrained.validation_loss(model)
    record = {
        "name": name,
        "model": "GPT",
        "config": model.config.to_dict(),
        "parameters": model.num_parameters(),
        "stored_dtype": stored,
        "training": {**setup, "schedule": "linear warm-up over warmup_steps, cosine decay to floor x lr at the "
                                          "end of the budget", "steps": len(history.steps),
                     "cpu_seconds": round(history.eval_seconds[-1], 1),
                     "cpu_seconds_with_curve_evaluations": round(history.seconds, 1),
                     "clock": "CPU time of the process on 1 thread (time.process_time)",
                     "steps_budget": steps, "minutes_budget": minutes,
                     "final_train_loss_avg100": last_hundred_mean(history.train_loss)},
        "curve": {"what": f"validation loss on the first {CURVE_BATCHES} validation batches during training",
                  "steps": history.eval_steps, "cpu_seconds": [round(t, 1) for t in history.eval_seconds],
                  "val_loss": [round(v, 5) for v in history.eval_loss]},
        "validation": {"loss": round(val_loss, 5), "batches": pretrained.VAL_BATCHES},
        **provenance(name, steps, minutes),
    }
    if stored == "float16":
        model.half()
    write(name, model, record)
    return record


build_reverser = pretrained.build_reverser


def reversal_accuracy(model: torch.nn.Module, vocab, pairs: list[tuple[str, str]]) -> dict[int, float]:
    """Share of digits in the right place, averaged per source length (notebook 8's measure)."""
    outputs = translate(model.eval(), [vocab.encode(s) for s, _ in pairs], max_len=26)
    by_length: dict[int, list[float]] = defaultdict(list)
    for (source, target), output in zip(pairs, outputs):
        written = vocab.decode(output)
        by_length[len(source)].append(sum(i < len(written) and written[i] == target[i]
                                           for i in range(len(target))) / len(target))
    return {n: round(sum(v) / len(v), 5) for n, v in sorted(by_length.items())}


def make_reverser(name: str) -> dict:
    spec, setup = REVERSERS[name], REVERSAL
    pairs, test = make_reversals(**setup["train"]), make_reversals(**setup["test"])
    vocab, _ = pair_vocabs(pairs)                                  # the same digits on both sides
    torch.manual_seed(setup["seed"])
    model = build_reverser(spec["model"], {"src_vocab_size": len(vocab), "tgt_vocab_size": len(vocab), **spec["config"]})
    batches = PairBatches([(vocab.encode(s), vocab.encode(t)) for s, t in pairs], setup["batch_size"], seed=setup["seed"])
    sampling = spec.get("scheduled_sampling")
    loss = (ScheduledSampling(linear_schedule(sampling["final"], setup["steps"]), seed=sampling["seed"]) if sampling
            else seq2seq_loss)
    history = train(model, batches, loss, max_steps=setup["steps"], lr=setup["lr"], clip_norm=setup["clip_norm"],
                    seed=setup["seed"], description=name)
    if spec.get("store_dtype") == "float16":                      # measure what is stored: round, then back to float32
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.half().float())
    record = {
        "name": name,
        "model": spec["model"],
        "config": model.config.to_dict(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "stored_dtype": spec.get("store_dtype", "float32"),
        "data": {"task": "reverse a string of digits", "vocab": vocab.itos, "train": setup["train"], "test": setup["test"]},
        "training": {"batch_size": setup["batch_size"], "lr": setup["lr"], "clip_norm": setup["clip_norm"],
                     "seed": setup["seed"], "optimizer": "Adam", "steps": len(history.steps),
                     "seconds": round(history.seconds, 1), "train_loss_first": round(history.train_loss[0], 4),
                     "train_loss_first_avg50": round(sum(history.train_loss[:50]) / 50, 4),
                     "final_train_loss_avg50": round(sum(history.train_loss[-50:]) / 50, 4),
                     "loss": ("seq2seq_loss (teacher forcing)" if not sampling else
                              f"ScheduledSampling(linear_schedule({sampling['final']}, {setup['steps']}), "
                              f"seed={sampling['seed']})"),
                     **({"own_token_probability": {"steps": len(loss.probabilities), "first": loss.probabilities[0],
                                                   "last": round(loss.probabilities[-1], 6)}} if sampling else {})},
        "test": {"measure": "share of digits in the right place, greedy decoding, mean per source length",
                 "accuracy_by_length": reversal_accuracy(model, vocab, test),
                 "first_500_by_length": reversal_accuracy(model, vocab, test[:500])},
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "processor": platform.machine(), "date": time.strftime("%Y-%m-%d")},
        "made_by": "python scripts/make_checkpoints.py " + name,
    }
    if spec.get("store_dtype") == "float16":
        model.half()
    write(name, model, record)
    return record


def write(name: str, model: torch.nn.Module, record: dict) -> None:
    out = pretrained.checkpoint_dir()
    out.mkdir(parents=True, exist_ok=True)
    save_checkpoint(out / f"{name}.safetensors", model, record)
    (out / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")


def rescore(name: str) -> dict:
    """Re-measure a checkpoint's validation loss (after the validation slice changed) and rewrite its record."""
    model, record = pretrained.load_pretrained(name)
    if record.get("stored_dtype") == "float16":
        model.half()                               # write back what was stored
    record["validation"] = {"loss": round(pretrained.validation_loss(model), 5), "batches": pretrained.VAL_BATCHES}
    write(name, model, record)
    return record


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = list(recipes.CHECKPOINTS) + list(REVERSERS)
    parser.add_argument("names", nargs="*", default=known, help=f"some of {known}")
    parser.add_argument("--steps", type=int, help="training steps for each (default: the table's)")
    parser.add_argument("--minutes", type=float, help="a time budget for each, instead of (or beside) the steps")
    parser.add_argument("--rescore", action="store_true", help="only re-measure the recorded validation loss")
    args = parser.parse_args(argv)
    for name in args.names:
        if name in REVERSERS:
            if args.steps is not None or args.minutes is not None or args.rescore:
                parser.error(f"{name} is trained on notebook 13's fixed budget; --steps, --minutes and --rescore "
                             "do not apply")
            record = make_reverser(name)
            print(f"{name}: digits in the right place at 2 / 12 / 24 digits: "
                  + " / ".join(f"{record['test']['accuracy_by_length'][n]:.0%}" for n in (2, 12, 24))
                  + f" after {record['training']['steps']} steps ({record['training']['seconds']:.0f} s)", flush=True)
            continue
        if name not in recipes.CHECKPOINTS:
            parser.error(f"unknown checkpoint {name!r}; expected some of {known}")
        if args.rescore:
            record = rescore(name)
        else:
            steps = args.steps if args.steps is not None else (None if args.minutes else recipes.CHECKPOINTS[name]["steps"])
            record = make(name, steps, args.minutes)
        training = record["training"]
        took = (f"{training['seconds']:.0f} s" if "seconds" in training
                else f"{training['cpu_seconds']:.0f} CPU-seconds on 1 thread")
        print(f"{name}: validation loss {record['validation']['loss']:.4f} after {training['steps']} steps ({took})",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
