"""Per-token API prices (data/api_prices.csv): what the same or a comparable model costs through a hosted API.

Each row: provider, model, the catalog preset it serves (blank for closed models), USD per million input and output
tokens, whether the provider still offers it on the as-of date, the as-of date and the source."""

from __future__ import annotations

import datetime as dt
import functools
import math

from pydantic import BaseModel, ConfigDict, Field

from core.catalog.accelerators import DATA_DIR, CatalogError, read_catalog_rows

API_PRICES_CSV = DATA_DIR / "api_prices.csv"


class ApiPrice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    provider: str = Field(min_length=1, max_length=64)
    model: str = Field(min_length=1, max_length=200)
    model_id: str = ""
    open_weights: bool
    preset: str = ""
    input_usd_per_million: float = Field(ge=0, allow_inf_nan=False)
    output_usd_per_million: float = Field(ge=0, allow_inf_nan=False)
    cached_input_usd_per_million: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    context_tokens: int | None = Field(default=None, ge=1)
    available: bool
    as_of: dt.date
    source: str = Field(min_length=3)
    notes: str = ""


@functools.lru_cache(maxsize=1)
def load_api_prices() -> tuple[ApiPrice, ...]:
    from core.catalog.presets import preset_ids

    rows = read_catalog_rows(API_PRICES_CSV, ApiPrice)
    for i, row in enumerate(rows, start=1):
        if row.preset and row.preset not in preset_ids():
            raise CatalogError(f"unknown preset {row.preset!r}", file=API_PRICES_CSV.name, row=i, field="preset")
    return rows


def monthly_usd(row: ApiPrice, input_tokens_per_month: float, output_tokens_per_month: float) -> float:
    return (input_tokens_per_month * row.input_usd_per_million + output_tokens_per_month * row.output_usd_per_million) / 1e6


def nearest_api_price(preset_id: str | None, total_params: float, input_tokens: int, output_tokens: int) -> tuple[ApiPrice, bool] | None:
    """The per-token offer a dedicated fleet is compared with when the person typed no price: among rows still
    offered, the same preset's, else the preset nearest in total parameters (by ratio, either way); of those, the
    cheapest for a request of `input_tokens` in and `output_tokens` out (ties: provider name). (row, same model), or
    None when the catalog has no open model to compare with."""
    from core.catalog.presets import preset

    rows = [r for r in load_api_prices() if r.available and r.preset]
    if not rows or total_params <= 0:
        return None
    same = [r for r in rows if r.preset == preset_id]
    if not same:
        gap = {p: abs(math.log(preset(p).architecture.total_params / total_params)) for p in {r.preset for r in rows}}
        nearest = min(gap, key=lambda p: (gap[p], p))
        same_model, pool = False, [r for r in rows if r.preset == nearest]
    else:
        same_model, pool = True, same
    best = min(pool, key=lambda r: (input_tokens * r.input_usd_per_million + output_tokens * r.output_usd_per_million, r.provider, r.model))
    return best, same_model
