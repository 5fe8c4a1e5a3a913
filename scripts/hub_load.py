#!/usr/bin/env python3
"""make hub-load N=16: a class arriving at seqlab's hub on one machine, measured (run by hand, as root; not in CI).

    make hub-load N=16                      # or: .venv/bin/python scripts/hub_load.py --students 16

On a hub of its own on loopback (scripts/hub_run.py, as make hub-smoke), with the hub's per-student limits:

1. a baseline: one student alone runs each notebook of the mix (``--notebooks``), so the crowd's times have
   something to be compared with;
2. the crowd: N students arrive ``--stagger`` seconds apart; each logs in (the login form), gets a server, starts
   a kernel (through the REST API) and runs one notebook of the mix cell by cell through the kernel's websocket
   (student i takes notebook i mod len(mix)), then reads its kernel's CPU seconds and peak RSS;
3. the hog: one more student allocates 3 GiB in a kernel (more than the 2 GiB limit) while the crowd runs; the
   kernel is killed, it restarts, and the next cell's output must say that it was memory (hub/memory_notice.py);
   no other student's group may count an OOM kill.

It prints, per phase (login, spawn, kernel start, cell execution, the whole notebook), p50 / p90 / max and the
failures by cause; per student, the cgroup's peak memory (the server, its kernel and the page cache charged to
it), the kernel's own peak RSS and CPU seconds; the slowdown of each notebook against the baseline; and the
load average before and after (the machine may be shared: say so beside the numbers). JSON goes to
test-artifacts/hub/load-N<N>.json.

Bounded: at most 64 students, ``--max-minutes`` in all (every wait has its own limit too), everything on
127.0.0.1, and it stops the run (students stop at their next cell, the hub is stopped) when the machine's
available memory falls under ``--min-free-gib`` (2 GiB). The hub stops everything it started at the end, and the
run reports anything left behind.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import hub_run  # a sibling script (this script's folder is on the path)

ROOT = Path(__file__).resolve().parents[1]

MIX = ["01-why-sequences.ipynb", "09-self-attention.ipynb", "00-start-here.ipynb", "17-cost-and-beyond.ipynb"]
MAX_STUDENTS = 64
HOG_GIB = 3
USAGE_CELL = ("import resource as _r; _u = _r.getrusage(_r.RUSAGE_SELF); "
              "print(_u.ru_utime + _u.ru_stime, _u.ru_maxrss * 1024); del _r, _u")
HOG_CELL = f"import numpy as _np; _hog = _np.ones({HOG_GIB} * 2**30 // 8); print(_hog.nbytes)"


class Stop(Exception):
    """The run was stopped (memory guard or time limit)."""


def percentiles(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]

    return {"n": len(values), "p50": statistics.median(ordered), "p90": at(0.9), "max": ordered[-1]}


class Run:
    def __init__(self, hub: hub_run.Hub, args):
        self.hub, self.args = hub, args
        self.deadline = time.monotonic() + args.max_minutes * 60
        self.stopped: str | None = None
        self.phases: dict[str, list[float]] = {p: [] for p in ("login", "spawn", "kernel start", "cell", "notebook")}
        self.failures: Counter = Counter()
        self.students: list[dict] = []
        self.lock = threading.Lock()

    def check(self) -> None:
        if self.stopped:
            raise Stop(self.stopped)
        if time.monotonic() > self.deadline:
            self.stopped = f"time limit ({self.args.max_minutes} min) reached"
            raise Stop(self.stopped)

    def guard(self) -> None:
        """Every second: stop the run when available memory falls under the floor."""
        floor = self.args.min_free_gib * 2**30
        self.lowest_free = hub_run.free_memory_bytes()
        while not self.done.is_set():
            free = hub_run.free_memory_bytes()
            self.lowest_free = min(self.lowest_free, free)
            if free < floor:
                self.stopped = f"available memory fell to {free / 2**30:.1f} GiB (< {self.args.min_free_gib} GiB)"
                print(f"[hub-load] STOPPING: {self.stopped}", flush=True)
                return
            time.sleep(1)

    def record(self, phase: str, seconds: float) -> None:
        with self.lock:
            self.phases[phase].append(seconds)

    def run_cells(self, kernel: hub_run.Kernel, cells: list[str], phase: bool = True) -> tuple[float, list[float]]:
        started, times = time.monotonic(), []
        for index, code in enumerate(cells):
            self.check()
            result = kernel.run(code, timeout_s=300)
            if result["status"] != "ok":
                raise AssertionError(f"code cell {index}: {result['error']}")
            times.append(result["seconds"])
            if phase:
                self.record("cell", result["seconds"])
        return time.monotonic() - started, times

    def student(self, index: int, notebook: str, start_at: float, baseline: bool = False) -> dict:
        time.sleep(max(0.0, start_at - time.monotonic()))
        student = self.hub.student(index)
        entry = {"student": student.name, "notebook": notebook, "ok": False}
        cause = None
        try:
            self.check()
            entry["login_s"] = student.log_in()
            self.check()
            entry["spawn_s"] = student.spawn(timeout_s=self.args.spawn_timeout)
            started = time.monotonic()
            kernel = student.start_kernel(f"work/{notebook}")
            kernel.run("pass", timeout_s=120)
            entry["kernel_start_s"] = time.monotonic() - started
            if not baseline:
                self.record("login", entry["login_s"])
                self.record("spawn", entry["spawn_s"])
                self.record("kernel start", entry["kernel_start_s"])
            try:
                total, _ = self.run_cells(kernel, hub_run.code_cells(ROOT / "notebooks" / notebook), not baseline)
                entry["notebook_s"] = total
                if not baseline:
                    self.record("notebook", total)
                cpu, maxrss = kernel.run(USAGE_CELL)["stdout"].split()
                entry["kernel_cpu_s"], entry["kernel_peak_rss"] = float(cpu), int(maxrss)
            finally:
                kernel.close()
            entry["ok"] = True
        except Stop as error:
            cause = f"stopped: {error}"
        except hub_run.SpawnFailed as error:
            cause = f"spawn failed: {error}"
        except TimeoutError as error:
            cause = f"timeout: {str(error).splitlines()[0][:120]}"
        except hub_run.KernelDied as error:
            cause = f"kernel died: {error}"
        except AssertionError as error:
            cause = f"cell error: {str(error)[:160]}"
        except Exception as error:                                   # report every cause, never hide one
            cause = f"{type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"
        usage = self.hub.usage(student.name)
        if usage:
            entry.update({k: usage[k] for k in ("peak_bytes", "limit_bytes", "oom_kills", "cpu_seconds")})
        if cause:
            entry["failure"] = cause
            if not baseline:
                with self.lock:
                    self.failures[cause.split(":")[0]] += 1
        return entry

    def hog(self, index: int, start_at: float) -> dict:
        """A student who allocates more than the limit: killed, restarted, told that it was memory."""
        time.sleep(max(0.0, start_at - time.monotonic()))
        student = self.hub.student(index)
        entry = {"student": student.name, "notebook": f"allocates {HOG_GIB} GiB"}
        try:
            student.log_in()
            student.spawn(timeout_s=self.args.spawn_timeout)
            kernel = student.start_kernel(f"work/{MIX[0]}")
            kernel.run("pass", timeout_s=120)
            try:
                result = kernel.run(HOG_CELL, timeout_s=180)
                entry["killed"] = False
                entry["result"] = result
            except hub_run.KernelDied as died:
                entry["killed"] = True
                entry["death"] = str(died)
                deadline = time.monotonic() + 300            # the restart is slow on a busy machine
                while "told" not in entry and time.monotonic() < deadline:
                    try:                                     # the first cell the student runs after the restart
                        entry["told"] = kernel.run("1 + 1", timeout_s=30)["stderr"].strip()
                    except (TimeoutError, hub_run.KernelDied):
                        pass
            kernel.close()
        except Exception as error:
            entry["failure"] = f"{type(error).__name__}: {str(error)[:200]}"
        usage = self.hub.usage(student.name)
        if usage:
            entry.update({k: usage[k] for k in ("peak_bytes", "limit_bytes", "oom_kills")})
        return entry


def mib(value) -> str:
    return "-" if value is None else f"{value / 2**20:.0f}"


def report(run: Run, baseline: list[dict], crowd: list[dict], hog: dict | None, meta: dict) -> str:
    lines = [f"# make hub-load: {meta['students']} students, stagger {meta['stagger_s']} s, limits "
             f"{meta['mem_limit']} / {meta['cpu_limit']} CPU per student, on {meta['cores']} cores and "
             f"{meta['mem_total_gib']:.0f} GiB",
             f"load average before {meta['load_before']}, after {meta['load_after']} (the machine is shared: other "
             "work ran beside this)",
             f"hub up in {meta['hub_startup_s']:.1f} s; lowest available memory {meta['lowest_free_gib']:.1f} GiB; "
             f"run {meta['elapsed_s']:.0f} s" + (f"; STOPPED: {run.stopped}" if run.stopped else ""), "",
             "| phase | n | p50 s | p90 s | max s |", "|---|---|---|---|---|"]
    for phase, values in run.phases.items():
        p = percentiles(values)
        lines.append(f"| {phase} | {p['n']} | " + (" | ".join(f"{p[k]:.2f}" for k in ("p50", "p90", "max"))
                                                   if p["n"] else "- | - | -") + " |")
    lines += ["", "failures by cause: " + (", ".join(f"{k}: {v}" for k, v in run.failures.items()) or "none"), "",
              "| notebook | alone s | alone kernel CPU s | in the crowd s (p50, max) | slowdown (p50) | kernel peak RSS MiB "
              "(max) | cgroup peak MiB (max) |", "|---|---|---|---|---|---|---|"]
    for notebook in meta["mix"]:
        solo = next((b for b in baseline if b["notebook"] == notebook and b.get("ok")), None)
        mine = [c for c in crowd if c["notebook"] == notebook and c.get("ok")]
        times = [c["notebook_s"] for c in mine]
        p = percentiles(times)
        slowdown = f"{p['p50'] / solo['notebook_s']:.1f}x" if solo and times else "-"
        lines.append(f"| {notebook} | {solo['notebook_s']:.1f} | {solo['kernel_cpu_s']:.1f} | "
                     if solo else f"| {notebook} | - | - | ")
        lines[-1] += (f"{p['p50']:.1f}, {p['max']:.1f} | {slowdown} | "
                      f"{mib(max(c['kernel_peak_rss'] for c in mine))} | {mib(max(c.get('peak_bytes') or 0 for c in mine))} |"
                      if times else "- | - | - | - |")
    lines += ["", "| student | notebook | spawn s | notebook s | kernel CPU s | kernel peak RSS MiB | cgroup peak MiB | "
              "OOM kills | failure |", "|---|---|---|---|---|---|---|---|---|"]
    for c in crowd:
        lines.append(f"| {c['student']} | {c['notebook']} | {c.get('spawn_s', 0):.1f} | {c.get('notebook_s', 0):.1f} | "
                     f"{c.get('kernel_cpu_s', 0):.1f} | {mib(c.get('kernel_peak_rss'))} | {mib(c.get('peak_bytes'))} | "
                     f"{c.get('oom_kills', '-')} | {c.get('failure', '')} |")
    if hog:
        lines += ["", f"the hog ({hog['student']}, {HOG_GIB} GiB against a {mib(hog.get('limit_bytes'))} MiB limit): "
                  f"killed: {hog.get('killed')}, OOM kills in its group: {hog.get('oom_kills')}; told: "
                  f"{hog.get('told', hog.get('failure', ''))[:200]!r}"]
        others = [c["student"] for c in crowd + baseline if c.get("oom_kills")]
        lines.append("other students with an OOM kill: " + (", ".join(others) or "none"))
    lines.append("left behind after the hub stopped: " + (json.dumps(meta["leftovers"]) if meta["leftovers"] else "nothing"))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=16)
    parser.add_argument("--stagger", type=float, default=2.0, help="seconds between two arrivals")
    parser.add_argument("--notebooks", default=",".join(MIX), help="the mix, comma-separated file names")
    parser.add_argument("--mem-limit", default="2G")
    parser.add_argument("--cpu-limit", default="1")
    parser.add_argument("--spawn-timeout", type=float, default=420, help="seconds one server may take to start")
    parser.add_argument("--max-minutes", type=float, default=25)
    parser.add_argument("--min-free-gib", type=float, default=2.0)
    parser.add_argument("--no-hog", action="store_true")
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.students <= MAX_STUDENTS:
        parser.error(f"--students must be 1..{MAX_STUDENTS}")
    if not hub_run.is_root():
        print("make hub-load needs root (system users and cgroups): run it as root")
        return 1
    mix = [n.strip() for n in args.notebooks.split(",") if n.strip()]
    missing = [n for n in mix if not (ROOT / "notebooks" / n).exists()]
    if missing:
        parser.error(f"no such notebooks: {missing}")
    if hub_run.free_memory_bytes() < (args.min_free_gib + 2) * 2**30:
        print(f"[hub-load] not starting: available memory {hub_run.free_memory_bytes() / 2**30:.1f} GiB")
        return 1
    load_before = os.getloadavg()
    started = time.monotonic()
    baseline, crowd, hog = [], [], None
    with hub_run.Hub(mem_limit=args.mem_limit, cpu_limit=args.cpu_limit) as hub:
        run = Run(hub, args)
        run.done = threading.Event()
        guard = threading.Thread(target=run.guard, daemon=True)
        guard.start()
        try:
            if not args.no_baseline:
                print("[hub-load] baseline: one student alone runs each notebook of the mix", flush=True)
                for i, notebook in enumerate(mix):
                    entry = run.student(90 + i, notebook, time.monotonic(), baseline=True)
                    print(f"[hub-load]   {notebook}: {entry.get('notebook_s', float('nan')):.1f} s "
                          f"{entry.get('failure', '')}", flush=True)
                    baseline.append(entry)
                    hub_run.Student(hub, entry["student"]).stop_server()
            print(f"[hub-load] the crowd: {args.students} students, {args.stagger} s apart", flush=True)
            t0 = time.monotonic() + 1
            with ThreadPoolExecutor(args.students + 1) as pool:
                futures = [pool.submit(run.student, i + 1, mix[i % len(mix)], t0 + i * args.stagger)
                           for i in range(args.students)]
                hog_future = None if args.no_hog else pool.submit(run.hog, 80, t0 + args.students * args.stagger / 2)
                crowd = [f.result() for f in futures]
                hog = hog_future.result() if hog_future else None
        finally:
            run.done.set()
    meta = {"students": args.students, "stagger_s": args.stagger, "mem_limit": args.mem_limit,
            "cpu_limit": args.cpu_limit, "cores": os.cpu_count(),
            "mem_total_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
            "load_before": " ".join(f"{x:.1f}" for x in load_before),
            "load_after": " ".join(f"{x:.1f}" for x in os.getloadavg()), "hub_startup_s": hub.startup_s,
            "lowest_free_gib": getattr(run, "lowest_free", 0) / 2**30, "elapsed_s": time.monotonic() - started,
            "mix": mix, "leftovers": hub.leftovers}
    text = report(run, baseline, crowd, hog, meta)
    print(text)
    out = hub_run.LOGS / f"load-N{args.students}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "phases": run.phases, "failures": run.failures, "baseline": baseline,
                               "crowd": crowd, "hog": hog, "stopped": run.stopped, "report": text}, indent=1,
                              default=str))
    print(f"[hub-load] written: {out.relative_to(ROOT)}")
    ok = not run.stopped and not run.failures and not meta["leftovers"] and (
        hog is None or (hog.get("killed") and "memory" in hog.get("told", "")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
