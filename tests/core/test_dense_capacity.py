"""Per-GPU capacity of a dense model as the planner prices it, against TensorRT-LLM's published peak throughput
(tests/data/dense_capacity.csv; issue #27: "Per-GPU capacity of the planner's cheapest plan is within 25% for dense
and MoE models"; the MoE rows are tests/core/test_expert_parallel.py's). Each row is the serving core's replica
capacity (core/money/serving.py) at the published model, format, FP8 KV cache and layout, with latency targets that
do not bind (trtllm-bench queues every request at once), divided by the replica's devices. Nothing is calibrated on
these rows: TensorRT-LLM's decode time per sequence and layer (data/engine_timing.csv) was fitted on a NIM latency
row, and these rows check it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.money.serving import Traffic, replica_capacity, request_scenario
from core.scenario import Scenario

ROWS = list(csv.DictReader((Path(__file__).resolve().parents[1] / "data" / "dense_capacity.csv").open(newline="")))


def per_gpu(row: dict[str, str]) -> float:
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
        serving_engine="tensorrt-llm",
        accelerator=row["accelerator"],
        tensor_parallel=n,
    )
    cap = replica_capacity(request_scenario(sc, traffic), get_accelerator(row["accelerator"]), Layout(1, n, 1), traffic)
    assert not isinstance(cap, str), cap
    return cap.output_tokens_per_s / n


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_dense_peak_capacity_against_tensorrt_llm(row: dict[str, str]) -> None:
    err = per_gpu(row) / float(row["measured_tokens_per_s_per_gpu"]) - 1
    within = abs(err) <= float(row["tolerance"])
    assert within == (row["expect"] == "within"), f"{err:+.1%} ({row['note']})"


def test_the_rows_cover_both_hopper_parts_and_short_and_long_contexts() -> None:
    assert {r["accelerator"] for r in ROWS} == {"h100-sxm", "h200"}
    assert {(r["prompt_tokens"], r["output_tokens"]) for r in ROWS} >= {("1000", "1000"), ("8192", "1024"), ("1024", "8192"), ("32768", "1024")}
    assert all(r["expect"] == "within" for r in ROWS)
