"""A page's lower section: a second fragment below the page (app.py's `lower_section`), rerun only when what it
reads changes. A sidebar move reruns the page fragment alone when the sidebar keeps its shape (rerun.py); if the lower
section's reads are the same for the new values it is left as drawn (the browser keeps a fragment's elements that a
run of another fragment did not touch), else it reruns in the same run, after the page. Its own inputs rerun it alone.

The Inference page's serving bill is one: it reads the served scenario but not its context length (the traffic sets
each request's), so a context move on Inference no longer re-sends and re-renders its six inputs, four metrics and
table (bench/latency.py, docs/PERFORMANCE.md). A section declares what it reads (`reads`), and the declaration is what decides:
one that left out something the section draws from would leave it stale after a move of that. So the declaration is
tested against what is drawn (tests/app/test_lower_section.py: fresh links that differ only in what it leaves out
draw the same section, element for element). The page fragment also checks after each run of its own that the
section is not stale by that declaration (its own inputs, which no callback sees), rerunning the whole app if it is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from app_pages.shared import serving_section
from app_pages.shared.field import Values
from app_pages.shared.page_types import PageContext
from app_pages.shared.prices import price_list
from app_pages.shared.scenario_io import build_scenario
from app_pages.shared.state import CFG_TEXT

DRAWN = "_lower_drawn"  # (page url path, what its section read) when the lower fragment last ran
QUEUED = "_lower_queued"  # set by a sidebar change that reruns the lower section after the page (rerun.py)


@dataclass(frozen=True)
class Section:
    draw: Callable[[PageContext], None]
    reads: Callable[[PageContext], str]  # everything the section draws from but its own inputs, as text


SECTIONS = {"inference": Section(serving_section.draw, serving_section.reads)}  # page url path -> its lower section


def page_context(values: Values) -> PageContext:
    """The scenario and price list these input values describe (the page fragment adds the link's messages)."""
    scenario, problem = build_scenario(values, st.session_state.get(CFG_TEXT, ""))
    return PageContext(scenario, values, (problem,) if problem else (), (), price_list(values))


def reads(page: str, ctx: PageContext) -> str | None:
    section = SECTIONS.get(page)
    return None if section is None else section.reads(ctx)


def draw(page: str, values: Values) -> None:
    """The page's lower section (nothing for a page without one), noting what it read."""
    section = SECTIONS.get(page)
    if section is None:
        st.session_state[DRAWN] = (page, None)
        return
    ctx = page_context(values)
    st.session_state[DRAWN] = (page, section.reads(ctx))
    section.draw(ctx)


def stale(ctx: PageContext) -> bool:
    """After a run of the page alone (app.py): whether the lower section, drawn before and not run after the page in
    this run, reads something else now. The mark that it does run after the page is for this one run."""
    queued = st.session_state.pop(QUEUED, False)
    return not queued and DRAWN in st.session_state and not current(ctx.values, ctx)


def current(values: Values, ctx: PageContext | None = None) -> bool:
    """Whether the lower section as last drawn is the one these values draw (`ctx`: theirs, when at hand)."""
    drawn = st.session_state.get(DRAWN)
    if drawn is None:
        return False
    section = SECTIONS.get(drawn[0])
    if section is None:
        return drawn[1] is None
    return section.reads(ctx or page_context(values)) == drawn[1]
