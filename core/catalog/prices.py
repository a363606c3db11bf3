"""Cloud price catalog (data/cloud_prices.csv) and a forgiving parser for user-supplied price CSVs.

A row prices one rentable unit: a whole instance with `accelerators_per_instance` devices, or one
TPU chip (accelerators_per_instance = 1). Prices are USD per hour; spot is empty where none is
published. parse_price_csv never raises on bad content: it returns the good rows plus one
message per bad row, so an upload can be shown back to the user line by line.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import io
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from core.catalog.accelerators import DATA_DIR, ID_PATTERN, CatalogError, load_accelerators, validation_problems

PRICES_CSV = DATA_DIR / "cloud_prices.csv"
MAX_ROWS = 5_000
MAX_BYTES = 5_000_000  # an upload larger than this is refused before parsing
# What one device-hour can cost, from any row: the catalog's cheapest is $0.05 (a V100 on spot) and its dearest $18
# (a GB300 on demand), data/cloud_prices.csv as of 2026-11. The bounds leave 5x below and 50x above them, and keep
# every bill finite: $1,000 x 65,536 devices x the longest run the scenario allows stays far below float range.
MIN_USD_PER_DEVICE_HOUR = 0.01
MAX_USD_PER_DEVICE_HOUR = 1_000.0


class PriceRow(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = Field(min_length=1, max_length=64)
    instance_type: str = Field(min_length=1, max_length=128)
    accelerator_id: str = Field(pattern=ID_PATTERN, max_length=64)
    accelerators_per_instance: int = Field(ge=1, le=100_000)
    on_demand_usd_per_hour: float = Field(gt=0, allow_inf_nan=False)
    spot_usd_per_hour: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    region: str = Field(min_length=1, max_length=128)
    estimate: bool
    as_of: dt.date
    source: str = Field(min_length=3)
    notes: str = ""

    @field_validator("on_demand_usd_per_hour", "spot_usd_per_hour")
    @classmethod
    def _a_rental_price(cls, usd: float | None, info: ValidationInfo) -> float | None:
        """One gate for every price, whatever its source (catalog, uploaded list, link): a per-device-hour price in
        [MIN_USD_PER_DEVICE_HOUR, MAX_USD_PER_DEVICE_HOUR], so no bill built on it overflows or rounds to zero."""
        devices = info.data.get("accelerators_per_instance")
        if usd is None or devices is None:
            return usd
        per_device = usd / devices
        if not MIN_USD_PER_DEVICE_HOUR <= per_device <= MAX_USD_PER_DEVICE_HOUR:
            raise ValueError(
                f"{usd:.4g} USD an hour for {devices:,} device(s) is {per_device:.4g} USD per device-hour; "
                f"a rental costs {MIN_USD_PER_DEVICE_HOUR:g} to {MAX_USD_PER_DEVICE_HOUR:,.0f} USD per device-hour"
            )
        return usd

    @property
    def on_demand_usd_per_device_hour(self) -> float:
        return self.on_demand_usd_per_hour / self.accelerators_per_instance

    @property
    def spot_usd_per_device_hour(self) -> float | None:
        if self.spot_usd_per_hour is None:
            return None
        return self.spot_usd_per_hour / self.accelerators_per_instance


COLUMNS: tuple[str, ...] = tuple(PriceRow.model_fields)


# Catalog region names that read as something else in a sentence: skypilot's catalogs call a provider's only region
# "default" (hyperbolic: a plan read "hyperbolic 2x-H100-149-1443 (default)", like a setting) or "earth" (daytona).
REGION_WORDS = {"default": "the provider's default region", "earth": "one global region"}


def region_text(region: str) -> str:
    """A row's region as a sentence says it."""
    return REGION_WORDS.get(region.strip().lower(), region)


def parse_price_csv(text: str, known_accelerator_ids: set[str]) -> tuple[tuple[PriceRow, ...], list[str]]:
    """Parse price CSV text. Returns (good rows, messages); never raises on bad content."""
    text = text.lstrip("\ufeff")
    if not text.strip():
        return (), ["empty file: expected a header line with columns " + ", ".join(COLUMNS)]
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[PriceRow] = []
    messages: list[str] = []
    try:
        header = [h.strip() for h in next(reader)]
        missing = [c for c in COLUMNS if c not in header]
        extra = [h for h in header if h not in COLUMNS]
        if missing or extra or len(set(header)) != len(header):
            parts = [
                f"missing columns: {', '.join(missing)}" if missing else "",
                f"unexpected columns: {', '.join(extra) or '(blank)'}" if extra else "",
                "duplicate column names" if len(set(header)) != len(header) else "",
            ]
            return (), ["header: " + "; ".join(p for p in parts if p)]
        row_no = 0
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue  # blank line
            row_no += 1
            if row_no > MAX_ROWS:
                messages.append(f"more than {MAX_ROWS:,} rows: only the first {MAX_ROWS:,} were read")
                break
            where = f"row {row_no} (line {reader.line_num})"
            if len(cells) != len(header):
                messages.append(f"{where}: expected {len(header)} cells, found {len(cells)}")
                continue
            record = {k: v.strip() for k, v in zip(header, cells, strict=True) if v.strip()}
            try:
                row = PriceRow(**record)
            except ValidationError as exc:
                problems = "; ".join(f"{f}: {p}" for f, p in validation_problems(exc))
                messages.append(f"{where}: {problems}")
                continue
            if row.accelerator_id not in known_accelerator_ids:
                messages.append(f"{where}: accelerator_id: unknown accelerator {row.accelerator_id!r}")
                continue
            rows.append(row)
    except StopIteration:
        return (), ["empty file: no header line"]
    except csv.Error as exc:
        messages.append(f"line {reader.line_num}: not readable as CSV ({exc}); rest of file skipped")
    return tuple(rows), messages


def parse_price_bytes(data: bytes, known_accelerator_ids: set[str]) -> tuple[tuple[PriceRow, ...], list[str]]:
    """Like parse_price_csv for raw uploaded bytes: refuses binary, non-UTF-8 or oversized input."""
    if len(data) > MAX_BYTES:
        return (), [f"file too large: {len(data):,} bytes (limit {MAX_BYTES:,})"]
    if b"\x00" in data:
        return (), ["not a text file: contains NUL bytes (binary data?)"]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return (), [f"not UTF-8 text: undecodable byte at offset {exc.start}"]
    return parse_price_csv(text, known_accelerator_ids)


def _read_catalog(path: Path) -> tuple[PriceRow, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"cannot read: {exc}", file=path.name) from None
    rows, messages = parse_price_csv(text, {a.id for a in load_accelerators()})
    if messages:
        more = f" (+{len(messages) - 3} more)" if len(messages) > 3 else ""
        raise CatalogError("; ".join(messages[:3]) + more, file=path.name)
    if not rows:
        raise CatalogError("no rows", file=path.name)
    return rows


@functools.lru_cache(maxsize=1)
def _load_default() -> tuple[PriceRow, ...]:
    return _read_catalog(PRICES_CSV)


def load_prices(path: Path | None = None) -> tuple[PriceRow, ...]:
    """The built-in price catalog (cached), or another file in the same format."""
    return _load_default() if path is None else _read_catalog(Path(path))


# A price older than about six months is shown as stale: GPU cloud prices moved by tens of percent a year in 2024-2026.
STALE_AFTER_DAYS = 183


def is_stale(row: PriceRow, today: dt.date) -> bool:
    return (today - row.as_of).days > STALE_AFTER_DAYS


def prices_for(accelerator_id: str, rows: tuple[PriceRow, ...] | None = None) -> tuple[PriceRow, ...]:
    """Rows for one accelerator, cheapest on-demand price per device first."""
    pool = load_prices() if rows is None else rows
    hits = [r for r in pool if r.accelerator_id == accelerator_id]
    return tuple(sorted(hits, key=lambda r: (r.on_demand_usd_per_device_hour, r.provider)))
