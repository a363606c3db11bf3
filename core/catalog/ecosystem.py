"""Qualitative trade-offs per platform (data/ecosystem.csv): framework,
quantization, scaling, availability, serving support and memory, each with a source."""

from __future__ import annotations

import csv
import datetime as dt
import functools
import io
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.catalog.accelerators import DATA_DIR, Accelerator, CatalogError, validation_problems
from core.text import described_pattern

ECOSYSTEM_CSV = DATA_DIR / "ecosystem.csv"

Platform = Literal["nvidia-gpu", "amd-gpu", "google-tpu", "aws-trainium", "apple-silicon", "intel-gaudi", "groq-lpu", "cerebras-wse"]
# The trade-offs the seed notes name: low-precision throughput (quantization), memory capacity (memory), scaling and
# software maturity (frameworks), plus where to get the hardware and what serves models on it.
Aspect = Literal["frameworks", "quantization", "scaling", "availability", "inference-serving", "memory"]

_PLATFORM_BY_VENDOR: dict[str, Platform] = {
    "nvidia": "nvidia-gpu",
    "amd": "amd-gpu",
    "google": "google-tpu",
    "aws": "aws-trainium",
    "apple": "apple-silicon",
    "intel": "intel-gaudi",
    "groq": "groq-lpu",
    "cerebras": "cerebras-wse",
}


class EcosystemEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    platform: Platform
    aspect: Aspect
    summary: str = Field(min_length=10)
    source: str = Field(pattern=described_pattern(r"^https://\S+$", "an https:// link without spaces"))
    as_of: dt.date


@functools.lru_cache(maxsize=1)
def load_ecosystem() -> tuple[EcosystemEntry, ...]:
    name = ECOSYSTEM_CSV.name
    try:
        text = ECOSYSTEM_CSV.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"cannot read: {exc}", file=name) from None
    out = []
    for row_no, record in enumerate(csv.DictReader(io.StringIO(text, newline="")), start=1):
        try:
            out.append(EcosystemEntry(**{k: (v or "").strip() for k, v in record.items() if k}))
        except ValidationError as exc:
            field, problem = validation_problems(exc)[0]
            raise CatalogError(problem, file=name, row=row_no, field=field) from None
    if not out:
        raise CatalogError("no rows", file=name)
    return tuple(out)


def platform_of(acc: Accelerator) -> Platform:
    return _PLATFORM_BY_VENDOR[acc.vendor]


def ecosystem_for(acc: Accelerator) -> tuple[EcosystemEntry, ...]:
    platform = platform_of(acc)
    return tuple(e for e in load_ecosystem() if e.platform == platform)
