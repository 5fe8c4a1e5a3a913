"""The timing loop every benchmark script shares (not a benchmark itself: `make bench` runs bench_*.py).

The variants are timed interleaved -- one step of each, in turn, every repeat -- so that a change in
the machine's load hits all of them alike, and the ratios printed by one run compare like with like.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping


def time_interleaved(steps: Mapping[str, Callable[[], None]], *, warmup: int, repeats: int,
                     clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Seconds per call of each step, ``repeats`` samples each, after ``warmup`` untimed rounds."""
    times: dict[str, list[float]] = {key: [] for key in steps}
    for repeat in range(warmup + repeats):
        for key, step in steps.items():
            start = clock()
            step()
            if repeat >= warmup:
                times[key].append(clock() - start)
    return times
