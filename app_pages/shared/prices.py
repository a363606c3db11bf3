"""Your own price list: a CSV in data/cloud_prices.csv's columns, uploaded in the
sidebar, kept as the user's text in the session and in the link (`prc`, a
compressed blob like the pasted config.json), and merged with the catalog by the
`pmode` field. Every priced page reads it from the page context, so the
training cost, the serving plans, GPU vs TPU, Training vs inference and the Plan
page all price from the same rows."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import streamlit as st

from app_pages.shared.cache import shared_cache
from app_pages.shared.sidebar import page_widget
from app_pages.shared.state import PRICE_TEXT
from app_pages.shared.text import plain
from core.catalog.accelerators import load_accelerators
from core.catalog.prices import COLUMNS, PriceRow, merge_prices, parse_price_bytes, parse_price_csv

MAX_PRICE_CHARS = 64_000  # about 500 rows: a team's own price sheet is tens of rows; parsed lists are shared in a small cache
TEMPLATE = ",".join(COLUMNS) + "\nOur cloud,h100x8-reserved,h100-sxm,8,17.60,,us-east,false,2026-11-01,our 1-year contract,\n"


@dataclass(frozen=True)
class PriceList:
    key: str  # "" for the built-in catalog; else a digest of the text and the mode (a cache key)
    rows: tuple[PriceRow, ...] | None  # None: the built-in catalog
    own_rows: int = 0
    accelerators: int = 0
    problems: tuple[str, ...] = ()
    as_of: str = ""

    def summary(self) -> str:
        rows, accs = f"{self.own_rows} row{'s' * (self.own_rows != 1)}", f"{self.accelerators} accelerator{'s' * (self.accelerators != 1)}"
        return f"Priced from your own list: {rows} for {accs}, as of {self.as_of}"

    @property
    def args(self) -> tuple[str, tuple[PriceRow, ...] | None]:
        """(price_key, rows) for the cached results (app_pages/shared/results.py)."""
        return self.key, self.rows


@shared_cache(max_entries=16)
def _parsed(text: str, mode: str) -> PriceList:
    rows, problems = parse_price_csv(text, {a.id for a in load_accelerators()})
    if not rows:
        return PriceList("", None, problems=tuple(problems) or ("no price rows",))
    digest = hashlib.sha256(f"{mode}\n{text}".encode()).hexdigest()[:16]
    dates = sorted(r.as_of for r in rows)
    span = f"{dates[0]}" if dates[0] == dates[-1] else f"{dates[0]} – {dates[-1]}"
    return PriceList(digest, merge_prices(rows, mode), len(rows), len({r.accelerator_id for r in rows}), tuple(problems), span)  # type: ignore[arg-type]


def price_list(values: dict) -> PriceList:
    text = st.session_state.get(PRICE_TEXT, "")
    return _parsed(text, values.get("pmode", "replace")) if text.strip() else PriceList("", None)


def price_inputs() -> None:
    """The sidebar's "Your prices" expander: upload, template, mode, what was read."""
    text = st.session_state.get(PRICE_TEXT, "")
    with st.sidebar.expander("Your own prices (CSV)", icon=":material/payments:", expanded=bool(text.strip() or st.session_state.get("price_error"))):
        upload = st.file_uploader("Upload a price list (CSV)", type=["csv"], key="price_upload", max_upload_size=1)
        if upload is not None and st.session_state.get("price_upload_id") != upload.file_id:
            st.session_state["price_upload_id"] = upload.file_id
            _take(upload.getvalue())
            st.rerun()
        if err := st.session_state.get("price_error"):
            st.error(plain(err))
        st.download_button("Template (CSV)", data=TEMPLATE, file_name="my-prices.csv", mime="text/csv", icon=":material/download:", width="stretch")
        if not text.strip():
            st.caption("Prices come from the dated catalog (Method page). A list of your own, in the same columns, prices every page.")
            return
        page_widget("pmode")
        got = _parsed(text, st.session_state.get("pmode", "replace"))
        if got.rows is not None:
            st.caption(plain(got.summary() + "."))
        if got.problems:
            more = f" (+{len(got.problems) - 3} more)" if len(got.problems) > 3 else ""
            verb = "were skipped" if got.rows is not None else "nothing could be used"
            st.warning(plain(f"Some lines {verb}: " + "; ".join(got.problems[:3]) + more), icon=":material/warning:")
        if st.button("Forget my prices", key="price_forget", icon=":material/delete:", width="stretch"):
            st.session_state[PRICE_TEXT] = ""
            st.session_state.pop("price_error", None)
            st.rerun()


def _take(data: bytes) -> None:
    """Keep an uploaded list's text when at least one row reads; otherwise say why and keep the list in use. The
    core's reader refuses binary and non-UTF-8 files; the app's own bound is MAX_PRICE_CHARS."""
    st.session_state.pop("price_error", None)
    rows, problems = parse_price_bytes(data, {a.id for a in load_accelerators()}) if len(data) <= MAX_PRICE_CHARS * 4 else ((), [])
    text = data.decode("utf-8-sig") if rows else ""
    if not rows or len(text) > MAX_PRICE_CHARS:
        why = "; ".join(problems[:3]) or f"a price list here holds up to {MAX_PRICE_CHARS:,} characters"
        st.session_state["price_error"] = f"No price list could be read from that file ({why}). Nothing was changed."
        return
    st.session_state[PRICE_TEXT] = text
