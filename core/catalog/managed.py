"""Managed services people start from (data/managed_services.csv): Google Colab's compute-unit tiers, SageMaker and
Azure ML instances and their markup over the raw instance, Snowflake's GPU compute pools; each row dated and sourced.
Rows without an hourly price (a subscription, a unit price) carry it in `basis`."""

from __future__ import annotations

import functools

from pydantic import BaseModel, ConfigDict, Field

from core.catalog.accelerators import DATA_DIR, PartialDate, read_catalog_rows

MANAGED_CSV = DATA_DIR / "managed_services.csv"


class ManagedService(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    service: str = Field(min_length=1)
    tier_or_instance: str = Field(min_length=1)
    accelerator_id: str = ""
    accelerators: float = Field(ge=0)
    usd_per_hour: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # 0: a free tier
    basis: str = ""
    as_of: PartialDate
    source: str = Field(min_length=3)
    notes: str = ""


@functools.lru_cache(maxsize=1)
def load_managed_services() -> tuple[ManagedService, ...]:
    return read_catalog_rows(MANAGED_CSV, ManagedService)
