"""Expert parallelism as a serving choice (issue #27): the scenario field, its refusals, memory per device, the serving
roofline, the planner's search and what its plan says. The step formula itself is checked against published runs
in tests/core/test_expert_parallel.py."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.memory.components import expert_parallel_weight_bytes, inference_components, kv_bytes_per_sequence
from core.model.formats import FORMATS, routed_expert_bytes, weight_bytes
from core.plan import plan
from core.plan.goal import Goal
from core.scenario import Scenario
from core.speed.expert_parallel import ep_decode_step
from core.speed.roofline import inference_speed

R1 = {"model": "deepseek-r1", "weights_format": "fp8", "kv_cache_format": "fp8", "accelerator": "h200", "seq_len": 2000, "output_tokens": 1000}


def test_off_by_default():
    assert Scenario(model="qwen3-30b-a3b").expert_parallel is False


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"model": "llama-3.1-8b"}, "mixture-of-experts"),
        ({"model": "qwen3-30b-a3b", "serving_engine": "llama.cpp", "weights_format": "gguf-q4_k_m"}, "llama.cpp has no expert-parallel"),
        ({"model": "qwen3-30b-a3b", "serving_engine": "mlx", "weights_format": "mlx-q4"}, "mlx has no expert-parallel"),
    ],
)
def test_refused_in_one_line(changes, says):
    with pytest.raises(ValidationError) as e:
        Scenario(**{"tensor_parallel": 2, "expert_parallel": True, **changes})
    msg = e.value.errors()[0]["msg"]
    assert says in msg and "\n" not in msg


def test_memory_per_device_replicates_the_non_experts_and_splits_the_experts():
    """DeepSeek-R1 FP8 on 8 GPUs at 64 sequences: weights = all - 7/8 of the routed experts (hand formula), the KV cache
    of 64 / 8 = 8 whole sequences (data-parallel attention: no MLA latent replicated on every rank as under TP)."""
    tp = Scenario(**R1, tensor_parallel=8, batch_size=64)
    ep = tp.replace(expert_parallel=True)
    a, fmt = tp.architecture, FORMATS["fp8"]
    total, experts = weight_bytes(a, fmt), routed_expert_bytes(a, fmt)
    assert experts > 0.9 * total  # 256 routed experts of 58 MoE layers: almost all of the 671B
    want = total - experts * 7 / 8
    assert expert_parallel_weight_bytes(a, "fp8", 8) == pytest.approx(want)
    got = inference_components(ep, a, Layout(1, 8, 1), 64, 2000)
    assert got.weights == pytest.approx(want)
    assert got.kv_cache == pytest.approx(8 * kv_bytes_per_sequence(a, "fp8", 2000))
    assert inference_components(ep, a, Layout(1, 8, 1), 65, 2000).kv_cache == pytest.approx(9 * kv_bytes_per_sequence(a, "fp8", 2000))
    # tensor-parallel: weights / 8, the MLA latent on every rank (64 sequences each)
    off = inference_components(tp, a, Layout(1, 8, 1), 64, 2000)
    assert off.weights == pytest.approx(total / 8)
    assert off.kv_cache == pytest.approx(64 * kv_bytes_per_sequence(a, "fp8", 2000))
    assert expert_parallel_weight_bytes(a, "fp8", 1) == pytest.approx(total)


def test_one_device_or_off_is_the_tensor_parallel_model():
    """EP on one device is no EP, and a scenario with it off is priced exactly as before (its numbers do not move)."""
    one = Scenario(**R1 | {"model": "qwen3-30b-a3b", "weights_format": "bf16"}, tensor_parallel=1)
    assert inference_speed(one.replace(expert_parallel=True)).decode_step_s == inference_speed(one).decode_step_s
    tp = Scenario(**R1, tensor_parallel=8, batch_size=64)
    assert inference_speed(tp).decode_step_s != inference_speed(tp.replace(expert_parallel=True)).decode_step_s


def test_the_serving_roofline_prices_the_published_ep_step():
    """The Inference page's decode step with EP on is ep_decode_step's (checked on LMSYS's and DeepSeek's wide-EP runs
    within 11%) at batch / ranks sequences a rank; its overlapped bound is faster, and the per-user speed is 1 / step."""
    sc = Scenario(**R1, tensor_parallel=8, batch_size=8 * 96, expert_parallel=True)
    s = inference_speed(sc)
    step = ep_decode_step(sc, get_accelerator("h200"), 8, 96, 2000 - 1000 + 500)
    assert s.decode_step_s == pytest.approx(step.step_s, rel=1e-9)
    assert s.decode_tokens_per_s == pytest.approx(1.0 / step.step_s)
    assert step.overlapped_step_s < step.step_s
    assert s.bytes_read_per_step_per_device > expert_parallel_weight_bytes(sc.architecture, "fp8", 8) * 0.05  # non-expert weights at least


def test_the_inference_block_states_both_bounds():
    from core.estimate import estimate

    r = estimate(Scenario(**R1, tensor_parallel=8, batch_size=256, expert_parallel=True, serving_engine="sglang"))
    inf = r.inference
    assert inf.expert_parallel_ranks == 8
    assert inf.decode_tokens_per_s < inf.decode_tokens_per_s_overlapped
    assert inf.aggregate_tokens_per_s_overlapped == pytest.approx(256 * inf.decode_tokens_per_s_overlapped)
    assert 0 < inf.all_to_all_share < 1
    assert any("expert-parallel over 8 devices" in n for n in inf.assumptions)
    # memory: far more sequences fit than under tensor parallelism (the MLA cache is not replicated)
    tp = estimate(Scenario(**R1, tensor_parallel=8, batch_size=256, serving_engine="sglang"))
    assert r.max_batch_size > 3 * tp.max_batch_size
    assert tp.inference.expert_parallel_ranks == 1 and tp.inference.decode_tokens_per_s_overlapped is None


SERVE_R1 = {"goal": "serve", "model": "deepseek-r1", "requests_per_day": 2_000_000, "input_tokens": 1000, "output_tokens": 1000, "expert_parallel": True}


def test_the_planner_picks_an_expert_parallel_plan_where_it_wins_and_says_so():
    """DeepSeek-R1 at 2M requests a day (1,000 in / 1,000 out, 20 tokens/s per user): before EP was searched the
    cheapest plan was B300s, AWQ, TP 4 at $61,232 a month (main at 12d523c, 2026-11-26); with it, 4 x 8 H100
    expert-parallel, AWQ at $56,064. The plan's scenario, notes and field say EP. Only when the goal asks for EP
    plans: their speed model is optimistic for serving with prefill on the same GPUs (docs/MOE.md)."""
    r = plan(Goal.model_validate(SERVE_R1))
    c = r.cheapest
    assert c.expert_parallel and c.scenario["expert_parallel"] is True
    assert any(n.startswith("expert-parallel:") for n in c.notes)
    assert c.usd_per_month < 61_232
    tp_plans = [p for p in r.plans if not p.expert_parallel]
    assert tp_plans and all("expert_parallel" not in p.scenario for p in tp_plans)  # a TP plan's scenario is as before
    # the plan's scenario reproduces an EP scenario
    assert Scenario.model_validate(c.scenario).expert_parallel


@pytest.mark.parametrize(
    "spec",
    [
        {"goal": "serve", "model": "llama-3.1-70b", "requests_per_day": 2_000_000, "expert_parallel": True},  # dense
        {"goal": "serve", "model": "qwen3-30b-a3b", "requests_per_day": 200_000, "serving_engine": "llama.cpp", "expert_parallel": True},  # no EP
        {k: v for k, v in SERVE_R1.items() if k != "expert_parallel"},  # not asked for
    ],
)
def test_no_expert_parallel_plan_for_dense_models_or_engines_without_it(spec):
    r = plan(Goal.model_validate(spec))
    assert r.plans and not any(p.expert_parallel for p in r.plans)


def test_a_replica_decodes_at_most_256_sequences_a_rank():
    """DeepEP's low-latency buffers (MAX_TOKENS_PER_RANK): a replica of n ranks runs at most 256 x n at once."""
    from core.money.serving import Traffic, replica_capacity, request_scenario

    t = Traffic(requests_per_day=1e6, input_tokens_per_request=200, output_tokens_per_request=200, ttft_s=600, tokens_per_s_per_user=0.01)
    sc = request_scenario(Scenario(model="qwen3-30b-a3b", weights_format="fp8", accelerator="h200", tensor_parallel=2, expert_parallel=True), t)
    cap = replica_capacity(sc, get_accelerator("h200"), Layout(1, 2, 1), t)
    assert not isinstance(cap, str)
    assert cap.max_batch_that_fits == 512
    assert math.isfinite(cap.output_tokens_per_s) and cap.output_tokens_per_s > 0


def test_explain_shows_the_ep_formula_with_its_numbers():
    from core.memory.estimate import estimate_memory
    from core.memory.explain import explain

    sc = Scenario(**R1, tensor_parallel=8, batch_size=256, expert_parallel=True, serving_engine="sglang")
    mem = estimate_memory(sc)
    weights, kv = explain(sc, mem)[:2]
    assert "1/EP of the experts" in weights.formula and "x 7/8" in str(weights.numbers)
    assert weights.bytes == pytest.approx(expert_parallel_weight_bytes(sc.architecture, "fp8", 8))
    assert "= 32 sequences (this rank's own)" in str(kv.numbers)
    assert kv.bytes == pytest.approx(32 * kv_bytes_per_sequence(sc.architecture, "fp8", 2000))
