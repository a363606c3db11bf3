"""Colours, units and figure defaults shared by every page."""

from __future__ import annotations

import hashlib
import json
import math

import plotly.graph_objects as go
import plotly.io as pio
from plotly.utils import PlotlyJSONEncoder

from core.units import BYTES_PER_GB, BYTES_PER_GIB

# One colour per memory component, the same on every page (colour-blind-safe
# Tableau 10 hues).
COMPONENT_COLORS = {
    "weights": "#4C78A8",
    "gradients": "#F58518",
    "optimizer": "#E45756",
    "activations": "#72B7B2",
    "kv_cache": "#54A24B",
    "overhead": "#B279A2",
    "allocator": "#BAB0AC",
}
COMPONENT_LABELS = {
    "weights": "Weights",
    "gradients": "Gradients",
    "optimizer": "Optimizer states",
    "activations": "Activations",
    "kv_cache": "KV cache",
    "overhead": "Runtime (CUDA context, NCCL)",
    "allocator": "Allocator reserve",
}
# the line that says "fits / does not fit": near-black, which a projector does not wash out on the red and blue bars
# (mid-grey #7F7F7F, 3.9:1 on white, all but vanished on the optimizer's red there)
CAPACITY_COLOR = "#262730"
FIT_COLORS = {"fits on 1": "#54A24B", "needs several": "#EECA3B", "does not fit": "#E45756"}
PLOTLY_CONFIG = {
    "displaylogo": False,
    "showSendToCloud": False,
    "modeBarButtonsToRemove": ["lasso2d", "select2d", "sendDataToCloud"],
    "toImageButtonOptions": {"format": "png", "scale": 2},
}

# The look of every chart: the app's font, grey axis text, faint grid lines, transparent backgrounds (so the same
# figure reads on a light or a dark page; app_pages/shared/chart.js takes the title, legend and hover colours from
# the page). Small on purpose: Plotly applies the template on every draw.
_GREY = "#808495"
_GRID = "rgba(128, 132, 149, 0.22)"
_AXIS = {
    "automargin": True,
    "gridcolor": _GRID,
    "zerolinecolor": _GRID,
    "tickcolor": _GRID,
    "tickfont": {"color": _GREY, "size": 12},
    "title": {"font": {"color": _GREY, "size": 14}, "standoff": 14},
}
# The charts' colours in order (Vega's "tableau10" scheme, Vega-Lite's default); the last, grey, marks "the rest".
COLORWAY = ("#4C78A8", "#F58518", "#E45756", "#72B7B2", "#54A24B", "#EECA3B", "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC")
pio.templates["llmgp"] = go.layout.Template(
    layout={
        "font": {"family": '"Source Sans", sans-serif', "size": 12, "color": _GREY},
        "title": {"font": {"size": 16, "weight": 600}, "x": 0, "xanchor": "left", "pad": {"l": 4}},
        "colorway": list(COLORWAY),
        "paper_bgcolor": "rgba(0, 0, 0, 0)",
        "plot_bgcolor": "rgba(0, 0, 0, 0)",
        "xaxis": {**_AXIS, "showgrid": False},
        "yaxis": _AXIS,
        "legend": {"font": {"size": 12}},
        "hoverlabel": {"font": {"size": 12}},
        "margin": {"pad": 6},
    }
)
pio.templates.default = "llmgp"


class Units:
    """Bytes shown in GiB or GB, labelled."""

    def __init__(self, name: str):
        self.name = name if name in ("GiB", "GB") else "GiB"
        self.divisor = BYTES_PER_GIB if self.name == "GiB" else BYTES_PER_GB

    def __call__(self, n_bytes: float, digits: int = 1) -> str:
        return f"{n_bytes / self.divisor:,.{digits}f} {self.name}"

    def value(self, n_bytes: float) -> float:
        return n_bytes / self.divisor


def layout(fig: go.Figure, title: str, height: int = 380) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0, "xanchor": "left"},
        height=height,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        # at the foot of the figure (container coordinates): Plotly makes room for it, so on a narrow screen a tall
        # legend pushes the plot up instead of covering the axis title
        legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "xanchor": "left", "x": 0, "traceorder": "normal"},
        hoverlabel={"namelength": -1},
    )
    return fig


def vmarker(fig: go.Figure, x: float, text: str, *, log_x: bool, color: str = "#8C8C8C", dash: str = "dot", side: str = "center", at_top: bool = True) -> None:
    """A labelled vertical line at data value x over the plot's height: side="left" puts the label left of the line (a
    line at the right end of the axis), at_top=False at its foot (clear of other lines' labels on a narrow screen).
    Drawn as a layout shape and annotation, not a trace: when only the marker moves (the slider it marks), the
    figure's data stays the same and the browser redraws the chart in a third of the time (app_pages/shared/chart.js).
    On a log x axis (log_x) the annotation takes log10 coordinates; the shape takes data values (Plotly.js 2+)."""
    fig.add_shape(type="line", xref="x", yref="y domain", x0=x, x1=x, y0=0, y1=1, line={"color": color, "dash": dash, "width": 2})
    fig.add_annotation(
        x=math.log10(x) if log_x else x,
        xref="x",
        yref="y domain",
        y=1 if at_top else 0,
        yanchor="bottom",
        xanchor={"center": "center", "left": "right", "right": "left"}[side],
        text=text,
        showarrow=False,
        font={"color": color},
    )


def hmarker(fig: go.Figure, y: float, text: str, *, log_y: bool, color: str) -> None:
    """A labelled horizontal dashed line at data value y across the plot, its label above the line at the right (on a
    cost-vs-speed chart the cheap plans sit at the left, near such a line, and the fast ones high at the right). As
    vmarker: a layout shape and annotation, the annotation in log10 coordinates on a log axis (Plotly's add_hline put
    its label at 10^y there: a $1.76 line labelled near $58)."""
    fig.add_shape(type="line", xref="x domain", yref="y", x0=0, x1=1, y0=y, y1=y, line={"color": color, "dash": "dash", "width": 2})
    fig.add_annotation(
        x=1, xref="x domain", y=math.log10(y) if log_y else y, yref="y", xanchor="right", yanchor="bottom", text=text, showarrow=False, font={"color": color}
    )


# Axis lengths past the device's memory, in multiples of it (capacity_line): 1.25, 1.5, then 2, 3, 4, 6, 8, 12 ...
CAPACITY_STEPS = (1.0, 1.25, 1.5, *(f * 2.0**k for k in range(1, 40) for f in (1.0, 1.5)))


def capacity_axis(longest: float, capacity: float) -> float:
    """The end of a capacity chart's axis: the smallest step of CAPACITY_STEPS x `capacity` that holds the longest
    bar, with 6% of room for the line's label (the longer bar's own 6% where the device has no memory figure)."""
    if not capacity > 0:
        return max(longest, 1e-9) * 1.06
    step = next((m for m in CAPACITY_STEPS if m * capacity >= longest), longest / capacity)
    return step * capacity * 1.06


def capacity_line(fig: go.Figure, capacity: float, text: str, longest: float, narrow_text: str) -> None:
    """The device's usable memory as a dashed vertical line on a horizontal-bar chart, labelled above the plot, on
    the side of the line with more room (a line far right: to its left; a line near 0 when the bars run far past
    it: to its right), so the label is never cut off at the chart's edge. The axis runs from 0 to past the longer of
    the bars and the line: left to itself, Plotly widens it to hold the label's text box, and a label run left from a
    line near 0 took the axis to -200 GiB. On a chart narrower than 600 px the label reads `narrow_text` (a short one:
    a phone has no room for a card's full name beside a line; app_pages/shared/chart.js).

    The axis moves in steps a room can follow (capacity_axis): a bar that fits, whatever its length, sits on the
    device's own axis; a bar past the line sits on 1.25, 1.5, 2, 3, 4, 6, 8 ... times the device's memory, so a slider
    that shrinks or grows it moves the bar, not the axis under it, until it crosses a step."""
    axis_max = capacity_axis(longest, capacity)
    fig.update_xaxes(range=[0, axis_max])
    fig.add_vline(x=capacity, line={"color": CAPACITY_COLOR, "dash": "dash", "width": 3})
    fig.add_annotation(x=capacity, y=1.0, yref="paper", yanchor="bottom", text=text, showarrow=False, xanchor="right" if capacity > 0.5 * axis_max else "left")
    meta = dict(fig.layout.meta or {})
    meta["narrow_annotation_text"] = {**meta.get("narrow_annotation_text", {}), str(len(fig.layout.annotations) - 1): narrow_text}
    fig.update_layout(meta=meta)


def figure_spec(fig: go.Figure) -> tuple[str, str]:
    """The figure as the JSON the browser draws, and a short digest of it (a chart whose digest did not change is
    not redrawn)."""
    spec = json.dumps(fig.to_dict(), cls=PlotlyJSONEncoder, separators=(",", ":"))
    return spec, hashlib.blake2b(spec.encode(), digest_size=8).hexdigest()


class FrozenFigure(go.Figure):
    """A finished figure whose dict and JSON forms are computed once: a page sends its figures on every rerun
    (plotly's to_dict deep-copies a figure), which for a cached figure is the same every time. Only for figures that
    are not changed after they are built (they are shared between sessions through st.cache_resource)."""

    def to_dict(self) -> dict:
        frozen = self.__dict__.get("_frozen_dict")
        if frozen is None:
            frozen = super().to_dict()
            self.__dict__["_frozen_dict"] = frozen
        return frozen

    def spec(self) -> tuple[str, str]:
        memo = self.__dict__.get("_frozen_spec")
        if memo is None:
            memo = figure_spec(self)
            self.__dict__["_frozen_spec"] = memo
        return memo


def frozen(fig: go.Figure) -> FrozenFigure:
    """Freeze a figure just built (in a cached function: shared by every session that draws it)."""
    fig.__class__ = FrozenFigure  # same object and data, with the memoised to_dict
    return fig  # type: ignore[return-value]


# The page's own CSS (mounted once a run by page_style() below): every selector on Streamlit's data-testid attributes,
# kept here. What it fixes was measured at 1024 x 768, 1280 x 720 and 390 px (tests/browser/test_room.py): a metric's
# label and value were cut with an ellipsis ("29.1…", "2 de…"), the page started 6rem down, a segmented control in the
# sidebar wrapped its last button onto a line of its own without its border, and a seven-column static table ran off
# a phone's screen. On a phone (up to 640 px) Streamlit's opened sidebar covered the page, charts included, while a
# slider in it moved; it opens here as a sheet over the lower 55% of the screen, the page scrolling above it (with room
# at its foot so its last chart can reach the upper part), and Plan's one-line answer (an h4) is smaller.
PAGE_CSS = """
[data-testid="stMainBlockContainer"] { padding-top: 3.5rem; }
@media (min-width: 640px) { [data-testid="stMainBlockContainer"] { padding-left: 2rem; padding-right: 2rem; } }
[data-testid="stMetricLabel"] [data-testid="stMarkdownContainer"] p,
[data-testid="stMetricLabel"] [data-testid="stMarkdownContainer"] {
  white-space: normal; overflow: visible; text-overflow: clip; overflow-wrap: break-word; line-height: 1.25;
}
[data-testid="stMetricLabel"] { height: auto; min-height: 1.5rem; }
[data-testid="stMetricValue"] { font-size: clamp(1.35rem, 2.3vw, 2.1rem); }
[data-testid="stMetricValue"] [data-testid="stMarkdownContainer"],
[data-testid="stMetricValue"] [data-testid="stMarkdownContainer"] p {
  white-space: normal; overflow: visible; text-overflow: clip; overflow-wrap: break-word; line-height: 1.2;
}
[data-testid="stMetricDelta"], [data-testid="stMetricDelta"] div, [data-testid="stMetricDelta"] p {
  white-space: normal; overflow: visible; text-overflow: clip; max-width: 100%; height: auto;
}
[data-testid="stButtonGroup"] [role="radiogroup"] { flex-wrap: nowrap; max-width: 100%; }
[data-testid="stButtonGroup"] [role="radiogroup"] button {
  flex: 1 1 auto; min-width: min-content; padding-left: 0.4rem; padding-right: 0.4rem;
}
[data-testid="stButtonGroup"] [role="radiogroup"] button p { white-space: normal; line-height: 1.2; word-break: normal; overflow-wrap: normal; }
[data-testid="stSidebar"] [data-testid="stButtonGroup"] [role="radiogroup"] button { padding-left: 0.3rem; padding-right: 0.3rem; }
[data-testid="stSidebar"] [data-testid="stButtonGroup"] [role="radiogroup"] button p { font-size: 0.875rem; }
[data-testid="stSidebar"] [data-testid="stButton"] button [data-testid="stMarkdownContainer"] p {
  white-space: normal; overflow: visible; text-overflow: clip;
}
[data-testid="stTable"] { overflow-x: auto; max-width: 100%; }
@media (max-width: 640px) {
  [data-testid="stSidebar"][data-collapsed="false"] {
    position: fixed !important; top: auto; bottom: 0; left: 0; width: 100vw !important; min-width: 100vw; max-width: 100vw;
    height: 55vh !important; border-top: 1px solid rgba(128, 132, 149, 0.35); border-radius: 0.75rem 0.75rem 0 0;
    box-shadow: 0 -0.5rem 1.5rem rgba(0, 0, 0, 0.18);
  }
  [data-testid="stSidebar"][data-collapsed="false"] [data-testid="stSidebarContent"] { height: 100%; overflow-y: auto; }
  [data-testid="stAppViewContainer"]:has([data-testid="stSidebar"][data-collapsed="false"]) [data-testid="stMainBlockContainer"] { padding-bottom: 60vh; }
  [data-testid="stMain"] h4 { font-size: 1.15rem; }
}
.st-key-llmgp_style, .st-key-llmgp_style_presenter { display: none; }
"""
# The presenter view (link key `present`): larger type everywhere (Streamlit's sizes are in rem), the charts' type at
# 1.4x (app_pages/shared/chart.js reads --llmgp-chart-scale; review M3: 1.19x from the root font alone), a wider page.
PRESENTER_CSS = """
html { font-size: 19px; }
:root { --llmgp-chart-scale: 1.4; }
[data-testid="stMainBlockContainer"] { max-width: none; padding-top: 4.25rem; }
[data-testid="stMain"] h1 { font-size: 2rem; padding-top: 0; padding-bottom: 0.25rem; }
[data-testid="stMetricValue"] { font-size: clamp(1.5rem, 2.6vw, 2.4rem); }
[data-testid="stSidebar"] [data-testid="stButtonGroup"] [role="radiogroup"] button p { font-size: 0.75rem; }
"""
_STYLE: dict[bool, object] = {}


def page_style(presenter: bool) -> None:
    """Put the page's CSS on the page (a component with no content, its element hidden by its own CSS): a public
    Streamlit API, st.components.v2 with isolate_styles=False, whose <style> lands in the page itself."""
    import streamlit as st

    if presenter not in _STYLE:
        name = "llmgp_style_presenter" if presenter else "llmgp_style"
        _STYLE[presenter] = st.components.v2.component(name, html="<span></span>", css=PAGE_CSS + (PRESENTER_CSS if presenter else ""), isolate_styles=False)
    _STYLE[presenter](key="llmgp_style_presenter" if presenter else "llmgp_style")  # type: ignore[operator]
