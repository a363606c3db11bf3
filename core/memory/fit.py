"""Does a scenario fit a device, how many devices does it need, and what is the
largest batch and the longest sequence that fit.

Per-device memory never decreases with the batch or the sequence length and
never increases along the candidate layouts (property-tested), so each limit is
a binary search."""

from __future__ import annotations

from collections.abc import Callable

from core.layout import Layout

MemoryFn = Callable[[Layout, int, int], float]  # (layout, batch, seq) -> total bytes

MAX_BATCH = 4096
MAX_DEVICES = 65_536
# How far our estimate of what nvidia-smi shows lands from the measured peak: the 90th percentile of |estimate /
# measured - 1| over the 48 training and generate() peaks of our H100 (2026-11-23) and H200 (2026-11-26) runs
# (data/measurements/; tests/core/test_measured_h200.py recomputes it). A scenario whose estimate is within this
# fraction of the device's capacity, above or below, is called borderline: the measurements cannot tell.
BORDERLINE_FRACTION = 0.07
BORDERLINE_BASIS = "90% of our 48 measured H100 and H200 peaks land within 7% of the estimate (data/measurements)"


def borderline(total_bytes: float, capacity_bytes: float) -> bool:
    """Whether the fit verdict is inside the estimate's measured error (either side of the capacity)."""
    return abs(total_bytes - capacity_bytes) <= BORDERLINE_FRACTION * total_bytes


def _largest_fitting(fits: Callable[[int], bool], hi: int) -> int:
    """Largest n in [1, hi] with fits(n), 0 if none (fits is monotone)."""
    if not fits(1):
        return 0
    if fits(hi):
        return hi
    lo = 1  # fits(lo) and not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def max_batch(mem: MemoryFn, layout: Layout, seq: int, capacity: float) -> int:
    return _largest_fitting(lambda b: mem(layout, b, seq) <= capacity, MAX_BATCH)


def max_seq(mem: MemoryFn, layout: Layout, batch: int, capacity: float, limit: int) -> int:
    return _largest_fitting(lambda s: mem(layout, batch, s) <= capacity, limit)


def smallest_count(fits: Callable[[int], bool], hi: int) -> int:
    """Smallest n in [1, hi] with fits(n), 0 if none. Memory per device never
    grows as a group gets larger except between 1 and 2 devices, where the
    second device brings communication buffers; so n = 1 is tried on its own
    and the rest is a binary search."""
    if hi < 1:
        return 0
    if fits(1):
        return 1
    if hi < 2 or not fits(hi):
        return 0
    lo = 1  # not fits(lo), fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi
