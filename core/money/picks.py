"""Choosing among priced runs: the time-vs-cost frontier, the deadline and budget, and the one definition of the
cheapest and the fastest pick (the planner's plans and the Training page's runs alike: anything with `cost`,
`duration`, `within_bounds` and `scaling_efficiency`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# A plan that wastes more than half its devices' time on communication is never called cheapest or fastest
# while a plan that does not exists (issue #11's rule; shown per plan as scaling_efficiency).
MIN_SCALING_EFFICIENCY = 0.5


def frontier(plans: Sequence[Any]) -> set[int]:
    """Indices of the plans no other plan beats on both cost and duration (ties: the first seen)."""
    order = sorted(range(len(plans)), key=lambda i: (plans[i].cost, plans[i].duration))
    keep: set[int] = set()
    best = float("inf")
    for i in order:
        if plans[i].duration < best:
            keep.add(i)
            best = plans[i].duration
    return keep


def eligible(plans: Sequence[Any]) -> list[Any]:
    """Plans that may be called cheapest or fastest: within the bounds and scaling well, when any does."""
    for test in (
        lambda p: p.within_bounds and p.scaling_efficiency >= MIN_SCALING_EFFICIENCY,
        lambda p: p.within_bounds,
        lambda p: True,
    ):
        chosen = [p for p in plans if test(p)]
        if chosen:
            return chosen
    return []


def cheapest(plans: Sequence[Any]) -> Any:
    pool = eligible(plans)
    return min(pool, key=lambda p: (p.cost, p.duration)) if pool else None


# Durations within 5% of the shortest count as equally fast: "fastest" is then the cheapest of them, not a plan that
# rents ten times the devices to finish a minute sooner.
FAST_ENOUGH = 1.05


def fastest(plans: Sequence[Any]) -> Any:
    pool = eligible(plans)
    if not pool:
        return None
    best = min(p.duration for p in pool)
    return min((p for p in pool if p.duration <= best * FAST_ENOUGH), key=lambda p: (p.cost, p.duration))
