"""Training: devices, time and cost across accelerators and clouds."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app_pages.shared.context import as_mode, page_header, priced
from app_pages.shared.plot import show
from app_pages.shared.results import cached_estimate, scenario_of
from app_pages.shared.sidebar import page_widget
from app_pages.shared.style import frozen, layout
from app_pages.shared.text import flops_text, hours_text, md, plain
from core.catalog.accelerators import get_accelerator
from core.money.cost import training_curve, training_options

sc, values, units = page_header("Training", "How many devices, how long, and what a training or fine-tuning run costs, on real price lists.")
DEFAULT_TOKENS = 1e9
if sc.mode != "training":
    sc, err, note = as_mode(sc, "training")
    st.info(
        "The sidebar is set to serving; this page shows the same model **trained** (switch *Workload* to *Train / fine-tune* to set the method, sharding and batch)."
        + (" " + note if note else ""),
        icon=":material/info:",
    )
    if sc is None:
        st.error(plain(err))
        st.stop()
if not sc.train_tokens:
    sc = sc.model_copy(update={"train_tokens": DEFAULT_TOKENS})
    st.caption(f"No training-token count set: assuming **{DEFAULT_TOKENS / 1e9:g} billion tokens** (set *Training tokens* under *Training run* in the sidebar).")

acc = get_accelerator(sc.accelerator)
price_kind = page_widget("price")
KEY = sc.model_dump_json()
PRICES = priced()  # the price list in use: (cache key, rows)


@st.cache_resource(max_entries=64, show_spinner=False)
def _options(key: str, price_key: str = "", _rows=None):
    return training_options(scenario_of(key), _rows)


@st.cache_resource(max_entries=64, show_spinner=False)
def _curve(key: str, price_key: str = "", _rows=None):
    return training_curve(scenario_of(key), _rows)


opts = _options(KEY, *PRICES)
if not opts.options:
    st.warning("No price row can run this setup (it fits on no priced accelerator). " + plain("; ".join(opts.skipped[:3])))
    st.stop()

spot = price_kind == "spot"


def cost(o):
    return o.spot_usd if spot else o.on_demand_usd


priced = [o for o in opts.options if cost(o) is not None]
with st.container():  # one slot whether or not the warning shows (the chart below keeps its place)
    if not priced:
        st.warning("No spot prices are published for these instances; showing on-demand.")
        spot, priced = False, list(opts.options)
cheapest = min(priced, key=cost)
fastest = min(priced, key=lambda o: (o.wall_hours, cost(o)))
mine = [o for o in priced if o.accelerator_id == acc.id]

est = cached_estimate(KEY, *PRICES).training
c = st.columns(4)
c[0].metric("Compute", flops_text(est.flops), help=f"{est.flops:.3g} FLOPs = {sc.train_tokens / 1e9:,.3g} B tokens x {est.flops_per_token:.3g} FLOPs per token")
c[1].metric("Device-hours", f"{est.gpu_hours:,.0f}", help=f"on {acc.name}: {est.devices} devices x {est.wall_hours:,.1f} h at MFU {est.mfu:.0%}")
c[2].metric(
    "Cheapest run", f"${cost(cheapest):,.0f}", help=f"{cheapest.provider} {cheapest.instance_type}, {cheapest.devices} x {get_accelerator(cheapest.accelerator_id).name}"
)
c[3].metric(
    "Fastest run", hours_text(fastest.wall_hours), help=f"{fastest.provider} {fastest.instance_type}, {fastest.devices} x {get_accelerator(fastest.accelerator_id).name}"
)


TOP_ACCELERATORS = 10


@st.cache_resource(max_entries=64, show_spinner=False)
def time_cost_figure(key: str, use_spot: bool, price_key: str = "", _rows=None) -> go.Figure:
    """One point per accelerator and device count, at its cheapest offer (the others take as long and cost more: the
    table below lists them); cheapest and fastest circled. Cached per scenario, price kind and list. A fifth of the
    points of one per offer (245 instead of 1,204 for Llama 3.1 8B), so the chart redraws faster."""
    priced = [o for o in _options(key, price_key, _rows).options if (o.spot_usd if use_spot else o.on_demand_usd) is not None]

    def cost(o):
        return o.spot_usd if use_spot else o.on_demand_usd

    cheapest = min(priced, key=cost)
    fastest = min(priced, key=lambda o: (o.wall_hours, cost(o)))
    fig = go.Figure()
    df = pd.DataFrame(
        [
            {
                "accelerator": o.accelerator_id,
                "provider": o.provider,
                "instance": o.instance_type,
                "devices": o.devices,
                "hours": o.wall_hours,
                "usd": cost(o),
                "layout": f"DP {o.data_parallel} x TP {o.tensor_parallel} x PP {o.pipeline_parallel}" + (f", ZeRO-{o.zero_stage}" if o.zero_stage else ""),
                "estimate": o.price_is_estimate,
            }
            for o in priced
        ]
    )
    offers = df.groupby(["accelerator", "devices"])["usd"].transform("size")
    df = df.assign(offers=offers).sort_values("usd", kind="stable").drop_duplicates(["accelerator", "devices"])
    # The ten accelerators with the cheapest runs get a colour and a legend entry each (by name); the rest share one
    # grey trace, so the legend stays readable on a phone and the chart quick to redraw.
    df["name"] = [get_accelerator(a).name for a in df["accelerator"]]
    ranked = df.groupby("name", sort=False)["usd"].min().sort_values()
    top = list(ranked.index[:TOP_ACCELERATORS])
    groups = [(name, df[df["name"] == name], None) for name in top]
    rest = df[~df["name"].isin(top)]
    if len(rest):
        groups.append((f"{rest['name'].nunique()} other accelerators", rest, "#BBBBBB"))
    for label, g, color in groups:
        fig.add_scatter(
            x=g["hours"],
            y=g["usd"],
            mode="markers",
            name=label,
            marker={"size": 9, "opacity": 0.8, **({"color": color} if color else {})},
            customdata=g[["name", "provider", "instance", "devices", "layout", "offers"]].values,
            hovertemplate="%{customdata[0]}: %{customdata[1]} %{customdata[2]}<br>%{customdata[3]} devices (%{customdata[4]})<br>"
            "%{x:,.1f} h, $%{y:,.0f} (cheapest of %{customdata[5]} offers)<extra></extra>",
        )
    marks = [(cheapest, "cheapest and fastest" if cheapest is fastest else "cheapest", "#54A24B")]
    if fastest is not cheapest:
        marks.append((fastest, "fastest", "#E45756"))
    for o, text, color in marks:
        fig.add_scatter(
            x=[o.wall_hours],
            y=[cost(o)],
            mode="markers+text",
            text=[text],
            textposition="top center",
            marker={"size": 18, "symbol": "circle-open", "color": color, "line": {"width": 3}},
            showlegend=False,
            hoverinfo="skip",
        )
    fig.update_layout(
        xaxis={"type": "log", "dtick": 1, "title": "Wall-clock time (hours, log scale)"},
        yaxis={"type": "log", "dtick": 1, "tickprefix": "$", "title": "Run cost (USD, log scale)"},
    )
    return frozen(layout(fig, f"Time vs cost of the run ({'spot' if use_spot else 'on-demand'})", height=480))


show(time_cost_figure(KEY, spot, *PRICES), key="chart_tc")
st.caption(
    "Each dot is one accelerator at one device count, at its cheapest offer (hover for the provider and how many offers there are); the table below lists them all."
)

left, right = st.columns(2)
with left:
    curve = _curve(KEY, *PRICES)
    if curve:
        cf = go.Figure()
        xs = [p.devices for p in curve]
        # two panels over one device axis (one scale each, no dual axis)
        cf = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
        xs = [p.devices for p in curve]
        ys = [p.spot_usd if spot and p.spot_usd is not None else p.on_demand_usd for p in curve]
        cf.add_scatter(x=xs, y=[p.wall_hours for p in curve], name="Wall-clock hours", mode="lines+markers", row=1, col=1)
        cf.add_scatter(x=xs, y=ys, name="Run cost (USD)", mode="lines+markers", row=2, col=1)
        cf.update_xaxes(type="log", dtick=1)
        cf.update_xaxes(title=f"Number of {acc.name} devices (log scale)", row=2, col=1)
        cf.update_yaxes(type="log", dtick=1, title="Hours (log)", row=1, col=1)
        cf.update_yaxes(title="Run cost (USD)", rangemode="tozero", tickprefix="$", row=2, col=1)
        show(layout(cf, f"More {acc.name} devices: shorter, and what it costs", height=460), key="chart_curve")
    else:
        st.info(md("No price rows for {acc}: the curve needs a price.", acc=acc.name))
with right:
    best = {}
    for o in priced:
        key = (o.provider, o.instance_type)
        if key not in best or cost(o) < cost(best[key]):
            best[key] = o
    table = pd.DataFrame(
        [
            {
                "Provider": o.provider,
                "Instance": o.instance_type,
                "Accelerator": get_accelerator(o.accelerator_id).name,
                "Devices": o.devices,
                "Hours": round(o.wall_hours, 1),
                "On-demand (USD)": round(o.on_demand_usd),
                "Spot (USD)": None if o.spot_usd is None else round(o.spot_usd),
                "Price is an estimate": "yes" if o.price_is_estimate else "",
            }
            for o in sorted(best.values(), key=cost)
        ]
    )
    st.markdown("**Per provider and instance: the cheapest way to run it**")
    st.dataframe(table, hide_index=True, width="stretch", height=400, column_config={"Provider": st.column_config.TextColumn(pinned=True)})

with st.expander("How this is computed"):
    t = (mine or [cheapest])[0]
    st.markdown(
        f"FLOPs = {'8' if sc.gradient_checkpointing else '6'} x active parameters x tokens for full training "
        "(Kaplan et al. 2020; 8 with full recomputation, Narayanan et al. 2021); LoRA skips the frozen weights' gradients. "
        "Time = FLOPs / (devices x peak dense TFLOP/s x MFU). The MFU default depends on the setup (full 40%, LoRA 35%, "
        "QLoRA 30%; Llama 3.1 405B trained at 38-43% on H100s) and the sidebar's *MFU* overrides it. "
        f"The cheapest option here uses {t.devices} x {get_accelerator(t.accelerator_id).name} on {t.provider} {t.instance_type}. "
        "Prices are the catalog's list prices (see Method for sources and dates)."
    )
    if opts.skipped:
        st.markdown("Not shown: " + plain("; ".join(opts.skipped[:8])))
