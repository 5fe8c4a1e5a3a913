"""Regression power, shown: plant a known bug in a scratch copy of the library, run the tests, report
which ones catch it.

    python scripts/mutants.py                       # every mutant, the unit tests (tests/, no browser)
    python scripts/mutants.py lstm-forget-from-input attention-no-scale
    python scripts/mutants.py --list                # the mutants and what each breaks
    python scripts/mutants.py causal-mask-shifted -- notebooks/14-gpt.ipynb   # other test paths

Why: a suite that is told to tolerate machine-to-machine drift (bands, outputs compared only where
every profile prints alike) must still fail on a real mistake. Each mutant below is a mistake a
student or a contributor makes -- a gate read from the wrong rows, a scale dropped, a mask off by
one -- written as one exact text replacement in one file. The checkout is never touched: ``lib/``
is copied to a temporary folder, the bug planted there, and pytest runs from the checkout with that
copy first on ``PYTHONPATH`` (ahead of the editable install). A mutant whose text no longer matches
the library stops the script with its name, so the list cannot silently rot.

The closing table says, per mutant, how many tests failed and names the first few; ``SURVIVED``
means no test caught it, and is the script's failure (exit 1).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # testbed.py, at the root (standard library only): a script sees only scripts/
from testbed import parallel_arguments, worker_threads  # noqa: E402

DEFAULT_PATHS = ["tests", "--ignore=tests/browser"]


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str          # relative to lib/seqlab
    old: str           # exact text, found once
    new: str
    what: str          # the mistake in words


MUTANTS = [
    Mutant("lstm-forget-from-input", "nn/lstm.py",
           "i_t, f_t, _, o_t = torch.sigmoid(gates).chunk(4, dim=1)",
           "i_t, _, _, o_t = torch.sigmoid(gates).chunk(4, dim=1); f_t = i_t",
           "the LSTM's forget gate read from the input gate's rows"),
    Mutant("gru-reset-dropped", "nn/gru.py",
           "n_t = torch.tanh(x_n + r_t * h_n)",
           "n_t = torch.tanh(x_n + h_n)",
           "the GRU's candidate ignores the reset gate"),
    Mutant("attention-no-scale", "nn/attention.py",
           "scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale\n    n, m",
           "scale = 1.0 if scale is None else scale\n    n, m",
           "scaled dot-product attention without 1/sqrt(d_k)"),
    Mutant("causal-mask-shifted", "nn/masks.py",
           ".tril(diagonal=m - n)",
           ".tril(diagonal=m - n + 1)",
           "the causal mask shifted by one: each token also sees the next"),
    Mutant("heads-view-without-transpose", "nn/multihead.py",
           "return x.view(n, B, self.num_heads, self.head_dim).permute(1, 2, 0, 3)",
           "return x.reshape(B, self.num_heads, n, self.head_dim)",
           "heads split by a reshape that mixes positions and batch (no transpose)"),
    Mutant("layernorm-unbiased", "nn/layer_norm.py",
           "sigma2 = (x_ - mu).pow(2).mean(dim=dims, keepdim=True)",
           "sigma2 = x_.var(dim=dims, keepdim=True, correction=1)",
           "LayerNorm with the unbiased variance (1/(d-1))"),
    Mutant("sinusoid-sin-cos-swapped", "nn/positional.py",
           "torch.stack((torch.sin(angle), torch.cos(angle)), dim=-1)",
           "torch.stack((torch.cos(angle), torch.sin(angle)), dim=-1)",
           "sinusoidal encoding with cosines in the even columns"),
]


def plant(mutant: Mutant, lib_copy: Path) -> None:
    target = lib_copy / "seqlab" / mutant.file
    text = target.read_text()
    if text.count(mutant.old) != 1:
        raise SystemExit(f"mutant {mutant.name}: expected its text once in lib/seqlab/{mutant.file}, found it "
                         f"{text.count(mutant.old)} times; update MUTANTS in {Path(__file__).name}")
    target.write_text(text.replace(mutant.old, mutant.new))


def failed_tests(xml_path: Path) -> list[str]:
    if not xml_path.exists():
        return []
    failed = []
    for case in ET.parse(xml_path).iter("testcase"):
        if any(child.tag in ("failure", "error") for child in case):
            failed.append(f"{case.get('classname', '')}::{case.get('name', '')}")
    return failed


def prepare(mutant: Mutant | None, scratch: Path) -> Path:
    """A copy of ``lib/`` with ``mutant`` planted (None: as it is), ``data/`` linked beside it, as seqlab
    expects (it finds its checkpoints there); returns the copy's ``lib`` folder."""
    lib_copy = scratch / (mutant.name if mutant else "none") / "lib"
    shutil.copytree(ROOT / "lib", lib_copy, ignore=shutil.ignore_patterns("__pycache__"))
    (lib_copy.parent / "data").symlink_to(ROOT / "data")
    if mutant:
        plant(mutant, lib_copy)
    return lib_copy


def copy_env(lib_copy: Path, workers: int) -> dict[str, str]:
    """This environment with ``lib_copy`` first on the import path and torch's threads shared out among
    the test workers as ``make test`` does (testbed.worker_threads)."""
    env = {**os.environ, "PYTHONPATH": f"{lib_copy}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "SEQLAB_DEVICE": os.environ.get("SEQLAB_DEVICE", "cpu")}
    return worker_threads(env, workers)


def run_tests(lib_copy: Path, paths: list[str], workers: int, maxfail: int = 0) -> tuple[int, list[str], float]:
    """pytest over ``paths`` against ``lib_copy``: (exit code, failed tests, seconds). ``maxfail`` > 0 stops
    the run after that many failures (a mutant caught that often needs no more)."""
    xml = lib_copy.parent / "report.xml"
    parallel = parallel_arguments([], cpus=workers)
    stop = [f"--maxfail={maxfail}"] if maxfail > 0 else []
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *parallel, *stop,
           f"--junitxml={xml}", *paths]
    started = time.perf_counter()
    code = subprocess.run(cmd, cwd=ROOT, env=copy_env(lib_copy, max(1, workers)), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode
    return code, failed_tests(xml), time.perf_counter() - started


def check_import_path(lib_copy: Path) -> None:
    """The copy must be what the tests import; else every mutant 'survives' for the wrong reason."""
    where = subprocess.run([sys.executable, "-c", "import seqlab; print(seqlab.__file__)"], cwd=ROOT,
                           env=copy_env(lib_copy, 1), capture_output=True, text=True).stdout.strip()
    if not where.startswith(str(lib_copy)):
        raise SystemExit(f"the scratch copy is not imported first (seqlab came from {where!r})")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mutants", nargs="*", help="names (default: all)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("-n", "--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--no-control", action="store_true", help="skip the run without a mutant")
    parser.add_argument("--maxfail", type=int, default=20,
                        help="stop a mutant's run after this many failing tests (0: run them all)")
    cut = argv.index("--") if "--" in argv else len(argv)          # after "--": pytest's paths and options
    args = parser.parse_args(argv[:cut])
    paths = argv[cut + 1:] or DEFAULT_PATHS
    known = {m.name: m for m in MUTANTS}
    if args.list:
        for m in MUTANTS:
            print(f"{m.name:30s} lib/seqlab/{m.file}: {m.what}")
        return 0
    unknown = [n for n in args.mutants if n not in known]
    if unknown:
        raise SystemExit(f"no mutant {unknown}; the mutants are: {', '.join(known)}")
    chosen = [known[n] for n in args.mutants] or MUTANTS
    rows, survived = [], []
    with tempfile.TemporaryDirectory(prefix="seqlab-mutants-") as tmp:
        scratch = Path(tmp)
        control = prepare(None, scratch)
        check_import_path(control)
        copies = {m.name: prepare(m, scratch) for m in chosen}   # every text must match before any test runs
        if not args.no_control:
            code, failed, seconds = run_tests(control, paths, args.workers)
            print(f"control (no mutant): exit {code}, {len(failed)} failed, {seconds:.0f} s", flush=True)
            if failed:
                raise SystemExit("the tests fail without a mutant: " + ", ".join(failed[:5]))
        for m in chosen:
            code, failed, seconds = run_tests(copies[m.name], paths, args.workers, args.maxfail)
            stopped = args.maxfail > 0 and len(failed) >= args.maxfail
            verdict = f"caught by {'at least ' if stopped else ''}{len(failed)} tests" if failed else "SURVIVED"
            print(f"{m.name}: {verdict} ({seconds:.0f} s)", flush=True)
            for name in failed[:8]:
                print(f"    {name}")
            if not failed:
                survived.append(m.name)
            rows.append((m, len(failed), failed))
    print(f"\n{'mutant':30s} {'tests failed':>12s}  first")
    for m, count, failed in rows:
        shown = (f">= {count}" if args.maxfail > 0 and count >= args.maxfail else str(count)) if count else "SURVIVED"
        print(f"{m.name:30s} {shown:>12s}  {failed[0] if failed else m.what}")
    print(f"test paths: {' '.join(paths)}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
