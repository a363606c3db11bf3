"""Your own price list: a CSV in data/cloud_prices.csv's columns, uploaded in the
sidebar, kept as the user's text in the session and in the link (`prc`, a
compressed blob like the pasted config.json), and merged with the catalog by the
`pmode` field. Every priced page reads it from the page context, so the
training cost, the serving plans, GPU vs TPU, Training vs inference and the Plan
page all price from the same rows."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import streamlit as st

from app_pages.shared.blobs import Blob
from app_pages.shared.cache import shared_cache
from app_pages.shared.fold import folded
from app_pages.shared.page_types import PriceList
from app_pages.shared.state import PRICE_TEXT, set_price_text
from app_pages.shared.text import plain
from app_pages.shared.widgets import page_widget
from core.catalog.accelerators import load_accelerators
from core.catalog.price_trust import merge_prices
from core.catalog.prices import COLUMNS, load_prices, parse_price_bytes, parse_price_csv

MAX_PRICE_CHARS = 64_000  # about 500 rows: a team's own price sheet is tens of rows; parsed lists are shared in a small cache
TEMPLATE = ",".join(COLUMNS) + "\nOur cloud,h100x8-reserved,h100-sxm,8,17.60,,us-east,false,2026-11-01,our 1-year contract,\n"


FLAGGED = PriceList("flagged", load_prices(), problems=())  # the whole catalog, its flagged rows too (pflag on)


def _parsed(blob: Blob, mode: str, flagged: bool = False) -> PriceList:
    """The session's price list, parsed and merged: by the stored text's digest (the text is inflated only when
    this list, mode and flag are not cached)."""
    return _parsed_text(blob.digest.hex(), mode, flagged, _blob=blob)


@shared_cache(max_entries=16)
def _parsed_text(digest: str, mode: str, flagged: bool = False, _blob: Blob | None = None) -> PriceList:
    text = _blob.text() if _blob is not None else ""
    rows, problems = parse_price_csv(text, {a.id for a in load_accelerators()})
    if not rows:
        fallback = FLAGGED if flagged else PriceList("", None)
        return PriceList(fallback.key, fallback.rows, problems=tuple(problems) or ("no price rows",))
    digest = hashlib.sha256(f"{mode}\n{flagged}\n{text}".encode()).hexdigest()[:16]
    dates = sorted(r.as_of for r in rows)
    span = f"{dates[0]}" if dates[0] == dates[-1] else f"{dates[0]} – {dates[-1]}"
    merged = merge_prices(rows, mode, load_prices() if flagged else None)  # type: ignore[arg-type]
    return PriceList(digest, merged, len(rows), len({r.accelerator_id for r in rows}), tuple(problems), span)


def price_list(values: dict) -> PriceList:
    """The rows every page prices from: the user's list by `pmode`, else the catalog's billable rows; with `pflag`
    the catalog's flagged rows too (core/catalog/price_trust.py)."""
    return price_list_later(values)()


def price_list_later(values: dict) -> Callable[[], PriceList]:
    """price_list(values) when called, for a download built on click: holds the session's stored price text (deflated,
    shared by every session on the same link) and not its parsed rows. A download callable lives as long as its
    session; holding the rows kept each session's 1.7 MB parse of a price list at its budget alive after the shared
    cache had dropped it (bench/abuse.py memory)."""
    blob = st.session_state.get(PRICE_TEXT)
    flagged, mode = bool(values.get("pflag", False)), values.get("pmode", "replace")
    if isinstance(blob, Blob):
        return lambda: _parsed(blob, mode, flagged)
    fixed = FLAGGED if flagged else PriceList("", None)
    return lambda: fixed


def price_inputs() -> None:
    """The sidebar's "Your prices" expander, where it is called (app.py: in the sidebar's inputs part): upload,
    template, mode, what was read."""
    blob = st.session_state.get(PRICE_TEXT)
    box = folded("Your own prices (CSV)", "fold_prices", icon=":material/payments:", expanded=bool(isinstance(blob, Blob) or st.session_state.get("price_error")))
    if box is None:  # closed: its upload, template and toggles are not drawn (app_pages/shared/fold.py)
        return
    with box:
        upload = st.file_uploader("Upload a price list (CSV)", type=["csv"], key="price_upload", max_upload_size=1)
        if upload is not None and st.session_state.get("price_upload_id") != upload.file_id:
            st.session_state["price_upload_id"] = upload.file_id
            _take(upload.getvalue())
            st.rerun()
        if err := st.session_state.get("price_error"):
            st.error(plain(err))
        st.download_button("Template (CSV)", data=TEMPLATE, file_name="my-prices.csv", mime="text/csv", icon=":material/download:", width="stretch", on_click="ignore")
        page_widget("pflag")
        if not isinstance(blob, Blob):
            st.caption("Prices come from the dated catalog (Method page). A list of your own, in the same columns, prices every page.")
            return
        page_widget("pmode")
        got = _parsed(blob, st.session_state.get("pmode", "replace"), bool(st.session_state.get("pflag", False)))
        if got.rows is not None:
            st.caption(plain(got.summary() + "."))
        if got.problems:
            more = f" (+{len(got.problems) - 3} more)" if len(got.problems) > 3 else ""
            verb = "were skipped" if got.rows is not None else "nothing could be used"
            st.warning(plain(f"Some lines {verb}: " + "; ".join(got.problems[:3]) + more), icon=":material/warning:")
        if st.button("Forget my prices", key="price_forget", icon=":material/delete:", width="stretch"):
            set_price_text("")
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
    set_price_text(text)
