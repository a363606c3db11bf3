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
state (whole_run, fragment_run); the page the browser asked for is read from st.context.url (asked_page); the page's
file is run by exec_page in every run, not by Page.run(), which refuses a second call per run of the app. What has
no public API (a callback's view of its run) is read in st_private.py, and where that fails the app runs whole:
slower, never wrong."""

from __future__ import annotations

import functools
import os
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any
from urllib.parse import urlsplit

import streamlit as st
from streamlit.errors import StreamlitAPIException

from app_pages.shared import lower, st_private
from app_pages.shared.field import Values
from app_pages.shared.fields import fields
from app_pages.shared.state import current_values
from app_pages.shared.widgets import long_choice

BODY = "body"  # the page fragment's key
LOWER = "lower"  # the page's lower section's fragment key (lower.py)
INPUTS = "inputs"  # the sidebar inputs' fragment key
WHOLE = "_whole_run"  # session state: set while app.py's top level runs (whole_run)
CHOSEN = "_chosen_page"  # session state: the url_path of the page the last whole run chose (whole_run)
ROOT = Path(__file__).resolve().parents[2]  # the project root: app.py's folder, where page paths start


def sidebar_shape(values: Values) -> tuple:
    """Everything about the sidebar that the inputs' values decide: which inputs show, each slider's stops, the
    workload (it names the parallelism section), the model source (the config.json box), the presenter view (which
    moves a page's main inputs out of the sidebar: presenter.py) and a long choice's full name under its box."""
    shown = tuple((f.key, tuple(f.stops(values[f.key])) if f.widget == "slider" else None) for f in fields().values() if f.section != "page" and f.applies(values))
    return (*shown, values["src"], values["mode"], bool(values.get("present")), *(long_choice(f, values) for f in fields().values() if f.section != "page"))


@contextmanager
def whole_run(chosen: str) -> Iterator[None]:
    """Around app.py's top level, which a run of fragments alone skips: marks the run whole while it lasts, and notes
    the url_path of the page st.navigation chose (`chosen`) for the runs of fragments that follow (run_page)."""
    st.session_state[CHOSEN] = chosen
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


def asked_page(url_paths: Collection[str]) -> str | None:
    """The url_path of the page the browser asked for in this run ("" for the default page), read from st.context.url:
    Streamlit ends that URL with the asked page's url_path (the default page's is empty). None where the client sent
    no URL (run_page then goes by the last whole run's choice)."""
    url = st.context.url
    if not url:
        return None
    last = urlsplit(url).path.rstrip("/").rpartition("/")[2]
    return last if last in url_paths else ""


@functools.lru_cache(maxsize=32)
def _page_code(path: str, version: int) -> CodeType:
    """A page file's compiled code, kept for the process (as Streamlit keeps a script's bytecode) or, where a file
    watcher is on (development), until the file changes: `version` is then its modification time."""
    return compile(Path(path).read_bytes(), path, "exec", dont_inherit=True)


def exec_page(path: str) -> None:
    """Run a page file (a .py file directly in app_pages/, as app.py's page table names it; any other path is
    refused) as Streamlit runs a page: its code in a fresh __main__ module. Streamlit's Page.run() would do the
    same, but it runs once per run of the app and marks the page spent, and a fragment-only run reaches the page a
    second time; so both kinds of run call this instead, and the page's widgets get the same identity in both (the
    page fragment's script hash: the app's). The file is looked at again only where Streamlit watches files
    (server.fileWatcherType; the shipped config has none): a stat releases the interpreter lock, and a busy
    server's run can wait a switch interval to get it back. The one exec in the app (tests/test_security.py)."""
    resolved = (ROOT / path).resolve()
    if resolved.parent != ROOT / "app_pages" or resolved.suffix != ".py":
        raise ValueError(f"not a page file of the app: {path!r}")
    file = str(resolved)
    version = os.stat(file).st_mtime_ns if st.get_option("server.fileWatcherType") != "none" else 0
    module = ModuleType("__main__")
    module.__file__ = file
    exec(_page_code(file, version), module.__dict__)


def run_page(page: Any, path: str, url_paths: Collection[str]) -> None:
    """Run the page st.navigation chose (`page`, from the file `path`). A fragment-only run draws the page of the
    last whole run that drew the fragment; where the browser has asked for another page since (its URL), the app
    runs whole instead. A client that sends no URL (the agent API of bench/load.py) is taken to ask for the page the
    last whole run chose, which a whole run cut short before it drew the page also changes
    (tests/app/test_rerun_scope.py, tests/app/test_st_private.py). Public APIs only: st.context.url and Page.url_path
    (issue 28)."""
    if fragment_run():
        asked = asked_page(url_paths)
        if (asked if asked is not None else st.session_state.get(CHOSEN)) != page.url_path:
            st.rerun()
    exec_page(path)
