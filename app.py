"""LLM GPU Planner: the entry point. The scenario sidebar is shared by every
page; every input is a URL query parameter (app_pages/shared/fields.py), so a
link reproduces the view."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from app_pages.shared import guard, lower
from app_pages.shared.context import PageContext, PageStopped, set_context
from app_pages.shared.fields import fields
from app_pages.shared.presenter import PAGE_KEY
from app_pages.shared.prices import price_inputs, price_list
from app_pages.shared.rerun import BODY, LOWER, fragment_run, run_page, whole_run
from app_pages.shared.scenario_io import LATEST, NO_CONFIG, build_scenario, load_scenario_json, remember_scenario, scenario_download, scenario_values
from app_pages.shared.sidebar import render_sidebar
from app_pages.shared.state import (
    CFG_TEXT,
    apply_requested_values,
    current_values,
    keep_across_pages,
    load_link_once,
    request_values,
    write_url,
)
from app_pages.shared.style import page_style
from app_pages.shared.text import plain
from app_pages.shared.workshop import load_workshop_presets

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator  # what st.sidebar.expander and st.container return


def _link_presents() -> bool:
    """Whether the link asks for the presenter view (present=true; app_pages/shared/presenter.py): the page then
    opens with the sidebar folded away."""
    try:
        return bool(fields()["present"].parse(st.query_params.get("present", "false")))
    except ValueError:
        return False


st.set_page_config(page_title="LLM GPU Planner", page_icon=":material/memory:", layout="wide", initial_sidebar_state="collapsed" if _link_presents() else "auto")

PAGES = {
    "home": st.Page("app_pages/home.py", title="Home", url_path="home", default=True, visibility="hidden"),
    "plan": st.Page("app_pages/plan.py", title="Plan", icon=":material/route:", url_path="plan"),
    "memory": st.Page("app_pages/memory.py", title="Memory", icon=":material/memory:", url_path="memory"),
    "training": st.Page("app_pages/training.py", title="Training", icon=":material/model_training:", url_path="training"),
    "inference": st.Page("app_pages/inference.py", title="Inference", icon=":material/bolt:", url_path="inference"),
    "train-vs-serve": st.Page("app_pages/train_vs_serve.py", title="Training vs inference", icon=":material/balance:", url_path="train-vs-serve"),
    "gpu-vs-tpu": st.Page("app_pages/gpu_vs_tpu.py", title="GPU vs TPU", icon=":material/compare_arrows:", url_path="gpu-vs-tpu"),
    "compare": st.Page("app_pages/compare.py", title="Compare", icon=":material/table_chart:", url_path="compare"),
    "method": st.Page("app_pages/method.py", title="Method", icon=":material/menu_book:", url_path="method"),
}
# each page's file by its url_path (the default page's is ""): rerun.run_page runs the file itself (Page.run() runs once a run)
PAGE_FILES = {p.url_path: f"app_pages/{key.replace('-', '_')}.py" for key, p in PAGES.items()}
page = st.navigation(list(PAGES.values()))


@st.fragment(key=BODY)
def body() -> None:
    """The page itself, built from the inputs' current values so that it can rerun on its own: a sidebar input that
    leaves the sidebar as it is reruns only this (app_pages/shared/rerun.py), and so does every input the page
    draws; the sidebar's ~30 elements are then neither rebuilt nor sent again (bench/latency.py, docs/PERFORMANCE.md). The URL is
    written at its start and end (the page's own inputs). A page that stops early (stop_page) ends this fragment,
    not the run: the lower section below still runs."""
    with guard.turn():  # a fragment-only run skips the app's top level, and its guard
        if fragment_run():  # a whole run kept every value at its top
            keep_across_pages()
        values = current_values()  # hop: session state -> Values (each input in its widget's units)
        scenario, problem = build_scenario(values, st.session_state.get(CFG_TEXT, ""))  # hop: Values -> Scenario
        remember_scenario(scenario, problem)
        note = write_url(values)
        # the inputs' problem first: it is the one that stops the page (show_messages folds all but the first away);
        # but "paste a config.json" after a link whose config could not be read is the link's doing: its word first
        link_messages = list(st.session_state.get("_link_messages", []))
        messages = [*link_messages, problem] if problem == NO_CONFIG and link_messages else [*([problem] if problem else []), *link_messages]
        ctx = PageContext(scenario, values, tuple(messages), (note,) if note else (), price_list(values))
        set_context(ctx)  # hop: Scenario -> this run's PageContext, which the page reads (context.page_header)
        guard.yield_turn()
        try:
            run_page(page, PAGE_FILES[page.url_path], PAGE_FILES)
        except PageStopped:
            pass
        finally:
            write_url()
    if fragment_run() and lower.stale(ctx):
        st.rerun()  # the lower section reads something this run changed and does not run after it: a whole run draws both


@st.fragment(key=LOWER)
def lower_section() -> None:
    """The page's lower section (app_pages/shared/lower.py; nothing on most pages), below the page: it reruns with
    the page when what it reads changed, alone when one of its own inputs changes, and is left as drawn otherwise."""
    if page.url_path not in lower.SECTIONS:
        lower.draw(page.url_path, {})
        return
    with guard.turn():
        if fragment_run():
            keep_across_pages()
        try:
            lower.draw(page.url_path, current_values())
        finally:
            write_url()


def sidebar_slots() -> tuple[DeltaGenerator, DeltaGenerator, DeltaGenerator]:
    """The sidebar's parts in their order: the workshop presets, the inputs and prices, saving and loading."""
    presets = st.sidebar.expander("Workshop presets", icon=":material/school:")
    inputs = st.sidebar.container()
    return presets, inputs, st.sidebar.expander("Save or load this scenario", icon=":material/save:")


def download_button(into: DeltaGenerator) -> None:
    into.download_button(
        "Download scenario (JSON)",
        data=scenario_download(),  # built when clicked: the page may have rerun alone since
        file_name="scenario.json",
        mime="application/json",
        # no run on click: a whole run clears the session's file references first, and another session's run ending
        # before this one drew the button again dropped the callable the click asked for (issue #28)
        on_click="ignore",
        icon=":material/download:",
        width="stretch",
    )


# A session that drew the sidebar before gets its download button again before this run waits for its turn: the
# run began by clearing the session's file references, so until the browser has the new button a click on the one it
# shows asks for a callable that any other session's end of run may drop (issue #28). The button needs nothing this
# run computes. A session's first run draws it in its turn, so that a new session the guard refuses (over its
# address's session cap) draws no sidebar.
slots = sidebar_slots() if LATEST in st.session_state else None
if slots:
    download_button(slots[2])

with guard.turn(), whole_run(page.url_path):  # only a whole run comes here: the marker tells the fragments (rerun.fragment_run)
    st.session_state.pop(lower.QUEUED, None)  # a mark for a run of fragments; this run is whole (lower.py)
    keep_across_pages()
    if link_messages := load_link_once():
        st.session_state["_link_messages"] = link_messages
    apply_requested_values()
    st.session_state[PAGE_KEY] = page.url_path  # the presenter view's inputs are the page's (presenter.py)
    if slots is None:
        slots = sidebar_slots()
        download_button(slots[2])
    presets_box, inputs_box, save_box = slots

    with presets_box:
        for preset in load_workshop_presets():
            if st.button(preset.label, key=f"ws-{preset.id}", width="stretch"):
                request_values(scenario_values(preset.scenario))
                st.switch_page(PAGES[preset.page])

    with inputs_box:
        render_sidebar()
        price_inputs()

    with save_box:
        upload = st.file_uploader("Load a scenario (JSON)", type=["json"], key="scenario_upload", max_upload_size=1)
        if upload is not None and st.session_state.get("scenario_upload_id") != upload.file_id:
            st.session_state["scenario_upload_id"] = upload.file_id
            loaded, error = load_scenario_json(upload.getvalue())
            if error:
                st.session_state["upload_error"] = error
            else:
                request_values(loaded or {})
            st.rerun()
        if err := st.session_state.pop("upload_error", None):
            st.error(plain(err))
    with st.sidebar:
        page_style(bool(st.session_state.get("present")))

    body()
    lower_section()
