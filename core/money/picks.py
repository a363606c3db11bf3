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


def _fills_term(p: Any) -> bool:
    """False for a run on a reserved cluster shorter than the reservation's minimum term (`pays_idle_term`): it pays
    for a cluster that sits idle most of the term, which no engineer rents when an on-demand plan exists."""
    return not getattr(p, "pays_idle_term", False)


def eligible(plans: Sequence[Any]) -> list[Any]:
    """Plans that may be called cheapest or fastest: within the bounds, scaling well and not paying for an idle
    reservation (_fills_term), when any does; then the ones that fall short on the fewest of these."""
    for test in (
        lambda p: p.within_bounds and p.scaling_efficiency >= MIN_SCALING_EFFICIENCY and _fills_term(p),
        lambda p: p.within_bounds and _fills_term(p),
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


# How much longer than the time limit (the goal's deadline, or without one the 30-day horizon) a run may be to be
# offered as "cheaper if longer": one more limit's span. The limit is the schedule the user gave, or the span a team
# plans a run in; waiting up to that again is a trade a manager can weigh against the money saved. A run many times
# longer (the 5.6 years on one 8-GPU host this replaced) is a different project, not a slower version of this one.
LONGER_RUN_FACTOR = 2.0


def cheaper_if_longer(plans: Sequence[Any], cheapest: Any, limit_hours: float, budget_usd: float | None = None) -> Any:
    """The cheapest plan that only the time limit ruled out (within the budget), finishing within LONGER_RUN_FACTOR x
    the limit, when it costs less than `cheapest` (itself within the bounds); None otherwise. Plans that scale well
    and fill their reservation's term first, as for the picks."""
    if cheapest is None or not cheapest.within_bounds:
        return None
    longer = [
        p
        for p in plans
        if not p.within_bounds and p.duration <= LONGER_RUN_FACTOR * limit_hours and (budget_usd is None or p.cost <= budget_usd) and p.cost < cheapest.cost
    ]
    good = [p for p in longer if p.scaling_efficiency >= MIN_SCALING_EFFICIENCY and _fills_term(p)]
    return min(good or longer, key=lambda p: (p.cost, p.duration), default=None)
