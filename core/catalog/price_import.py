"""Rebuild data/cloud_prices.csv from committed inputs, offline and repeatably:

- data/prices/skypilot_snapshot.csv: our normalised extract of SkyPilot's per-cloud catalogs (skypilot-org/
  skypilot-catalog, one pinned commit per cloud, named on every row): one row per (cloud, instance type) with
  accelerators, the cheapest US region's on-demand price (else the cheapest region's) and the lowest spot price;
- data/prices/accelerator_names.csv: each catalog accelerator name mapped to one of our accelerator ids;
- data/prices/hand_rows.csv: hand-entered, sourced rows in our own format (GPU clouds the catalogs lack: RunPod,
  CoreWeave, Crusoe, Together, Modal...; and older rows the snapshot no longer covers).

    python -m core prices import          # rewrite data/cloud_prices.csv
    python -m core prices import --check  # exit 1 if the committed file differs from a rebuild

A snapshot row whose accelerator has no id in data/accelerators.csv, or that has no on-demand price, is left out
(counted in the summary). When a hand row and a snapshot row price the same provider and instance type, the one
with the newer as_of date wins (the snapshot on a tie)."""

from __future__ import annotations

import csv
import datetime as dt
import io
from pathlib import Path

from pydantic import ValidationError

from core.catalog.accelerators import DATA_DIR, load_accelerators
from core.catalog.prices import COLUMNS, PRICES_CSV, PriceRow

PRICES_DIR = DATA_DIR / "prices"
SNAPSHOT_CSV = PRICES_DIR / "skypilot_snapshot.csv"
NAMES_CSV = PRICES_DIR / "accelerator_names.csv"
HAND_CSV = PRICES_DIR / "hand_rows.csv"
# The day the snapshot's catalog files were read (their own commit dates could not be read offline).
SNAPSHOT_READ_ON = dt.date(2026, 11, 23)
# Ids the research used before the accelerator catalog named the part.
ID_ALIASES = {"rtx-pro-6000": "rtx-pro-6000-blackwell-server"}


def _names(known: set[str]) -> dict[str, str]:
    """Catalog accelerator name -> our id (the mapped id, else the suggested one once the catalog has it)."""
    out = {}
    with NAMES_CSV.open(encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            for candidate in (r["accelerator_id"], r["suggested_new_id"]):
                candidate = ID_ALIASES.get(candidate, candidate)
                if candidate and candidate in known:
                    out[r["accelerator_name"]] = candidate
                    break
    return out


def _disambiguate(name: str, default: str, memory_gib: float, instance: str) -> str:
    """Catalog names shared by several parts (accelerator_names.csv, match=ambiguous): the memory per device and the
    instance name tell them apart (an 80 GB A100 row; a 94 GB H100 is an H100 NVL; 'pcie' in the instance name)."""
    pcie = "pcie" in instance.lower() or (instance.startswith("Standard_NC") and "ads" in instance)
    if name in ("A100", "A100-80GB"):
        if memory_gib >= 70 or name == "A100-80GB":
            return "a100-pcie-80gb" if pcie else "a100-sxm-80gb"
        return "a100-pcie-40gb" if pcie else "a100-sxm-40gb"
    if name == "V100" and (memory_gib >= 30 or "v100-32" in instance.lower() or "v100_32" in instance.lower()):
        return "v100-32gb"
    if name == "H100":
        if memory_gib >= 90:
            return "h100-nvl"
        return "h100-pcie" if pcie else "h100-sxm"
    return default


def _snapshot_rows(known: set[str]) -> tuple[list[PriceRow], dict[str, int]]:
    names = _names(known)
    rows, left_out = [], {"no accelerator id": 0, "no on-demand price": 0, "invalid": 0}
    with SNAPSHOT_CSV.open(encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            base = names.get(r["accelerator_name"])
            if base is None:
                left_out["no accelerator id"] += 1
                continue
            if not r["on_demand_usd_per_hour"]:
                left_out["no on-demand price"] += 1
                continue
            aid = _disambiguate(r["accelerator_name"], base, float(r["accelerator_memory_gib"] or 0), r["instance_type"])
            notes = "; ".join(n for n in (f"spot price in {r['spot_region']}" if r["spot_usd_per_hour"] else "", r["notes"]) if n)
            try:
                rows.append(
                    PriceRow(
                        provider=r["cloud"],
                        instance_type=r["instance_type"],
                        accelerator_id=aid,
                        accelerators_per_instance=int(r["accelerator_count"]),
                        on_demand_usd_per_hour=float(r["on_demand_usd_per_hour"]),
                        spot_usd_per_hour=float(r["spot_usd_per_hour"]) if r["spot_usd_per_hour"] else None,
                        region=r["region"] or "not stated in the catalog",
                        estimate=False,
                        as_of=SNAPSHOT_READ_ON,
                        source=f"skypilot-org/skypilot-catalog@{r['catalog_commit'][:10]} {r['catalog_path']}",
                        notes=notes,
                    )
                )
            except (ValidationError, ValueError):
                left_out["invalid"] += 1
    return rows, left_out


def _hand_rows(known: set[str], left_out: dict[str, int]) -> list[PriceRow]:
    """Hand rows for parts the accelerator catalog has, with an on-demand price (spot-only offers are left out)."""
    with HAND_CSV.open(encoding="utf-8", newline="") as fh:
        out = []
        for r in csv.DictReader(fh):
            r["accelerator_id"] = ID_ALIASES.get(r["accelerator_id"], r["accelerator_id"])
            if r["accelerator_id"] not in known:
                left_out["hand: no accelerator id"] = left_out.get("hand: no accelerator id", 0) + 1
            elif not r["on_demand_usd_per_hour"]:
                left_out["hand: spot only"] = left_out.get("hand: spot only", 0) + 1
            else:
                out.append(PriceRow(**{k: v for k, v in r.items() if v != ""}))
    return out


def build() -> tuple[list[PriceRow], dict[str, int]]:
    """The catalog rows, sorted by provider, accelerator and instance; and how many snapshot rows were left out."""
    known = {a.id for a in load_accelerators()}
    snapshot, left_out = _snapshot_rows(known)
    chosen: dict[tuple[str, str], PriceRow] = {}
    for row in [*snapshot, *_hand_rows(known, left_out)]:
        key = (row.provider, row.instance_type)
        if key not in chosen or row.as_of > chosen[key].as_of:
            chosen[key] = row
    rows = sorted(chosen.values(), key=lambda r: (r.provider, r.accelerator_id, r.accelerators_per_instance, r.instance_type))
    return rows, left_out


def render(rows: list[PriceRow]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        d = r.model_dump()
        w.writerow(["" if d[c] is None else ("true" if d[c] is True else "false" if d[c] is False else d[c]) for c in COLUMNS])
    return out.getvalue()


def run(check: bool = False, out: Path = PRICES_CSV) -> tuple[bool, str]:
    """(ok, a one-line summary). With check, compare instead of writing."""
    rows, left_out = build()
    text = render(rows)
    skipped = ", ".join(f"{n} {why}" for why, n in left_out.items() if n)
    summary = f"{len(rows)} rows ({len({r.provider for r in rows})} providers, {len({r.accelerator_id for r in rows})} accelerators); left out: {skipped or 'none'}"
    if check:
        same = out.read_text(encoding="utf-8") == text
        return same, summary + ("" if same else f"; {out.name} differs from a rebuild: run python -m core prices import")
    out.write_text(text, encoding="utf-8")
    return True, summary
