"""Bus bandwidth collectives achieve, per interconnect (data/collective_bandwidth.csv, one sourced row per measurement).

NCCL reports a collective's speed as "bus bandwidth" (busbw): the message size times the ring's 2(n-1)/n factor for an
all-reduce ((n-1)/n for reduce-scatter and all-gather) over the time, so it compares directly with a link's line rate
(nccl-tests doc/PERFORMANCE.md). A ring never reaches the line rate: NCCL's protocol overhead is about 20% on NVLink
(NVIDIA/nccl-tests issue #212), PCIe systems are bounded by the host, and a NIC loses a few percent. Each row gives
the largest busbw published for a ring over `devices` devices at large messages, against the line rate it ran on;
core/speed/comm.py scales an accelerator's own line rate (data/accelerators.csv) by that fraction.

A row's `pattern` (a regular expression) picks the accelerators whose `interconnect` label it matches; the first
family in the file whose pattern matches wins. Rows without a pattern are the inter-node network (`network`) and the
stated default for links nothing is published for (`default`). NVLink SHARP rows (`algorithm` nvls) are recorded but
not used: the switch reduces, so their busbw is not wire bandwidth and may exceed the line rate."""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.catalog import KEYED_CACHE_ENTRIES
from core.catalog.accelerators import DATA_DIR, read_catalog_rows

COLLECTIVE_BANDWIDTH_CSV = DATA_DIR / "collective_bandwidth.csv"
NETWORK = "network"
DEFAULT = "default"


def regular_expression(value: str) -> str:
    """`value` if it compiles as a regular expression (a catalog's pattern column), else a ValueError."""
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    return value


class CollectiveBandwidth(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    interconnect: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    pattern: str = ""  # regular expression on data/accelerators.csv's interconnect label
    line_gbps: float = Field(gt=0, allow_inf_nan=False)  # per device and direction, as the run's hardware is rated
    busbw_gbps: float = Field(gt=0, allow_inf_nan=False)  # the largest bus bandwidth published for the run
    devices: int = Field(ge=2)  # devices on the ring of that run
    algorithm: Literal["ring", "nvls"]
    message_regime: str = Field(min_length=3)
    basis: Literal["measured", "nccl-model", "vendor", "stated default"]
    source: str = Field(min_length=10)
    as_of: dt.date
    note: str = ""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        return regular_expression(value)

    @model_validator(mode="after")
    def _physical(self) -> CollectiveBandwidth:
        if self.algorithm == "ring" and self.busbw_gbps > self.line_gbps:
            raise ValueError(f"a ring cannot beat the line rate: busbw {self.busbw_gbps:g} > line {self.line_gbps:g} GB/s")
        if (self.interconnect in (NETWORK, DEFAULT)) == bool(self.pattern):
            raise ValueError("the network and default rows have no pattern; every other row has one")
        return self

    @property
    def fraction(self) -> float:
        """Achieved bus bandwidth over line rate."""
        return self.busbw_gbps / self.line_gbps


@functools.cache
def load_collective_bandwidth() -> tuple[CollectiveBandwidth, ...]:
    rows = read_catalog_rows(COLLECTIVE_BANDWIDTH_CSV, CollectiveBandwidth)
    if not any(r.interconnect == DEFAULT for r in rows) or not any(r.interconnect == NETWORK for r in rows):
        raise ValueError(f"{COLLECTIVE_BANDWIDTH_CSV.name}: needs a '{DEFAULT}' row and a '{NETWORK}' row")
    return rows


def _ring_rows(family: str) -> list[CollectiveBandwidth]:
    return [r for r in load_collective_bandwidth() if r.interconnect == family and r.algorithm == "ring"]


def family_of(interconnect_label: str) -> str:
    """The table's interconnect family for an accelerator's interconnect label ('default' where none matches)."""
    for row in load_collective_bandwidth():
        if row.pattern and row.algorithm == "ring" and re.search(row.pattern, interconnect_label):
            return row.interconnect
    return DEFAULT


def _fraction(family: str, devices: int) -> float:
    """Of the family's ring rows, the one measured on the most devices not above `devices` (the fewest-device row
    below that: a smaller ring never does worse than a larger one); its busbw over its line rate."""
    rows = sorted(_ring_rows(family), key=lambda r: r.devices)
    chosen = [r for r in rows if r.devices <= devices] or rows[:1]
    return chosen[-1].fraction


@functools.lru_cache(maxsize=KEYED_CACHE_ENTRIES)  # keyed on what a link can set (a custom part's id): bounded
def link_fraction(interconnect_label: str, devices: int) -> float:
    """Share of the line rate a ring collective over `devices` devices achieves on this interconnect."""
    return _fraction(family_of(interconnect_label), devices)


@functools.lru_cache(maxsize=KEYED_CACHE_ENTRIES)  # keyed on what a link can set (a custom part's id): bounded
def network_fraction(devices: int) -> float:
    """Share of the NICs' line rate a ring collective across nodes achieves."""
    return _fraction(NETWORK, devices)
