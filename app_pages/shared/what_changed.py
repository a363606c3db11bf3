"""What the last move changed on the Memory page, in one line under the bars: the inputs that moved and the
components that grew or shrank most ("Batch 1 -> 8: activations +31.4 GiB; total 13.7 -> 45.1 GiB"). A room watching
the bars move saw them move but not why (stop 50's projector review, M4). Kept per session, as the last estimate's
components and inputs; the line stays until the next move changes something."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app_pages.shared.charts import component_label
from app_pages.shared.fields import fields
from app_pages.shared.style import Units
from core.estimate import Result
from core.memory.sweep import COMPONENTS

LAST_KEY = "_memory_last"  # (input values, component bytes, the line said) of the last run
FIRST_LINE = "Move a setting and this line says what it changed in the bars."
SHOWN_INPUTS = 2  # inputs named in the line (a preset moves several at once: "and 3 more")
SHOWN_PARTS = 2  # components named
QUIET_BYTES = 0.05 * 2**30  # smaller moves are not news to a room


def what_changed(values: dict[str, Any], result: Result, units: Units) -> str:
    """The line for this run, and this run remembered for the next."""
    parts = {c: float(getattr(result.memory_per_device_bytes, c)) for c in COMPONENTS}
    table = fields()
    inputs = {k: v for k, v in values.items() if k in table and table[k].scenario}  # what shapes the scenario
    last = st.session_state.get(LAST_KEY)
    said = FIRST_LINE if last is None else last[2]
    if last is not None and last[0] != inputs:
        moved = [k for k in inputs if last[0].get(k) != inputs[k]]
        words = [f"{table[k].label} {table[k].fmt(last[0].get(k, table[k].default))} → {table[k].fmt(inputs[k])}" for k in moved[:SHOWN_INPUTS]]
        if len(moved) > SHOWN_INPUTS:
            words.append(f"and {len(moved) - SHOWN_INPUTS} more")
        deltas = sorted(((parts[c] - last[1].get(c, 0.0), c) for c in COMPONENTS), key=lambda d: -abs(d[0]))
        grew = [f"{component_label(c, [result.accelerator]).lower()} {'+' if d > 0 else '−'}{units(abs(d))}" for d, c in deltas[:SHOWN_PARTS] if abs(d) >= QUIET_BYTES]
        total = f"total {units(sum(last[1].values()))} → {units(sum(parts.values()))}"
        said = "Changed: " + ", ".join(words) + ": " + ("; ".join([*grew, total]) if grew else "no part of the bar moved by more than a rounding")
    st.session_state[LAST_KEY] = (inputs, parts, said)
    return said
