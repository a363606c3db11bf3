"""The one way a table reaches the screen. Every st.dataframe has a built-in "Download as CSV" that writes its cells
as they are, so a provider named =HYPERLINK(...) in a link's price list, or a Compare scenario's name, would land in a
spreadsheet as a formula. `show_table()` neutralises every text cell, column name and row name first (the rule of the
app's own CSV downloads, text.spreadsheet_safe); tests/app/test_injection.py checks that no page calls st.dataframe or
st.table itself."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app_pages.shared.text import FORMULA_STARTS, spreadsheet_safe


def _safe_column(values: pd.Series) -> pd.Series | None:
    """The column with its text cells made spreadsheet_safe, or None when none needed it (most: names, numbers as
    text). A list comprehension over the values: Series.map cost about 1 ms a column (the Method page's six tables
    took half its rerun's CPU, bench/rerun_cpu.py)."""
    cells = values.tolist()
    safe = [spreadsheet_safe(v) if isinstance(v, str) and v[:1] in FORMULA_STARTS else v for v in cells]
    if all(a is b for a, b in zip(safe, cells, strict=True)):
        return None
    return pd.Series(safe, index=values.index, dtype=values.dtype, name=values.name)


def sheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` whose text cells, column names and row names a spreadsheet will not run as formulas."""
    out = frame.copy(deep=False)
    for i in range(out.shape[1]):
        column = out.iloc[:, i]
        if column.dtype == object or pd.api.types.is_string_dtype(column.dtype):
            safe = _safe_column(column)
            if safe is not None:
                out.isetitem(i, safe)
    out.columns = [spreadsheet_safe(c) for c in out.columns]
    out.index = [spreadsheet_safe(i) for i in out.index] if out.index.dtype == object else out.index
    return out


# What an interactive table shows for a missing value: a figure that does not apply (a serving speed on a part the engine
# does not run on, blanked with its reason in the row's note) reads as a dash, not as Streamlit's default "None"
MISSING_CELL = "—"


def show_table(data: Any, *, static: bool = False, **kwargs: Any) -> None:
    """st.dataframe (or, with static=True, st.table) of `data` (a DataFrame, or records for one), made sheet_safe;
    missing values shown as MISSING_CELL."""
    frame = sheet_safe(data if isinstance(data, pd.DataFrame) else pd.DataFrame(data))
    if static:
        st.table(frame, **kwargs)
    else:
        st.dataframe(frame, **{"placeholder": MISSING_CELL, **kwargs})


# The training bill's two columns (Compare, GPU vs TPU): which rows each prices, as the Training page's Price says it
TRAINING_RUN_HELP = {
    "Training run (USD)": st.column_config.NumberColumn(help="on demand: the run with setup on the cheapest on-demand instances that hold its layout"),
    "Training run on spot (USD)": st.column_config.NumberColumn(
        help="the same run on the cheapest spot (preemptible) rows, as the Training and Plan pages bill it with Price = Spot; blank: no spot price"
    ),
}
