"""Managed services people start from (data/managed_services.csv): Google Colab's compute-unit tiers, SageMaker and
Azure ML instances and their markup over the raw instance, Snowflake's GPU compute pools; each row dated and sourced.
Rows without an hourly price (a subscription, a unit price) carry it in `basis`."""

from __future__ import annotations

import csv
import functools
import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.catalog.accelerators import DATA_DIR, CatalogError, validation_problems

MANAGED_CSV = DATA_DIR / "managed_services.csv"


class ManagedService(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    service: str = Field(min_length=1)
    tier_or_instance: str = Field(min_length=1)
    accelerator_id: str = ""
    accelerators: float = Field(ge=0)
    usd_per_hour: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # 0: a free tier
    basis: str = ""
    as_of: str
    source: str = Field(min_length=3)
    notes: str = ""

    @field_validator("as_of")
    @classmethod
    def _date(cls, value: str) -> str:
        if not re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", value):
            raise ValueError("as_of must be YYYY, YYYY-MM or YYYY-MM-DD")
        return value


@functools.lru_cache(maxsize=1)
def load_managed_services() -> tuple[ManagedService, ...]:
    out = []
    with MANAGED_CSV.open(encoding="utf-8", newline="") as fh:
        for i, record in enumerate(csv.DictReader(fh), start=1):
            try:
                out.append(ManagedService(**{k: v for k, v in record.items() if v != ""}))
            except ValidationError as exc:
                field, problem = validation_problems(exc)[0]
                raise CatalogError(problem, file=MANAGED_CSV.name, row=i, field=field) from None
    return tuple(out)
