"""The Method page's main chart (no Streamlit here): each published measurement against our estimate of it, with the
line where they agree and the band within which we call a case a match."""

from __future__ import annotations

import plotly.graph_objects as go

from app_pages.shared.style import FIT_COLORS, layout
from app_pages.shared.text import chart_text

MATCH_PERCENT = 15.0  # a case within this of its measurement is a match (the table's "Within 15%" column)


def validation_figure(
    cases: list[str],
    measured_gb: list[float],
    estimated_gb: list[float],
    title: str = "Our estimate against each published measurement",
    match_percent: float = MATCH_PERCENT,
) -> go.Figure:
    """Measured peak (x) against our estimate (y), one point per case, the case on hover; the diagonal is a perfect
    estimate and the shaded band is within `match_percent` of the measurement. Points inside the band are green,
    outside it red (the colours of 'fits' and 'does not fit')."""
    top = max([*measured_gb, *estimated_gb, 1.0]) * 1.08
    lo, hi = 1 - match_percent / 100, 1 + match_percent / 100
    fig = go.Figure()
    fig.add_scatter(
        x=[0, top, top, top / hi, 0],  # between y = lo x and y = hi x, cut at the plot's top
        y=[0, lo * top, top, top, 0],
        fill="toself",
        mode="none",
        fillcolor="rgba(84, 162, 75, 0.12)",
        name=f"Within {match_percent:.0f}% of the measurement",
        hoverinfo="skip",
    )
    fig.add_scatter(x=[0, top], y=[0, top], mode="lines", line={"color": "#8C8C8C", "dash": "dot", "width": 2}, name="Estimate = measurement", hoverinfo="skip")
    inside = [abs(e / m - 1) * 100 <= match_percent for m, e in zip(measured_gb, estimated_gb, strict=True)]
    for within, name in ((True, f"Case within {match_percent:.0f}%"), (False, f"Case outside {match_percent:.0f}%")):
        idx = [i for i, ok in enumerate(inside) if ok is within]
        if not idx:
            continue
        fig.add_scatter(
            x=[measured_gb[i] for i in idx],
            y=[estimated_gb[i] for i in idx],
            mode="markers",
            name=name,
            marker={"size": 12, "color": FIT_COLORS["fits on 1" if within else "does not fit"], "line": {"width": 1, "color": "#FFFFFF"}},
            customdata=[[chart_text(cases[i]), 100 * (estimated_gb[i] / measured_gb[i] - 1)] for i in idx],
            hovertemplate="%{customdata[0]}<br>measured %{x:,.2f} GB, our estimate %{y:,.2f} GB (%{customdata[1]:+.1f}%)<extra></extra>",
        )
    fig.update_xaxes(range=[0, top], title="Measured peak memory (GB)", showgrid=True)
    fig.update_yaxes(range=[0, top], title="Our estimate (GB)")
    return layout(fig, title, height=420)
