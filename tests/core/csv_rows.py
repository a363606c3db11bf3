"""A catalog CSV with one row's cells replaced, written to a test's folder (tests of what a catalog refuses on load)."""

from __future__ import annotations

import csv
from pathlib import Path


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
