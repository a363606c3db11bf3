"""Results shared by every session that looks at the same scenario (a shared
link, a workshop room): computed once per process, bounded, read-only (the
core's results are frozen). Priced results take the price list in use as
(`price_key`, `_rows`): the key is what the cache tells lists apart by (""
for the built-in catalog), the rows (not hashed) what prices them."""

from __future__ import annotations

from app_pages.shared import guard
from app_pages.shared.cache import shared_cache
from core.catalog.accelerators import load_accelerators
from core.catalog.prices import PriceRow
from core.estimate import Result, estimate
from core.memory.explain import Explanation, explain
from core.money.compare import ComparisonRow, compare_accelerators
from core.money.help_options import HelpOption, help_options
from core.money.serving import ServingPlan, Traffic, serving_options, serving_plan
from core.scenario import Scenario

Rows = tuple[PriceRow, ...] | None


@shared_cache(max_entries=256)
def scenario_of(key: str) -> Scenario:
    return Scenario.model_validate_json(key)  # hop: the cache key (Scenario JSON) -> Scenario, once per process


def cached_estimate(key: str, price_key: str = "", _rows: Rows = None) -> Result:
    """estimate() of the scenario whose JSON is `key` (Scenario.model_dump_json()). Streamlit's cache keys a call by
    the arguments passed, not by the defaults filled in: `cached_estimate(key)` and `cached_estimate(key, "", None)`
    were two entries, and a figure beside its page computed the same estimate again. Every call passes all of them."""
    return _estimate(key, price_key, _rows)


@shared_cache(max_entries=256)
def _estimate(key: str, price_key: str, _rows: Rows) -> Result:
    # hop: Scenario -> core's Result (memory, fit, training, serving); what would help is the Memory page's alone
    return estimate(scenario_of(key), _rows, with_help=False)


@shared_cache(max_entries=128)
def cached_help_options(key: str, price_key: str = "", _rows: Rows = None) -> list[HelpOption]:
    """What would help a scenario that does not fit, timed and priced from the price list in use (core's
    help_options, what `estimate` carries as `help_options`); empty when it fits."""
    if cached_estimate(key).fits:
        return []
    return help_options(scenario_of(key), _rows)


@shared_cache(max_entries=256)
def cached_explain(key: str) -> list[Explanation]:
    return explain(scenario_of(key), cached_estimate(key))


COMPARISON_CHUNK = 12  # accelerators per cached piece of a comparison (a few ms to tens of ms of CPU each)


@shared_cache(max_entries=1024)
def _comparison_chunk(key: str, first: int, price_key: str = "", _rows: Rows = None) -> tuple[ComparisonRow, ...]:
    ids = [a.id for a in load_accelerators()][first : first + COMPARISON_CHUNK]
    return tuple(compare_accelerators(scenario_of(key), ids, _rows))


def cached_comparison(key: str, price_key: str = "", _rows: Rows = None) -> list[ComparisonRow]:
    """compare_accelerators() of a scenario: every accelerator in the catalog, in cached pieces. Called at a page's
    top level (not from inside another cached function), a waiting person may take the turn between pieces
    (guard.yield_turn does nothing inside a cached function, which holds the cache's lock)."""
    rows: list[ComparisonRow] = []
    for first in range(0, len(load_accelerators()), COMPARISON_CHUNK):
        guard.yield_turn()
        rows += _comparison_chunk(key, first, price_key, _rows)
    return rows


@shared_cache(max_entries=64)
def cached_serving(
    key: str, traffic_key: str, max_utilisation: float, price_key: str = "", _rows: Rows = None
) -> tuple[ServingPlan | None, str | None, tuple[ServingPlan, ...]]:
    """(the scenario's own serving plan or None with why, the plans across accelerators) for a traffic."""
    sc, traffic = scenario_of(key), Traffic.model_validate_json(traffic_key)  # hop: JSON keys -> Scenario, Traffic
    try:
        # hop: Scenario + Traffic + price rows -> the cheapest ServingPlan (replicas, $/month, $/M output tokens)
        own, why = serving_plan(sc, traffic, rows=_rows, max_utilisation=max_utilisation), None
    except ValueError as exc:
        own, why = None, str(exc)
    return own, why, serving_options(sc, traffic, _rows, max_utilisation=max_utilisation)
