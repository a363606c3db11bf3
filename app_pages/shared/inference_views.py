"""The Inference page's cached figures and tables: built once per scenario (and traffic, prices, units) and shared by
every session. Defined here, not in the page script, so a rerun does not hash their source again."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_pages.shared.cache import shared_cache
from app_pages.shared.fold import folded
from app_pages.shared.plot import show
from app_pages.shared.results import Rows, cached_estimate, cached_serving, scenario_of
from app_pages.shared.state import off_default
from app_pages.shared.style import CAPACITY_COLOR, COMPONENT_COLORS, FrozenFigure, Units, frozen, layout, vmarker
from app_pages.shared.text import plain, spreadsheet_safe
from app_pages.shared.ticks import CONTEXT_TICKS, log_ticks, number_ticks
from app_pages.shared.widgets import page_widget
from core.catalog.accelerators import get_accelerator
from core.estimate import Result
from core.layout import Layout
from core.memory.sweep import sweep
from core.money.blocks import InferenceEstimate
from core.money.serving import ServingPlan
from core.scenario import Scenario
from core.speed.load import RUNNING_LIMIT_FLAG, load_curve, running_limit_words, scenario_scheduler
from core.speed.roofline import decode_curve


def replica_scenario(sc: Scenario, inf: InferenceEstimate) -> Scenario:
    """The scenario on the layout the page's speeds are for (the smallest that fits when the sidebar's does not). The
    decode chart draws it (it showed one device's speed next to metrics for two), and so does the KV chart where the
    sidebar's devices cannot hold even the weights (kv_on_sidebars_layout)."""
    return Scenario(**(dict(sc) | {"tensor_parallel": inf.tensor_parallel, "pipeline_parallel": inf.pipeline_parallel}))


@shared_cache(max_entries=64)
def decode_figure(key: str) -> FrozenFigure:
    """Tokens/s per user and for all users against the batch, through the scenario's own batch, with the memory's
    limit on concurrent sequences."""
    inf = cached_estimate(key).inference
    sc = replica_scenario(scenario_of(key), inf)
    top = max(2, min(1024, max(inf.max_concurrent_sequences, sc.batch_size) * 2))
    batches = sorted({int(b) for b in np.unique(np.geomspace(1, top, 24).astype(int))} | {sc.batch_size})  # through your setting
    pts = decode_curve(sc, batches)
    # one panel on one log axis: both lines are tokens/s (at batch 1 they meet; with more sequences each user is
    # slower and all of them together faster). Two panels over a shared batch axis took twice as long to redraw.
    xs = [p.batch_size for p in pts]
    per_user, all_users = [p.decode_tokens_per_s for p in pts], [p.aggregate_tokens_per_s for p in pts]
    fig = go.Figure()
    fig.add_scatter(x=xs, y=per_user, name="Per user (tokens/s)", mode="lines")
    fig.add_scatter(x=xs, y=all_users, name="All users (tokens/s)", mode="lines")
    low, high = min(per_user + all_users), max(per_user + all_users)
    if inf.max_concurrent_sequences:
        vmarker(fig, inf.max_concurrent_sequences, f"memory limit: {inf.max_concurrent_sequences}", log_x=True, color="#E45756", dash="solid")
    if sc.batch_size != inf.max_concurrent_sequences:  # the slider beside the chart moves this (stop 50's projector review, H1)
        vmarker(fig, sc.batch_size, f"your batch: {sc.batch_size:,}", log_x=True, at_top=False)
    powers = [2**k for k in range(int(np.log2(max(batches))) + 1)]  # batch marks 1, 2, 4, ... (every other past 7)
    fig.update_xaxes(type="log", tickvals=powers if len(powers) <= 7 else powers[::2], title="Concurrent sequences (batch, log scale)")
    fig.update_yaxes(type="log", **number_ticks([low, high]), title="Tokens/s (log scale)")
    fig.update_layout(hovermode="x unified")
    own = scenario_of(key)
    title = "Decode speed by batch size"
    if (own.tensor_parallel, own.pipeline_parallel) != (sc.tensor_parallel, sc.pipeline_parallel):  # said on the chart
        n = sc.tensor_parallel * sc.pipeline_parallel
        title += f", on {n} devices: the sidebar's {own.tensor_parallel * own.pipeline_parallel} do not hold batch {own.batch_size:,}"
    return frozen(layout(fig, title, height=460))


class LoadAtBatch(NamedTuple):
    """The under-load curves read at the sidebar's batch (users sharing one replica): what the metric row's
    one-request figures become with that many users."""

    users: int
    time_to_first_token_p50_s: float
    time_to_first_token_p90_s: float
    tokens_per_s_per_user_p50: float
    tokens_per_s_per_user_p90: float


@shared_cache(max_entries=64)
def _load_points(key: str) -> tuple[list[float], dict[str, list[float]], int, int, int, str]:
    """The under-load curves (core/speed/load.py: a continuous-batching engine with the sidebar engine's scheduler,
    the page's settings where it sets them, and the page's arrival pattern) over the users the charts draw, the
    sidebar's batch among them: (users, figures, the memory's room, the top of the axis, the cap on running
    requests, what sets that cap). One computation for the charts and the metric row's under-load line."""
    inf = cached_estimate(key).inference
    sc = replica_scenario(scenario_of(key), inf)
    room = max(1, inf.max_concurrent_sequences)
    top = max(8, min(2048, room * 2))
    users = np.unique(np.concatenate([np.geomspace(1, top, 40).round(), [float(min(sc.batch_size, top))]]))
    acc = get_accelerator(sc.accelerator)
    sched = scenario_scheduler(sc, inf.prompt_tokens, acc)
    lay = Layout(1, sc.tensor_parallel, sc.pipeline_parallel)
    out = load_curve(sc, acc, lay, users, inf.prompt_tokens, inf.output_tokens, scheduler=sched, max_running=room, arrivals=sc.arrivals)
    cap = min(room, sched.max_num_seqs)
    mark = f"memory holds {room:,}" if room <= sched.max_num_seqs else running_limit_words(sc.serving_engine, cap)
    return [float(u) for u in users], {k: [float(x) for x in v] for k, v in out.items()}, room, top, cap, mark


def load_at_batch(key: str) -> LoadAtBatch | None:
    """The curves at the sidebar's batch (None past the axis: more users than the charts draw)."""
    users, out, _, _, _, _ = _load_points(key)
    batch = scenario_of(key).batch_size
    if batch not in users:
        return None
    i = users.index(float(batch))
    return LoadAtBatch(
        batch,
        out["time_to_first_token_p50_s"][i],
        out["time_to_first_token_p90_s"][i],
        out["tokens_per_s_per_user_p50"][i],
        out["tokens_per_s_per_user_p90"][i],
    )


@shared_cache(max_entries=64)
def load_figures(key: str) -> tuple[FrozenFigure, FrozenFigure]:
    """Time to first token and each user's tokens/s against the number of users sharing one replica, p50 and p90,
    with the memory's limit on running requests (past it users wait for a slot) and the sidebar's batch marked."""
    inf = cached_estimate(key).inference
    sc = scenario_of(key)
    users, out, _, top, cap, mark = _load_points(key)
    what = f"{inf.prompt_tokens:,} prompt + {inf.output_tokens:,} output tokens each"
    steady = sc.arrivals == "steady"  # a benchmark's users all start at once instead (core/speed/load.py)
    figs = []
    for metric, unit, title in (
        ("time_to_first_token", "s", "Time to first token by number of users" if steady else "Time to first token, benchmark users"),
        ("tokens_per_s_per_user", "", "Tokens/s per user by number of users" if steady else "Tokens/s per user, benchmark users"),
    ):
        fig = go.Figure()
        for q, dash in (("p50", "solid"), ("p90", "dash")):
            name = f"{metric}_{q}_s" if unit else f"{metric}_{q}"
            label = {"p50": "median user (p50)", "p90": "slowest 10% (p90)"}[q]
            fig.add_scatter(x=users, y=out[name], name=label, mode="lines", line={"dash": dash})
        if cap < top:  # past it users wait for a slot: the memory's room or the scheduler's max_num_seqs
            vmarker(fig, cap, mark, log_x=True, color="#E45756", dash="solid", side="left")
        if 1 < sc.batch_size <= top and sc.batch_size != cap:  # the metric row's batch, read off here (load_at_batch)
            vmarker(fig, sc.batch_size, f"your batch: {sc.batch_size:,}", log_x=True, at_top=False)
        who = "Concurrent users" if steady else "Users starting together, identical requests"
        fig.update_xaxes(type="log", **number_ticks(list(users)), title=f"{who} ({what}; log scale)")
        if unit:  # seconds on a log axis: from a prefill's tenths of a second to a queue's minutes
            values = [float(v) for q in ("p50", "p90") for v in out[f"{metric}_{q}_s"]]
            fig.update_yaxes(type="log", **number_ticks(values), title="Time to first token (seconds, log scale)")
        else:
            fig.update_yaxes(rangemode="tozero", title="Tokens/s each user sees")
        fig.update_layout(hovermode="x unified")
        figs.append(frozen(layout(fig, title, height=420)))
    return figs[0], figs[1]


SCHEDULER_KEYS = ("mns", "mnbt", "pcache", "arrive")  # the engine scheduler's inputs (app_pages/shared/fields.py)


def scheduler_text(sc: Scenario, prompt_tokens: int) -> str:
    """The scheduler the curves assume, in words: the engine's defaults with the page's settings."""
    s = scenario_scheduler(sc, prompt_tokens, get_accelerator(sc.accelerator))
    chunks = "prompts chunked to fit" if s.chunked_prefill else "whole prompts, no chunking"
    cache = f", {s.prefix_cache_hit_fraction:.0%} of each prompt from the prefix cache" if s.prefix_cache_hit_fraction else ""
    flag = f" ({running_limit_words(sc.serving_engine, s.max_num_seqs)})" if sc.serving_engine in RUNNING_LIMIT_FLAG else ""
    return f"The curves assume at most {s.max_num_seqs:,} running requests{flag} and {s.max_num_batched_tokens:,} tokens per engine step ({chunks}){cache}."


def load_section(key: str) -> None:
    """The engine scheduler's inputs (folded away), then the two under-load charts side by side (stacked on a
    phone)."""
    # open from the start where a link or the reader set one of its inputs (so a refused value is in sight)
    changed = bool(off_default(SCHEDULER_KEYS))
    if (fold := folded("Engine scheduler and how users arrive (what the curves below assume)", "fold_scheduler", expanded=changed)) is not None:
        with fold:
            cols = [*st.columns(2), *st.columns(2)]  # two a row: the labels name the engine's flags, and need the room
            for k, col in zip(SCHEDULER_KEYS, cols, strict=True):
                page_widget(k, col)
            sc = scenario_of(key)
            st.caption(plain(scheduler_text(sc, cached_estimate(key).inference.prompt_tokens)))
    ttft, speed = load_figures(key)
    left, right = st.columns(2)
    with left:
        show(ttft, key="chart_load_ttft")
    with right:
        show(speed, key="chart_load_speed")


def kv_on_sidebars_layout(result: Result) -> bool:
    """Whether the KV chart draws the sidebar's layout: while its devices hold everything but the KV cache. Then, where
    they do not hold the batch, the chart shows why (the KV line above what is left, at your context), and a context
    move only moves its marker. Drawn on the layout that fits, which changes with the context, it was redrawn whole on
    every move across the fit. Where the sidebar's devices cannot hold even that (Llama 3.1 70B in BF16 on one H100),
    the chart draws the layout the speeds are for: one with nothing left at any context said less than the warning."""
    m = result.memory_per_device_bytes
    return m.total - m.kv_cache < result.fit_capacity_bytes


def kv_scenario(sc: Scenario, result: Result) -> Scenario:
    """The layout the KV chart draws (kv_on_sidebars_layout); `result` is the estimate of `sc`."""
    return sc if kv_on_sidebars_layout(result) else replica_scenario(sc, result.inference)


@shared_cache(max_entries=64)
def kv_figure(key: str, unit: str) -> FrozenFigure:
    """The KV cache of the scenario's batch against the context, and the memory one device has left for it, on the
    layout kv_scenario picks."""
    result, units = cached_estimate(key), Units(unit)
    sc = kv_scenario(scenario_of(key), result)
    devices = sc.tensor_parallel * sc.pipeline_parallel
    top_ctx = max(sc.architecture.max_context, sc.seq_len)
    ctx = np.unique(np.geomspace(256, top_ctx, 60).astype(int))
    grid = sweep(sc, sc.batch_size, ctx)
    free = grid["kv_headroom"]  # bytes per device left for KV (core.memory.components.kv_headroom) -> the dashed line
    kf = go.Figure()
    kf.add_scatter(
        x=ctx, y=units.value(grid["kv_cache"]), name=f"KV cache for {sc.batch_size} sequence(s)", mode="lines", line={"color": COMPONENT_COLORS["kv_cache"], "width": 3}
    )
    kf.add_scatter(x=ctx, y=units.value(free), name="Memory left for KV cache", mode="lines", line={"color": CAPACITY_COLOR, "dash": "dash"})
    vmarker(kf, sc.seq_len, "your context", log_x=True)
    y_title = f"{units.name} per device" if devices == 1 else f"{units.name} on each of {devices} devices"
    kf.update_layout(xaxis={"type": "log", "title": "Context per sequence (tokens, log scale)", **log_ticks(list(ctx), CONTEXT_TICKS)}, yaxis_title=y_title)
    return frozen(layout(kf, f"KV cache vs context ({result.kv_cache_bytes_per_token:,} bytes per token)", height=420))


def _offer_row(o: ServingPlan) -> dict:
    return {
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


def _every_offer(opts: tuple[ServingPlan, ...]) -> pd.DataFrame:
    """Every priced instance for a traffic, cheapest first."""
    return pd.DataFrame([_offer_row(o) for o in opts]).sort_values("Monthly (USD)", kind="stable")


@shared_cache(max_entries=64)
def offers_by_accelerator(key: str, traffic_key: str, max_utilisation: float, price_key: str = "", _rows: Rows = None) -> pd.DataFrame:
    """One row per accelerator at its cheapest instance for this traffic, cheapest first, with how many instances
    price it (a few dozen rows: every priced instance, ~750, made the table the slowest thing on the page to update)."""
    every = _every_offer(cached_serving(key, traffic_key, max_utilisation, price_key, _rows)[2])
    counts = every.groupby("Accelerator")["Instance"].transform("size")
    table = every.assign(**{"Instances priced": counts}).drop_duplicates("Accelerator")
    first = ["Accelerator", "Monthly (USD)", "USD / M output tokens", "Provider", "Instance", "Instances priced"]  # the money in view
    return table[first + [c for c in table.columns if c not in first]]


def every_offer_csv(key: str, traffic_key: str, max_utilisation: float, price_key: str = "", _rows: Rows = None) -> str:
    """Every priced instance for this traffic as CSV, cheapest first (the download beside the table)."""
    every = _every_offer(cached_serving(key, traffic_key, max_utilisation, price_key, _rows)[2])
    return every.map(spreadsheet_safe).to_csv(index=False)  # instance names may come from a link's price list
