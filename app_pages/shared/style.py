"""Colours, units and figure defaults shared by every page."""

from __future__ import annotations

import plotly.graph_objects as go

from app_pages.shared import guard
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
CAPACITY_COLOR = "#7F7F7F"
FIT_COLORS = {"fits on 1": "#54A24B", "needs several": "#EECA3B", "does not fit": "#E45756"}
PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
CHART_OPTIONS = {"config": PLOTLY_CONFIG}  # every st.plotly_chart call's options


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


def vmarker(
    fig: go.Figure, x: float, y_low: float, y_high: float, text: str, color: str = "#8C8C8C", dash: str = "dot", side: str = "center", at_top: bool = True
) -> None:
    """A labelled vertical line drawn as a trace, so it sits at data value x on
    log axes too (shapes on a log axis take log10 coordinates); side="left" puts the label left of the line (a line at
    the right end of the axis), at_top=False at its foot (clear of other lines' labels on a narrow screen)."""
    fig.add_scatter(
        x=[x, x],
        y=[y_low, y_high],
        mode="lines+text",
        text=["", text] if at_top else [text, ""],
        textposition=f"top {side}",
        line={"color": color, "dash": dash, "width": 2},
        showlegend=False,
        hoverinfo="skip",
        textfont={"color": color},
        cliponaxis=False,  # the label sits above the line's top, outside the plot area
    )


class FrozenFigure(go.Figure):
    """A finished figure whose dict form is computed once: st.plotly_chart converts its figure to a dict on every
    rerun (plotly's to_dict deep-copies it), which for a cached figure is the same dict every time. Only for figures
    that are not changed after they are built (they are shared between sessions through st.cache_resource)."""

    def to_dict(self) -> dict:
        frozen = self.__dict__.get("_frozen_dict")
        if frozen is None:
            frozen = super().to_dict()
            self.__dict__["_frozen_dict"] = frozen
        return frozen


def frozen(fig: go.Figure) -> FrozenFigure:
    """Freeze a figure just built (on a cache miss: the expensive part of a run), then let a waiting person take the
    turn before the run goes on (app_pages/shared/guard.py)."""
    fig.__class__ = FrozenFigure  # same object and data, with the memoised to_dict
    guard.yield_turn()
    return fig  # type: ignore[return-value]
