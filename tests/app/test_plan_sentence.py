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
