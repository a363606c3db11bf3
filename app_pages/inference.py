"""Inference: latency, throughput vs batch, KV cache vs context, and what serving costs."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app_pages.shared.box import box_section
from app_pages.shared.context import as_mode, page_header, priced
from app_pages.shared.plot import show
from app_pages.shared.results import cached_estimate, cached_serving, scenario_of
from app_pages.shared.sidebar import page_widget, traffic_inputs
from app_pages.shared.style import CAPACITY_COLOR, COMPONENT_COLORS, Units, frozen, layout, vmarker
from app_pages.shared.text import md, plain
from core.catalog.accelerators import get_accelerator
from core.memory.sweep import sweep
from core.money.blocks import InferenceEstimate
from core.money.serving import dedicated_vs_per_token
from core.scenario import Scenario
from core.speed.roofline import decode_curve

sc, values, units = page_header("Inference", "Time to first token, tokens per second, how many users fit, and what serving costs.")
if sc.mode != "inference":
    sc, err, _ = as_mode(sc, "inference")
    st.info("The sidebar is set to training; this page shows the same model **served** (weights in the sidebar's format).", icon=":material/info:")
    if sc is None:
        st.error(plain(err))
        st.stop()
acc = get_accelerator(sc.accelerator)
PRICES = priced()  # the price list in use: (cache key, rows)
result = cached_estimate(sc.model_dump_json(), *PRICES)
inf = result.inference

c = st.columns(5)
c[0].metric("Time to first token", f"{inf.time_to_first_token_s * 1e3:,.0f} ms", help=f"prefill of {inf.prompt_tokens:,} prompt tokens")
c[1].metric("Tokens/s per user", f"{inf.decode_tokens_per_s:,.1f}", help=f"decode at batch {inf.batch_size} ({inf.decode_bound}-bound)")
c[2].metric("Tokens/s, all users", f"{inf.aggregate_tokens_per_s:,.0f}", help="decode tokens per second summed over the batch")
c[3].metric("Most concurrent sequences", f"{inf.max_concurrent_sequences:,}", help=f"at {sc.seq_len:,} tokens each, on {inf.devices_per_replica} device(s)")
c[4].metric(
    f"\\$ / M tokens, batch {inf.batch_size}",
    "—" if inf.usd_per_million_tokens is None else f"${inf.usd_per_million_tokens:,.2f}",
    help=(inf.price_instance or "no price for this accelerator in the price list")
    + f": USD per million output tokens with the replica kept 100% busy at batch {inf.batch_size}, every hour of the month (a floor; the traffic bill is below)",
)
if result.layout_needed is None:
    st.error(md("{model} does not fit on any layout of {acc} at these settings: no speeds to show.", model=sc.architecture.name, acc=acc.name))
    st.stop()
with st.container():  # always there, so a warning that comes and goes does not shift (and redraw) the charts below
    if not result.fits:
        st.warning(
            md(
                "At these settings one {acc} does not hold the model; speeds are for the smallest layout that fits ({n} devices).",
                acc=acc.name,
                n=inf.devices_per_replica,
            ),
            icon=":material/warning:",
        )


def replica_scenario(sc: Scenario, inf: InferenceEstimate) -> Scenario:
    """The scenario on the layout the speeds above are for (the smallest that fits when the sidebar's does not): the
    charts below draw that replica too, not the sidebar's layout (they showed one device's speed and memory next to
    metrics for two)."""
    return Scenario(**(dict(sc) | {"tensor_parallel": inf.tensor_parallel, "pipeline_parallel": inf.pipeline_parallel}))


@st.cache_resource(max_entries=64, show_spinner=False)
def decode_figure(key: str):
    inf = cached_estimate(key).inference
    sc = replica_scenario(scenario_of(key), inf)
    top = max(2, min(1024, max(inf.max_concurrent_sequences, sc.batch_size) * 2))
    batches = sorted({int(b) for b in np.unique(np.geomspace(1, top, 24).astype(int))} | {sc.batch_size})  # through your setting
    pts = decode_curve(sc, batches)
    # two panels over one batch axis (one scale each, no dual axis)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    fig.add_scatter(x=[p.batch_size for p in pts], y=[p.decode_tokens_per_s for p in pts], name="Per user (tokens/s)", mode="lines+markers", row=1, col=1)
    fig.add_scatter(x=[p.batch_size for p in pts], y=[p.aggregate_tokens_per_s for p in pts], name="All users (tokens/s)", mode="lines+markers", row=2, col=1)
    if inf.max_concurrent_sequences:
        vmarker(
            fig,
            inf.max_concurrent_sequences,
            0,
            max(p.decode_tokens_per_s for p in pts) * 1.1,
            f"memory limit: {inf.max_concurrent_sequences}",
            color="#E45756",
            dash="solid",
        )
    powers = [2**k for k in range(int(np.log2(max(batches))) + 1)]  # batch marks 1, 2, 4, ... (every other past 7)
    fig.update_xaxes(type="log", tickvals=powers if len(powers) <= 7 else powers[::2])
    fig.update_xaxes(title="Concurrent sequences (batch, log scale)", row=2, col=1)
    fig.update_yaxes(title="Per user (tokens/s)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title="All users (tokens/s)", rangemode="tozero", row=2, col=1)
    fig.update_layout(hovermode="x unified")
    return frozen(layout(fig, "Decode speed by batch size", height=460))


@st.cache_resource(max_entries=64, show_spinner=False)
def kv_figure(key: str, unit: str):
    result, units = cached_estimate(key), Units(unit)
    sc = replica_scenario(scenario_of(key), result.inference)
    top_ctx = max(sc.architecture.max_context, sc.seq_len)
    ctx = np.unique(np.geomspace(256, top_ctx, 60).astype(int))
    grid = sweep(sc, sc.batch_size, ctx)
    # What one device has left for KV after everything else (0 when nothing is left).
    free = np.maximum(result.fit_capacity_bytes - (grid["total"] - grid["kv_cache"]), 0.0)
    kf = go.Figure()
    kf.add_scatter(
        x=ctx, y=units.value(grid["kv_cache"]), name=f"KV cache for {sc.batch_size} sequence(s)", mode="lines", line={"color": COMPONENT_COLORS["kv_cache"], "width": 3}
    )
    kf.add_scatter(x=ctx, y=units.value(free), name="Memory left for KV cache", mode="lines", line={"color": CAPACITY_COLOR, "dash": "dash"})
    vmarker(kf, sc.seq_len, 0, float(units.value(max(grid["kv_cache"].max(), free.max()))) * 1.05, "your context")
    kf.update_layout(xaxis={"type": "log", "dtick": 1, "title": "Context per sequence (tokens, log scale)"}, yaxis_title=f"{units.name} per device")
    return frozen(layout(kf, f"KV cache vs context ({result.kv_cache_bytes_per_token:,} bytes per token)", height=420))


KEY = sc.model_dump_json()
left, right = st.columns(2)
with left:
    show(decode_figure(KEY), key="chart_decode")
with right:
    show(kv_figure(KEY, units.name), key="chart_kv")
box_section(sc, units)


st.subheader("What serving your traffic costs")
traffic, util = traffic_inputs("util")
if traffic is None:
    st.stop()
plan, why, opts = cached_serving(sc.model_dump_json(), traffic.model_dump_json(), util / 100, *PRICES)
if plan is None:
    st.info(md("No serving bill on {acc}: {why}. The table below lists the accelerators that can be priced.", acc=acc.name, why=why or ""), icon=":material/info:")
m = st.columns(4) if plan else []
if plan:
    m[0].metric("Replicas needed", f"{plan.replicas:,}", help=f"{plan.devices_per_replica} device(s) each, batch {plan.batch_size}")
    m[1].metric(
        "Monthly cost",
        "—" if plan.usd_per_month is None else f"${plan.usd_per_month:,.0f}",
        help=f"{plan.provider} {plan.instance_type}, {plan.instances} instance(s), 730 h per month",
    )
    m[2].metric("Utilisation", f"{plan.utilisation:.0%}", help="average load on the fleet for this traffic")
    m[3].metric(
        f"USD / M output tokens at {plan.utilisation:.0%} load",
        "—" if plan.usd_per_million_output_tokens is None else f"${plan.usd_per_million_output_tokens:,.2f}",
        help=f"the monthly bill over this traffic's output tokens: batch {plan.batch_size}, {plan.utilisation:.0%} average utilisation, idle capacity included",
    )

a = st.columns(2)
api_in = page_widget("api_in", a[0])
api_out = page_widget("api_out", a[1])
if plan and (api_in or api_out):
    cmp = dedicated_vs_per_token(plan, traffic, api_in, api_out)
    st.markdown(
        f"**Dedicated vs per-token API:** dedicated \\${cmp.dedicated_usd_per_month:,.0f}/month vs per-token "
        f"\\${cmp.per_token_usd_per_month:,.0f}/month — **{cmp.cheaper}** is cheaper"
        + (f"; dedicated breaks even above {cmp.break_even_requests_per_day:,.0f} requests/day." if cmp.break_even_requests_per_day else ".")
    )

if opts:
    df = pd.DataFrame(
        [
            {
                "Accelerator": get_accelerator(o.accelerator_id).name,
                "Provider": o.provider,
                "Instance": o.instance_type,
                "Devices per replica": o.devices_per_replica,
                "Replicas": o.replicas,
                "Monthly (USD)": np.nan if o.usd_per_month is None else round(o.usd_per_month),
                "Spot monthly (USD)": np.nan if o.spot_usd_per_month is None else round(o.spot_usd_per_month),
                "USD / M output tokens": np.nan if o.usd_per_million_output_tokens is None else round(o.usd_per_million_output_tokens, 3),
                "TTFT (ms)": round(o.time_to_first_token_s * 1e3),
                "Tokens/s per user": round(o.decode_tokens_per_s, 1),
            }
            for o in opts
        ]
    ).sort_values("Monthly (USD)")
    st.markdown("**Every priced accelerator for this traffic (cheapest first)**")
    st.dataframe(df, hide_index=True, width="stretch", height=360, column_config={"Accelerator": st.column_config.TextColumn(pinned=True)})
with st.expander("How this is computed"):
    for line in inf.assumptions:
        st.markdown("- " + plain(line))
