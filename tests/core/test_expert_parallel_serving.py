"""Expert parallelism as a serving choice (issue #27): the scenario field, its refusals, memory per device, the serving
roofline, the planner's search and what its plan says. The step formula itself is checked against published runs
in tests/core/test_expert_parallel.py."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from core.catalog.accelerators import get_accelerator
from core.estimate import estimate
from core.layout import Layout
from core.memory.components import expert_parallel_weight_bytes, inference_components, kv_bytes_per_sequence
from core.memory.estimate import estimate_memory
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


# --- the fewest devices and the pool's sequences with expert parallel on (issue #27's "one answer on every page") ---

GIB = 2**30


def test_fewest_devices_with_ep_on_is_an_expert_parallel_replica():
    """DeepSeek-R1 FP8 on H200 (SGLang reserves 88% of 140.4 GiB usable: 123.55 GiB), 64 sequences of 2,000 tokens,
    expert parallel on. Worked by hand: the routed experts are 58 MoE layers x 256 experts x 3 x 7,168 x 2,048 FP8
    bytes = 609.0 GiB of the 626.8 GiB checkpoint, so the non-expert weights every rank holds are 17.8 GiB. A rank of
    4 holds 17.8 + 609 / 4 = 170.0 GiB of weights alone: over the 123.55. A rank of 8 holds 17.8 + 76.1 = 93.9 GiB, and
    with its 8 sequences' KV cache, the prefill and the runtime, 98.5 GiB: fits. So the fewest devices are 8,
    expert-parallel. The search answered 6 (TP 2 x 3 pipeline stages), a layout without expert parallelism."""
    sc = Scenario(**R1, serving_engine="sglang", tensor_parallel=8, batch_size=64, expert_parallel=True)
    a = sc.architecture
    routed = 58 * 256 * 3 * 7168 * 2048  # bytes, one byte a weight in FP8
    assert a.moe_layers == 58 and a.num_experts == 256 and a.hidden_size == 7168 and a.moe_intermediate_size == 2048
    assert routed / GIB == pytest.approx(609.0)
    non_expert = weight_bytes(a, FORMATS["fp8"]) - routed
    assert non_expert / GIB == pytest.approx(17.77, abs=0.01)
    capacity = 0.88 * get_accelerator("h200").usable_memory_bytes
    assert (non_expert + routed / 4) / GIB == pytest.approx(170.02, abs=0.01) and non_expert + routed / 4 > capacity
    assert (non_expert + routed / 8) / GIB == pytest.approx(93.89, abs=0.01)
    assert expert_parallel_weight_bytes(a, "fp8", 8) == pytest.approx(non_expert + routed / 8)
    res = estimate_memory(sc)
    assert res.memory_per_device_bytes.total < capacity
    n = res.layout_needed
    assert n is not None and (n.devices, n.tensor_parallel, n.pipeline_parallel, n.expert_parallel) == (8, 8, 1, True)
    # with a rank of 4 short by the weights alone, the same scenario on 4 GPUs needs 8, and is priced on them with EP
    four = estimate(sc.replace(tensor_parallel=4))
    assert not four.fits and four.layout_needed == n
    assert four.inference is not None and four.inference.expert_parallel_ranks == 8
    # without expert parallelism the tensor x pipeline search answers, as before
    off = estimate_memory(sc.replace(expert_parallel=False)).layout_needed
    assert off is not None and (off.devices, off.tensor_parallel, off.pipeline_parallel, off.expert_parallel) == (6, 2, 3, False)


def test_fewest_devices_with_ep_falls_back_to_tensor_parallel_when_no_rank_fits():
    """DeepSeek-R1 in BF16 on an L4 (22.5 GiB): the non-expert weights alone (2 x 17.8 = 35.5 GiB) fill a device, so no
    expert-parallel replica fits at any size; the fewest devices are the tensor x pipeline layout, marked so, and the
    speeds are for it served without expert parallelism."""
    sc = Scenario(model="deepseek-r1", weights_format="bf16", accelerator="l4", tensor_parallel=8, batch_size=1, seq_len=1024, expert_parallel=True)
    assert expert_parallel_weight_bytes(sc.architecture, "bf16", 256) > get_accelerator("l4").usable_memory_bytes
    got = estimate(sc)
    want = estimate_memory(sc.replace(expert_parallel=False)).layout_needed
    assert want is not None and got.layout_needed == want and not want.expert_parallel
    assert got.inference is not None and got.inference.expert_parallel_ranks == 1
    assert got.inference.devices_per_replica == want.devices


@pytest.mark.parametrize("model", ["deepseek-r1", "qwen3-235b-a22b"])
def test_the_pool_counts_whole_sequences_a_rank(model):
    """vLLM, EP over 8 H200: the replica's pools hold the pool of a device over one whole sequence's KV cache, times 8
    (each rank holds its own sequences). At 2 and at 8 sequences a rank holds one, so the pool and its count are the
    same; the count was the pool over (the batch's own KV / the batch), 4x apart between the two."""
    base = Scenario(model=model, weights_format="fp8", kv_cache_format="fp8", accelerator="h200", seq_len=4096, tensor_parallel=8, expert_parallel=True)
    one = kv_bytes_per_sequence(base.architecture, "fp8", 4096)
    two, eight = (estimate_memory(base.replace(batch_size=b)) for b in (2, 8))
    assert two.kv_pool_bytes == eight.kv_pool_bytes
    assert two.kv_pool_bytes is not None and two.kv_pool_sequences == pytest.approx(two.kv_pool_bytes / one * 8, rel=1e-6)
    assert eight.kv_pool_sequences == pytest.approx(two.kv_pool_sequences)
    # the whole count the Memory page shows is the largest batch: 8 x the whole sequences a rank's full pool holds
    assert two.max_batch_size % 8 == 0 and two.max_batch_size <= two.kv_pool_sequences
