"""What app.py hands to the page being shown (per session)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app_pages.shared.specs import plain
from app_pages.shared.style import Units
from core.scenario import Scenario


def set_context(scenario: Scenario | None, values: dict[str, Any], messages: list[str]) -> None:
    st.session_state["_ctx"] = (scenario, values, messages)


def page_header(title: str, caption: str) -> tuple[Scenario | None, dict[str, Any], Units]:
    """Title, the link's warnings, and the scenario (None: the page stops after
    saying why)."""
    scenario, values, messages = st.session_state["_ctx"]
    st.title(title)
    st.caption(caption)
    show_messages(messages)
    if scenario is None:
        st.info("Fix the input above (in the sidebar) to see results; everything you entered is kept.")
        st.stop()
    return scenario, values, Units(values.get("units", "GiB"))


def as_mode(sc: Scenario, mode: str, **update) -> tuple[Scenario | None, str | None]:
    """The same model and accelerator as a training or serving scenario."""
    from pydantic import ValidationError

    from core.cli import describe_validation_error

    fields = dict(sc) | {"mode": mode} | update
    if mode == "training" and fields.get("offload") != "none" and not fields.get("zero_stage"):
        fields["offload"] = "none"
    try:
        return Scenario(**fields), None
    except ValidationError as exc:
        return None, describe_validation_error(exc)


def show_messages(messages: list[str] | None = None) -> None:
    """The link's and the inputs' warnings, escaped: they can quote user input."""
    if messages is None:
        messages = st.session_state.get("_ctx", (None, None, []))[2]
    for msg in messages:
        st.warning(plain(msg), icon=":material/warning:")
