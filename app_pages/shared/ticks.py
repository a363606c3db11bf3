"""Tick marks for log axes that a manager reads at a glance: times in words, and numbers at 1, 2 and 5 times a power
of ten written out in full (Plotly's own marks on a log axis are bare digits, "2" for 20 or for 200, or a single
label on a range shorter than a decade)."""

from __future__ import annotations

from typing import Any

Marks = tuple[tuple[float, str], ...]

# (hours, label)
TIME_TICKS: Marks = (
    (10 / 3600, "10 s"),
    (30 / 3600, "30 s"),
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
    *((8760 * n, f"{n} years") for n in (2, 5, 10, 20, 50, 100)),  # a 1T-token pretrain on few devices: 11 years (docs/PERFORMANCE.md)
)


def _label(value: float, prefix: str) -> str:
    return f"{prefix}{value:,.0f}" if value >= 1 and value.is_integer() else f"{prefix}{value:g}"


def number_marks(prefix: str = "", decades: range = range(0, 5), steps: tuple[float, ...] = (1, 2, 5)) -> Marks:
    """`steps` times each power of ten in `decades`, labelled in full ("1,000", "$0.5", "1.5")."""
    return tuple((m * 10.0**e, _label(m * 10.0**e, prefix)) for e in decades for m in steps)


# Contexts in the words people use for them ("4k", "128k"): every power of four from 256 tokens to 1M (with Llama's
# 128k), few enough for a projector's chart.
CONTEXT_TICKS: Marks = ((256, "256"), (1024, "1k"), (4096, "4k"), (16384, "16k"), (65536, "64k"), (131072, "128k"), (262144, "256k"), (1048576, "1M"))
SPEED_TICKS = number_marks()  # tokens/s: 1 to 50,000 (the Plan page's speed axis, GPU vs TPU's)
_WIDE = range(-3, 10)  # 0.001 to 5 x 10^9: fractions of a dollar up to a fleet's tokens/s (368,000 for a small model ran past 50,000)
_COARSE = {prefix: number_marks(prefix, _WIDE) for prefix in ("", "$")}
_FINE = {prefix: number_marks(prefix, _WIDE, (1, 1.5, 2, 3, 5, 7)) for prefix in ("", "$")}
_DECADES = {prefix: number_marks(prefix, _WIDE, (1,)) for prefix in ("", "$")}


# More marks than this on one axis overlap on a projector's 480 px chart (a training cost axis from $5 to $20,000
# had twelve): past it, powers of ten alone.
MAX_MARKS = 9


def number_ticks(values: list[float], prefix: str = "") -> dict[str, Any]:
    """Marks for a log axis of plain numbers ("" or "$"): 1, 2 and 5 times each power of ten (powers of ten alone on a
    range that would take more than MAX_MARKS), finer steps on a range too short for two of those, else Plotly's own
    marks (with the prefix)."""
    coarse = log_ticks(values, _COARSE[prefix])
    if len(coarse.get("tickvals", ())) > MAX_MARKS:
        return log_ticks(values, _DECADES[prefix])
    return coarse or log_ticks(values, _FINE[prefix]) or ({"tickprefix": prefix} if prefix else {})


def time_ticks(hours: list[float]) -> dict[str, Any]:
    """Marks for a log axis of hours: minutes, hours, days, ... years (TIME_TICKS), else Plotly's own in hours."""
    return log_ticks(hours, TIME_TICKS) or {"ticksuffix": " h"}


def log_ticks(values: list[float], marks: Marks) -> dict[str, Any]:
    """An axis's tickvals and ticktext: the `marks` within the data's range (a little either side); none (Plotly's
    own) when fewer than two fall in it."""
    low, high = min(values) / 1.3, max(values) * 1.3
    kept = [(v, text) for v, text in marks if low <= v <= high]
    return {"tickvals": [v for v, _ in kept], "ticktext": [text for _, text in kept]} if len(kept) >= 2 else {}
