"""Draw a Plotly figure on a page: `show(fig, key=...)` for every chart of the app.

A chart is a small Streamlit component (app_pages/shared/chart.js) that keeps its <div> between reruns and updates
it with Plotly.react, drawing with the Plotly that Streamlit already ships; a figure that did not change is not
redrawn. st.plotly_chart redraws every changed chart from nothing (a new element each time): on the Memory page that
was about half of the wait after a slider move (bench/latency.py, numbers in the README). A chart out of view is drawn
when it is scrolled into view (or the page is printed), not on every rerun: a slider move waits only for the charts on
screen.

Where Streamlit's Plotly module cannot be found (another Streamlit version) or LLMGP_NATIVE_CHARTS=1 is set, charts
are drawn with st.plotly_chart instead, with the same figures and the same answers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from app_pages.shared import guard
from app_pages.shared.style import PLOTLY_CONFIG, FrozenFigure, figure_spec

COMPONENT_NAME = "llmgp_chart"


def plotly_module() -> str | None:
    """File name of the module in Streamlit's frontend that holds Plotly (it sets window.Plotly when loaded)."""
    found = list((Path(st.__file__).parent / "static" / "static" / "js").glob("PlotlyChart.*.js"))
    return found[0].name if len(found) == 1 else None


CHUNK = plotly_module()
_COMPONENT: Callable[..., Any] | None = None
if CHUNK is not None and os.environ.get("LLMGP_NATIVE_CHARTS", "0") != "1":
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
    spec, digest = fig.spec() if isinstance(fig, FrozenFigure) else figure_spec(fig)
    data = {"spec": spec, "digest": digest, "chunk": CHUNK, "config": PLOTLY_CONFIG, "title": _title(fig), "height": fig.layout.height or 450, "clicks": clicks}
    result = _COMPONENT(data=data, key=key, **({"on_click_change": _no_op} if clicks else {}))
    clicked = getattr(result, "click", None) if clicks else None
    return clicked.get("customdata") if isinstance(clicked, dict) else None
