"""What buying hardware costs (data/purchase_prices.csv) and what running it in a data center adds
(data/facility.csv: PUE, electricity prices), each row dated and sourced.

A purchase row prices a system (a DGX/HGX server: `includes_host_server` true) or a single card, with the total power
it is rated for where known. The buy-vs-rent default for a part is its newest whole-system price per accelerator
(host server, networking slot and power supply included), else its newest single-card price."""

from __future__ import annotations

import functools
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.catalog.accelerators import DATA_DIR, ID_PATTERN, PartialDate, read_catalog_rows

PURCHASES_CSV = DATA_DIR / "purchase_prices.csv"
FACILITY_CSV = DATA_DIR / "facility.csv"


class Purchase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    item: str = Field(min_length=1)
    accelerator_id: str = Field(pattern=ID_PATTERN, max_length=64)  # may name a part the accelerator catalog lacks
    accelerators: int = Field(ge=1, le=1_000)
    usd: float = Field(gt=0, allow_inf_nan=False)
    usd_per_accelerator: float = Field(gt=0, allow_inf_nan=False)
    includes_host_server: Literal["true", "false", "unknown"]
    kind: Literal["list", "street", "estimate", "msrp"]
    power_w_total: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    as_of: PartialDate
    source: str = Field(min_length=3)
    notes: str = ""

    @property
    def whole_system(self) -> bool:
        return self.includes_host_server == "true"

    @property
    def watts_per_accelerator(self) -> float | None:
        return None if self.power_w_total is None else self.power_w_total / self.accelerators


class FacilityFigure(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    item: str
    value: float = Field(gt=0, allow_inf_nan=False)
    unit: str
    as_of: str
    source: str = Field(min_length=3)
    notes: str = ""


@functools.lru_cache(maxsize=1)
def load_purchases() -> tuple[Purchase, ...]:
    return read_catalog_rows(PURCHASES_CSV, Purchase)


@functools.lru_cache(maxsize=1)
def load_facility() -> dict[str, FacilityFigure]:
    return {f.item: f for f in read_catalog_rows(FACILITY_CSV, FacilityFigure)}


def default_purchase(accelerator_id: str) -> Purchase | None:
    """The newest whole-system price per accelerator for a part, else its newest single-card price."""
    rows = [p for p in load_purchases() if p.accelerator_id == accelerator_id]
    if not rows:
        return None
    return max(rows, key=lambda p: (p.whole_system, p.as_of))
