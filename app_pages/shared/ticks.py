"""Tick marks for log axes that a manager reads at a glance: times in words, and numbers at 1, 2 and 5 times a power
of ten written out in full (Plotly's own marks on a log axis are bare digits, "2" for 20 or for 200, or a single
label on a range shorter than a decade)."""

from __future__ import annotations

from typing import Any

Marks = tuple[tuple[float, str], ...]

# (hours, label)
TIME_TICKS: Marks = (
    (1 / 60, "1 min"),
    (5 / 60, "5 min"),
    (0.25, "15 min"),
    (0.5, "30 min"),
    (1, "1 h"),
    (2, "2 h"),
    (5, "5 h"),
    (12, "12 h"),
    (24, "1 day"),
    (72, "3 days"),
    (168, "1 week"),
    (720, "1 month"),
    (2190, "3 months"),
    (8760, "1 year"),
)


def number_marks(prefix: str = "", decades: range = range(0, 5)) -> Marks:
    """1, 2 and 5 times each power of ten in `decades`, labelled in full ("1,000", "$0.5")."""
    return tuple((m * 10.0**e, f"{prefix}{m * 10**e:,}" if e >= 0 else f"{prefix}{m * 10.0**e:g}") for e in decades for m in (1, 2, 5))


SPEED_TICKS = number_marks()  # tokens/s: 1 to 50,000
USD_TICKS = number_marks("$", range(-2, 9))  # $0.01 to $500,000,000


def log_ticks(values: list[float], marks: Marks) -> dict[str, Any]:
    """An axis's tickvals and ticktext: the `marks` within the data's range (a little either side); none (Plotly's
    own) when fewer than two fall in it."""
    low, high = min(values) / 1.3, max(values) * 1.3
    kept = [(v, text) for v, text in marks if low <= v <= high]
    return {"tickvals": [v for v, _ in kept], "ticktext": [text for _, text in kept]} if len(kept) >= 2 else {}
