"""LLM GPU Planner: the entry point. The scenario sidebar is shared by every
page; each input is a URL query parameter, so a link reproduces the view."""

from __future__ import annotations

import json

import streamlit as st

from app_pages.shared.context import set_context
from app_pages.shared.sidebar import load_scenario_json, render_sidebar, request_widgets, scenario_to_widgets
from app_pages.shared.specs import plain
from app_pages.shared.workshop import load_workshop_presets

st.set_page_config(page_title="LLM GPU Planner", page_icon=":material/memory:", layout="wide")

PAGES = {
    "memory": st.Page("app_pages/memory.py", title="Memory", icon=":material/memory:", url_path="memory", default=True),
    "training": st.Page("app_pages/training.py", title="Training", icon=":material/model_training:", url_path="training"),
    "inference": st.Page("app_pages/inference.py", title="Inference", icon=":material/bolt:", url_path="inference"),
    "train-vs-serve": st.Page("app_pages/train_vs_serve.py", title="Training vs inference", icon=":material/balance:", url_path="train-vs-serve"),
    "gpu-vs-tpu": st.Page("app_pages/gpu_vs_tpu.py", title="GPU vs TPU", icon=":material/compare_arrows:", url_path="gpu-vs-tpu"),
    "compare": st.Page("app_pages/compare.py", title="Compare", icon=":material/table_chart:", url_path="compare"),
    "method": st.Page("app_pages/method.py", title="Method", icon=":material/menu_book:", url_path="method"),
}
page = st.navigation(list(PAGES.values()))

with st.sidebar.expander("Workshop presets", icon=":material/school:"):
    for preset in load_workshop_presets():
        if st.button(preset.label, key=f"ws-{preset.id}", width="stretch"):
            request_widgets(scenario_to_widgets(preset.scenario))
            st.switch_page(PAGES[preset.page])

scenario, values, messages = render_sidebar()
set_context(scenario, values, messages)

with st.sidebar.expander("Save or load this scenario", icon=":material/save:"):
    if scenario is not None:
        st.download_button(
            "Download scenario (JSON)",
            data=lambda: json.dumps({"scenario": scenario.model_dump(mode="json", exclude_defaults=True)}, indent=2),
            file_name="scenario.json",
            mime="application/json",
            icon=":material/download:",
            width="stretch",
        )
    upload = st.file_uploader("Load a scenario (JSON)", type=["json"], key="scenario_upload", max_upload_size=1)
    if upload is not None and st.session_state.get("scenario_upload_id") != upload.file_id:
        st.session_state["scenario_upload_id"] = upload.file_id
        widgets, error = load_scenario_json(upload.getvalue())
        if error:
            st.session_state["upload_error"] = error
        else:
            request_widgets(widgets)
        st.rerun()
    if err := st.session_state.pop("upload_error", None):
        st.error(plain(err))

page.run()
