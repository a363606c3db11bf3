"""The Memory page's cached figures. Defined here, not at the page's top level: a page's module runs again on every
rerun, and decorating a cached function again costs Streamlit a read and tokenization of its source to name its
cache (~1-2 ms each, three a Memory rerun: bench/profile_server.py --page memory)."""

from __future__ import annotations

from app_pages.shared.cache import shared_cache
from app_pages.shared.charts import breakdown_bar, fits_on_figure, sweep_figure
from app_pages.shared.results import cached_estimate, scenario_of
from app_pages.shared.style import Units, frozen


@shared_cache(max_entries=32)
def breakdown_chart(key: str, unit: str, device: str):
    return frozen(breakdown_bar(cached_estimate(key), Units(unit), device))


@shared_cache(max_entries=32)
def fits_on_chart(key: str, unit: str):
    return frozen(fits_on_figure(scenario_of(key), Units(unit)))


@shared_cache(max_entries=32)
def sweep_chart(key: str, unit: str, axis: str):
    return frozen(sweep_figure(scenario_of(key), cached_estimate(key), Units(unit), axis))
