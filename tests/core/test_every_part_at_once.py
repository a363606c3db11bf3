"""The planner's search times a serving candidate on every part at once (core/speed/roofline._Roofs,
core/speed/load.load_curves, core/money/serving.replica_capacities): each part's answer must be, to the last bit, the
one its own roof gives alone, whatever mix of parts, schedulers (vLLM's small-GPU defaults), host offload, tensor
parallelism and expert parallelism is asked for together."""

from __future__ import annotations

import numpy as np
import pytest

from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.money.serving import BATCHES, Traffic, memory_by_batch, replica_capacities, replica_capacity, request_scenario
from core.scenario import Scenario
from core.speed.load import ALL_KEYS, PartLoad, load_curve, load_curves
from core.speed.roofline import _Roofs, replica_output_tokens_per_s, roofline, serving_curve

# An H100 and an H200 (vLLM's large-GPU scheduler), an L4 and an A100 (its small one: 256 sequences, 2,048 tokens),
# a T4 (power-capped matmuls), an MI300X, a Trainium chip and an SRAM chip (no launches): different rates, collectives and step overheads.
PARTS = ["h100-sxm", "h200", "l4", "a100-sxm-80gb", "t4", "mi300x", "trainium2", "groq-lpu"]
TRAFFIC = Traffic(requests_per_day=200_000, input_tokens_per_request=2000, output_tokens_per_request=300, ttft_s=2.0, tokens_per_s_per_user=15)

CASES = {
    "8B fp16, one device, vLLM": (Scenario(model="llama-3.1-8b", weights_format="fp16", kv_cache_format="fp16"), Layout(1, 1, 1)),
    "8B fp8 KV, TP 2, TensorRT-LLM": (Scenario(model="llama-3.1-8b", weights_format="fp16", kv_cache_format="fp8", serving_engine="tensorrt-llm"), Layout(1, 2, 1)),
    "Qwen3 30B-A3B (MoE), TP 4, SGLang": (Scenario(model="qwen3-30b-a3b", serving_engine="sglang"), Layout(1, 4, 1)),
    "70B Q4 on llama.cpp, 40 of 80 layers in system RAM": (
        Scenario(model="llama-3.1-70b", weights_format="gguf-q4_k_m", kv_cache_format="fp16", serving_engine="llama.cpp", gpu_layers=40),
        Layout(1, 1, 1),
    ),
    "DeepSeek-V3 expert-parallel over 8": (Scenario(model="deepseek-v3", weights_format="fp8", expert_parallel=True), Layout(1, 8, 1)),
}


def _parts(sc: Scenario, layout: Layout) -> list[PartLoad]:
    out = []
    for i, aid in enumerate(PARTS):
        acc = get_accelerator(aid)
        out.append(PartLoad(acc, roofline(sc, acc, layout), BATCHES[: 40 + 30 * i], 40 + 30 * i))  # a cap each
    return out


@pytest.mark.parametrize("case", CASES)
def test_a_stacked_step_is_each_parts_own_step(case: str) -> None:
    sc, layout = CASES[case]
    parts = _parts(sc, layout)
    plain = [p.roof for p in parts if p.roof.ep_ranks == 1]
    if len(plain) < 2:
        with pytest.raises(ValueError):
            _Roofs([p.roof for p in parts])
        return
    stacked = _Roofs(plain)
    decodes, prefill = np.array([1.0, 7.0, 64.0, 300.0]), np.array([0.0, 512.0, 0.0, 2048.0])
    steps, read, bound = stacked.mixed_step(decodes, 1500.0, prefill, 2000.0)
    prompts = stacked.prefill(np.array([1.0, 16.0]), 2000.0)
    speeds = replica_output_tokens_per_s(stacked, BATCHES[:50], 2000, 300)
    for row, roof in enumerate(plain):
        own_steps, own_read, own_bound = roof.mixed_step(decodes, 1500.0, prefill, 2000.0)
        assert np.array_equal(steps[row], own_steps) and np.array_equal(np.broadcast_to(read, steps.shape)[row], own_read)
        assert np.array_equal(bound[row], own_bound)
        assert np.array_equal(prompts[row], roof.prefill(np.array([1.0, 16.0]), 2000.0))
        assert np.array_equal(speeds[row], serving_curve(roof.sc, roof.acc, layout, BATCHES[:50], 2000, 300, roof)["output_tokens_per_s"])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("cut", [False, True])
def test_load_curves_answer_what_load_curve_answers_part_by_part(case: str, cut: bool) -> None:
    sc, layout = CASES[case]
    # latency targets that cut some parts' curves short and not others (the half-offloaded 70B is slow everywhere)
    within = None if not cut else (30.0, 2.0) if sc.serving_engine == "llama.cpp" else (3.0, 10.0)
    parts = _parts(sc, layout)
    together = load_curves(sc, layout, parts, 2000, 300, keys=None, within=within)
    assert len(together) == len(parts)
    for p, got in zip(parts, together, strict=True):
        alone = load_curve(sc, p.acc, layout, p.concurrency, 2000, 300, max_running=p.max_running, roof=p.roof, within=within)
        assert set(got) == set(alone) and set(got) <= set(ALL_KEYS)
        for k in alone:
            assert np.array_equal(got[k], alone[k]), (p.acc.id, k)
    if within is not None:  # the targets cut some curves short and not others: the mix is exercised
        assert len({len(got["time_to_first_token_p90_s"]) for got in together}) > 1


@pytest.mark.parametrize("case", CASES)
def test_replica_capacities_are_each_parts_replica_capacity(case: str) -> None:
    sc, layout = CASES[case]
    traffic = TRAFFIC if sc.serving_engine != "llama.cpp" else TRAFFIC.model_copy(update={"ttft_s": 30.0, "tokens_per_s_per_user": 2.0})
    req = request_scenario(sc, traffic)
    memory = memory_by_batch(req, layout)
    accs = [get_accelerator(a) for a in PARTS]
    together = replica_capacities(req, accs, layout, traffic, memory)
    for acc, got in zip(accs, together, strict=True):
        alone = replica_capacity(req, acc, layout, traffic, memory)
        assert type(got) is type(alone), acc.id
        if isinstance(alone, str):
            assert got == alone
            continue
        assert not isinstance(got, str)
        assert (got.max_batch_that_fits, got.max_batch_meeting_targets) == (alone.max_batch_that_fits, alone.max_batch_meeting_targets)
        assert got.curve.keys() == alone.curve.keys()
        for k in alone.curve:
            assert np.array_equal(got.curve[k], alone.curve[k]), (acc.id, k)
    # the case asks something of the search: at least one part answers with a capacity
    assert any(not isinstance(c, str) for c in together)
