"""The planner (core/plan): worked cases with their arithmetic, and properties of every search."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.catalog.accelerators import get_accelerator
from core.catalog.prices import load_prices
from core.estimate import estimate
from core.money.pricing import DAYS_PER_MONTH, HOURS_PER_MONTH
from core.plan import Goal, plan
from core.plan.frontier import MIN_SCALING_EFFICIENCY
from core.plan.serve import plan_serving
from core.plan.train import price_training_scenario
from core.scenario import Scenario
from core.speed.timing import training_flops_per_token, training_time

SERVE_8B = {"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 2000, "input_tokens": 1000, "output_tokens": 300}


def _row(p):
    return next(r for r in load_prices() if (r.provider, r.instance_type, r.accelerator_id) == (p.provider, p.instance, p.accelerator))


def test_serving_8b_at_2000_requests_a_day_is_one_small_gpu():
    """2,000 requests x 300 output tokens / 86,400 s = 6.9 tokens/s on average, 13.9 in the busiest hour (2x):
    a single 8B replica generating >= 20 tokens/s for one user carries it, so one device, the cheapest that can."""
    r = plan(Goal.model_validate(SERVE_8B))
    p = r.cheapest
    assert p is not None and p.devices == 1 and p.instances == 1 and p.idle_devices == 0
    assert get_accelerator(p.accelerator).memory_gib <= 48
    row = _row(p)
    assert p.usd_per_month == pytest.approx(row.on_demand_usd_per_hour * HOURS_PER_MONTH)
    tokens_per_month = 2000 * DAYS_PER_MONTH * (1000 + 300)
    assert p.usd_per_million_tokens == pytest.approx(p.usd_per_month / (tokens_per_month / 1e6))
    assert p.usd_per_million_output_tokens == pytest.approx(p.usd_per_month / (2000 * DAYS_PER_MONTH * 300 / 1e6))
    assert p.utilisation == pytest.approx(2000 * 300 / 86_400 / p.output_tokens_per_s_capacity)
    assert p.tokens_per_s_per_user >= 20 and p.time_to_first_token_s <= 2
    # the API catalog quotes the same open model at this traffic
    assert r.api_quotes and all(q.same_model for q in r.api_quotes)
    q = r.api_quotes[0]
    assert q.usd_per_month == pytest.approx(2000 * DAYS_PER_MONTH * (1000 * q.input_usd_per_million + 300 * q.output_usd_per_million) / 1e6)


def test_serving_70b_at_the_same_traffic_is_one_or_two_devices_not_a_node():
    p = plan(Goal.model_validate({**SERVE_8B, "model": "llama-3.1-70b"})).cheapest
    assert p is not None and p.devices <= 2 and p.idle_devices == 0
    assert p.usd_per_month < 23_302 / 4  # the old literal answer: a whole 8 x H100 node


def test_fine_tuning_70b_on_20m_tokens_costs_tens_of_dollars():
    """LoRA touches 4N FLOPs per token forward and backward (+2N recomputed with checkpointing): 20M x 4 x 70.6B =
    5.6e18 FLOPs; at 35% MFU that is hours on a handful of devices: tens of dollars at most, not hundreds. The
    plan's hours are the training model's time for its devices (core/speed/timing.py) plus setup and communication."""
    g = Goal(goal="fine-tune", model="llama-3.1-70b", tokens=20e6)
    p = plan(g).cheapest
    assert p is not None and p.usd < 100  # the literal configuration cost hundreds
    sc = Scenario.model_validate(p.scenario)
    acc = get_accelerator(p.accelerator)
    ideal_hours = training_time(sc, acc, p.devices, 20e6).wall_hours
    assert ideal_hours > 20e6 * training_flops_per_token(sc, sc.architecture) / (p.devices * acc.bf16_tflops * 1e12) / 3600
    assert p.hours >= g.setup_hours + ideal_hours * 0.999  # communication and dequantization only add time
    assert p.usd == pytest.approx(p.instances * _row(p).on_demand_usd_per_hour * p.hours)


def test_pretraining_1b_on_1b_tokens_uses_a_handful_of_devices():
    p = plan(Goal(goal="pretrain", model="llama-3.2-1b", tokens=1e9)).cheapest
    assert p is not None and p.devices <= 8 and p.method == "full"


def test_the_rented_node_is_used_not_billed_idle():
    """A LoRA fine-tune of 8B on H100s: an 8-GPU node is filled with data-parallel ranks, never rented for 4."""
    r = plan(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=50e6, accelerators=("h100-sxm",), methods=("lora",)))
    for p in r.plans:
        if p.instances * _row(p).accelerators_per_instance == 8:
            assert p.idle_devices == 0 and p.devices == 8


def test_a_deadline_is_honoured_and_costs_more():
    free = plan(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=200e6)).cheapest
    assert free is not None
    rushed = plan(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=200e6, deadline_hours=free.hours / 4)).cheapest
    assert rushed is not None and rushed.within_bounds and rushed.hours <= free.hours / 4
    assert rushed.usd >= free.usd


def test_budget_bounds_serving():
    r = plan(Goal.model_validate({**SERVE_8B, "budget_usd": 100.0}))
    assert all(not p.within_bounds for p in r.plans)  # no GPU rents for $100 a month
    assert r.cheapest is not None and not r.cheapest.within_bounds


_GOALS = st.one_of(
    st.builds(
        lambda m, t, meth: {"goal": "fine-tune", "model": m, "tokens": t, "methods": meth},
        st.sampled_from(["llama-3.2-1b", "llama-3.1-8b", "mixtral-8x7b", "qwen3-4b"]),
        st.sampled_from([1e6, 2e7, 3e8]),
        st.sampled_from([None, ["full"], ["lora", "qlora"]]),
    ),
    st.builds(
        lambda m, rpd, o: {"goal": "serve", "model": m, "requests_per_day": rpd, "output_tokens": o},
        st.sampled_from(["llama-3.2-1b", "llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b"]),
        st.sampled_from([100, 20_000, 2_000_000]),
        st.sampled_from([50, 300, 2000]),
    ),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_GOALS)
def test_every_plan_fits_and_the_frontier_is_not_dominated(goal):
    r = plan(Goal.model_validate(goal))
    assert r.plans and r.cheapest is not None
    for p in r.plans:
        res = estimate(Scenario.model_validate(p.scenario))
        assert res.fits, p.scenario
        assert p.idle_devices >= 0 and p.devices >= 1
    frontier = [p for p in r.plans if p.pareto]
    assert frontier
    for f in frontier:
        assert not any(o.cost < f.cost and o.duration < f.duration and o.within_bounds for o in r.plans)
    good = [p for p in r.plans if p.scaling_efficiency >= MIN_SCALING_EFFICIENCY]
    if good:
        assert r.cheapest.scaling_efficiency >= MIN_SCALING_EFFICIENCY
    assert r.cheapest.cost == min(p.cost for p in r.plans if p.scaling_efficiency >= MIN_SCALING_EFFICIENCY or not good)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["llama-3.2-1b", "llama-3.1-8b", "llama-3.1-70b"]),
    st.sampled_from(["full", "lora", "qlora"]),
    st.sampled_from(["h100-sxm", "a100-sxm-80gb", "l4", "rtx-a6000", "b200", "tpu-v5e"]),
    st.sampled_from([1, 2, 4, 8, 16]),
    st.booleans(),
    st.sampled_from([0, 3]),
)
def test_the_cheapest_plan_never_costs_more_than_the_sidebars_own(model, method, acc, dp, gc, zero):
    """Whatever fitting configuration a user typed, pricing it honestly (whole instances, communication) never beats
    the planner's cheapest plan."""
    goal = Goal(goal="fine-tune", model=model, tokens=2e7)
    try:
        sc = Scenario(
            model=model,
            mode="training",
            method=method,
            precision="bf16" if method == "full" else "bf16-true",
            gradient_checkpointing=gc,
            accelerator=acc,
            data_parallel=dp,
            zero_stage=zero if dp > 1 else 0,
            train_tokens=2e7,
            batch_size=1,
            gradient_accumulation_steps=max(1, 64 // dp),
        )
    except ValueError:
        return
    if not estimate(sc).fits:
        return
    own = price_training_scenario(goal, sc)
    if own is None:
        return
    cheapest = plan(goal).cheapest
    assert cheapest is not None
    assert cheapest.usd <= own[3] * 1.0001, (cheapest.scenario, own)


def test_plan_cli_contract():
    out = subprocess.run(
        [sys.executable, "-m", "core", "plan", "-"],
        input=json.dumps([SERVE_8B, {"goal": "pretrain", "model": "llama-3.2-1b", "tokens": 1e9}]),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    serve, train = json.loads(out.stdout)
    for result in (serve, train):
        assert {"plans", "cheapest", "fastest", "assumptions"} <= set(result)
        for p in result["plans"]:
            assert {
                "accelerator",
                "devices",
                "instance",
                "instances",
                "idle_devices",
                "method",
                "weights_format",
                "scaling_efficiency",
                "pareto",
                "notes",
                "scenario",
            } <= set(p)
    assert {"usd_per_month", "usd_per_million_tokens"} <= set(serve["cheapest"])
    assert {"hours", "usd"} <= set(train["cheapest"])
    est = subprocess.run([sys.executable, "-m", "core", "estimate", "-"], input=json.dumps(train["cheapest"]["scenario"]), capture_output=True, text=True)
    assert est.returncode == 0 and "training" in json.loads(est.stdout)


@pytest.mark.parametrize(
    ("goal", "field"),
    [
        ({"goal": "serve", "model": "llama-3.1-8b"}, "goal"),
        ({"goal": "fine-tune", "model": "llama-3.1-8b"}, "goal"),
        ({"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 1e7, "methods": ["dora"]}, "methods.0"),
        ({"goal": "serve", "model": "llama-9", "requests_per_day": 10}, "model"),
        ({"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 10, "accelerators": ["h1000"]}, "accelerators"),
        ({"goal": "pretrain", "model": "llama-3.1-8b", "tokens": 1e9, "methods": ["lora"]}, "goal"),
        ({"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": math.inf}, "requests_per_day"),
    ],
)
def test_bad_goals_exit_2_naming_the_field(goal, field):
    text = json.dumps(goal).replace("Infinity", "1e999")
    out = subprocess.run([sys.executable, "-m", "core", "plan", "-"], input=text, capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == ""
    line = out.stderr.strip()
    assert "\n" not in line and line.startswith(f"error: {field}"), line


def test_serving_plans_only_use_4_bit_kernels_the_part_has():
    """vLLM has no AWQ kernels before Turing (SM 7.5) (its "Supported Hardware" table): a 70B serving plan put "4-bit
    AWQ on 4 x V100". Its AWQ runs on NVIDIA from Turing, on the MI300 family (Triton kernels), TPU v5e / v5p / v6e
    (tpu-inference) and Gaudi 3; GPTQ nowhere AWQ does not also run but Volta (data/format_kernels.csv). Since vLLM's
    own builds left Volta (data/engine_hardware.csv) its plans have no V100, and each part serves one 4-bit checkpoint
    of the two formats' equal bytes: AWQ."""
    options, _, _ = plan_serving(Goal.model_validate({**SERVE_8B, "model": "llama-3.1-70b", "requests_per_day": 20000, "tokens_per_s_per_user": 30, "pricing": "spot"}))
    four_bit = {(o.accelerator.id, o.weights_format) for o in options if o.weights_format in ("awq-4bit", "gptq-4bit")}
    assert four_bit, "some 4-bit plans are found"
    assert {f for _, f in four_bit} == {"awq-4bit"}
    for acc_id, _ in four_bit:
        acc = get_accelerator(acc_id)
        assert acc.vendor == "nvidia" or acc_id in ("mi300x", "mi325x", "mi350x", "mi355x", "tpu-v5e", "tpu-v5p", "tpu-v6e", "gaudi3"), acc_id
        assert not acc_id.startswith(("v100", "tpu-v4", "tpu-v7", "trainium", "inferentia", "rx-", "radeon")), acc_id
    # Transformers still runs on a V100, where its AWQ has no kernels (AutoAWQ: SM 7.5) and a GPTQ checkpoint of the
    # same bytes serves; on a T4 AWQ, the first of the two
    slow = {"tokens_per_s_per_user": 2, "ttft_s": 30}  # eager Transformers: targets its single requests meet
    hf, _, _ = plan_serving(Goal.model_validate({**SERVE_8B, **slow, "serving_engine": "hf-transformers", "accelerators": ["v100-32gb", "t4"]}))
    hf_four_bit = {(o.accelerator.id, o.weights_format) for o in hf if o.weights_format in ("awq-4bit", "gptq-4bit")}
    assert ("v100-32gb", "gptq-4bit") in hf_four_bit and ("t4", "awq-4bit") in hf_four_bit
    assert not {("v100-32gb", "awq-4bit"), ("t4", "gptq-4bit")} & hf_four_bit


PRETRAIN_8B = Goal(goal="pretrain", model="llama-3.1-8b", tokens=1e12, seq_len=4096)


def test_a_marketplace_listing_is_never_scaled_to_a_cluster():
    """A marketplace's row is one host with ordinary networking to the next (data/providers.csv): the planner rents
    one of it. Before, pretraining 8B on 1T tokens put 512 copies of one vast.ai 8 x V100 listing on the frontier."""
    from core.catalog.providers import spans_nodes

    r = plan(PRETRAIN_8B)
    several = [p for p in r.plans if p.instances > 1]
    assert several and r.fastest is not None and r.fastest.instances > 1
    assert all(spans_nodes(p.provider, p.instance) for p in several), {(p.provider, p.instance, p.instances) for p in several}
    # One host still competes where the goal gives it time (no single host finishes 1T tokens within 30 days).
    years = plan(PRETRAIN_8B.model_copy(update={"deadline_hours": 24 * 365 * 10.0}))
    assert any(p.instances == 1 and not spans_nodes(p.provider, p.instance) for p in years.plans)


def _eight_h100(provider: str, usd_per_hour: float):
    from core.catalog.prices import PriceRow

    return PriceRow(
        provider=provider,
        instance_type=f"{provider}-8x-h100",
        accelerator_id="h100-sxm",
        accelerators_per_instance=8,
        on_demand_usd_per_hour=usd_per_hour,
        region="test",
        estimate=False,
        as_of="2026-11-25",
        source="test rows",
    )


def test_a_cheaper_single_host_leaves_the_cluster_provider_for_several_nodes():
    """The cheapest 8-GPU row is a single host (vast): one node is rented there, and several from the dearer
    provider with a cluster network; a provider the catalog does not know (the person's own cluster) may span nodes."""
    rows = (_eight_h100("vast", 10.0), _eight_h100("coreweave", 20.0))
    goal = Goal(goal="pretrain", model="llama-3.2-1b", tokens=1e11, accelerators=("h100-sxm",))
    r = plan(goal, rows)
    assert {p.provider for p in r.plans if p.instances == 1} == {"vast"}
    assert {p.provider for p in r.plans if p.instances > 1} == {"coreweave"}
    own = plan(goal, (_eight_h100("our-own-cluster", 20.0),))
    assert max(p.instances for p in own.plans) > 1


def test_the_serve_search_tries_an_fp8_kv_cache_and_every_batch_where_the_part_has_fp8():
    """Issue 26/27: the search tried a bf16 KV cache and batches 1, 2, 4 ... 1,024 only (an 8B model on an H100, where
    247 sequences fitted, ran 128). Now: an FP8 cache where the engine stores one (data/kv_cache_kernels.csv: vLLM's
    on an A100 through FlashInfer since stop 45, never on a T4), and each plan's batch is the largest that meets the
    targets, at most what fits, whatever its value."""
    import numpy as np

    from core.layout import Layout
    from core.memory.evaluator import fit_capacity
    from core.money.serving import MAX_BATCH, memory_by_batch
    from core.plan.serve import serving_scenario, traffic_of
    from core.speed.load import load_curve

    parts = ["h100-sxm", "a100-sxm-80gb", "l40s"]
    goal = Goal.model_validate({"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 2_000_000, "accelerators": parts})
    options, _, _ = plan_serving(goal)
    kv = {(o.accelerator.id, o.kv_cache_format) for o in options}
    assert {("h100-sxm", "fp8"), ("l40s", "fp8"), ("a100-sxm-80gb", "fp8"), ("a100-sxm-80gb", "bf16")} <= kv  # T4: tests/core/test_kv_cache_kernels.py
    best = plan(goal).cheapest
    assert best is not None and best.scenario["kv_cache_format"] == "fp8"
    powers = {2**i for i in range(12)}
    assert any(o.bill.max_batch_meeting_targets not in powers for o in options)
    traffic = traffic_of(goal)
    for o in options[::25]:  # the batch is the largest within the targets: one more fits no more, or misses a target
        b = o.bill
        assert 1 <= b.batch_size <= b.max_batch_meeting_targets <= b.max_batch_that_fits <= MAX_BATCH
        lay = Layout(1, o.tensor_parallel, 1)
        sc = serving_scenario(goal, o.weights_format, o.tensor_parallel, kv_cache_format=o.kv_cache_format)
        nxt = b.max_batch_meeting_targets + 1
        fits = nxt <= MAX_BATCH and memory_by_batch(sc, lay)[nxt - 1] <= fit_capacity(sc, float(o.accelerator.usable_memory_bytes))
        # the targets are checked on the p90 figures under load (core/speed/load.py), running requests capped by memory
        curve = load_curve(
            sc, o.accelerator, lay, np.array([nxt], dtype=float), traffic.input_tokens_per_request, traffic.output_tokens_per_request, max_running=b.max_batch_that_fits
        )
        meets = curve["tokens_per_s_per_user_p90"][0] >= traffic.tokens_per_s_per_user and curve["time_to_first_token_p90_s"][0] <= traffic.ttft_s
        assert not (fits and meets), (o.accelerator.id, o.weights_format, o.kv_cache_format, o.tensor_parallel, b.max_batch_meeting_targets)


def test_a_pretraining_goal_on_a_fine_tuning_sized_dataset_says_so_in_its_assumptions():
    """Compute-optimal pretraining at 20 tokens a parameter (Hoffmann et al. 2022): Llama 3.1 8B's 8.03 billion
    parameters make 161 billion tokens; a goal on a tenth of that or less is told so, one above it is not."""
    from core.catalog.presets import preset
    from core.plan import assumptions
    from core.plan.goal import compute_optimal_tokens, fine_tuning_sized

    params = preset("llama-3.1-8b").architecture.total_params
    assert compute_optimal_tokens(params) == pytest.approx(20 * params) and 160e9 < 20 * params < 162e9
    assert fine_tuning_sized(0.1 * 20 * params, params) and not fine_tuning_sized(0.11 * 20 * params, params)
    said = [a for a in assumptions(Goal(goal="pretrain", model="llama-3.1-8b", tokens=2e7)) if "compute-optimal" in a]
    assert said == [
        "20,000,000 tokens is a fine-tuning-sized dataset for pretraining: compute-optimal is about 161 billion (20 tokens a parameter, Hoffmann et al. 2022)."
    ]
    assert not [a for a in assumptions(Goal(goal="pretrain", model="llama-3.1-8b", tokens=2e11)) if "compute-optimal" in a]
    assert not [a for a in assumptions(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=2e7)) if "compute-optimal" in a]
