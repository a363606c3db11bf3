"""Folded sections drawn only while open: a keyed expander that reruns the app when opened or closed (Streamlit's
public `on_change="rerun"`), so a closed one's elements are not sent, and a context move re-renders fewer elements
in the browser (docs/PERFORMANCE.md, "Folded sections"). Opening one costs a rerun before its content shows."""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

# Every fold's key. The app's tests open them all before a page runs (tests/app/conftest.py), so what a fold holds is
# checked as before (hostile input, exports, launch commands); a fold's own tests close it.
KEYS = ("fold_prices", "fold_scheduler", "fold_inference_how", "fold_inference_launch", "fold_training_launch", "fold_training_how", "fold_box_how")


def folded(label: str, key: str, *, expanded: bool = False, icon: str | None = None) -> DeltaGenerator | None:
    """The expander's container while it is open, None while it is closed (draw nothing into it then). `key` keeps
    its state (session state, not the link); `expanded` is how it starts."""
    if key not in KEYS:
        raise ValueError(f"fold key {key!r} is not in app_pages/shared/fold.KEYS")
    exp = st.expander(label, expanded=expanded, key=key, icon=icon, on_change="rerun")
    return exp if exp.open else None
