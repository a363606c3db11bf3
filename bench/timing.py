"""Shared timing helper for the bench scripts."""

import statistics
import time
from collections.abc import Callable


def time_it(fn: Callable[[], object], repeat: int = 7) -> float:
    """Median wall time of `repeat` calls, after one warm-up call (caches)."""
    fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)
