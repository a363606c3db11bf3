"""Where a plan trades quality for cost (data/quality_notes.csv): one sourced line per technique."""

from __future__ import annotations

import csv
import functools
from typing import NamedTuple

from core.catalog.accelerators import DATA_DIR, CatalogError

QUALITY_CSV = DATA_DIR / "quality_notes.csv"


class QualityNote(NamedTuple):
    id: str
    applies_to: frozenset[str]  # weight formats, optimizers, or "kv-<format>" for a KV cache format
    caveat: str
    source: str
    as_of: str


@functools.lru_cache(maxsize=1)
def load_quality_notes() -> tuple[QualityNote, ...]:
    out = []
    with QUALITY_CSV.open(encoding="utf-8", newline="") as fh:
        for i, r in enumerate(csv.DictReader(fh), start=1):
            if not all(r.get(k, "").strip() for k in ("id", "applies_to", "caveat", "source", "as_of")):
                raise CatalogError("every column must be filled", file=QUALITY_CSV.name, row=i)
            out.append(QualityNote(r["id"], frozenset(r["applies_to"].split()), r["caveat"], r["source"], r["as_of"]))
    return tuple(out)


def caveats(weights_format: str, optimizer: str | None = None, kv_cache_format: str | None = None) -> list[QualityNote]:
    """The notes that apply to a plan's weight format, optimizer and KV cache format."""
    keys = {weights_format, optimizer or "", f"kv-{kv_cache_format}" if kv_cache_format else ""}
    return [n for n in load_quality_notes() if n.applies_to & keys]
