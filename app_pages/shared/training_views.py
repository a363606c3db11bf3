"""The Training page's cached results and figures: built once per scenario (and price kind and list) and shared by
every session. Defined here, not in the page script, so a rerun does not hash their source again."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app_pages.shared.cache import shared_cache
from app_pages.shared.results import Rows, scenario_of
from app_pages.shared.style import COLORWAY, FrozenFigure, frozen, layout
from app_pages.shared.text import chart_text
from app_pages.shared.ticks import number_ticks, time_ticks
from core.catalog.accelerators import get_accelerator
from core.money.cost import CurvePoint, TrainingOption, TrainingOptions, pick, training_curve, training_options
from core.money.picks import frontier
from core.plan.train import term_words


@shared_cache(max_entries=64)
def training_options_of(key: str, price_key: str = "", _rows: Rows = None) -> TrainingOptions:
    return training_options(scenario_of(key), _rows)


@shared_cache(max_entries=64)
def training_curve_of(key: str, price_key: str = "", _rows: Rows = None) -> tuple[CurvePoint, ...]:
    return training_curve(scenario_of(key), _rows)


# The colour of each of the accelerators with the cheapest runs (the template's colours without its grey, which marks
# the others), one more for the sidebar's own when it is not among them, and the others' grey.
TOP_COLORS = COLORWAY[:-1]
OWN_EXTRA_COLOR = "#1B6F8A"
OTHER_COLOR = "#9A9A9A"


def on_frontier(hours: pd.Series, usd: pd.Series) -> pd.Series:
    """True for each run that no other run beats on both time and cost: the planner's time-cost frontier
    (core.plan.frontier) over these runs."""
    kept = frontier([SimpleNamespace(cost=u, duration=h) for h, u in zip(hours, usd, strict=True)])
    return pd.Series([i in kept for i in range(len(hours))], index=hours.index)


def rented(o: TrainingOption) -> str:
    """How a run is rented: 'on demand', or 'reservation, 1 week min' / 'reservation, 1 day min' for a provider's
    reserved cluster (data/reservations.csv), whose whole terms its cost pays."""
    if o.reservation is None or o.reservation_min_term_hours is None:
        return "on demand"
    return f"reservation, {term_words(o.reservation_min_term_hours)} min"


def run_cost(o: TrainingOption, use_spot: bool) -> float | None:
    """What a run is billed at the price kind shown (None: no spot price for its instance): setup and communication
    included, as the planner bills it (core/money/run_bill.py)."""
    return o.run_spot_usd if use_spot else o.run_usd


@shared_cache(max_entries=64)
def time_cost_figure(key: str, use_spot: bool, price_key: str = "", _rows: Rows = None) -> FrozenFigure:
    """Each run as a point: wall-clock hours against cost, one per accelerator and device count at its cheapest offer
    (the offers there take as long and cost more: the table lists them), for the cheapest accelerators and the
    sidebar's, and the time-cost frontier of the others; cheapest and fastest circled. Cached per scenario, price
    kind and list."""
    priced = [o for o in training_options_of(key, price_key, _rows).options if run_cost(o, use_spot) is not None]

    def cost(o):
        return run_cost(o, use_spot)

    cheapest, fastest = pick(priced, use_spot)
    fig = go.Figure()
    df = pd.DataFrame(
        [
            {
                "accelerator": o.accelerator_id,
                "provider": chart_text(o.provider),  # a price list from a link names these: no tags in the hover
                "instance": chart_text(o.instance_type),
                "devices": o.devices,
                "hours": o.run_hours,
                "usd": cost(o),
                "layout": f"DP {o.data_parallel} x TP {o.tensor_parallel} x PP {o.pipeline_parallel}" + (f", ZeRO-{o.zero_stage}" if o.zero_stage else ""),
                "rented": chart_text(rented(o) if o.reservation is None else f"{o.reservation}: {rented(o)}"),
            }
            for o in priced
        ]
    )
    offers = df.groupby(["accelerator", "devices"])["usd"].transform("size")
    df = df.assign(offers=offers).sort_values("usd", kind="stable").drop_duplicates(["accelerator", "devices"])
    # The nine accelerators with the cheapest runs, and the sidebar's (a diamond, "yours"), get a colour and a legend
    # entry each (by name). Of the rest, only the runs no other run beats on both time and cost are drawn, as grey
    # rings (the fastest run is often among them): the table below lists every instance, the legend stays readable on
    # a phone, and the chart redraws in two thirds of the time of all ~250 points (bench/latency.py).
    df["name"] = [chart_text(get_accelerator(a).name) for a in df["accelerator"]]
    ranked = df.groupby("name", sort=False)["usd"].min().sort_values()
    top = list(ranked.index[: len(TOP_COLORS)])
    own = chart_text(get_accelerator(scenario_of(key).accelerator).name)
    if own in ranked.index and own not in top:
        top.append(own)
    groups = [(name, df[df["name"] == name], TOP_COLORS[i] if i < len(TOP_COLORS) else OWN_EXTRA_COLOR) for i, name in enumerate(top)]
    rest = df[~df["name"].isin(top) & on_frontier(df["hours"], df["usd"])]
    if len(rest):
        # short: a horizontal legend's columns are as wide as its longest entry (this one at 60 characters put every
        # entry on a line of its own, ten lines under a 480 px chart in the presenter view); the caption says the rest
        groups.append(("Other accelerators (best runs)", rest, OTHER_COLOR))
    for name, g, color in groups:
        symbol = "diamond" if name == own else "circle-open" if color == OTHER_COLOR else "circle"
        fig.add_scatter(
            x=g["hours"],
            y=g["usd"],
            mode="markers",
            name=f"{name} (yours)" if name == own else name,
            marker={"size": 11 if name == own else 9, "opacity": 0.85, "color": color, "symbol": symbol, **({"line": {"width": 2}} if color == OTHER_COLOR else {})},
            customdata=g[["name", "provider", "instance", "devices", "layout", "offers", "rented"]].values,
            hovertemplate="%{customdata[0]}: %{customdata[1]} %{customdata[2]}, %{customdata[6]}<br>%{customdata[3]} devices (%{customdata[4]})<br>"
            "%{x:,.1f} h, $%{y:,.0f} (cheapest of %{customdata[5]} offers)<extra></extra>",
        )
    marks = [(cheapest, "cheapest and fastest" if cheapest is fastest else "cheapest", "#54A24B")]
    if fastest is not cheapest:
        marks.append((fastest, "fastest", "#E45756"))
    for i, (o, text, color) in enumerate(marks):
        fig.add_scatter(
            x=[o.run_hours],
            y=[cost(o)],
            mode="markers",
            marker={"size": 18, "symbol": "circle-open", "color": color, "line": {"width": 3}},
            showlegend=False,
            hoverinfo="skip",
        )
        # the label on a short leader above the point, on a white box over the other points (a text beside the ring
        # was overprinted by its neighbours' markers: "fa●test"; stop 50's projector review, M6), with its figures
        fig.add_annotation(
            x=math.log10(o.run_hours),
            y=math.log10(cost(o)),
            text=f"{text}: ${cost(o):,.2f}" if cost(o) < 100 else f"{text}: ${cost(o):,.0f}",
            showarrow=True,
            arrowhead=0,
            arrowcolor=color,
            ax=0,
            ay=-34 - 20 * i,  # the fastest's label above the cheapest's where the two sit close
            bgcolor="rgba(255,255,255,0.9)",
            font={"color": color},
        )
    fig.update_layout(
        xaxis={"type": "log", "title": "Wall-clock time (log scale)", **time_ticks(list(df["hours"]))},
        yaxis={"type": "log", "title": "Run cost (USD, log scale)", **number_ticks(list(df["usd"]), "$")},
    )
    return frozen(layout(fig, f"Time vs cost of the run ({'spot' if use_spot else 'on-demand'})", height=480))


@shared_cache(max_entries=64)
def curve_figure(key: str, use_spot: bool, price_key: str = "", _rows: Rows = None) -> FrozenFigure | None:
    """Hours and run cost on the sidebar's accelerator against its device count (None without a price for it): two
    panels over one device axis, one scale each (no dual axis)."""
    curve = training_curve_of(key, price_key, _rows)
    if not curve:
        return None
    name = get_accelerator(scenario_of(key).accelerator).name
    xs = [p.devices for p in curve]
    ys = [p.run_spot_usd if use_spot and p.run_spot_usd is not None else p.run_usd for p in curve]
    cf = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    cf.add_scatter(x=xs, y=[p.run_hours for p in curve], name="Wall-clock hours", mode="lines+markers", row=1, col=1)
    cf.add_scatter(x=xs, y=ys, name="Run cost (USD)", mode="lines+markers", row=2, col=1)
    cf.update_xaxes(type="log", **number_ticks([float(x) for x in xs]))
    cf.update_xaxes(title=f"Number of {name} devices (log scale)", row=2, col=1)
    # both in words at 1-2-5 steps (the hours axis had one mark, "1"); the cost on a log scale too: a reserved cluster's
    # whole terms ($15,000 at 128 devices) flattened every on-demand run to "$0" on a linear one
    # short axis titles (each panel is a third of the chart: at 1024 px the longer ones ran into each other, review M4)
    # and no legend: the titles say which panel is which, and the legend took the panels' height on a phone
    cf.update_yaxes(type="log", **time_ticks([p.run_hours for p in curve]), title="Run time (log)", row=1, col=1)
    costs = [float(y) for y in ys if y]
    cf.update_yaxes(type="log", **(number_ticks(costs, "$") if costs else {}), title="Run cost (log)", row=2, col=1)
    cf.update_layout(showlegend=False)
    return frozen(layout(cf, f"More {name} devices: shorter, and what it costs", height=460))


@shared_cache(max_entries=64)
def offers_table(key: str, use_spot: bool, price_key: str = "", _rows: Rows = None) -> pd.DataFrame:
    """One row per provider, instance and way of renting it (on demand, or the provider's reservation: its whole
    terms in the cost, as the curve, Plan and `estimate` bill it) at its cheapest device count for the price kind,
    cheapest first."""

    def cost(o):
        return run_cost(o, use_spot)

    best: dict[tuple[str, str, str | None], TrainingOption] = {}
    for o in training_options_of(key, price_key, _rows).options:
        if cost(o) is None:
            continue
        k = (o.provider, o.instance_type, o.reservation)
        if k not in best or cost(o) < cost(best[k]):
            best[k] = o
    return pd.DataFrame(
        [
            {  # the answer first (what, how many, how long, what it costs: in sight at 1280 px), then where and how
                "Provider": o.provider,
                "Accelerator": get_accelerator(o.accelerator_id).name,
                "Devices": o.devices,
                # the cost in sight before the time (at 1280 px the last of these columns was cut at the edge: stop
                # 50's projector review, M5); hours to the digits that matter (a pretraining run read 31932.66)
                "Cost, on demand or reserved (USD)": round(o.run_usd, 2),
                "Spot (USD)": None if o.run_spot_usd is None else round(o.run_spot_usd, 2),
                "Hours": round(o.run_hours, 2 if o.run_hours < 10 else 1 if o.run_hours < 100 else 0),
                "Instance": o.instance_type,
                "Rented": "spot" if use_spot and o.reservation is None and o.run_spot_usd is not None else rented(o),
                "Price is an estimate": "yes" if o.price_is_estimate else "",
            }
            for o in sorted(best.values(), key=cost)
        ]
    )
