"""Train the small checkpoints that notebooks load ("what N minutes of training gives").

    python scripts/make_checkpoints.py                      # all of them, their default step budgets
    python scripts/make_checkpoints.py charlm-lstm --steps 500
    python scripts/make_checkpoints.py charlm-lstm --minutes 2      # a time budget instead
    python scripts/make_checkpoints.py --rescore            # re-measure the recorded validation loss

Each checkpoint is written to data/checkpoints/NAME.safetensors with NAME.json beside it: the
configuration, how long and how many steps it trained, the machine, and its validation loss on
a fixed slice of the validation text (seqlab.pretrained.validation_batches).
tests/test_checkpoints.py loads each one and re-measures that figure. The names, models and
training set-up are in seqlab.pretrained, which the notebooks load them through.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import torch

from seqlab import pretrained
from seqlab.data import LMBatches, char_lm_data, manifest
from seqlab.device import seed_everything
from seqlab.train import lm_loss, save_checkpoint, train

SEQ_LEN, LR, CLIP, SEED = pretrained.SEQ_LEN, 3e-3, 1.0, 0


def make(name: str, steps: int | None, minutes: float | None) -> dict:
    data = char_lm_data()
    seed_everything(SEED)
    model = pretrained.build_model(name)
    batches = LMBatches(data.train, pretrained.BATCH_SIZE, SEQ_LEN, seed=SEED)
    history = train(model, batches, lm_loss, lr=LR, clip_norm=CLIP, max_steps=steps,
                    time_budget_s=None if minutes is None else minutes * 60, description=name)
    val_loss = pretrained.validation_loss(model)
    record = {
        "name": name,
        "config": model.config.to_dict(),
        "training": {"seq_len": SEQ_LEN, "batch_size": pretrained.BATCH_SIZE, "lr": LR, "clip_norm": CLIP, "seed": SEED,
                     "optimizer": "Adam", "steps": len(history.steps), "seconds": round(history.seconds, 1),
                     "steps_budget": steps, "minutes_budget": minutes, "final_train_loss_avg100": round(sum(history.train_loss[-100:]) / min(100, len(history.train_loss)), 4)},
        "validation": {"loss": round(val_loss, 5), "batches": pretrained.VAL_BATCHES},
        "corpus": {"name": "shakespeare", "sha256": manifest()["shakespeare"]["sha256"], "split": "first 90% train, last 10% validation"},
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "processor": platform.machine(), "date": time.strftime("%Y-%m-%d")},
        "made_by": "python scripts/make_checkpoints.py " + name
                   + (f" --steps {steps}" if steps is not None else "") + (f" --minutes {minutes:g}" if minutes is not None else ""),
    }
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
    record["validation"] = {"loss": round(pretrained.validation_loss(model), 5), "batches": pretrained.VAL_BATCHES}
    write(name, model, record)
    return record


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(pretrained.CHECKPOINTS), help=f"some of {list(pretrained.CHECKPOINTS)}")
    parser.add_argument("--steps", type=int, help="training steps for each (default: the table's)")
    parser.add_argument("--minutes", type=float, help="a time budget for each, instead of (or beside) the steps")
    parser.add_argument("--rescore", action="store_true", help="only re-measure the recorded validation loss")
    args = parser.parse_args(argv)
    for name in args.names:
        if name not in pretrained.CHECKPOINTS:
            parser.error(f"unknown checkpoint {name!r}; expected some of {list(pretrained.CHECKPOINTS)}")
        if args.rescore:
            record = rescore(name)
        else:
            steps = args.steps if args.steps is not None else (None if args.minutes else pretrained.CHECKPOINTS[name]["steps"])
            record = make(name, steps, args.minutes)
        print(f"{name}: validation loss {record['validation']['loss']:.4f} after {record['training']['steps']} steps "
              f"({record['training']['seconds']:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
