"""What reruns when an input changes. The page is a keyed fragment (app.py's `body`); a sidebar input whose change
leaves the sidebar as drawn (the same inputs shown, the same slider stops, the same sections) reruns only that
fragment, so the sidebar is neither rebuilt on the server nor sent and redrawn in the browser. Any other change
(the workload switch, the model source, an input that shows or hides others) reruns the whole app.

The sidebar's inputs are a fragment too (sidebar.render_sidebar), and each of its widgets says what its change
reruns (after_sidebar_change, rerun_all); a widget there without a callback reruns only the inputs (typing a Hub
id). Streamlit starts a run that a widget outside every fragment asked for as a full run, dropping the session's
download files, before a callback can narrow it to a fragment: with callbacks alone, the sidebar's scenario download
failed after one move ("Deferred file ... not found"; tests/browser/test_fragment.py). A widget inside a fragment
asks for a fragment run from the start.

Public APIs where there are some: app.py's top level, which only a whole run reaches, marks the run whole in session
state (whole_run, fragment_run). What has none (a callback's view of its run, the page's internals) is read in
st_private.py, and where that fails the app runs whole: slower, never wrong."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st
from streamlit.errors import StreamlitAPIException

from app_pages.shared import lower, st_private
from app_pages.shared.fields import Values, fields
from app_pages.shared.state import current_values
from app_pages.shared.widgets import long_choice

BODY = "body"  # the page fragment's key
LOWER = "lower"  # the page's lower section's fragment key (lower.py)
INPUTS = "inputs"  # the sidebar inputs' fragment key
WHOLE = "_whole_run"  # session state: set while app.py's top level runs (whole_run)


def sidebar_shape(values: Values) -> tuple:
    """Everything about the sidebar that the inputs' values decide: which inputs show, each slider's stops, the
    workload (it names the parallelism section), the model source (the config.json box), the presenter view (which
    moves a page's main inputs out of the sidebar: presenter.py) and a long choice's full name under its box."""
    shown = tuple((f.key, tuple(f.stops(values[f.key])) if f.widget == "slider" else None) for f in fields().values() if f.section != "page" and f.applies(values))
    return (*shown, values["src"], values["mode"], bool(values.get("present")), *(long_choice(f, values) for f in fields().values() if f.section != "page"))


@contextmanager
def whole_run() -> Iterator[None]:
    """Around app.py's top level, which a run of fragments alone skips: marks the run whole while it lasts."""
    st.session_state[WHOLE] = True
    try:
        yield
    finally:
        st.session_state.pop(WHOLE, None)


def fragment_run() -> bool:
    """Whether the run now going on is of fragments alone (the page, its lower section): app.py's top level, which
    such a run skips, did not mark it whole. Not for widget callbacks: they run before the script (st_private)."""
    return WHOLE not in st.session_state


def after_sidebar_change(shape: tuple) -> None:
    """A sidebar input's on_change: rerun only the page when the sidebar keeps its shape (Streamlit: a widget
    callback may rerun keyed fragments with st.rerun(keys)), with its lower section when that reads something the
    change moved (lower.py); otherwise the whole app. Inside a run that is already whole, nothing to narrow. A
    callback runs before the script, so whether the run is whole is Streamlit's to say (st_private); where it cannot
    say, the whole app (slower, never stale)."""
    alone = st_private.fragment_only_run()  # hop: a sidebar move -> a rerun of the page alone, or of the app
    if alone is False:
        return
    if alone is None:
        st.rerun()
    values = current_values()
    if sidebar_shape(values) == shape:
        both = not lower.current(values)
        st.session_state[lower.QUEUED] = both  # the page fragment's check that the lower section is not left stale
        try:
            st.rerun([BODY, LOWER] if both else BODY)
        except StreamlitAPIException:  # a fragment did not draw last time (a run stopped early)
            pass
    st.rerun()


def rerun_all() -> None:
    """An on_change for a sidebar widget whose change the whole app takes (the config.json box and upload)."""
    st.rerun()


def run_page(page: Any) -> None:
    """Run the page st.navigation chose. Streamlit lets a page run once per run of the app and marks it spent; a
    fragment-only run is a run of its own that reaches the page again through the fragment's closure, so the mark
    is cleared first (st_private.rearm). A page switch since the fragment was drawn, or internals that cannot be
    read, run the app whole instead (tests/app/test_rerun_scope.py, tests/app/test_st_private.py)."""
    if fragment_run() and (st_private.page_switched(page) is not False or not st_private.rearm(page)):
        st.rerun()
    page.run()
