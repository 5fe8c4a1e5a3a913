"""The timing loop every benchmark script shares (not a benchmark itself: `make bench` runs bench_*.py).

The variants are timed interleaved -- one step of each, in turn, every repeat -- so that a change in
the machine's load hits all of them alike, and the ratios printed by one run compare like with like.
The loop lives in the library (:func:`seqlab.cost.time_interleaved`, beside ``best_time``, which the
notebooks use); this module keeps the scripts' ``from _timing import time_interleaved`` working.
"""

from __future__ import annotations

from seqlab.cost import best_time, time_interleaved

__all__ = ["best_time", "time_interleaved"]
