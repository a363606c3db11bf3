"""The Plan sentence names what the goal does: a pretraining run trains all weights from scratch, so its sentence,
the chart's legend and the table say "Pretrain", not "Full fine-tune" (the plan carries its goal: Plan.goal)."""

from __future__ import annotations

from app_pages.shared.planning import frontier_figure, headline, plan_table
from core.plan import Goal, plan


def test_a_pretraining_plan_says_pretrain():
    r = plan(Goal(goal="pretrain", model="llama-3.1-8b", tokens=2e11, accelerators=("h100-sxm",), deadline_hours=72))
    c = r.cheapest
    assert c is not None and c.method == "full" and c.goal == "pretrain"
    sentence = headline(c, "on-demand")
    assert sentence.startswith("Pretrain on ") and "fine-tune" not in sentence, sentence
    # the plan is an AWS Capacity Block (data/reservations.csv): the sentence says it is reserved and needs a reservation
    assert "reserved" in sentence and "needs a reservation: EC2 Capacity Block, minimum 1 day" in sentence, sentence
    legend = {t.name for t in frontier_figure(r.plans, serving=False, deadline=72, budget=None).data if t.showlegend is not False}
    assert "Full fine-tune" not in legend and "Pretrain" in legend, legend
    assert {row["Method"].removesuffix(" + GC") for row in plan_table(r.plans, serving=False)} <= {"Pretrain"}


def test_a_full_fine_tune_still_says_full_fine_tune():
    r = plan(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=2e7, accelerators=("h100-sxm",), methods=("full",)))
    c = r.cheapest
    assert c is not None and c.goal == "fine-tune"
    assert headline(c, "on-demand").startswith("Full fine-tune"), headline(c, "on-demand")


def test_the_plan_table_marks_prices_far_below_the_market_and_explains_its_terse_columns():
    """Every row priced far below its part's market says so in the table (the 70B fine-tune's V100 listing does), no
    other row does, and each column the hover help explains is a column the table has, for training and serving."""
    from app_pages.shared.planning import PLAN_COLUMN_HELP

    r = plan(Goal(goal="fine-tune", model="llama-3.1-70b", tokens=5e7))
    rows = plan_table(r.plans, serving=False)
    assert [row["Against the market"] == "far below" for row in rows] == [p.price_note is not None for p in r.plans]
    assert rows[0]["Against the market"] == "far below" and any(row["Against the market"] == "" for row in rows)
    served = plan_table(plan(Goal(goal="serve", model="llama-3.1-8b", requests_per_day=2000)).plans, serving=True)
    columns = set(rows[0]) | set(served[0])
    assert set(PLAN_COLUMN_HELP) <= columns, set(PLAN_COLUMN_HELP) - columns
    assert {"Layout", "Replicas x TP", "Scaling efficiency"} <= set(PLAN_COLUMN_HELP)


def test_the_serving_chart_draws_the_per_token_api_at_its_monthly_bill():
    """The manager's other option on the chart: a dashed line at the cheapest API quote's monthly bill for the same
    traffic, labelled with its provider and bill, its label placed on the log axis at the line (log10 of the bill);
    training charts have none."""
    import math

    from app_pages.shared.text import usd_text

    r = plan(Goal(goal="serve", model="llama-3.1-70b", requests_per_day=200_000))
    api = r.api_quotes[0]
    assert api.usd_per_month == min(q.usd_per_month for q in r.api_quotes) > 0
    fig = frontier_figure(r.plans, serving=True, deadline=None, budget=None, cheapest=r.cheapest, fastest=r.fastest, api=api)
    lines = [s for s in fig.layout.shapes if s.y0 == s.y1 == api.usd_per_month]
    assert len(lines) == 1 and lines[0].line.dash == "dash"
    label = next(a for a in fig.layout.annotations if "per-token API" in a.text)
    assert label.text == f"per-token API ({api.provider}): {usd_text(api.usd_per_month)} a month"
    assert label.y == math.log10(api.usd_per_month)
    training = plan(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=2e7))
    tf = frontier_figure(training.plans, serving=False, deadline=None, budget=None, api=api)
    assert not any("per-token API" in (a.text or "") for a in tf.layout.annotations)
