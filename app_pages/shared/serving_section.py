"""The Inference page's "What serving your traffic costs" section: the bill for a day's traffic (replicas, monthly
cost, utilisation, USD per million output tokens), the per-token API comparison and every priced accelerator.

It is the page's lower section (app_pages/shared/lower.py): drawn by a fragment of its own below the page, rerun
when what it reads changes. It reads the serving scenario without its context length or batch: a request's context is
the traffic's tokens in + out, and a replica's batch comes from the traffic's latency targets (core/money/serving.py),
so moving the sidebar's context or batch slider leaves every number here as it was and reruns only the page above
(tests/app/test_lower_section.py)."""

from __future__ import annotations

import math

import streamlit as st

from app_pages.shared.context import PageContext, as_mode
from app_pages.shared.inference_views import every_offer_csv, offers_by_accelerator
from app_pages.shared.prices import price_list_later
from app_pages.shared.results import cached_serving
from app_pages.shared.tables import show_table
from app_pages.shared.text import md, metric, usd_text
from app_pages.shared.widgets import page_widget, traffic_inputs
from core.catalog.accelerators import get_accelerator
from core.catalog.api_prices import nearest_api_price
from core.money.serving import PerTokenComparison, ServingPlan, Traffic, dedicated_vs_per_token
from core.scenario import Scenario

IGNORED = {"seq_len", "batch_size"}  # what the serving bill does not read: the traffic sets each request's context and the batch


def serving_scenario(ctx: PageContext) -> Scenario | None:
    """The sidebar's scenario, served (the page above says why when there is none)."""
    sc = ctx.scenario
    if sc is not None and sc.mode != "inference":
        sc = as_mode(sc, "inference")[0]
    return sc


def reads(ctx: PageContext) -> str:
    """Everything the section draws from besides its own inputs: the served scenario but its context length and
    batch, and the price list."""
    sc = serving_scenario(ctx)
    return "no scenario" if sc is None else f"{sc.model_dump_json(exclude=IGNORED)}|{ctx.prices.key}"


def traffic_and_targets(last_key: str) -> tuple[Traffic | None, object]:
    """The traffic (requests/day, tokens in and out, and `last_key` in the first row: the busiest hour or another
    input) with the busiest hour and the latency targets: the Plan page's serve-goal inputs (same keys), so a page's bill and the Plan's
    are for the same fleet (core/money/serving.py)."""
    traffic, extra = traffic_inputs(last_key)
    cols = iter(st.columns(4))
    targets = {"peak_to_average": extra if last_key == "peak" else page_widget("peak", next(cols))}
    targets |= {"ttft_s": page_widget("ttft", next(cols)), "tokens_per_s_per_user": page_widget("tps", next(cols))}
    return (None if traffic is None else Traffic.model_validate(traffic.model_dump() | targets)), extra


def traffic_of_values(values: dict) -> Traffic | None:
    """The traffic and targets the serving inputs hold (for a page that does not draw them: Compare); None when
    they do not make a valid traffic (the page that draws them says why)."""
    try:
        return Traffic(
            requests_per_day=values["rpd"],
            input_tokens_per_request=values["tin"],
            output_tokens_per_request=values["tout"],
            peak_to_average=values["peak"],
            ttft_s=values["ttft"],
            tokens_per_s_per_user=values["tps"],
        )
    except (KeyError, ValueError):
        return None


def monthly_serving_usd(sc: Scenario, traffic: Traffic | None, prices: tuple) -> float | None:
    """The serving bill of a scenario for a traffic (core/money/serving.py, the bill every page shows), or None."""
    served = sc if sc.mode == "inference" else as_mode(sc, "inference")[0]
    if served is None or traffic is None:
        return None
    plan = cached_serving(served.model_dump_json(), traffic.model_dump_json(), 1.0, *prices)[0]
    return None if plan is None else plan.usd_per_month


def api_comparison(sc: Scenario, plan: ServingPlan, traffic: Traffic, api_in: float, api_out: float) -> tuple[PerTokenComparison | None, str]:
    """The fleet against a per-token API: the prices typed, or where none is typed (both 0) the catalog's cheapest
    offer of the same or the nearest model (data/api_prices.csv); (comparison or None, what it is against)."""
    if api_in or api_out:
        return dedicated_vs_per_token(plan, traffic, api_in, api_out), f"your prices (${api_in:g} in, ${api_out:g} out per million tokens)"
    tin, tout = traffic.input_tokens_per_request, traffic.output_tokens_per_request
    quote = nearest_api_price(sc.model if isinstance(sc.model, str) else None, sc.architecture.total_params, tin, tout)
    if quote is None:
        return None, ""
    row, same = quote
    what = f"{row.provider}'s {row.model} (${row.input_usd_per_million:g} in, ${row.output_usd_per_million:g} out per million tokens, as of {row.as_of.isoformat()}"
    what += ")" if same else ": the nearest model in size with a price in data/api_prices.csv)"
    return dedicated_vs_per_token(plan, traffic, row.input_usd_per_million, row.output_usd_per_million), what


def draw(ctx: PageContext) -> None:
    sc = serving_scenario(ctx)
    if sc is None:
        return
    acc = get_accelerator(sc.accelerator)
    st.subheader("What serving your traffic costs")
    traffic, _ = traffic_and_targets("peak")  # hop: the traffic and target widgets -> Traffic (validated)
    if traffic is None:
        return
    # one fleet-sizing rule (core/money/serving.py): replicas for the busiest hour, batch from the latency targets
    # hop: Scenario, Traffic -> JSON cache keys; the price list -> (its key, its rows)
    args = (sc.model_dump_json(), traffic.model_dump_json(), 1.0, *ctx.prices.args)  # what the bill, table and CSV are for
    plan, why, opts = cached_serving(*args)
    if plan is None:
        st.info(md("No serving bill on {acc}: {why}. The table below lists the accelerators that can be priced.", acc=acc.name, why=why or ""), icon=":material/info:")
    else:
        m = st.columns(4)
        metric(
            m[0],
            "Replicas needed",
            f"{plan.replicas:,}",
            help=f"{plan.devices_per_replica} device(s) each, {plan.batch_size:,} concurrent requests each in the busiest hour "
            f"(at most {plan.max_batch_meeting_targets:,} within the latency targets; {plan.max_batch_that_fits:,} fit)",
        )
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
            "—" if plan.usd_per_million_output_tokens is None else usd_text(plan.usd_per_million_output_tokens),  # hop: float -> text
            help=f"the monthly bill over this traffic's output tokens: batch {plan.batch_size}, {plan.utilisation:.0%} average utilisation, idle capacity included",
        )

    a = st.columns(2)
    api_in = page_widget("api_in", a[0])
    api_out = page_widget("api_out", a[1])
    cmp, against = api_comparison(sc, plan, traffic, api_in, api_out) if plan else (None, "")
    if cmp is not None:
        even = cmp.break_even_requests_per_day
        st.markdown(
            f"**Dedicated vs per-token API:** dedicated \\${cmp.dedicated_usd_per_month:,.0f}/month vs per-token "
            f"\\${cmp.per_token_usd_per_month:,.0f}/month — **{cmp.cheaper}** is cheaper"
            + (f"; dedicated breaks even above {even:,.0f} requests/day." if math.isfinite(even) else "; dedicated never breaks even (the API is free).")
        )
        st.caption(md("Per-token prices: {what}.", what=against))

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
        head, later = args[:4], price_list_later(ctx.values)
        st.download_button(
            f"Every priced instance ({len(opts):,} rows, CSV)",
            data=lambda: every_offer_csv(*head, later().rows),  # built on click; holds no parsed price rows
            file_name="llm-gpu-planner-serving-offers.csv",
            mime="text/csv",
            icon=":material/download:",
            on_click="ignore",
        )
