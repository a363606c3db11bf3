"""The sidebar's layout: the field table's sidebar inputs, section by section, shown when they apply to the current
values, each drawn by the widget factory (widgets.py, which also draws the pages' inputs) with the callback that
decides what its change reruns (rerun.py)."""

from __future__ import annotations

import os

import streamlit as st

from app_pages.shared import guard
from app_pages.shared.fields import fields
from app_pages.shared.rerun import INPUTS, after_sidebar_change, rerun_all, sidebar_shape
from app_pages.shared.state import CFG_TEXT, MAX_CONFIG_CHARS, current_values
from app_pages.shared.text import plain
from app_pages.shared.widgets import widget
from core.model.hub import HUB_BASE_URL, HubError, fetch_hub_model

SECTIONS = (("model", "Model"), ("workload", "Workload"), ("parallel", None), ("run", None), ("display", "Display"))


def _hub_import() -> None:
    """Type a Hugging Face repo id; its config.json lands in the paste box below (and so in the link). LLMGP_HUB_URL
    points it at a loopback recorder in tests; "off" hides it on a server without outbound access."""
    hub_url = os.environ.get("LLMGP_HUB_URL", HUB_BASE_URL)
    if hub_url == "off":
        return
    cols = st.columns([2, 1], vertical_alignment="bottom")  # at [3, 1] the button read "F…" in the sidebar
    repo = cols[0].text_input("Hugging Face model id", key="hub_repo", max_chars=200, placeholder="Qwen/Qwen3-8B")
    if cols[1].button("Fetch", key="hub_fetch", disabled=not repo.strip()):
        try:
            with guard.released():  # up to the fetch's 5 s deadline on the network: the other sessions run meanwhile
                got = fetch_hub_model(repo, base_url=hub_url)
        except HubError as exc:
            st.session_state["hub_note"] = ("warning", exc.message)
        else:
            st.session_state[CFG_TEXT] = got.config_text
            count = f"; the checkpoint holds {got.params:,} parameters" + (f" ({got.dtype})" if got.dtype else "") if got.params else ""
            st.session_state["hub_note"] = ("info", f"config.json of {got.repo_id} from huggingface.co{count}.")
        st.rerun()  # the sidebar's inputs reran alone (rerun.py): the whole app takes the new config
    if note := st.session_state.get("hub_note"):
        (st.warning if note[0] == "warning" else st.caption)(plain(note[1]))


def _config_input() -> None:
    _hub_import()
    upload = st.file_uploader("Upload config.json", type=["json"], key="cfg_upload", max_upload_size=1, on_change=rerun_all)
    if upload is not None and st.session_state.get("cfg_upload_id") != upload.file_id:
        st.session_state["cfg_upload_id"] = upload.file_id
        data = upload.getvalue()
        if len(data) > MAX_CONFIG_CHARS:
            st.error(f"That file is {len(data) / 1e6:.1f} MB; a config.json is a few kB. Nothing was changed.")
        else:
            try:
                st.session_state[CFG_TEXT] = data.decode("utf-8-sig")
            except UnicodeDecodeError:
                st.error("That file is not UTF-8 text. Nothing was changed.")
    st.session_state.setdefault(CFG_TEXT, "")
    st.text_area(
        "...or paste config.json",
        key=CFG_TEXT,
        height=160,
        max_chars=MAX_CONFIG_CHARS,
        placeholder='{"model_type": "llama", "hidden_size": 4096, ...}',
        on_change=rerun_all,
    )


@st.fragment(key=INPUTS)
def render_sidebar() -> None:
    """Draw every sidebar input that applies (hidden ones keep their values), where it is called (app.py: in the
    sidebar). Widget changes are in st.session_state before the run starts, so the values read once up front decide
    what shows. A fragment (rerun.py): each input's change reruns the page alone or the whole app."""
    with guard.turn():  # alone, this run skips the app's top level and its guard
        _inputs()


def _inputs() -> None:
    table = fields()
    values = current_values()
    shape = sidebar_shape(values)
    st.subheader("Model")
    for f in table.values():
        if f.section == "model" and f.applies(values):
            widget(f, on_change=after_sidebar_change, args=(shape,))
    if values["src"] == "config":
        _config_input()
    for section, title in SECTIONS[1:]:
        rows = [f for f in table.values() if f.section == section and f.applies(values)]
        if not rows:
            continue
        if section == "parallel":
            container = st.expander("Sharding and parallelism" if values["mode"] == "training" else "Parallelism")
        elif section == "run":
            container = st.expander("Training run (time and cost)")
        else:
            st.subheader(title or section)
            container = st.container()
        with container:
            for f in rows:
                widget(f, on_change=after_sidebar_change, args=(shape,))
