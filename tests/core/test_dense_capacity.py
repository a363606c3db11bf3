"""Per-GPU capacity of a dense model as the planner prices it, against TensorRT-LLM's published peak throughput and
MLPerf Inference's Llama 2 70B Offline runs on NVIDIA and AMD parts (tests/data/dense_capacity.csv; issue #27:
"Per-GPU capacity of the planner's cheapest plan is within 25% for dense and MoE models"; the MoE rows are
tests/core/test_expert_parallel.py's). Each row is the serving core's replica capacity (core/money/serving.py) at the
published model, format, FP8 KV cache, engine and layout, with latency targets that do not bind (trtllm-bench and
MLPerf's Offline scenario queue every request at once), divided by the replica's devices. Nothing is calibrated on
these rows: TensorRT-LLM's decode time per sequence and layer (data/engine_timing.csv) was fitted on a NIM latency
row, the AMD parts' FP8 GEMM ceilings (data/accelerators.csv) are AMD's own GEMM measurements, and these rows check
both. A recorded miss keeps its error within RECORDED_MISS_POINTS of the one its note starts with."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from core.catalog.accelerators import Accelerator, get_accelerator
from core.layout import Layout
from core.money.serving import Traffic, replica_capacity, request_scenario
from core.scenario import Scenario

ROWS = list(csv.DictReader((Path(__file__).resolve().parents[1] / "data" / "dense_capacity.csv").open(newline="")))
RECORDED_MISS_POINTS = 5.0


def per_gpu(row: dict[str, str], acc: Accelerator | None = None) -> float:
    n = int(row["devices"])
    traffic = Traffic(
        requests_per_day=1e6,
        input_tokens_per_request=int(row["prompt_tokens"]),
        output_tokens_per_request=int(row["output_tokens"]),
        peak_to_average=1.0,
        ttft_s=600,
        tokens_per_s_per_user=0.01,
    )
    sc = Scenario(
        model=row["model"],
        weights_format=row["weights_format"],
        kv_cache_format=row["kv_cache_format"],
        serving_engine=row["engine"] or "tensorrt-llm",
        accelerator=row["accelerator"],
        tensor_parallel=n,
    )
    cap = replica_capacity(request_scenario(sc, traffic), acc or get_accelerator(row["accelerator"]), Layout(1, n, 1), traffic)
    assert not isinstance(cap, str), cap
    return cap.output_tokens_per_s / n


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_dense_peak_capacity_against_tensorrt_llm(row: dict[str, str]) -> None:
    err = per_gpu(row) / float(row["measured_tokens_per_s_per_gpu"]) - 1
    within = abs(err) <= float(row["tolerance"])
    assert within == (row["expect"] == "within"), f"{err:+.1%} ({row['note']})"
    if row["expect"] == "miss":
        recorded = float(row["note"].split("%")[0])
        assert abs(100 * err - recorded) <= RECORDED_MISS_POINTS, f"{err:+.1%}, recorded {recorded:+g}%"


def test_the_rows_cover_both_hopper_parts_amd_and_short_and_long_contexts() -> None:
    assert {r["accelerator"] for r in ROWS} == {"h100-sxm", "h200", "mi300x", "mi325x"}
    assert {(r["prompt_tokens"], r["output_tokens"]) for r in ROWS} >= {("1000", "1000"), ("8192", "1024"), ("1024", "8192"), ("32768", "1024"), ("222", "294")}
    assert [r["id"] for r in ROWS if r["expect"] != "within"] == ["mlperf51-l2-70b-mi300x-tp1"]


@pytest.mark.parametrize("row_id", ["mlperf51-l2-70b-mi325x-tp1", "mlperf51-l2-70b-mi300x-tp1"])
def test_amd_parts_would_miss_far_wider_at_the_datasheet_fp8_peak(row_id: str) -> None:
    """The FP8 GEMM ceiling (sustained_fp8_tflops) is what brings the AMD rows near: at the datasheet's peak the MI325X
    is +48% and the MI300X +84%."""
    row = next(r for r in ROWS if r["id"] == row_id)
    uncapped = get_accelerator(row["accelerator"]).model_copy(update={"sustained_fp8_tflops": None})
    assert per_gpu(row, uncapped) / float(row["measured_tokens_per_s_per_gpu"]) - 1 > 0.4
