"""Every Streamlit internal the app reads, in one place, each with a fallback (issue 28). Only rerun.py and guard.py call these.

The page is a keyed fragment (app.py's `body`), and a sidebar move reruns that fragment alone (rerun.py). Three
things that this needs have no public API in Streamlit 1.67:

- whether the run a widget callback starts is a fragment's alone (`ScriptRunContext.fragment_ids_this_run`): a
  callback runs before the script, so app.py's marker for whole runs (rerun.whole_run) cannot tell it;
- which page the browser asked for in a fragment-only run (`ScriptRunContext.page_script_hash`, against the page's
  own hash `Page._script_hash`): a page switch since the fragment was drawn must run the app whole;
- running the page again in a fragment-only run: `Page.run()` refuses a second call per run of the app and marks
  the page spent (`Page._can_be_called`); a fragment-only run reaches the page through the fragment's closure.

Where an internal is gone (another Streamlit), each function says "unknown" (None, or False for `rearm`) and
rerun.py then runs the app whole: every input still works, only slower (as before the page was a fragment;
bench/latency.py). tests/app/test_st_private.py checks that the internals are there in the pinned Streamlit and
that the app renders and reruns with each of them gone.

The fair-share guard (app_pages/shared/guard.py) needs two more, also here with a fallback each:

- which session a run belongs to (`ScriptRunContext.session_id`): without it the guard cannot tell sessions
  apart, so it gives every run a turn in arrival order and no per-session allowance (the server still runs);
- whether this thread is computing a cached value (Streamlit's cache replay contexts, `_cached_message_stack`):
  a turn must not be handed over then (the value's lock would be held while waiting). Where it cannot be read the
  answer is "unknown" (None), and the guard keeps the turn: never hands it over rather than risk the wait."""

from __future__ import annotations

from typing import Any

# The attribute names, as names so that a test can make each one "gone" (tests/app/test_st_private.py).
FRAGMENT_IDS = "fragment_ids_this_run"  # ScriptRunContext: the fragments this run runs alone (empty: a whole run)
PAGE_HASH = "page_script_hash"  # ScriptRunContext: the page the browser asked for
SCRIPT_HASH = "_script_hash"  # Page: the page's own hash (of its url_path)
CAN_BE_CALLED = "_can_be_called"  # Page: cleared by Page.run(), set by st.navigation
SESSION_ID = "session_id"  # ScriptRunContext: the browser session the run belongs to
REPLAY_STACK = "_cached_message_stack"  # the cache replay context: the cached functions this thread is inside
_GONE = object()


def _ctx() -> Any:
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:
        return None
    return get_script_run_ctx()


def fragment_only_run() -> bool | None:
    """Whether the run now starting runs fragments alone; False outside a script run, None where it cannot be read."""
    ctx = _ctx()
    if ctx is None:
        return False
    ids = getattr(ctx, FRAGMENT_IDS, _GONE)  # None or [] in a whole run
    return None if ids is _GONE else bool(ids)


def page_switched(page: Any) -> bool | None:
    """Whether the browser asked for another page than `page` (the one st.navigation chose in the last whole run);
    None where it cannot be read."""
    asked, own = getattr(_ctx(), PAGE_HASH, None), getattr(page, SCRIPT_HASH, None)
    return None if asked is None or own is None else asked != own


def rearm(page: Any) -> bool:
    """Let `page.run()` run once more in this run (a fragment-only run); False where it cannot be done."""
    if not isinstance(getattr(page, CAN_BE_CALLED, None), bool):
        return False
    setattr(page, CAN_BE_CALLED, True)
    return True


def session_id() -> str | None:
    """The session of the run on this thread; None outside a script run or where it cannot be read."""
    sid = getattr(_ctx(), SESSION_ID, None)
    return sid if isinstance(sid, str) else None


def _replay_contexts() -> tuple[Any, ...] | None:
    try:
        from streamlit.runtime.caching import cache_data_api, cache_resource_api

        return (cache_data_api.CACHE_DATA_MESSAGE_REPLAY_CTX, cache_resource_api.CACHE_RESOURCE_MESSAGE_REPLAY_CTX)
    except (ImportError, AttributeError):
        return None


_REPLAY_CONTEXTS = _replay_contexts()


def inside_cached_function() -> bool | None:
    """Whether this thread is computing a st.cache_data / st.cache_resource value; None where it cannot be read."""
    if _REPLAY_CONTEXTS is None:
        return None
    try:
        return any(getattr(ctx, REPLAY_STACK).get() for ctx in _REPLAY_CONTEXTS)
    except Exception:  # the stack's attribute or its .get() is gone or changed: unknown
        return None
