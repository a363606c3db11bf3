"""The engines' extra time per layer on some parts (data/engine_timing.csv, core/catalog/engine_timing.py): the A100's
calibrated on one published vLLM run, checked on another model of the same sweep and on SGLang's 8-GPU Llama 3.1 70B
decode step (tests/data/load_latency.csv)."""

import math

import pytest

from core.catalog.accelerators import CatalogError, get_accelerator
from core.catalog.engine_timing import EngineTiming, engine_time_s, load_engine_timing
from core.layout import Layout
from core.speed.roofline import layer_overhead_s, roofline
from tests.core.csv_rows import load_error
from tests.core.test_load import ROWS as LOAD_ROWS
from tests.core.test_load import _scenario
from tests.core.test_roofline import ROWS, predicted

A100 = get_accelerator("a100-sxm-80gb")


def test_every_row_is_sourced_and_names_its_calibration_row():
    rows = load_engine_timing()
    assert rows and all(r.source and r.as_of and r.calibrated_on for r in rows)
    calibration = {"tests/data/engine_speeds.csv": {r["id"] for r in ROWS if r["expect"] == "calibration"}}
    calibration["tests/data/load_latency.csv"] = {r["id"] for r in LOAD_ROWS if r["role"] == "calibration"}
    for r in rows:
        table, row_id = r.calibrated_on.split()
        assert row_id in calibration[table], r.calibrated_on


def test_a_bad_pattern_is_refused():
    with pytest.raises(ValueError):
        EngineTiming(
            engines="vllm",
            accelerator_pattern="(",
            quantity="layer_overhead_s",
            value_s=1e-5,
            engine_version="x",
            calibrated_on="row",
            source="a source",
            as_of="2026-11-26",
        )


def test_the_a100_time_applies_to_cuda_graph_engines_on_a100s_only():
    h100 = get_accelerator("h100-sxm")
    for engine, part in (("vllm", A100), ("sglang", get_accelerator("a100-pcie-40gb"))):  # what the roofline adds per layer
        assert layer_overhead_s(engine, "bf16", part) - layer_overhead_s(engine, "bf16", h100) == pytest.approx(63.8e-6)
    # the H100 the engines' own per-layer time was fitted on, other parts, other engines: nothing added
    for engine, part in (("vllm", "h100-sxm"), ("sglang", "b200"), ("vllm", "l4"), ("tensorrt-llm", "a100-sxm-80gb"), ("llama.cpp", "a100-sxm-80gb")):
        assert engine_time_s("layer_overhead_s", engine, part) == 0.0


def test_calibration_row_reproduced_and_check_row_within():
    """Calibrated on vLLM's Qwen3-1.7B on an A100 (215.3 tokens/s, 350 without the A100's time); checked on Qwen3-30B-A3B
    of the same sweep: 103.9 tokens/s measured (tenstorrent/tt-inference-server issue #340), 150 before."""
    rows = {r["id"]: r for r in ROWS}
    assert predicted(rows["vllm-a100-qwen3-1.7b-bs1"]) == pytest.approx(215.32, rel=0.01)
    assert predicted(rows["vllm-a100-qwen3-30b-a3b-bs1"]) == pytest.approx(103.9, rel=0.05)


def test_sglang_70b_tp8_decode_step_on_a100s():
    """SGLang 0.5.6's Llama 3.1 70B BF16 on 8 A100s at one user: 18.64 ms per token (SGLang Cookbook, row
    sgl056-l31-70b-bf16-a100x8-1000-1000-c1). The roofline alone gave 14.4 ms: 17.6 GB of weights per GPU at 80% of
    2.04 TB/s (10.8 ms), 160 all-reduces at 10 us (1.6 ms) and the H100-fitted 26 us per layer (2.1 ms); the A100's
    80 x 63.8 us = 5.1 ms more bring it within 5%."""
    row = next(r for r in LOAD_ROWS if r["id"] == "sgl056-l31-70b-bf16-a100x8-1000-1000-c1")
    roof = roofline(_scenario(row), A100, Layout(1, 8, 1))
    step = float(roof.decode_step(1.0, 610 + 211)[0])
    assert step == pytest.approx(18.64e-3, rel=0.06)
    assert step - 80 * 63.8e-6 == pytest.approx(14.4e-3, rel=0.03)
    assert math.isfinite(step)


def test_the_catalog_refuses_a_row_without_a_source(tmp_path, monkeypatch):
    import core.catalog.engine_timing as et

    bad = tmp_path / "engine_timing.csv"
    bad.write_text("engines,accelerator_pattern,quantity,value_s,engine_version,calibrated_on,source,as_of\nvllm,^a100-,layer_overhead_s,1e-5,x,row,,2026-11-26\n")
    assert isinstance(load_error(monkeypatch, et, "ENGINE_TIMING_CSV", "load_engine_timing", bad), CatalogError)


def test_sglang_eager_prefill_steps():
    """SGLang 0.5.6 runs a step that carries prompt tokens without CUDA graphs: 0.748 ms a layer more (calibrated on
    Qwen3-235B-A22B's one-user TTFT on 8 B200s, 99 ms measured against 29 ms), on every such step and only on those;
    TensorRT-LLM's and vLLM's steps are unchanged."""
    row = next(r for r in LOAD_ROWS if r["id"] == "sgl056-q3-235b-bf16-b200x8-1000-1000-c1")
    sc, b200 = _scenario(row), get_accelerator("b200")
    roof = roofline(sc, b200, Layout(1, 8, 1))
    assert roof.prefill_step_s == pytest.approx(94 * 0.748e-3)
    decode = float(roof.mixed_step(4.0, 800.0, 0.0, 610.0)[0])
    mixed = float(roof.mixed_step(4.0, 800.0, 610.0, 610.0)[0])
    assert mixed - decode > roof.prefill_step_s  # the prompt's own work on top
    plain = roofline(sc.replace(serving_engine="vllm"), b200, Layout(1, 8, 1))
    assert plain.prefill_step_s == 0.0
    assert float(roof.prefill(1, 610.0)) - float(plain.prefill(1, 610.0)) == pytest.approx(roof.prefill_step_s, rel=0.05)
    assert engine_time_s("prefill_layer_overhead_s", "tensorrt-llm", "b200") == 0.0


def test_tensorrt_llm_decode_time_per_sequence_and_layer():
    """Calibrated on NIM's Llama 3.3 70B FP8 TP2 1,000/1,000 rows: the value makes the 50-user row's tokens/s-per-user
    error equal the one-user row's (+14%: the one-user gap is the 70B's per-layer time, not load); that device runs 32
    of the 64 query heads, so 0.485 us a sequence and layer is 15.16 ns a head. Hopper parts only; other engines and
    parts add nothing. Checked by the other NIM rows (tests/core/test_load.py) and TensorRT-LLM's published peak
    throughput (tests/core/test_dense_capacity.py, tests/core/test_expert_parallel.py)."""
    from tests.core.test_load import predicted as load_predicted

    assert engine_time_s("decode_sequence_head_layer_s", "tensorrt-llm", "h100-sxm") == pytest.approx(15.16e-9)
    for engine, part in (("tensorrt-llm", "a100-sxm-80gb"), ("tensorrt-llm", "b200"), ("vllm", "h100-sxm"), ("sglang", "h200")):
        assert engine_time_s("decode_sequence_head_layer_s", engine, part) == 0.0
    rows = {r["id"]: r for r in LOAD_ROWS}

    def speed_error(row_id: str) -> float:
        row = rows[row_id]
        return (1.0 / load_predicted(row)["inter_token_latency_mean_s"]) / (1e3 / float(row["itl_ms"])) - 1

    one, fifty = speed_error("nim180-l33-70b-fp8-tp2-1000-1000-c1"), speed_error("nim180-l33-70b-fp8-tp2-1000-1000-c50")
    assert fifty == pytest.approx(one, abs=0.005) and one == pytest.approx(0.141, abs=0.005)
    # the term grows the step with the batch: 100 sequences on one H100 step of the 8B add 100 x 32 layers x 32 heads
    # x 15.16 ns
    import copy

    from core.scenario import Scenario

    sc = Scenario(model="llama-3.1-8b", weights_format="fp8", kv_cache_format="fp8", serving_engine="tensorrt-llm")
    roof = roofline(sc, get_accelerator("h100-sxm"), Layout(1, 1, 1))
    without = copy.copy(roof)
    without.decode_sequence_s = 0.0
    for batch in (1, 100):
        extra = float(roof.decode_step(batch, 1000.0)[0]) - float(without.decode_step(batch, 1000.0)[0])
        assert extra == pytest.approx(batch * 32 * 32 * 15.16e-9)
    # per head the device runs: tensor parallelism splits the heads, an expert-parallel rank runs all of its sequences'
    big = Scenario(model="llama-3.3-70b", weights_format="fp8", kv_cache_format="fp8", serving_engine="tensorrt-llm")
    per_layer = {tp: roofline(big, get_accelerator("h100-sxm"), Layout(1, tp, 1)).decode_sequence_layer_s for tp in (1, 2, 4, 8)}
    assert per_layer[2] == pytest.approx(0.485e-6, rel=0.001) and per_layer[1] == pytest.approx(2 * per_layer[2]) and per_layer[8] == pytest.approx(per_layer[2] / 4)
    moe = Scenario(model="qwen3-235b-a22b", weights_format="fp8", kv_cache_format="fp8", serving_engine="tensorrt-llm", expert_parallel=True)
    assert roofline(moe, get_accelerator("h200"), Layout(1, 8, 1)).decode_sequence_layer_s == pytest.approx(64 * 15.16e-9)  # all 64 heads a rank


def test_the_estimates_note_states_the_time_per_sequence_per_layer_and_per_step():
    """The estimate's note gives the time per sequence and layer (15.16 ns a query head the device runs) and the time
    it adds to a decode step at the scenario's batch, whatever the layout: under tensor parallel 2 a device runs 32 of
    the 70B's 64 heads; under pipeline parallel the stages take their turns (the step pays all 80 layers, not one
    stage's 40) and each runs all 64 heads; an expert-parallel rank pays for its own sequences only, all heads
    (core/speed/roofline.py)."""
    import re

    from core.estimate import estimate
    from core.scenario import Scenario

    def note(**layout) -> tuple[float, float]:
        sc = Scenario(
            model=layout.pop("model", "llama-3.3-70b"),
            mode="inference",
            weights_format="fp8",
            kv_cache_format="fp8",
            serving_engine="tensorrt-llm",
            accelerator="h100-sxm",
            batch_size=64,
            seq_len=2000,
            **layout,
        )
        text = next(n for n in estimate(sc).inference.assumptions if "each decoding sequence adds" in n)
        per_layer_us, step_ms = re.search(r"adds ([\d.]+) us per layer to a decode step \(([\d.]+) ms at batch 64", text).groups()
        return float(per_layer_us), float(step_ms)

    head_ms = 15.16e-6  # one head, in ms
    assert note(tensor_parallel=2) == (0.49, pytest.approx(64 * 80 * 32 * head_ms, abs=0.05))
    assert note(tensor_parallel=1, pipeline_parallel=2) == (0.97, pytest.approx(64 * 80 * 64 * head_ms, abs=0.05))
    ep_us, ep_ms = note(model="qwen3-235b-a22b", tensor_parallel=8, expert_parallel=True)
    assert ep_us == 0.97 and ep_ms == pytest.approx(64 / 8 * 94 * 64 * head_ms, abs=0.05)
