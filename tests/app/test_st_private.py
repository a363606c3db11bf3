"""The Streamlit internals the app reads (app_pages/shared/st_private.py): they are there in the pinned Streamlit, so
a sidebar move reruns the page alone; and with any one of them gone (another Streamlit), the app still renders and
a sidebar move still updates the page, by a whole run (the sidebar is drawn again)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.shared import st_private

from .conftest import metric, no_exception, run_app

GONE = "_gone_in_this_streamlit"


def test_the_internals_are_there_in_this_streamlit():
    """Fails on a Streamlit without them: the app then runs whole on every move (slower); look at st_private.py."""

    def app():
        import streamlit as st

        from app_pages.shared import st_private

        page = st.navigation([st.Page(lambda: None, title="A", url_path="a")])
        st.write(repr((st_private.fragment_only_run(), st_private.page_switched(page), st_private.rearm(page))))

    at = AppTest.from_function(app).run()
    assert at.markdown[0].value == "(False, False, True)"


def test_outside_a_script_run_nothing_is_read():
    assert st_private.fragment_only_run() is False
    assert st_private.page_switched(object()) is None and st_private.rearm(object()) is False


@pytest.mark.parametrize("name", ["FRAGMENT_IDS", "PAGE_HASH", "SCRIPT_HASH", "CAN_BE_CALLED"])
def test_with_an_internal_gone_the_app_renders_and_reruns_whole(name, monkeypatch):
    monkeypatch.setattr(st_private, name, GONE)
    if name != "FRAGMENT_IDS":  # stand in for the browser's fragment run (tests/app/test_rerun_scope.py)
        real = st_private.fragment_only_run
        monkeypatch.setattr(st_private, "fragment_only_run", lambda: True if real() is not None else None)
    at = run_app("memory", {"model": "llama-3.1-8b"})
    no_exception(at)
    before = metric(at, "Memory per device")
    at.select_slider(key="seq").set_value(32768).run()
    no_exception(at)
    assert len(at.sidebar.select_slider) == 2, "a whole run: the sidebar was drawn again"
    assert metric(at, "Memory per device") != before
    assert at.query_params["seq"] == "32768"
    at.switch_page("app_pages/training.py").run()  # and another page still opens, with the value kept
    no_exception(at)
    assert at.select_slider(key="seq").value == 32768


def test_a_page_alone_run_uses_the_internals_when_they_are_there(monkeypatch):
    """The counterpart of the test above: with the internals there, the same move sends no sidebar."""
    monkeypatch.setattr(st_private, "fragment_only_run", lambda: True)
    at = run_app("memory", {"model": "llama-3.1-8b"})
    at.select_slider(key="seq").set_value(32768).run()
    no_exception(at)
    assert not at.sidebar.children


def test_no_streamlit_internal_is_read_outside_st_private():
    """Public Streamlit APIs only, everywhere in the app but st_private.py (the fair-share guard's two included)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    internal = re.compile(
        r"streamlit\.(runtime|web|util|proto|elements)\b|get_script_run_ctx|fragment_ids_this_run|page_script_hash|_script_hash|_can_be_called|_cached_message_stack|static/js"
    )
    allowed = {"app_pages/shared/st_private.py"}
    files = [root / "app.py", *sorted((root / "app_pages").rglob("*.py"))]
    found = [
        f"{p.relative_to(root)}:{n}"
        for p in files
        if str(p.relative_to(root)) not in allowed
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if internal.search(line)
    ]
    assert not found, found


def test_the_guards_internals_are_there_and_read_in_a_run():
    """session_id and the cache replay stack, read in a run: a session id, not inside a cached function there, and
    inside one while st.cache_data computes its value. Fails on a Streamlit without them (look at st_private.py)."""

    def app():
        import streamlit as st

        from app_pages.shared import st_private

        @st.cache_data
        def inside(_x: int) -> bool | None:
            return st_private.inside_cached_function()

        st.write(repr((isinstance(st_private.session_id(), str), st_private.inside_cached_function(), inside(1))))

    at = AppTest.from_function(app).run()
    assert at.markdown[0].value == "(True, False, True)"
    assert st_private.session_id() is None, "outside a run there is no session"


@pytest.mark.parametrize("name", ["SESSION_ID", "REPLAY_STACK"])
def test_with_a_guard_internal_gone_the_guard_still_runs_pages(name, monkeypatch):
    """With the session id gone the guard cannot tell sessions apart (turns in arrival order, no allowance); with the
    replay stack gone it never hands a turn over. Either way a page renders, reruns, and every turn is given back."""
    from app_pages.shared import guard

    monkeypatch.setattr(st_private, name, GONE)
    if name == "SESSION_ID":
        assert st_private.session_id() is None
    else:
        assert st_private.inside_cached_function() is None and guard._inside_cached_function() is True
    at = run_app("memory", {"model": "llama-3.1-8b"})
    no_exception(at)
    before = metric(at, "Memory per device")
    at.select_slider(key="seq").set_value(32768).run()
    no_exception(at)
    assert metric(at, "Memory per device") != before
    assert guard._running == 0 and not guard._holders, "every turn was given back"
