"""Every Streamlit internal the app reads, in one place, each with a fallback (issue 28). Only rerun.py calls these.

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
that the app renders and reruns with each of them gone. app_pages/shared/guard.py reads `streamlit.runtime` for
its own reasons (the fair-share guard, with its own fallbacks)."""

from __future__ import annotations

from typing import Any

# The attribute names, as names so that a test can make each one "gone" (tests/app/test_st_private.py).
FRAGMENT_IDS = "fragment_ids_this_run"  # ScriptRunContext: the fragments this run runs alone (empty: a whole run)
PAGE_HASH = "page_script_hash"  # ScriptRunContext: the page the browser asked for
SCRIPT_HASH = "_script_hash"  # Page: the page's own hash (of its url_path)
CAN_BE_CALLED = "_can_be_called"  # Page: cleared by Page.run(), set by st.navigation
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
