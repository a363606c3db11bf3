"""The types pages and their sections are handed, below every UI module (no Streamlit here): the price list in use
(built by prices.py from the user's CSV) and a page's context (set by app.py, read through context.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app_pages.shared.style import Units
from core.catalog.prices import PriceRow
from core.scenario import Scenario


@dataclass(frozen=True)
class PriceList:
    key: str  # "" for the built-in catalog; else a digest of the text and the mode (a cache key)
    rows: tuple[PriceRow, ...] | None  # None: the built-in catalog
    own_rows: int = 0
    accelerators: int = 0
    problems: tuple[str, ...] = ()
    as_of: str = ""

    def summary(self) -> str:
        if not self.own_rows:
            return "Priced from the whole catalog, its flagged rows too (placeholders, floors and stale rows: Method page)"
        rows, accs = f"{self.own_rows} row{'s' * (self.own_rows != 1)}", f"{self.accelerators} accelerator{'s' * (self.accelerators != 1)}"
        return f"Priced from your own list: {rows} for {accs}, as of {self.as_of}"

    @property
    def args(self) -> tuple[str, tuple[PriceRow, ...] | None]:
        """(price_key, rows) for the cached results (app_pages/shared/results.py)."""
        return self.key, self.rows


@dataclass(frozen=True)
class PageContext:
    scenario: Scenario | None
    values: dict[str, Any]
    messages: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    prices: PriceList = field(default=PriceList("", None))  # the price list in use (app_pages/shared/prices.py)

    @property
    def units(self) -> Units:
        return Units(self.values.get("units", "GiB"))
