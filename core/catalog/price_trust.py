"""Which catalog prices a bill may use, and how a price sits against its market.

A bill (the planner, the Training page, the serving bill, Training vs inference, GPU vs TPU, both CLI verbs) prices
from `billable_prices()`: the catalog less the rows it cannot vouch for, unless the user opts in. A row is flagged
when data/price_flags.csv names its provider (a placeholder, an auction floor, or the price of a part of a machine such
as GCP's attachable GPU without the VM it needs, each with its reason and source) or when it is stale (older than
prices.STALE_AFTER_DAYS). A user's own price list is theirs: it is never flagged.

The market band of an accelerator is the spread of its providers' prices per device-hour (each provider's cheapest
row, so a provider with fifty listings counts once), on demand or spot: a price is set against the band of its own
kind (a spot price is always below the on-demand band; against it nearly every spot plan read as an outlier). A price
under half its band's median is labelled far below the market: a marketplace host or a promotion is real, but a buyer
should know it is an outlier."""

from __future__ import annotations

import datetime as dt
import functools
import statistics
from collections import defaultdict
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.catalog.accelerators import DATA_DIR, read_catalog_rows
from core.catalog.prices import STALE_AFTER_DAYS, PriceRow, is_stale, load_prices

FLAGS_CSV = DATA_DIR / "price_flags.csv"
FAR_BELOW_MARKET = 0.5  # a row under half its accelerator's median provider price is labelled (an outlier, not an error)


class PriceFlag(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    provider: str = Field(min_length=1, max_length=64)
    instance_prefix: str = ""  # empty: every row of the provider
    flag: Literal["placeholder", "floor", "partial"]  # partial: the price of a part of a machine (a GPU without its host)
    reason: str = Field(min_length=10)
    as_of: dt.date
    source: str = Field(min_length=3)


@functools.cache
def load_price_flags() -> tuple[PriceFlag, ...]:
    return tuple(read_catalog_rows(FLAGS_CSV, PriceFlag))


def flag_of(row: PriceRow, today: dt.date | None = None) -> str | None:
    """Why a catalog row may not price a bill without the user's say-so, or None."""
    for f in load_price_flags():
        if row.provider.lower() == f.provider and row.instance_type.startswith(f.instance_prefix):
            return f"{f.flag}: {f.reason}"
    if is_stale(row, today or dt.date.today()):
        return f"stale: as of {row.as_of.isoformat()}, more than {STALE_AFTER_DAYS} days old"
    return None


def billable_prices(rows: tuple[PriceRow, ...] | None = None, today: dt.date | None = None, include_flagged: bool = False) -> tuple[PriceRow, ...]:
    """The rows a bill prices from: `rows` as given (a user's list, or one already chosen), else the catalog less its
    flagged rows (all of it with include_flagged)."""
    if rows is not None:
        return rows
    if include_flagged:
        return load_prices()
    return _billable_catalog(today or dt.date.today())


@functools.lru_cache(maxsize=4)
def _billable_catalog(today: dt.date) -> tuple[PriceRow, ...]:
    return tuple(r for r in load_prices() if flag_of(r, today) is None)


class MarketBand(BaseModel):
    model_config = ConfigDict(frozen=True)
    accelerator_id: str
    providers: int
    low_usd_per_device_hour: float
    median_usd_per_device_hour: float
    high_usd_per_device_hour: float


def market_bands(today: dt.date | None = None, spot: bool = False) -> dict[str, MarketBand]:
    """Per accelerator, the price per device-hour (on demand, or spot) of each provider's cheapest billable catalog row
    with such a price (on `today`'s billable rows: the bands move as rows go stale)."""
    return _market_bands(today or dt.date.today(), spot)


@functools.lru_cache(maxsize=8)
def _market_bands(today: dt.date, spot: bool) -> dict[str, MarketBand]:
    cheapest: dict[str, dict[str, float]] = defaultdict(dict)
    for r in _billable_catalog(today):
        usd = r.spot_usd_per_device_hour if spot else r.on_demand_usd_per_device_hour
        if usd is None:
            continue
        best = cheapest[r.accelerator_id]
        best[r.provider] = min(best.get(r.provider, float("inf")), usd)
    return {
        aid: MarketBand(
            accelerator_id=aid,
            providers=len(by),
            low_usd_per_device_hour=min(by.values()),
            median_usd_per_device_hour=statistics.median(by.values()),
            high_usd_per_device_hour=max(by.values()),
        )
        for aid, by in cheapest.items()
    }


def market_note(row: PriceRow, usd_per_device_hour: float | None = None, spot: bool = False) -> str | None:
    """ "far below the market ..." for a price (the row's on-demand one unless given) under FAR_BELOW_MARKET x its
    accelerator's median provider price of the same kind (spot against spot; at least three providers to have a
    market), else None."""
    band = market_bands(spot=spot).get(row.accelerator_id)
    usd = row.on_demand_usd_per_device_hour if usd_per_device_hour is None else usd_per_device_hour
    if band is None or band.providers < 3 or usd >= FAR_BELOW_MARKET * band.median_usd_per_device_hour:
        return None
    kind = "spot " if spot else ""
    return (
        f"far below the market: {usd:.2f} USD per device-hour against a {kind}median of {band.median_usd_per_device_hour:.2f} "
        f"({band.providers} providers, {band.low_usd_per_device_hour:.2f}-{band.high_usd_per_device_hour:.2f})"
    )


PriceMode = Literal["replace", "only"]
PRICE_MODES: tuple[PriceMode, ...] = ("replace", "only")


def merge_prices(own: tuple[PriceRow, ...], mode: PriceMode, catalog: tuple[PriceRow, ...] | None = None) -> tuple[PriceRow, ...]:
    """A user's price list in use: "replace" keeps the catalog's rows for the accelerators the list does not price
    (so a negotiated H100 rate replaces every H100 row, and the rest of the catalog still answers); "only" prices
    from the user's rows alone. The catalog's part is its billable rows (billable_prices) unless `catalog` is given."""
    if mode == "only":
        return own
    mine = {r.accelerator_id for r in own}
    return own + tuple(r for r in billable_prices(catalog) if r.accelerator_id not in mine)
