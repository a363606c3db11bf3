"""Scenario state: one value per field in st.session_state (the widgets' own
keys), read from the link once per session, kept when a page hides a widget,
and written back to the URL on every run, so the address bar always
reproduces what the user sees.

Three inputs do not fit in a query parameter as text and travel as compressed
blobs: the pasted config.json (`cfg`, the user's own text), the Compare
set (`cmp`) and the user's own price list (`prc`, the CSV as uploaded). Each
is refused above a size budget after decompression. The config.json stays as
text in the session (it is the text area's value); the Compare set and the
price list are kept deflated, stored once for every session holding the same
text (app_pages/shared/blobs.py), and parsed on demand through a bounded,
shared cache, so a hostile link cannot make a session large and a room on one
link holds one copy. Their link tokens are the stored bytes: writing the link
compresses nothing again (the config.json's blob is kept beside its text for
the same reason)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import zlib
from typing import Any

import streamlit as st
from streamlit.errors import StreamlitWidgetAlreadyInstantiatedError

from app_pages.shared.blobs import Blob, store
from app_pages.shared.field import Values
from app_pages.shared.fields import fields, url_problems

CFG_PARAM = "cfg"
CMP_PARAM = "cmp"
PRC_PARAM = "prc"
BLOB_PARAMS = (CFG_PARAM, CMP_PARAM, PRC_PARAM)
PRICE_TEXT = "price_text"  # the uploaded price CSV exactly as given, as a Blob (price_text(); app_pages/shared/prices.py)
CFG_TEXT = "cfg_text"  # the text area's key: the config.json exactly as the user gave it
CFG_BLOB = "_cfg_blob"  # the Blob of CFG_TEXT's text, for the link (written again only when the text changes)
SAVED = "cmp_rows"  # the Compare set as its link's JSON, a Blob (saved_rows(): [(name, scenario JSON)], at most MAX_SAVED)
MAX_SAVED = 4
MAX_CONFIG_CHARS = 256_000  # real config.json files are 1-10 kB (Llama 4 under 20 kB); a paste is kept up to this size
MAX_LINK_CONFIG_CHARS = 64_000  # a config.json read from a link (the link's budget after inflation)
MAX_SAVED_CHARS = 256_000  # the Compare set read from a link, after inflation
MAX_LINK_PRICE_CHARS = 64_000  # a price list read from a link, after inflation (app_pages/shared/prices.MAX_PRICE_CHARS)
MAX_URL_TOKEN_CHARS = 32_000  # a blob longer than this is left out of the link (and the page says so)
PERSISTENT = (CFG_TEXT, PRICE_TEXT)  # non-field keys kept across pages


class BlobError(ValueError):
    """A link's compressed parameter cannot be read."""


def encode_blob(text: str) -> str:
    return base64.urlsafe_b64encode(zlib.compress(text.encode("utf-8"), 9)).decode()


def decode_blob(token: str, limit: int) -> str:
    """Inflate a link parameter, refusing output above `limit` bytes before producing it (a 1 kB token can inflate
    to gigabytes) and anything that is not UTF-8 text."""
    try:
        raw_in = base64.urlsafe_b64decode(token.encode("ascii"))
        d = zlib.decompressobj()
        raw = d.decompress(raw_in, limit + 1)
    except (ValueError, binascii.Error, zlib.error, UnicodeError):
        raise BlobError("not a compressed blob") from None
    if len(raw) > limit or d.unconsumed_tail:
        raise BlobError(f"larger than {limit:,} bytes once inflated")
    if not d.eof:  # empty or cut short (a link truncated by a chat client)
        raise BlobError("not a complete compressed blob")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BlobError("not UTF-8 text") from None


def keep_across_pages() -> None:
    """Streamlit forgets a widget's value when a page that does not draw it runs; writing each value back as the
    app's own state keeps it (Streamlit docs, "Widget behavior": interrupt the widget clean-up process). Called at
    the top of every whole run and where the page starts in a run of the page alone (app.py's fragment): a value
    typed in such a run lives only as widget state until then, and a page switch would drop it. A widget already
    drawn in this run (the sidebar's inputs, when their fragment ran first in the same run) keeps its value itself
    and may not be written."""
    for key in (*fields(), *PERSISTENT):
        if key in st.session_state:
            try:
                st.session_state[key] = st.session_state[key]
            except StreamlitWidgetAlreadyInstantiatedError:
                pass


OPENED_WITH_PARAMS = "_opened_with_params"


def load_link_once() -> list[str]:
    """At a session's first run, take every input from the URL; return what the link got wrong."""
    if st.session_state.get("_url_loaded"):
        return []
    st.session_state["_url_loaded"] = True
    table = fields()
    query = {k: st.query_params[k] for k in st.query_params}
    st.session_state[OPENED_WITH_PARAMS] = bool(query)  # the root router's choice (app_pages/home.py)
    for key, raw in query.items():
        if key in table:
            try:
                st.session_state[key] = table[key].parse(raw)
            except (ValueError, OverflowError):
                pass
    if "util" in query and "peak" not in query and "util" in st.session_state:
        # a link from before the busiest hour sized every fleet: at most util% load on average is the same replicas
        # as a busiest hour of 100 / util times the average (core/money/serving.py sizes for the busiest hour)
        st.session_state["peak"] = min(100.0, max(1.0, 100.0 / st.session_state["util"]))
    messages = url_problems(query, table)
    if token := query.get(CFG_PARAM):
        try:
            text = decode_blob(token, MAX_LINK_CONFIG_CHARS * 4)  # UTF-8: at most 4 bytes a character
            if len(text) > MAX_LINK_CONFIG_CHARS:
                raise BlobError(f"longer than {MAX_LINK_CONFIG_CHARS:,} characters")
            st.session_state[CFG_TEXT] = text
        except BlobError as exc:
            messages.append(f"The config.json in the link could not be read ({exc}) and was ignored.")
    if token := query.get(CMP_PARAM):
        try:
            set_saved_rows(saved_rows_from_json(decode_blob(token, MAX_SAVED_CHARS)))
        except (BlobError, ValueError) as exc:
            messages.append(f"The saved comparison in the link could not be read ({exc}) and was ignored.")
    if token := query.get(PRC_PARAM):
        try:
            set_price_text(decode_blob(token, MAX_LINK_PRICE_CHARS))
        except BlobError as exc:
            messages.append(f"The price list in the link could not be read ({exc}) and was ignored; the catalog's prices are used.")
    return messages


def saved_rows_from_json(text: str) -> list[tuple[str, str]]:
    """The Compare set from its link form: a JSON list of {name, scenario}; scenarios are kept as compact JSON
    text and validated when shown."""
    from core.jsontext import loads
    from core.model.hf_config import safe_label

    rows = loads(text)
    if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("scenario"), dict) for r in rows):
        raise ValueError("expected a list of named scenarios")
    return [(safe_label(r.get("name"))[:60] or f"Scenario {i + 1}", json.dumps(r["scenario"], separators=(",", ":"))) for i, r in enumerate(rows[:MAX_SAVED])]


def _saved_json(rows: list[tuple[str, str]]) -> str:
    """The Compare set's link form: a JSON list of {name, scenario}."""
    return json.dumps([{"name": n, "scenario": json.loads(s)} for n, s in rows], separators=(",", ":"))


def saved_rows() -> list[tuple[str, str]]:
    """The Compare set: [(name, scenario as compact JSON)]."""
    blob = st.session_state.get(SAVED)
    if not isinstance(blob, Blob):
        return []
    return [(r["name"], json.dumps(r["scenario"], separators=(",", ":"))) for r in json.loads(blob.text())]


def set_saved_rows(rows: list[tuple[str, str]]) -> None:
    if rows:
        st.session_state[SAVED] = store(_saved_json(rows[:MAX_SAVED]))
    else:
        st.session_state.pop(SAVED, None)


def price_text() -> str:
    """The user's own price list as given ("" when none)."""
    blob = st.session_state.get(PRICE_TEXT)
    return blob.text() if isinstance(blob, Blob) else ""


def set_price_text(text: str) -> None:
    if text.strip():
        st.session_state[PRICE_TEXT] = store(text)
    else:
        st.session_state.pop(PRICE_TEXT, None)


def config_blob(text: str) -> Blob:
    """The Blob of the config.json's text, kept beside it: compressed again only when the text changed."""
    kept = st.session_state.get(CFG_BLOB)
    if isinstance(kept, Blob) and kept.digest == hashlib.sha256(text.encode("utf-8")).digest():
        return kept
    blob = st.session_state[CFG_BLOB] = store(text)
    return blob


def request_values(values: Values) -> None:
    """Ask the next run to set these inputs before any widget exists (workshop presets, uploads, plan clicks)."""
    st.session_state["_pending"] = values


def apply_requested_values() -> None:
    pending = st.session_state.pop("_pending", None)
    for key, value in (pending or {}).items():
        st.session_state[key] = value


def current_values() -> Values:
    # hop: st.session_state (the widgets' values, by URL key) -> a Values dict, defaults filled in
    return {key: st.session_state.get(key, f.default) for key, f in fields().items()}


def off_default(keys: tuple[str, ...]) -> list[str]:
    """Of `keys`, the inputs the link or the reader moved off their field's default (a folded group opens for them)."""
    table = fields()
    return [k for k in keys if st.session_state.get(k, table[k].default) != table[k].default]


def write_url(values: Values | None = None) -> str | None:
    """Every input that differs from its default, by its URL key, plus the blobs. Returns a note when a blob is too
    long for a link. `values`: current_values() read just before by the caller (each read is ~60 session-state
    reads), else read here."""
    note = None
    values = current_values() if values is None else values
    wanted: dict[str, str] = {}
    for key, f in fields().items():
        if values[key] != f.default:
            wanted[key] = f.serialize(values[key])
    text = st.session_state.get(CFG_TEXT, "")
    if values.get("src") == "config" and text.strip():
        token = config_blob(text).token()
        if len(token) <= MAX_URL_TOKEN_CHARS:
            wanted[CFG_PARAM] = token
        else:
            note = "This config.json is too long for a link; download the scenario (sidebar) to share it."
    if isinstance(saved := st.session_state.get(SAVED), Blob):
        token = saved.token()
        if len(token) <= MAX_URL_TOKEN_CHARS:
            wanted[CMP_PARAM] = token
        else:
            note = "The saved comparison is too long for a link; download each scenario to share it."
    if isinstance(prices := st.session_state.get(PRICE_TEXT), Blob):
        token = prices.token()
        if len(token) <= MAX_URL_TOKEN_CHARS:
            wanted[PRC_PARAM] = token
        else:
            note = "Your price list is too long for a link; colleagues opening it see the catalog's prices."
    for key in list(st.query_params):
        if key not in wanted and (key in fields() or key in BLOB_PARAMS):
            del st.query_params[key]
    for key, value in wanted.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value
    return note


def link_query() -> dict[str, Any]:
    """The query parameters of the current scenario (for st.switch_page)."""
    return {k: st.query_params[k] for k in st.query_params}
