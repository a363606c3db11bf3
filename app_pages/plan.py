"""Plan: what to run, on what, for how much. A goal in, the cheapest sensible plan out, with the fastest plan, the
time-vs-cost frontier, per-token APIs, memory by strategy and the quality trade-offs."""

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from app_pages.shared.cache import shared_cache
from app_pages.shared.context import page_header, priced, stop_page
from app_pages.shared.launch_section import launch_section
from app_pages.shared.planning import PLAN_COLUMN_HELP, faster_for_users, frontier_figure, goal_dict, headline, plan_table, strategies_figure
from app_pages.shared.plot import show
from app_pages.shared.scenario_io import scenario_values
from app_pages.shared.state import off_default, request_values
from app_pages.shared.style import Units, frozen
from app_pages.shared.tables import show_table
from app_pages.shared.text import hours_text, md, metric, plain, usd_text
from app_pages.shared.widgets import page_widget
from core.catalog.accelerators import get_accelerator
from core.catalog.quality import caveats
from core.cli import describe_validation_error
from core.memory.engines import ENGINES
from core.money.picks import FAST_ENOUGH, LONGER_RUN_FACTOR
from core.plan import Goal, PlanResult, plan
from core.plan.goal import CHINCHILLA_TOKENS_PER_PARAM, compute_optimal_tokens, fine_tuning_sized
from core.plan.serve import shipped_format
from core.plan.train import HORIZON_HOURS
from core.scenario import Scenario

sc, values, units = page_header(
    "Plan", "Say what you want to do; the planner searches methods, formats, layouts, accelerators and instances for the cheapest plan that works."
)

# Chart first, in the default and the presenter view alike (issue #29: the main chart above the fold at 1280 x 720
# and 1024 x 768): the answer in one short line, then the time-vs-cost chart with the goal and its three main inputs
# beside it (the rest of the goal folded under them, open when any is set), then the plan in full and how to run it.
# The presenter view differs only in type size and the folded sidebar (app_pages/shared/presenter.py). On a phone the
# columns stack: the chart, then the inputs that move it.
answer_slot = st.container()
chart_slot, side = st.columns([2, 1], gap="medium")
with side:
    goal_kind = page_widget("goal")
    # the folded inputs named in one line at 1280 x 720 (the column is ~230 px of text there: 39 characters fit)
    main, rest, more = (
        (("rpd", "tin", "tout"), ("peak", "ttft", "tps", "budget", "price", "cloud", "pep"), "Peak, targets, budget, price, cloud, EP")
        if goal_kind == "serve"
        else (("ptok", "epochs", "deadline"), ("pseq", "budget", "price", "cloud", "pbf16"), "Length, budget, price, cloud, BF16")
    )
    for key in main:
        page_widget(key)
    with st.expander(more, expanded=bool(off_default(rest))):
        for key in rest:
            page_widget(key)
values = {
    **values,
    **{
        k: st.session_state[k]
        for k in ("goal", "rpd", "tin", "tout", "peak", "ttft", "tps", "ptok", "epochs", "pseq", "deadline", "budget", "price", "cloud", "pbf16", "pep")
        if k in st.session_state
    },
}
try:
    goal = Goal.model_validate(goal_dict(values, sc.model))
except ValidationError as exc:
    answer_slot.warning(plain("This goal is not valid: " + describe_validation_error(exc, what="goal")), icon=":material/warning:")
    stop_page()
KEY = goal.model_dump_json()
PRICES = priced()  # the price list in use: (cache key, rows)


@shared_cache(max_entries=64, show_spinner="Searching plans...")
def _plan(key: str, price_key: str = "", _rows=None) -> PlanResult:
    return plan(Goal.model_validate_json(key), _rows)


@shared_cache(max_entries=64)
def _frontier(key: str, price_key: str = "", _rows=None):
    g = Goal.model_validate_json(key)
    r = _plan(key, price_key, _rows)
    api = r.api_quotes[0] if r.api_quotes else None
    return frozen(frontier_figure(r.plans, g.goal == "serve", g.deadline_hours, g.budget_usd, r.cheapest, r.fastest, api))


result = _plan(KEY, *PRICES)
serving = goal.goal == "serve"


def pretrain_tokens_note(g: Goal, arch) -> tuple[str, float] | None:
    """Where a pretraining goal's tokens are a tenth or less of the compute-optimal count: what to say, and that count
    in millions (the Dataset field's unit)."""
    optimal = compute_optimal_tokens(arch.total_params)
    tokens = g.train_tokens
    if not fine_tuning_sized(tokens, arch.total_params):
        return None
    said = (
        f"{tokens / 1e6:,.0f} million tokens is a fine-tuning-sized dataset: pretraining {arch.name} compute-optimally takes "
        f"about {optimal / 1e9:,.0f} billion ({CHINCHILLA_TOKENS_PER_PARAM:g} tokens a parameter, Hoffmann et al. 2022); "
        "Llama 3's models were pretrained on 15 trillion."
    )
    return said, float(f"{optimal / 1e6:.3g}")  # three significant figures: 161,000 million for an 8B model


def load(plan_index: int) -> None:
    chosen = result.plans[plan_index]
    request_values(scenario_values(Scenario.model_validate(chosen.scenario)))
    st.switch_page("app_pages/memory.py")


if result.cheapest is None:
    answer_slot.error(plain(result.verdict or "No plan fits."))
    stop_page()

with answer_slot:  # the answer in one line above the chart; in full, with how to run it, below it
    regardless = "" if result.cheapest.within_bounds else " (none meets the deadline and budget: the cheapest regardless)"
    short = plain(headline(result.cheapest, goal.pricing, short=True))
    if (at_market := result.cheapest_at_market) is not None:  # a manager quotes this line: the caveat goes in it
        month = " a month" if at_market.usd is None else ""
        short += md(" Its price is one listing far below its market; at a market price: {usd}{month}.", usd=usd_text(at_market.cost), month=month)
    st.markdown(md("#### Cheapest plan for {name}{regardless} — ", name=sc.architecture.name, regardless=regardless) + short)
    if goal.goal == "pretrain" and (optimal := pretrain_tokens_note(goal, sc.architecture)) is not None:
        note, million = optimal
        st.caption(plain(note))
        if st.button(f"Plan it at {million:,.0f} million tokens", key="ptok_optimal"):
            request_values({"ptok": float(million)})
            st.rerun()

with chart_slot:
    picked = show(_frontier(KEY, *PRICES), key="chart_frontier", clicks=True)
    st.caption(
        f"Click a point to load that plan into the sidebar and every page (hover for its accelerator and instance). Colour is the "
        f"{'weights format' if serving else 'method'}; outlined points are on the frontier. 'fastest' is the planner's: the "
        f"cheapest plan within {FAST_ENOUGH - 1:.0%} of the shortest time. {result.considered:,} priced plans weighed; "
        f"{len(result.plans)} shown (the frontier, the cheapest per accelerator and method)."
        + (" The dashed line is the same traffic through the cheapest per-token API (table below)." if serving and result.api_quotes else "")
    )
    if serving:
        from_sidebar = md("Model: **{name}**, served with **{engine}** (from the sidebar).", name=sc.architecture.name, engine=ENGINES[goal.serving_engine].label)
    else:
        from_sidebar = md("Model: **{name}** (from the sidebar).", name=sc.architecture.name)
        if goal.goal == "pretrain" and sc.mode == "training" and sc.objective == "dpo":  # said, not dropped without a word
            from_sidebar += " Pretraining learns from next tokens: the sidebar's DPO objective applies to a fine-tune goal."
        elif goal.objective == "dpo":
            from_sidebar += " Objective: preference tuning (DPO, from the sidebar)."
    st.caption(from_sidebar + " The plan's other settings are the planner's own; load a plan to see it on every page.")
if picked:
    load(int(picked[0]))

if serving:
    c = result.cheapest
    m = st.columns(4)
    metric(m[0], "Monthly bill", f"${c.usd_per_month:,.0f}", help="whole instances, 730 hours a month")
    metric(m[1], "USD / M tokens (in + out)", usd_text(c.usd_per_million_tokens), help="the bill / the month's tokens at this traffic, idle capacity included")
    metric(m[2], "USD / M output tokens", usd_text(c.usd_per_million_output_tokens), help="the same bill over output tokens only")
    metric(m[3], "Average load of the fleet", f"{100 * c.utilisation:.0f}%", help=f"{c.data_parallel} replica(s), batch up to {c.micro_batch}")

with st.container(border=True):
    st.markdown("**Cheapest plan that works**")
    st.markdown("### " + plain(headline(result.cheapest, goal.pricing)))
    for note in result.cheapest.notes:
        st.caption(plain(note))
    if not result.cheapest.within_bounds:
        st.warning("No plan meets the deadline and budget: this is the cheapest one regardless.", icon=":material/warning:")
    if (market := result.cheapest_at_market) is not None:
        st.markdown(
            md(
                "**Its price is {note}**: one listing or a promotion, which may be gone when you rent. **At a market price:** {plan}",
                note=result.cheapest.price_note or "far below the market",
                plan=headline(market, goal.pricing),
            )
        )
    if (longer := result.cheaper_if_longer) is not None and longer.usd is not None and longer.hours is not None:
        limit = f"the {hours_text(goal.deadline_hours)} deadline" if goal.deadline_hours else f"{HORIZON_HOURS / 24:.0f} days (no deadline set)"
        st.caption(
            md(
                "Waiting longer would save {save}: {plan} It runs past {limit} (the planner offers waits of up to {factor} "
                "times that); set a deadline of {hours} to plan on it.",
                save=f"${result.cheapest.cost - longer.usd:,.0f}",
                plan=headline(longer, goal.pricing),
                limit=limit,
                factor=f"{LONGER_RUN_FACTOR:g}",
                hours=hours_text(longer.hours),
            )
        )
    fastest = faster_for_users(result.plans, result.cheapest) if serving else result.fastest
    if fastest is not None and fastest is not result.cheapest and fastest.cost > result.cheapest.cost:
        st.markdown(("**Faster for each user, for at most twice the bill:** " if serving else "**Fastest:** ") + plain(headline(fastest, goal.pricing)))
    b1, b2, b3, _ = st.columns([1, 1, 1, 1])
    if b1.button("Load the cheapest plan", icon=":material/download:", width="stretch"):
        load(result.plans.index(result.cheapest))
    if fastest is not None and fastest is not result.cheapest and b2.button("Load the faster plan" if serving else "Load the fastest plan", width="stretch"):
        load(result.plans.index(fastest))
    if market is not None and b3.button("Load the market-price plan", width="stretch"):
        load(result.plans.index(market))
    shown = fastest if fastest is not None and fastest.cost > result.cheapest.cost else None
    launch_section(result.cheapest, shown, "faster" if serving else "fastest")

with st.expander("All shown plans", expanded=False):
    table = pd.DataFrame(plan_table(result.plans, serving))
    helps = {c: st.column_config.Column(help=PLAN_COLUMN_HELP[c]) for c in table.columns if c in PLAN_COLUMN_HELP}
    show_table(table, hide_index=True, width="stretch", column_config={"Accelerator": st.column_config.TextColumn(pinned=True), **helps})

if serving and result.api_quotes:
    st.subheader("The same traffic through a per-token API")
    same = result.api_quotes[0].same_model
    st.caption(
        md(
            "{what}, for {rpd} requests a day; prices from the dated API catalog (data/api_prices.csv).",
            what="The same open model" if same else "Comparable models (about the same size)",
            rpd=f"{goal.requests_per_day:,.0f}",
        )
    )
    show_table(
        pd.DataFrame(
            [
                {
                    "Provider": q.provider,
                    "Model": q.model,
                    "USD per month": round(q.usd_per_month, 2),
                    "Input USD per M": q.input_usd_per_million,
                    "Output USD per M": q.output_usd_per_million,
                    "As of": q.as_of,
                }
                for q in result.api_quotes
            ]
        ),
        hide_index=True,
        width="stretch",
    )

if not serving:
    st.subheader("Strategies side by side")
    acc = get_accelerator(sc.accelerator)

    @shared_cache(max_entries=32)
    def _strategies(key: str, unit: str, device: str):
        return frozen(strategies_figure(Scenario.model_validate_json(key), Units(unit), device))

    show(_strategies(sc.replace(seq_len=goal.seq_len, output_tokens=None).model_dump_json(), units.name, acc.name), key="chart_strategies")
    st.caption(
        md(
            "For the sidebar's accelerator (**{acc}**), {one} of {n} tokens per device; each bar says how many devices it is on. "
            "The full fine-tunes train in mixed BF16, LoRA and QLoRA in pure BF16 (the optimizer, LoRA rank and targets are the sidebar's), "
            "with gradient checkpointing but on the first bar: the Memory page shows the sidebar's own settings, which may differ.",
            acc=acc.name,
            n=f"{goal.seq_len:,}",
            one="one DPO pair (a chosen and a rejected sequence)" if sc.mode == "training" and sc.objective == "dpo" else "one sequence",
        )
    )

# a model served in the format its makers ship (gpt-oss's MXFP4 experts, trained so) trades nothing for the format
shipped = result.cheapest.weights_format == shipped_format(goal.model)
notes = [] if shipped else caveats(result.cheapest.weights_format, None, None)
if notes:
    st.subheader("What the cheapest plan trades for its price")
    for n in notes:
        st.markdown("- " + plain(n.caveat) + " *(" + plain(n.source) + ")*")

with st.expander("How the planner searches"):
    for a in result.assumptions:
        st.markdown("- " + plain(a))
    if result.skipped:
        st.markdown("Left out: " + plain("; ".join(result.skipped[:12])))
