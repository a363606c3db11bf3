"""The command that runs a plan (issue #27, part 5), under the Plan page's cheapest and fastest plans. The text comes
from core/plan/launch/, where every value a user could type is shell-quoted; st.code shows it as plain text."""

from __future__ import annotations

import streamlit as st

from core.plan.result import Plan

CODE_HEIGHT_PX = 360  # a trainer's config runs to 40 lines: scroll inside the block; the copy button copies it all


def launch_section(cheapest: Plan, faster: Plan | None, faster_label: str) -> None:
    """The cheapest plan's command, and in an expander the faster plan's (when there is one)."""
    if cheapest.launch:
        what = "the command" if cheapest.goal == "serve" else "the command (and the trainer's config)"  # no trainer when serving
        st.markdown(f"**Run it:** {what} for the cheapest plan, ready to copy")
        st.code(cheapest.launch, language="bash", height=CODE_HEIGHT_PX, wrap_lines=True)
    if faster is not None and faster is not cheapest and faster.launch:
        with st.expander(f"Run the {faster_label} plan instead"):
            st.code(faster.launch, language="bash", height=CODE_HEIGHT_PX, wrap_lines=True)
    st.caption(
        "Flag names from each engine's and trainer's documentation (data/launch_flags.csv, with the page of each). Lines "
        "starting with # say what to replace: the dataset, a model given by config, a GGUF or quantized checkpoint."
    )
