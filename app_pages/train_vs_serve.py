"""Training vs inference: the one-off bill next to the monthly bill; buy vs rent."""

from typing import Any

import streamlit as st

from app_pages.shared.context import as_mode, page_header, priced, stop_page, training_tokens
from app_pages.shared.plot import show
from app_pages.shared.presenter import presenting
from app_pages.shared.results import cached_estimate, cached_serving
from app_pages.shared.serving_section import api_comparison, traffic_and_targets
from app_pages.shared.text import hours_text, md, metric, plain, usd_text
from app_pages.shared.train_serve_views import bills_figure, cumulative_figure, own_vs_rent_figure
from app_pages.shared.widgets import page_widget
from core.catalog.accelerators import get_accelerator
from core.catalog.engine_hardware import engine_problem
from core.money.blocks import TrainingEstimate
from core.money.buy_rent import buy_vs_rent
from core.money.serving import train_vs_serve

sc, values, units = page_header("Training vs inference", "A one-off training or fine-tuning bill next to the monthly serving bill, and owning vs renting.")
acc = get_accelerator(sc.accelerator)
tokens, tokens_note = training_tokens(sc, values)
train_sc, err, note = as_mode(sc, "training", train_tokens=tokens)
serve_sc, err2, _ = as_mode(sc, "inference")
if train_sc is None:
    st.error(plain(err or ""))
    stop_page()
with st.container():  # one slot whether the note is shown or not: the charts below keep their place
    if note:
        st.caption(note)
PRICES = priced()  # the price list in use: (cache key, rows)
if tokens_note:
    st.caption(tokens_note)


def on_spot(training: TrainingEstimate, spot: bool) -> bool:
    """The run is billed on spot: the page's Price says spot (as the Training and Plan pages bill it) and a spot
    row rents it; else on demand, and the label says which."""
    return spot and training.run_spot_usd is not None


def training_usd(training: TrainingEstimate, spot: bool) -> float | None:
    return training.run_spot_usd if on_spot(training, spot) else training.run_usd


def training_metric(col: Any, training: TrainingEstimate, spot: bool) -> None:
    billed = on_spot(training, spot)
    metric(
        col,
        f"Training run (one-off{', spot' if billed else ''}{', DPO' if train_sc.objective == 'dpo' else ''})",
        usd_text(training_usd(training, spot)),
        help=f"{training.devices} x {acc.name}, {hours_text(training.run_hours or 0.0)} with setup, "
        + ("on spot: " + str(training.spot_price_instance) if billed else "on demand: " + str(training.price_instance))
        + ("; no spot row rents it" if spot and not billed else ""),
    )


TRAINING_LAYOUT = "the training layout's device count"


def bills() -> tuple[int, str]:
    """The training bill next to the serving bill; returns the devices buy vs rent weighs and what they are: a serving
    setup's fleet (the serving bill's replicas), else the training layout's."""
    st.subheader("One-off training bill vs monthly serving bill")
    trained = cached_estimate(train_sc.model_dump_json(), *PRICES)
    training = trained.training
    if trained.stack_problem:  # the Memory and Training pages' one line, where this page prices the same run
        st.warning(md("The training bill is for a setup its stack cannot run as set: {why}.", why=trained.stack_problem), icon=":material/warning:")
    serve, why_not, engine_id, where = serve_sc, err2, sc.serving_engine, " (the sidebar's *Serving engine*)"
    # the presenter view opens on the answer and its charts, the inputs under them (nine inputs filled a 1280 x 720
    # screen before the answer: stop 50's projector review, H4); elsewhere they come after the inputs
    answer_slot = st.container() if presenting(values) else None
    inputs = st.columns(4)
    # the training run on spot or on demand, as the Training and Plan pages bill it (one Price in the link); serving
    # is billed on demand (a fleet that must stay up)
    spot = page_widget("price", inputs[0]) == "spot"
    if sc.mode == "training":  # the sidebar draws no serving engine while training: the page does (a link's engine= kept)
        engine_id = page_widget("engine", inputs[1])
        serve, why_not, _ = as_mode(sc, "inference", fallback=False, serving_engine=engine_id)  # the page's own choice: said, not replaced
        where = " (*Serving engine* above)"
    if serve is None:  # the same setup cannot be served (its engine does not run on this part...): the training bill alone, and why
        if training is not None and training.run_usd is not None:
            training_metric(st.columns(4)[0], training, spot)
        why = (why_not or "").removeprefix("scenario: ")
        refused = engine_problem(engine_id, acc)  # the engine refuses the part: another engine may serve it
        st.warning(md("No serving bill: {why}", why=why) + (where if refused is not None and "; on it: " in refused else "") + ".")
        return (training.devices if training is not None else 1), TRAINING_LAYOUT
    traffic, months = traffic_and_targets("months")
    if traffic is None:
        return 1, TRAINING_LAYOUT
    # the Inference page's bill and the Plan's serve goal: one fleet-sizing rule (core/money/serving.py)
    plan, why, _ = cached_serving(serve.model_dump_json(), traffic.model_dump_json(), 1.0, *PRICES)
    if plan is None or plan.usd_per_month is None:
        if training is not None and training.run_usd is not None:  # the training bill does not depend on serving
            training_metric(st.columns(4)[0], training, spot)
        st.warning(md("No serving bill to compare on {acc}: {why}.", acc=acc.name, why=why or "no price for it in the price list"))
        return (training.devices if training is not None else 1), TRAINING_LAYOUT
    if training is None or training.run_usd is None or training.run_hours is None:  # the serving bill stands: the training one is missing
        metric(st.columns(4)[0], "Serving (per month)", f"${plan.usd_per_month:,.0f}")
        devices = f"the {training.devices:,} devices the run needs" if training is not None else "the run"
        st.warning(md("No training bill to compare on {acc}: no price row rents {devices}.", acc=acc.name, devices=devices))
        if sc.mode == "inference":
            return plan.replicas * plan.devices_per_replica, "the serving fleet's device count (its replicas x devices per replica)"
        return (training.devices if training is not None else 1), TRAINING_LAYOUT
    a = st.columns(2)
    api_in = page_widget("api_in", a[0])
    api_out = page_widget("api_out", a[1])
    cmp, against = api_comparison(serve, plan, traffic, api_in, api_out)
    alternative = None if cmp is None else cmp.per_token_usd_per_month
    run_usd = training_usd(training, spot)
    assert run_usd is not None  # run_usd is not None above, and a spot bill only where there is one
    be = train_vs_serve(run_usd, plan.usd_per_month, alternative, months=months)

    with answer_slot if answer_slot is not None else st.container():
        the_answer(training, plan, run_usd, spot, be, alternative, against, months)
    if alternative is None:
        st.caption("Type per-token API prices above to see when training and hosting your own model beats paying per token.")
    else:
        st.caption(md("Per-token prices: {what}.", what=against))
    if sc.mode == "inference":  # a serving setup is bought or rented as its fleet
        return plan.replicas * plan.devices_per_replica, "the serving fleet's device count (its replicas x devices per replica)"
    return training.devices, TRAINING_LAYOUT


def the_answer(training: TrainingEstimate, plan: Any, run_usd: float, spot: bool, be: Any, alternative: float | None, against: str, months: int) -> None:
    """The two bills, their ratio and the break-even, the sentence, and the two charts."""
    m = st.columns(4)
    training_metric(m[0], training, spot)
    metric(
        m[1],
        "Serving (per month)",
        f"${plan.usd_per_month:,.0f}",
        help=f"{plan.replicas} replica(s) of {plan.batch_size:,} concurrent requests on {plan.instances} x {plan.provider} {plan.instance_type}, on demand",
    )
    ratio = be.months_of_serving_per_one_off  # not the horizon (`months`, the bars' span)
    # two significant figures below 1 (a $30 fine-tune against $1,883 a month is 0.016, not "0.0")
    metric(m[2], "Training = months of serving", f"{ratio:,.1f}" if ratio >= 1 or ratio == 0 else f"{ratio:.2g}")
    metric(
        m[3],
        "Break-even vs per-token API",
        "—" if alternative is None else "never" if be.break_even_month is None else f"month {be.break_even_month}",
        help="no per-token price to compare with: type one above"
        if alternative is None
        else f"when owning the model beats paying per token: {against}"
        + ("; the API costs less every month than serving it yourself" if be.break_even_month is None else ""),
    )

    st.markdown(answer(run_usd, plan.usd_per_month, alternative, be.break_even_month, months))

    left, right = st.columns([2, 1])
    with left:
        show(cumulative_figure(tuple(be.cumulative_usd), tuple(be.cumulative_alternative_usd or ()), be.break_even_month), key="chart_be")
    with right:
        show(bills_figure(run_usd, plan.usd_per_month, months), key="chart_bills")


def answer(training_usd: float, serving_usd_per_month: float, api_usd_per_month: float | None, break_even_month: int | None, months: int) -> str:
    """The page's answer in one sentence: the one-off training bill, serving it yourself a month, and the per-token
    API a month, with which wins over the horizon."""
    said = md("**Training once: {t}. Serving it yourself: {s} a month.**", t=usd_text(training_usd), s=usd_text(serving_usd_per_month))
    if api_usd_per_month is None:
        return said
    api = md(" **The per-token API: {a} a month**", a=usd_text(api_usd_per_month))
    if break_even_month is None:
        share = api_usd_per_month / serving_usd_per_month if serving_usd_per_month > 0 else 0.0
        return said + api + md(": it costs less every month ({p} of serving it yourself).", p=f"{share:.0%}" if share >= 0.01 else "under 1%")
    within = "within" if break_even_month <= months else "after"
    return said + api + md(": owning the model pays back in month {m}, {w} the {h}-month horizon.", m=break_even_month, w=within, h=months)


training_devices, devices_basis = bills()
st.subheader(md("Buy vs rent: {acc}", acc=acc.name))
b = st.columns(5)
kwh = page_widget("kwh", b[0])
busy = page_widget("busy", b[1])
pue = page_widget("pue", b[2])
buy_usd = page_widget("buy_usd", b[3])
devices = max(1, training_devices)
metric(b[4], "Devices", f"{devices}", help=devices_basis)
try:
    bvr = buy_vs_rent(acc.id, usd_per_kwh=kwh, utilisation=busy / 100, devices=devices, purchase_usd_per_device=buy_usd or None, pue=pue, rows=PRICES[1])
except ValueError as exc:
    st.info(md("No buy-vs-rent answer for {acc} yet: {why}. Type a purchase price per device above.", acc=acc.name, why=str(exc)), icon=":material/info:")
    bvr = None
if bvr is not None:
    beyond_a_year = bvr.break_even_utilisation is not None and bvr.break_even_utilisation > 1
    r = st.columns(4)
    metric(r[0], "Own: per year", f"${bvr.own_usd_per_year:,.0f}", help=f"purchase ${bvr.purchase_usd:,.0f} over {bvr.amortisation_years:g} years + power")
    metric(r[1], "Rent: per year", f"${bvr.rent_usd_per_year:,.0f}", help=f"at {busy:g}% utilisation")
    metric(
        r[2],
        "Break-even utilisation",
        "never" if beyond_a_year or bvr.break_even_utilisation is None else f"{bvr.break_even_utilisation:.0%}",
        help="above this share of hours in use, owning is cheaper"
        + (f" (here it would take {bvr.break_even_utilisation:.0%} of the year's hours)" if beyond_a_year else ""),
    )
    past_life = bvr.payback_months is not None and bvr.payback_months > 12 * bvr.amortisation_years
    metric(
        r[3],
        "Pays for itself after",
        "never" if bvr.payback_months is None else f"{bvr.payback_months:,.0f} months",
        # beside "Break-even utilisation: never", a payback past the purchase's life says so in sight (stop 50's
        # projector review, M10), not only in the tooltip
        **({"delta": f"past its {bvr.amortisation_years:g}-year life", "delta_color": "gray", "delta_arrow": "off"} if past_life else {}),
        help="the purchase / what each month of renting at this utilisation would cost beyond the electricity"
        + (
            f" (longer than the {bvr.amortisation_years:g} years the purchase is spread over: owning never costs less per year)"
            if bvr.payback_months is not None and bvr.payback_months > 12 * bvr.amortisation_years
            else ""
        ),
    )
    st.caption(md("Bought: {p}. Rented: {r}. {c} is cheaper at {u}% utilisation.", p=bvr.purchase_basis, r=bvr.rent_basis, c=bvr.cheaper.capitalize(), u=f"{busy:g}"))
if bvr is not None:
    us = [u / 100 for u in range(5, 101, 5)]
    own = [bvr.own_usd_per_year_at(u) for u in us]
    rent = [bvr.rent_usd_per_year_at(u) for u in us]
    show(own_vs_rent_figure(tuple(u * 100 for u in us), tuple(own), tuple(rent)), key="chart_bvr")
    st.caption(
        f"Owning: the purchase price spread over {bvr.amortisation_years:g} years plus electricity at the rated power while busy, "
        f"times the PUE ({pue:g}: cooling and power delivery). Renting: cloud device-hours, paid only while busy. "
        "Purchase prices: data/purchase_prices.csv (dated, sourced); idle power, space, staff and resale are left out."
    )
