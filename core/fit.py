"""Does a scenario fit a device, how many devices does it need, and what is the
largest batch and the longest sequence that fit.

Per-device memory never decreases with the batch or the sequence length and
never increases along the candidate layouts (property-tested), so each limit is
a binary search."""

from __future__ import annotations

from collections.abc import Callable

from core.memory import Layout

MemoryFn = Callable[[Layout, int, int], float]  # (layout, batch, seq) -> total bytes

MAX_BATCH = 4096
MAX_DEVICES = 65_536


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


def candidate_layouts(base: Layout, strategy: str, tp_limit: int = 8, max_stages: int = 512) -> list[Layout]:
    """Layouts in increasing device count. 'data': grow data parallelism (ZeRO
    shards with it); 'model': tensor parallel within a node up to `tp_limit`
    (one NVLink domain), then pipeline stages across nodes."""
    out: list[Layout] = []
    if strategy == "data":
        n = 1
        while n * base.tensor_parallel * base.pipeline_parallel <= MAX_DEVICES:
            out.append(Layout(n, base.tensor_parallel, base.pipeline_parallel))
            n *= 2
        return out
    out += [Layout(1, tp, 1) for tp in (1, 2, 4, 8) if tp <= tp_limit]
    pp = 2
    while tp_limit * pp <= MAX_DEVICES and pp <= min(512, max_stages):  # a stage holds >= 1 layer
        out.append(Layout(1, tp_limit, pp))
        pp = pp * 2 if pp >= 16 else pp + 1
    return out


def smallest_fitting(mem: MemoryFn, layouts: list[Layout], batch: int, seq: int, capacity: float) -> Layout | None:
    """First layout that fits; binary search since memory never grows along `layouts`."""
    if not layouts or mem(layouts[-1], batch, seq) > capacity:
        return None
    lo, hi = 0, len(layouts) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if mem(layouts[mid], batch, seq) <= capacity:
            hi = mid
        else:
            lo = mid + 1
    return layouts[lo]
