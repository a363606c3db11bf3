"""Every Streamlit internal the app reads, in one place, each with a fallback (issue 28). Only rerun.py and guard.py call these.

The page is a keyed fragment (app.py's `body`), and a sidebar move reruns that fragment alone (rerun.py). One thing
this needs has no public API in Streamlit 1.67: whether the run a widget callback starts is a fragment's alone
(`ScriptRunContext.fragment_ids_this_run`). A callback runs before the script, so app.py's marker for whole runs
(rerun.whole_run) cannot tell it, and no public call (st.context, st.query_params, st.session_state) says what the
browser asked to rerun. Where it is gone (another Streamlit), fragment_only_run says "unknown" (None) and rerun.py
runs the app whole: every input still works, only slower (as before the page was a fragment; bench/latency.py).
The page the browser asked for (st.context.url) and running the page a second time in a run (rerun.exec_page) need
no internal. tests/app/test_st_private.py checks that the internals are there in the pinned Streamlit and that the
app renders and reruns with each of them gone.

The fair-share guard (app_pages/shared/guard.py) needs one more, also here with a fallback: which session a run
belongs to (`ScriptRunContext.session_id`); without it the guard cannot tell sessions apart, so it gives every run
a turn in arrival order and no per-session allowance (the server still runs). Whether a thread is computing a
cached value the app's own cache wrapper says (cache.computing), not Streamlit's replay stack."""

from __future__ import annotations

from typing import Any

# The attribute names, as names so that a test can make each one "gone" (tests/app/test_st_private.py).
FRAGMENT_IDS = "fragment_ids_this_run"  # ScriptRunContext: the fragments this run runs alone (empty: a whole run)
SESSION_ID = "session_id"  # ScriptRunContext: the browser session the run belongs to
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


def session_id() -> str | None:
    """The session of the run on this thread; None outside a script run or where it cannot be read."""
    sid = getattr(_ctx(), SESSION_ID, None)
    return sid if isinstance(sid, str) else None
