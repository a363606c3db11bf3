"""Draw a Plotly figure on a page: `show(fig, key=...)` for every chart of the app.

A chart is a small Streamlit component (app_pages/shared/chart.js) that keeps its <div> between reruns and updates
it with Plotly.react; a figure that did not change is not redrawn. plotly.js is the copy the `plotly` Python package
ships (plotly/package_data/plotly.min.js, the version plotly.offline.get_plotlyjs_version() names), served by a
declared component folder (st.components.v1.declare_component, a public API) and loaded once per page; nothing of
Streamlit's own build is used. st.plotly_chart redraws every changed chart from nothing (a new element each time): on the Memory page that
was about half of the wait after a slider move (bench/latency.py, numbers in docs/PERFORMANCE.md). A chart out of view is drawn
when it is scrolled into view (or the page is printed), not on every rerun: a slider move waits only for the charts on
screen.

Where that file is missing or is not plotly.js of that version, or LLMGP_NATIVE_CHARTS=1 is set, charts are drawn with
st.plotly_chart instead, with the same figures and the same answers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import plotly
import plotly.graph_objects as go
import streamlit as st

from app_pages.shared import guard
from app_pages.shared.style import PLOTLY_CONFIG, FrozenFigure, figure_spec

COMPONENT_NAME = "llmgp_chart"


PLOTLY_JS = "plotly.min.js"


def plotly_js(folder: Path | None = None) -> Path | None:
    """plotly.js as the plotly package ships it, when the file is there and its banner names the plotly.js version the
    package says it bundles ("plotly.js v4.1.1" for plotly 7.1); else None (charts fall back to st.plotly_chart)."""
    from plotly.offline import get_plotlyjs_version

    path = (folder or Path(plotly.__file__).parent / "package_data") / PLOTLY_JS
    try:
        with path.open("rb") as f:
            head = f.read(512)
    except OSError:
        return None
    return path if f"plotly.js v{get_plotlyjs_version()}\n".encode() in head else None


def _plotly_source(path: Path | None) -> str | None:
    """The file's address relative to the app's root: a declared component's folder is served at component/<name>/."""
    if path is None:
        return None
    folder = st.components.v1.declare_component(PLOTLY_FOLDER_NAME, path=str(path.parent))
    return f"component/{folder.name}/{path.name}"


PLOTLY_FOLDER_NAME = "plotlyjs"
SOURCE = _plotly_source(plotly_js())
_COMPONENT: Callable[..., Any] | None = None
if SOURCE is not None and os.environ.get("LLMGP_NATIVE_CHARTS", "0") != "1":
    _COMPONENT = st.components.v2.component(COMPONENT_NAME, js=(Path(__file__).with_name("chart.js")).read_text(), isolate_styles=False)


def _no_op() -> None:
    """A click is read from the component's result in the run it triggers."""


def _title(fig: go.Figure) -> str:
    text = fig.layout.title.text
    return str(text) if text else "Chart"


def show(fig: go.Figure, key: str, *, clicks: bool = False) -> list | None:
    """Draw `fig`; with clicks=True, the customdata of a point the person clicked (in the run the click starts),
    else None. The figure was just built (on a cache miss, the expensive part of a run): a waiting person may take
    the turn first (guard.yield_turn, here and not in the cached builder, which holds the cache's lock)."""
    guard.yield_turn()
    if _COMPONENT is None:
        kwargs: dict[str, Any] = {"on_select": "rerun", "selection_mode": "points"} if clicks else {}
        state = st.plotly_chart(fig, config=PLOTLY_CONFIG, key=key, **kwargs)
        selection = getattr(state, "selection", None) if clicks else None
        points = getattr(selection, "points", None) or []
        return points[0].get("customdata") if points and isinstance(points[0], dict) else None
    spec, digest = fig.spec() if isinstance(fig, FrozenFigure) else figure_spec(fig)  # hop: figure -> JSON for chart.js
    data = {"spec": spec, "digest": digest, "library": SOURCE, "config": PLOTLY_CONFIG, "title": _title(fig), "height": fig.layout.height or 450, "clicks": clicks}
    result = _COMPONENT(data=data, key=key, **({"on_click_change": _no_op} if clicks else {}))
    clicked = getattr(result, "click", None) if clicks else None
    return clicked.get("customdata") if isinstance(clicked, dict) else None
