"""The Inference page's "What serving your traffic costs" section: the bill for a day's traffic (replicas, monthly
cost, utilisation, USD per million output tokens), the per-token API comparison and every priced accelerator.

It is the page's lower section (app_pages/shared/lower.py): drawn by a fragment of its own below the page, rerun
when what it reads changes. It reads the serving scenario without its context length: a request's context is the
traffic's tokens in + out (core/money/serving.py, `_replica`), so moving the sidebar's context slider leaves every
number here as it was and reruns only the page above (tests/app/test_lower_section.py)."""

from __future__ import annotations

import streamlit as st

from app_pages.shared.context import PageContext, as_mode
from app_pages.shared.inference_views import every_offer_csv, offers_by_accelerator
from app_pages.shared.results import cached_serving
from app_pages.shared.tables import show_table
from app_pages.shared.text import md, metric
from app_pages.shared.widgets import page_widget, traffic_inputs
from core.catalog.accelerators import get_accelerator
from core.money.serving import dedicated_vs_per_token
from core.scenario import Scenario

IGNORED = {"seq_len"}  # scenario fields the serving bill does not read (the traffic sets each request's context)


def serving_scenario(ctx: PageContext) -> Scenario | None:
    """The sidebar's scenario, served (the page above says why when there is none)."""
    sc = ctx.scenario
    if sc is not None and sc.mode != "inference":
        sc = as_mode(sc, "inference")[0]
    return sc


def reads(ctx: PageContext) -> str:
    """Everything the section draws from besides its own inputs: the served scenario but its context length, and
    the price list."""
    sc = serving_scenario(ctx)
    return "no scenario" if sc is None else f"{sc.model_dump_json(exclude=IGNORED)}|{ctx.prices.key}"


def draw(ctx: PageContext) -> None:
    sc = serving_scenario(ctx)
    if sc is None:
        return
    acc = get_accelerator(sc.accelerator)
    st.subheader("What serving your traffic costs")
    traffic, util = traffic_inputs("util")  # hop: the traffic widgets -> Traffic (validated), utilisation in %
    if traffic is None:
        return
    # hop: Scenario, Traffic -> JSON cache keys; % -> fraction; the price list -> (its key, its rows)
    args = (sc.model_dump_json(), traffic.model_dump_json(), util / 100, *ctx.prices.args)  # what the bill, table and CSV are for
    plan, why, opts = cached_serving(*args)
    if plan is None:
        st.info(md("No serving bill on {acc}: {why}. The table below lists the accelerators that can be priced.", acc=acc.name, why=why or ""), icon=":material/info:")
    else:
        m = st.columns(4)
        metric(m[0], "Replicas needed", f"{plan.replicas:,}", help=f"{plan.devices_per_replica} device(s) each, batch {plan.batch_size}")
        metric(
            m[1],
            "Monthly cost",
            "—" if plan.usd_per_month is None else f"${plan.usd_per_month:,.0f}",
            help=f"{plan.provider} {plan.instance_type}, {plan.instances} instance(s), 730 h per month",
        )
        metric(m[2], "Utilisation", f"{plan.utilisation:.0%}", help="average load on the fleet for this traffic")
        metric(
            m[3],
            f"USD / M output tokens at {plan.utilisation:.0%} load",
            "—" if plan.usd_per_million_output_tokens is None else f"${plan.usd_per_million_output_tokens:,.2f}",  # hop: float -> text
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
        table = offers_by_accelerator(*args)
        st.markdown("**Every priced accelerator for this traffic, at its cheapest instance (cheapest first)**")
        show_table(
            table,
            hide_index=True,
            width="stretch",
            height=360,
            column_config={"Accelerator": st.column_config.TextColumn(pinned=True), "USD / M output tokens": st.column_config.NumberColumn(format="%.3f")},
        )
        st.download_button(
            f"Every priced instance ({len(opts):,} rows, CSV)",
            data=lambda: every_offer_csv(*args),
            file_name="llm-gpu-planner-serving-offers.csv",
            mime="text/csv",
            icon=":material/download:",
            on_click="ignore",
        )
