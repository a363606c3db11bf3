"""How long loading the weights from a drive takes (a seed-note topic: "use NVMe SSDs instead of HDDs for storing
models and datasets"): the checkpoint's bytes over the drive's rated sequential read (data/storage.csv, each from its
data sheet). A floor on a cold start: the serving engine's own warm-up (CUDA graphs, the KV-cache profile) and a
download from the Hub come on top; the same drive feeds every device of the replica, so it is the whole checkpoint's
bytes."""

from __future__ import annotations

import functools

from pydantic import BaseModel, ConfigDict, Field

from core.catalog.accelerators import DATA_DIR, read_catalog_rows

STORAGE_CSV = DATA_DIR / "storage.csv"


class Drive(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str = Field(min_length=2, max_length=32)
    label: str = Field(min_length=3)
    read_gbps: float = Field(gt=0, le=100, allow_inf_nan=False)  # GB/s (1e9 bytes), sequential read
    source: str = Field(min_length=10)
    as_of: str = Field(min_length=7)
    note: str = ""


@functools.cache
def load_drives() -> tuple[Drive, ...]:
    """The drives, fastest first."""
    return tuple(sorted(read_catalog_rows(STORAGE_CSV, Drive), key=lambda d: -d.read_gbps))


def load_seconds(weights_bytes: float, drive: Drive) -> float:
    """Seconds to read `weights_bytes` at the drive's rated sequential read."""
    return max(0.0, float(weights_bytes)) / (drive.read_gbps * 1e9)


def duration_text(seconds: float) -> str:
    """'0.4 s', '29 s', '4.5 min', '1.2 h'."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min" if seconds < 600 else f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def load_sentence(weights_bytes: float) -> str:
    """The load times from every drive, in one sentence (the Inference page and the estimate's assumptions)."""
    times = ", ".join(f"{duration_text(load_seconds(weights_bytes, d))} from {d.label}" for d in load_drives())
    return (
        f"loading the weights ({weights_bytes / 1e9:,.1f} GB) before the first request takes at least {times} "
        "(each drive's rated sequential read; the engine's warm-up comes on top)"
    )
