"""The Streamlit internals the app reads (app_pages/shared/st_private.py: two public attributes of the run context,
no private one): they are there in the pinned Streamlit, so a sidebar move reruns the page alone; and with either
gone (another Streamlit), or the browser's URL unknown, the app still renders and a sidebar move still updates the
page, by a whole run (the sidebar is drawn again)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from app_pages.shared import st_private

from .conftest import metric, no_exception, run_app

GONE = "_gone_in_this_streamlit"


def test_the_internal_is_there_in_this_streamlit():
    """Fails on a Streamlit without it: the app then runs whole on every move (slower); look at st_private.py."""

    def app():
        import streamlit as st

        from app_pages.shared import st_private

        st.write(repr(st_private.fragment_only_run()))

    at = AppTest.from_function(app).run()
    assert at.markdown[0].value == "False"


def test_outside_a_script_run_nothing_is_read():
    assert st_private.fragment_only_run() is False


def test_the_asked_page_is_read_from_the_browsers_url():
    """rerun.asked_page: the page the browser asked for, from st.context.url (public), which Streamlit ends with the
    page's url_path (nothing for the default page); None where the browser sent no URL."""

    def app():
        import streamlit as st

        from app_pages.shared.rerun import asked_page

        pages = [st.Page(lambda: None, title="H", url_path="h", default=True), st.Page(lambda: None, title="A", url_path="a")]
        page = st.navigation(pages)
        st.write(repr((asked_page({p.url_path for p in pages}), page.url_path)))

    at = AppTest.from_function(app)
    at.run()
    assert at.markdown[0].value == "(None, '')", "no URL sent: unknown"
    at.context = {"url": "http://localhost:8501/"}
    assert at.run().markdown[0].value == "('', '')"
    at._page_hash = calc_hash("a")  # a browser's link to /a (AppTest.switch_page opens only file pages; conftest.open_link)
    at.run()
    assert at.markdown[0].value == "('a', 'a')"


def test_with_the_internal_gone_the_app_renders_and_reruns_whole(monkeypatch):
    """fragment_ids_this_run gone (another Streamlit): a move reruns the app whole, and the page still updates."""
    monkeypatch.setattr(st_private, "FRAGMENT_IDS", GONE)
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


def test_a_page_alone_run_uses_the_internal_when_it_is_there(monkeypatch):
    """The counterpart of the test above: with the internal there and the URL sent, the same move sends no sidebar,
    and the page alone is drawn again (its file run a second time in the app's run: rerun.exec_page)."""
    monkeypatch.setattr(st_private, "fragment_only_run", lambda: True)
    at = run_app("memory", {"model": "llama-3.1-8b"})
    before = metric(at, "Memory per device")
    at.select_slider(key="seq").set_value(32768).run()
    no_exception(at)
    assert not at.sidebar.children
    assert metric(at, "Memory per device") != before


@pytest.mark.parametrize("url", [True, False])
def test_a_page_alone_run_after_a_page_switch_runs_whole(url, monkeypatch):
    """The fragment holds the page of the last whole run that drew it: where the browser asks for another one (its
    URL), or, from a client that sends no URL (the agent API), a whole run since chose another one (cut short before
    it drew the page), the fragment run is widened to a whole run, which draws the asked page."""
    from app_pages.shared import rerun

    monkeypatch.setattr(st_private, "fragment_only_run", lambda: True)
    at = run_app("memory", {"model": "llama-3.1-8b"})
    if url:
        monkeypatch.setattr(rerun, "asked_page", lambda paths: "training")
    else:
        at.context = {}
        at.session_state[rerun.CHOSEN] = "training"
    at.select_slider(key="seq").set_value(32768).run()
    no_exception(at)
    assert len(at.sidebar.select_slider) == 2, "a whole run"


def test_without_a_url_a_move_reruns_the_page_of_the_last_whole_run_alone(monkeypatch):
    """A client that sends no URL (the agent API that bench/load.py drives): the page the last whole run chose is
    the page asked for, so its moves rerun the page alone, as a browser's do."""
    monkeypatch.setattr(st_private, "fragment_only_run", lambda: True)
    at = run_app("memory", {"model": "llama-3.1-8b"})
    at.context = {}
    before = metric(at, "Memory per device")
    at.select_slider(key="seq").set_value(32768).run()
    no_exception(at)
    assert not at.sidebar.children
    assert metric(at, "Memory per device") != before


def test_no_streamlit_internal_is_read_outside_st_private():
    """Public Streamlit APIs only, everywhere in the app but st_private.py (the fair-share guard's session id included);
    no private attribute (a name with a leading underscore) of Streamlit's read there either."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    internal = re.compile(
        r"streamlit\.(runtime|web|util|proto|elements)\b|get_script_run_ctx|fragment_ids_this_run|page_script_hash|_script_hash|_can_be_called|_cached_message_stack|static/js"
    )
    allowed = {"app_pages/shared/st_private.py"}
    private_names = re.findall(r'^[A-Z_]+ = "(\w+)"', (root / "app_pages/shared/st_private.py").read_text(), re.M)
    assert private_names == ["fragment_ids_this_run", "session_id"], "the internals st_private.py reads: none private"
    gone = re.compile(r"_script_hash|_can_be_called|_cached_message_stack|REPLAY_CTX")
    assert not gone.search((root / "app_pages/shared/st_private.py").read_text()), "no private attribute read anywhere"
    files = [root / "app.py", *sorted((root / "app_pages").rglob("*.py"))]
    found = [
        f"{p.relative_to(root)}:{n}"
        for p in files
        if str(p.relative_to(root)) not in allowed
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if internal.search(line)
    ]
    assert not found, found


def test_the_guards_internal_is_there_and_cached_computations_are_marked():
    """session_id, read in a run: a session id. And the mark the guard reads instead of Streamlit's cache replay
    stack (cache.computing): not set in a run, set while a shared_cache function computes its value (nested ones
    too), and not on a cache hit."""

    def app():
        import streamlit as st

        from app_pages.shared import st_private
        from app_pages.shared.cache import computing, shared_cache

        @shared_cache(max_entries=4)
        def inner(x: int) -> bool:
            return computing()

        @shared_cache(max_entries=4)
        def outer(x: int) -> tuple[bool, bool, bool]:
            return computing(), inner(x), computing()

        st.write(repr((isinstance(st_private.session_id(), str), computing(), outer(1), inner(1), computing())))

    at = AppTest.from_function(app).run()
    assert at.markdown[0].value == "(True, False, (True, True, True), True, False)"
    assert st_private.session_id() is None, "outside a run there is no session"


def test_the_mark_is_cleared_when_a_cached_function_raises():
    from app_pages.shared.cache import computing, shared_cache

    @shared_cache(max_entries=4)
    def fails(x: int) -> None:
        assert computing()
        raise ValueError(x)

    with pytest.raises(ValueError):
        fails(1)
    assert not computing()


def test_with_the_session_id_gone_the_guard_still_runs_pages(monkeypatch):
    """With the session id gone the guard cannot tell sessions apart (turns in arrival order, no allowance): a page
    renders, reruns, and every turn is given back."""
    from app_pages.shared import guard

    monkeypatch.setattr(st_private, "SESSION_ID", GONE)
    assert st_private.session_id() is None
    at = run_app("memory", {"model": "llama-3.1-8b"})
    no_exception(at)
    before = metric(at, "Memory per device")
    at.select_slider(key="seq").set_value(32768).run()
    no_exception(at)
    assert metric(at, "Memory per device") != before
    assert guard._running == 0 and not guard._holders, "every turn was given back"


@pytest.mark.parametrize("path", ["app_pages/shared/text.py", "core/cli.py", "app_pages/../app.py", "app_pages/method.txt", "/etc/passwd"])
def test_exec_page_runs_page_files_of_the_app_only(path):
    """The app's one exec (tests/test_security.py) runs a page file of app_pages/ and refuses any other path."""
    from app_pages.shared.rerun import exec_page

    with pytest.raises(ValueError, match="not a page file"):
        exec_page(path)
