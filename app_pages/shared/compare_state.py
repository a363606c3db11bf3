"""Saved scenarios for the Compare page, kept in the session and in the URL
(`cmp`, compressed JSON) so that a link reproduces the comparison."""

from __future__ import annotations

import base64
import binascii
import json
import zlib

import streamlit as st
from pydantic import ValidationError

from app_pages.shared.sidebar import inflate
from core.model.hf_config import safe_label
from core.scenario import Scenario

MAX_SAVED = 4
PARAM = "cmp"
MAX_TOKEN_BYTES = 1_000_000  # four scenarios with pasted configs stay far below


def _encode(saved: list[tuple[str, Scenario]]) -> str:
    rows = [{"name": n, "scenario": s.model_dump(mode="json", exclude_defaults=True)} for n, s in saved]
    return base64.urlsafe_b64encode(zlib.compress(json.dumps(rows, separators=(",", ":")).encode(), 9)).decode()


def _decode(token: str) -> list[tuple[str, Scenario]]:
    rows = json.loads(inflate(token, MAX_TOKEN_BYTES))
    out = []
    for row in rows[:MAX_SAVED]:
        out.append((safe_label(row["name"])[:60] or "Scenario", Scenario.model_validate(row["scenario"])))
    return out


def load_saved() -> list[tuple[str, Scenario]]:
    if "saved_scenarios" not in st.session_state:
        saved: list[tuple[str, Scenario]] = []
        token = st.query_params.get(PARAM)
        if token:
            try:
                saved = _decode(token)
            except (ValueError, KeyError, TypeError, RecursionError, binascii.Error, zlib.error, ValidationError):
                st.warning("The saved comparison in the link could not be read and was ignored.", icon=":material/warning:")
        st.session_state["saved_scenarios"] = saved
    return list(st.session_state["saved_scenarios"])


def save_saved(saved: list[tuple[str, Scenario]]) -> None:
    st.session_state["saved_scenarios"] = saved[:MAX_SAVED]
    if saved:
        st.query_params[PARAM] = _encode(saved[:MAX_SAVED])
    elif PARAM in st.query_params:
        del st.query_params[PARAM]
