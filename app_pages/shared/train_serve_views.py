"""The Training vs inference page's figures, cached by the numbers they draw: Plotly builds and validates a figure on
the server at every call, and a slider move that changes none of these numbers rebuilds nothing (with the page's
other cached views, the server's CPU per move fell from about 50 to 20 ms: docs/PERFORMANCE.md, 12 moves' /proc CPU time)."""

from __future__ import annotations

import plotly.graph_objects as go

from app_pages.shared.cache import shared_cache
from app_pages.shared.style import FrozenFigure, frozen, layout


@shared_cache(max_entries=256)
def cumulative_figure(cumulative_usd: tuple[float, ...], alternative_usd: tuple[float, ...], break_even_month: int | None) -> FrozenFigure:
    """Month by month: training once then serving on own instances, and the per-token API (when priced)."""
    fig = go.Figure()
    xs = list(range(len(cumulative_usd)))
    fig.add_scatter(x=xs, y=list(cumulative_usd), name="Train once + serve on own instances", mode="lines", line={"width": 3})
    if alternative_usd:
        fig.add_scatter(x=xs, y=list(alternative_usd), name="Per-token API", mode="lines", line={"dash": "dash", "width": 3})
    if break_even_month is not None:
        fig.add_vline(x=break_even_month, line={"color": "#54A24B"}, annotation_text=f"break-even: month {break_even_month}")
    fig.update_layout(xaxis_title="Months", yaxis_title="Cumulative cost (USD)")
    return frozen(layout(fig, "Cumulative cost: the training bill is paid once, serving every month", height=420))


@shared_cache(max_entries=256)
def bills_figure(training_usd: float, serving_usd_per_month: float, months: int) -> FrozenFigure:
    """The one-off training bill beside the serving bill over the horizon."""
    bars = go.Figure()
    bars.add_bar(
        x=["Training (one-off)", f"Serving ({months} months)"],
        y=[training_usd, serving_usd_per_month * months],
        marker_color=["#F58518", "#4C78A8"],
        text=[f"${training_usd:,.0f}", f"${serving_usd_per_month * months:,.0f}"],
        textposition="outside",
    )
    bars.update_layout(yaxis_title="USD", showlegend=False)
    return frozen(layout(bars, f"Over {months} months", height=420))


@shared_cache(max_entries=256)
def own_vs_rent_figure(utilisation_percent: tuple[float, ...], own_usd: tuple[float, ...], rent_usd: tuple[float, ...]) -> FrozenFigure:
    """Yearly cost of owning and of renting against the share of hours in use."""
    bf = go.Figure()
    bf.add_scatter(x=list(utilisation_percent), y=list(own_usd), name="Own (amortised purchase + power)", mode="lines")
    bf.add_scatter(x=list(utilisation_percent), y=list(rent_usd), name="Rent (cloud hours)", mode="lines")
    bf.update_layout(xaxis_title="Utilisation (% of hours in use)", yaxis_title="USD per year")
    return frozen(layout(bf, "Owning vs renting as utilisation grows", height=380))
