"""The command that runs a plan (issue #27, part 5), under the Plan page's cheapest and fastest plans. The text comes
from core/plan/launch/, where every value a user could type is shell-quoted; st.code shows it as plain text."""

from __future__ import annotations

import streamlit as st

from core.memory.engines import ENGINES
from core.memory.evaluator import LayoutResult
from core.plan.launch import launch_command
from core.plan.result import Plan
from core.scenario import Scenario

CODE_HEIGHT_PX = 360  # a trainer's config runs to 40 lines: scroll inside the block; the copy button copies it all
CODE_LINES_IN_FULL = 14  # a serving command of up to this many lines is shown whole (no empty box below it)


def code_height(text: str) -> int | str:
    """The block's height: the text's own when it is short, else CODE_HEIGHT_PX with a scroll."""
    return "content" if text.count("\n") < CODE_LINES_IN_FULL else CODE_HEIGHT_PX


def launch_section(cheapest: Plan, faster: Plan | None, faster_label: str) -> None:
    """The cheapest plan's command, and in an expander the faster plan's (when there is one)."""
    if cheapest.launch:
        what = "the command" if cheapest.goal == "serve" else "the command (and the trainer's config)"  # no trainer when serving
        st.markdown(f"**Run it:** {what} for the cheapest plan, ready to copy")
        st.code(cheapest.launch, language="bash", height=code_height(cheapest.launch), wrap_lines=True)
    if faster is not None and faster is not cheapest and faster.launch:
        with st.expander(f"Run the {faster_label} plan instead"):
            st.code(faster.launch, language="bash", height=code_height(faster.launch), wrap_lines=True)
    st.caption(
        "Flag names from each engine's and trainer's documentation (data/launch_flags.csv, with the page of each). Lines "
        "starting with # say what to replace: the dataset, a model given by config, a GGUF or quantized checkpoint."
    )


def launch_section_for_setup(sc: Scenario, needed: LayoutResult | None) -> None:
    """The Inference page's command: the sidebar's serving scenario, its scheduler settings included, on its own
    layout, or (`needed`, when that does not hold the model) on the smallest layout that does, as the page's speeds."""
    run = sc
    if needed is not None:
        run = sc.model_copy(update={"tensor_parallel": needed.tensor_parallel, "pipeline_parallel": needed.pipeline_parallel, "expert_parallel": needed.expert_parallel})
    text = launch_command(run.model_dump(mode="json", exclude_none=True))
    st.code(text, language="bash", height=code_height(text), wrap_lines=True)
    laid = "" if needed is None else f" on the smallest layout that holds it ({run.tensor_parallel * run.pipeline_parallel} devices)"
    st.caption(
        f"For the sidebar's setup{laid}, served with {ENGINES[sc.serving_engine].label}: one replica; the Plan page writes "
        "the command of a planned fleet. Flag names from each engine's documentation (data/launch_flags.csv); lines "
        "starting with # say what to replace."
    )
