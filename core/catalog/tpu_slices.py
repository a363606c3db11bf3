"""The slice sizes a TPU is rented in (data/tpu_slices.csv, one sourced row per TPU generation).

A TPU is not rented by the chip in any count: Google sells slices of fixed shapes (v5e: 1, 4, 8, 16 ... 256 chips; v5p
from 4). A layout of 14 chips (tensor parallel 2 x 7 pipeline stages) is not a slice; the layout search rounds a TPU's
device count up to the next slice (core/memory/layouts.py), and a serving replica's group rents the smallest slice
that holds it, shared with other replicas where they fit (core/money/serving.fleet)."""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import itertools

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.catalog.accelerators import DATA_DIR, read_catalog_rows

TPU_SLICES_CSV = DATA_DIR / "tpu_slices.csv"


class TpuSlices(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    accelerator_id: str = Field(min_length=3)
    chips: tuple[int, ...]  # the slice sizes, smallest first
    chips_per_host: int = Field(ge=1, le=64)
    source: str = Field(min_length=10)
    as_of: dt.date
    note: str = ""

    @field_validator("chips", mode="before")
    @classmethod
    def _sizes(cls, value: object) -> object:
        if isinstance(value, str):
            value = tuple(int(v) for v in value.split(";") if v.strip())
        return value

    @field_validator("chips")
    @classmethod
    def _ascending(cls, sizes: tuple[int, ...]) -> tuple[int, ...]:
        if not sizes or any(a >= b for a, b in itertools.pairwise(sizes)) or sizes[0] < 1:
            raise ValueError("slice sizes are positive and ascending")
        return sizes


@functools.cache
def load_tpu_slices() -> dict[str, TpuSlices]:
    return {r.accelerator_id: r for r in read_catalog_rows(TPU_SLICES_CSV, TpuSlices)}


def slice_sizes(accelerator_id: str) -> tuple[int, ...] | None:
    """The slice sizes the part is rented in; None for a part rented by the device (a GPU)."""
    row = load_tpu_slices().get(accelerator_id)
    return None if row is None else row.chips


def rentable_chips(accelerator_id: str, chips: int) -> int:
    """The fewest chips at least `chips` that the part is rented in: the smallest slice that holds them, past the
    largest slice whole largest slices joined over the data-center network (Cloud TPU Multislice); `chips` itself on
    a part without slices."""
    sizes = slice_sizes(accelerator_id)
    if sizes is None:
        return chips
    i = bisect.bisect_left(sizes, chips)
    return sizes[i] if i < len(sizes) else -(-chips // sizes[-1]) * sizes[-1]
