"""Preference tuning (DPO) on the pages: the sidebar's Objective reaches the Memory page's figure, the Plan page's
plans and launch command, and the link; a stack without a DPO trainer says so in one line (core/memory/objective.py)."""

from app_pages.shared.style import Units
from core.estimate import estimate
from core.plan import plan
from core.plan.goal import Goal
from core.scenario import Scenario

from .conftest import metric, no_exception, open_link

LINK = {"model": "llama-3.1-8b", "mode": "training", "method": "lora", "seq": "2048", "obj": "dpo"}


def test_the_memory_page_counts_two_sequences_a_pair_and_says_so():
    at = open_link("memory", LINK)
    no_exception(at)
    sc = Scenario(model="llama-3.1-8b", mode="training", method="lora", seq_len=2048, objective="dpo")
    dpo = estimate(sc).memory_per_device_bytes.total
    sft = estimate(sc.replace(objective="sft")).memory_per_device_bytes.total
    assert metric(at, "Memory per device") == Units("GiB")(dpo) != Units("GiB")(sft)
    assert next(s for s in at.selectbox if s.label == "Objective").value == "dpo"
    assert at.query_params.get("obj") in ("dpo", ["dpo"])
    said = " ".join(str(m.value) for m in at.markdown) + " ".join(str(c.value) for c in at.caption)
    assert "a chosen and a rejected answer each" in said.replace("\\", "")


def test_the_plan_page_plans_and_launches_dpo():
    at = open_link("plan", {**LINK, "goal": "fine-tune", "ptok": "20"})
    no_exception(at)
    best = plan(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=20e6, objective="dpo")).cheapest
    assert best is not None and best.scenario["objective"] == "dpo"
    assert best.launch in [c.value for c in at.code] and "trl dpo" in best.launch
    headline = next(str(m.value) for m in at.markdown if str(m.value).startswith("#### Cheapest plan"))
    assert "DPO" in headline, headline


def test_a_stack_without_a_dpo_trainer_is_one_warning():
    at = open_link("memory", {**LINK, "stack": "megatron", "method": "full"})
    no_exception(at)
    said = [str(w.value).replace("\\", "") for w in at.warning]
    assert sum("Megatron-LM has no DPO trainer" in w for w in said) == 1, said


def test_the_plan_page_says_where_the_sidebars_objective_goes():
    """A pretraining goal with the sidebar's DPO objective says the objective applies to fine-tunes (it was dropped
    without a word); a fine-tune goal says it plans DPO."""
    at = open_link("plan", {**LINK, "goal": "pretrain", "ptok": "20"})
    no_exception(at)
    said = " ".join(str(c.value) for c in at.caption).replace("\\", "")
    assert "the sidebar's DPO objective applies to a fine-tune goal" in said
    at = open_link("plan", {**LINK, "goal": "fine-tune", "ptok": "20"})
    assert "Objective: preference tuning (DPO" in " ".join(str(c.value) for c in at.caption).replace("\\", "")
