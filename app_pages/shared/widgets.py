"""The widget factory: one Streamlit input per field of the field table (fields.py), keyed by its URL key, so its
value is kept in st.session_state and travels in the link. The sidebar's layout (sidebar.py) and the pages draw their
inputs with it; it knows nothing of what a change reruns (the sidebar passes that in as a callback)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st
from pydantic import ValidationError

from app_pages.shared.field import Field
from app_pages.shared.fields import fields
from app_pages.shared.text import plain
from core.cli import describe_validation_error


def widget(f: Field, container: Any = st, on_change: Callable[..., None] | None = None, args: tuple = (), narrow: bool = False) -> Any:
    """The widget for a field, keyed by its URL key; its value lives in st.session_state[f.key]. A sidebar input
    gets the sidebar's callback (sidebar.py: rerun.after_sidebar_change with the sidebar's shape). `narrow`: a column
    too narrow for a row of buttons in large type (the presenter view's, beside its chart), where a segmented choice
    is drawn as radio buttons, one a line ("Full fine-tune" was cut to "Full fine-" there at 1024 px)."""
    st.session_state.setdefault(f.key, f.default)
    common: dict[str, Any] = {"key": f.key, "help": f.help or None}
    if on_change is not None:
        common.update(on_change=on_change, args=args)
    if f.widget == "toggle":
        return container.toggle(f.label, **common)
    if f.widget == "number":
        cast = int if f.kind == "int" else float
        step = {"step": 1} if f.kind == "int" else {}
        return container.number_input(f.label, min_value=cast(f.lo), max_value=cast(f.hi), **step, **common)
    if f.widget == "slider":
        return container.select_slider(f.label, options=f.stops(st.session_state[f.key]), format_func=f.fmt, **common)
    if f.widget == "segmented" and narrow:
        return container.radio(f.label, options=list(f.options), format_func=f.fmt, **common)
    if f.widget == "segmented":
        return container.segmented_control(f.label, options=list(f.options), format_func=f.fmt, required=True, **common)
    return container.selectbox(f.label, options=list(f.options), format_func=f.fmt, **common)


# A selectbox shows its choice in a one-line text box: in the sidebar (about 215 px of text) a longer name is cut
# ("Hugging Face Trainer + PEFT + bitsa"), so the sidebar writes it out in full under the box. The presenter view's
# larger type fits fewer characters.
LONG_CHOICE = 29
LONG_CHOICE_PRESENTING = 23


def long_choice(f: Field, values: dict[str, Any], limit: int | None = None) -> str | None:
    """The full name of a selectbox's choice too long to read in its box (`limit` characters; by default the
    sidebar's at the view's type), else None."""
    if f.widget != "select" or not f.applies(values):
        return None
    text = f.fmt(values.get(f.key, f.default))
    return text if len(text) > (limit or (LONG_CHOICE_PRESENTING if values.get("present") else LONG_CHOICE)) else None


def page_widget(key: str, container: Any = st) -> Any:
    """A page-level input (traffic, prices, sweep axis): kept and linked like the sidebar's."""
    return widget(fields()[key], container)


def traffic_inputs(last_key: str):
    """Requests/day, tokens in and out (and one more input, `last_key`) in a row; the Traffic they describe, or
    None after saying why it is invalid."""
    from core.money.serving import Traffic

    cols = st.columns(4)
    rpd, tin, tout = (page_widget(k, c) for k, c in zip(("rpd", "tin", "tout"), cols, strict=False))
    extra = page_widget(last_key, cols[3])
    try:
        return Traffic(requests_per_day=rpd, input_tokens_per_request=tin, output_tokens_per_request=tout), extra
    except ValidationError as exc:
        st.warning(plain("This traffic is not valid: " + describe_validation_error(exc)), icon=":material/warning:")
        return None, extra
