"""A catalog CSV with one row's cells replaced, written to a test's folder, and the error a catalog raises loading a
file (tests of what a catalog refuses on load)."""

from __future__ import annotations

import csv
from pathlib import Path
from types import ModuleType

import pytest

from core.catalog.accelerators import CatalogError


def with_cells(table: Path, folder: Path, row: int, cells: dict[str, str]) -> Path:
    """`table` copied into `folder` with row `row`'s cells replaced by `cells`; the copy's path."""
    with table.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    rows[row].update(cells)
    out = folder / table.name
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return out


def load_error(monkeypatch: pytest.MonkeyPatch, module: ModuleType, csv_attr: str, loader: str, path: Path) -> CatalogError:
    """The CatalogError `module.<loader>()` raises reading `path` in place of `module.<csv_attr>` (its cache cleared
    before and after, so no other test sees the broken file)."""
    monkeypatch.setattr(module, csv_attr, path)
    load = getattr(module, loader)
    load.cache_clear()
    try:
        with pytest.raises(CatalogError) as exc:
            load()
        return exc.value
    finally:
        load.cache_clear()
