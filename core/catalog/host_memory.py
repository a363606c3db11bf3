"""The system RAM bandwidth of an accelerator's usual server (data/host_memory.csv, one sourced row per accelerator
whose reference server is published: DGX H100 / H200 / A100 / B200; AMD's MI300X / MI325X / MI355X / MI350X
platforms). The scenario's host_memory_bandwidth_gbps, when left unset, is the share of that server's bandwidth that
the devices used rent; an accelerator with no row is taken to sit in a desktop (dual-channel DDR5-4800). Used by
ZeRO-Offload's CPU step (core/speed/offload.py) and llama.cpp's layers in system RAM (core/speed/roofline.py)."""

from __future__ import annotations

import datetime as dt
import functools

from pydantic import BaseModel, ConfigDict, Field

from core.catalog.accelerators import DATA_DIR, Accelerator, CatalogError, load_accelerators, read_catalog_rows
from core.scenario import Scenario

HOST_MEMORY_CSV = DATA_DIR / "host_memory.csv"
BYTES_PER_CHANNEL_TRANSFER = 8  # a DDR4 / DDR5 DIMM channel is 64 bits wide (JEDEC JESD79-4 / JESD79-5)
# A desktop's dual-channel DDR5-4800: 2 x 8 B x 4800 MT/s = 76.8 GB/s (the scenario's default before this table)
DESKTOP_HOST_MEMORY_GBPS = 2 * BYTES_PER_CHANNEL_TRANSFER * 4800 / 1000


class HostMemory(BaseModel):
    """An accelerator's usual server: its sockets, memory channels and their speed."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    accelerator: str = Field(min_length=2)
    host: str = Field(min_length=2)
    sockets: int = Field(ge=1, le=8)
    channels_per_socket: int = Field(ge=1, le=24)
    mt_per_s: int = Field(ge=1000, le=20_000)  # DIMM transfers per second, millions
    gpus: int = Field(ge=1, le=64)  # accelerators the server holds (a rented slice of it gets their share)
    source: str = Field(min_length=10)
    as_of: dt.date
    note: str = ""

    @property
    def bandwidth_gbps(self) -> float:
        """Theoretical peak: sockets x channels x 8 bytes x MT/s."""
        return self.sockets * self.channels_per_socket * BYTES_PER_CHANNEL_TRANSFER * self.mt_per_s / 1000


@functools.cache
def load_host_memory() -> dict[str, HostMemory]:
    rows = read_catalog_rows(HOST_MEMORY_CSV, HostMemory)
    known = {a.id for a in load_accelerators()}
    for i, r in enumerate(rows, start=1):
        if r.accelerator not in known:
            raise CatalogError(f"unknown accelerator {r.accelerator!r}", file=HOST_MEMORY_CSV.name, row=i, field="accelerator")
    return {r.accelerator: r for r in rows}


def host_memory_bandwidth_gbps(sc: Scenario, acc: Accelerator, devices: int) -> float:
    """GB/s of system RAM the host of `devices` devices gives them, all together: the scenario's when set (the whole
    host's, as the sidebar asks for it); else the accelerator's usual server, the share of it that `devices` of its
    GPUs rent (a cloud slices a server's CPUs and RAM by the GPUs rented: one H100 of a DGX H100 gets 614.4 / 8 =
    76.8 GB/s, eight get 614.4), capped at one server (each server's RAM serves its own devices); else a desktop's."""
    if sc.host_memory_bandwidth_gbps is not None:
        return sc.host_memory_bandwidth_gbps
    row = load_host_memory().get(acc.id)
    if row is None:
        return DESKTOP_HOST_MEMORY_GBPS
    return row.bandwidth_gbps * min(max(1, devices), row.gpus) / row.gpus
