"""The one way a table reaches the screen. Every st.dataframe has a built-in "Download as CSV" that writes its cells
as they are, so a provider named =HYPERLINK(...) in a link's price list, or a Compare scenario's name, would land in a
spreadsheet as a formula. `show_table()` neutralises every text cell, column name and row name first (the rule of the
app's own CSV downloads, text.spreadsheet_safe); tests/app/test_injection.py checks that no page calls st.dataframe or
st.table itself."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app_pages.shared.text import spreadsheet_safe


def sheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` whose text cells, column names and row names a spreadsheet will not run as formulas."""
    out = frame.copy(deep=False)
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col].dtype):
            out[col] = out[col].map(spreadsheet_safe)
    out.columns = [spreadsheet_safe(c) for c in out.columns]
    out.index = [spreadsheet_safe(i) for i in out.index] if out.index.dtype == object else out.index
    return out


def show_table(data: Any, *, static: bool = False, **kwargs: Any) -> None:
    """st.dataframe (or, with static=True, st.table) of `data` (a DataFrame, or records for one), made sheet_safe."""
    frame = sheet_safe(data if isinstance(data, pd.DataFrame) else pd.DataFrame(data))
    (st.table if static else st.dataframe)(frame, **kwargs)
