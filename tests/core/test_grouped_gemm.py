"""Expert GEMMs measured on our H200 (data/measurements/speed/h200-grouped-2026-11-26.jsonl, bench/gpu/grouped_gemm.py,
2026-11-26): torch._grouped_mm (the kernel transformers' `grouped_mm` experts call) at four published expert shapes
and 512-16,384 tokens spread evenly over the experts, and transformers' whole Qwen3-MoE block at the same token counts.

The grouped GEMMs are CHECK rows for core/speed/moe.py's rates (the touched experts' bytes at MOE_BANDWIDTH_EFFICIENCY,
their FLOPs at the grouped-GEMM efficiency fitted on vLLM's Triton kernel): within 25% of the kernel's time, or a
recorded miss. The block is the CALIBRATION of transformers' unfused MoE traffic (core/memory/engines.py
TRANSFORMERS_MOE_UNFUSED_BYTES), checked on the H100 prefill rows of tests/core/test_measured_h100_prefill.py."""

from __future__ import annotations

import json

import pytest

from core.catalog.accelerators import get_accelerator
from core.catalog.presets import DATA_DIR
from core.memory.engines import TRANSFORMERS_MOE_UNFUSED_BYTES
from core.speed.moe import MOE_LAYER_FIXED_S
from tests.core.recorded import check_row
from tests.core.test_moe_speed import kernel_us

PATH = DATA_DIR / "measurements" / "speed" / "h200-grouped-2026-11-26.jsonl"
LINES = [json.loads(ln) for ln in PATH.read_text().splitlines() if ln.strip()]
GEMMS = [r for r in LINES if r["kind"] == "grouped_gemm"]
TOLERANCE = 0.25

_CUTLASS = (
    "compute-bound: torch._grouped_mm (CUTLASS on Hopper) runs at 600-672 TFLOP/s (61-68% of the dense peak) from "
    "about 512 rows an expert whatever the reduction length, near a dense GEMM's rate; the K0 tile-overhead model was "
    "fitted on vLLM's Triton fused-MoE kernel (tests/data/moe_kernels.csv), which is slower at these sizes"
)
_SMALL = "32 rows an expert: below the kernel's 64-128-row tiles, so it reads its experts' weights slower than a full tile does"
# row -> (measured seconds, ours when recorded, a miss's reason or "")
ROWS: dict[str, tuple[float, float, str]] = {
    "qwen3-30b-a3b 512": (0.000454, 0.000331, _SMALL),
    "qwen3-30b-a3b 2048": (0.000446, 0.000446, ""),
    "qwen3-30b-a3b 8192": (0.000984, 0.001785, _CUTLASS),
    "qwen3-30b-a3b 16384": (0.001847, 0.003570, _CUTLASS),
    "gpt-oss-120b 512": (0.002143, 0.001746, ""),
    "gpt-oss-120b 2048": (0.002085, 0.001746, ""),
    "gpt-oss-120b 8192": (0.002570, 0.003643, _CUTLASS),
    "gpt-oss-120b 16384": (0.005435, 0.007286, _CUTLASS),
    "mixtral-8x7b 512": (0.000883, 0.000773, ""),
    "mixtral-8x7b 2048": (0.002221, 0.002856, _CUTLASS),
    "mixtral-8x7b 8192": (0.008627, 0.011425, _CUTLASS),
    "mixtral-8x7b 16384": (0.017173, 0.022850, _CUTLASS),
    "deepseek-v3 512": (0.006792, 0.006181, ""),
    "deepseek-v3 2048": (0.007058, 0.006181, ""),
    "deepseek-v3 8192": (0.012268, 0.012062, ""),
    "deepseek-v3 16384": (0.018965, 0.024123, _CUTLASS),
}


def ours_s(r: dict) -> float:
    """The roofline's expert GEMMs as tests/core/test_moe_speed.py prices vLLM's fused kernel, less its fixed routing
    time (the kernel alone here): the touched experts' bytes at the grouped kernels' bandwidth, or their FLOPs at the
    grouped-GEMM rate, whichever is longer."""
    row = dict(experts=r["experts"], experts_per_token=r["top_k"], batch=r["tokens"], hidden=r["hidden"], expert_width_per_device=r["width"])
    return kernel_us({**row, "accelerator": "h200", "weights_format": "bf16"}) / 1e6 - MOE_LAYER_FIXED_S


def test_rows_are_the_run() -> None:
    assert {r["versions"]["gpu"] for r in LINES} == {"NVIDIA H200"}
    assert {f"{r['model']} {r['tokens']}" for r in GEMMS} == set(ROWS)
    assert sorted(r["tokens"] for r in LINES if r["kind"] == "moe_block") == [512, 2048, 8192, 16384]


@pytest.mark.parametrize("r", GEMMS, ids=lambda r: f"{r['model']} {r['tokens']}")
def test_grouped_gemm_times(r: dict) -> None:
    measured = r["up_seconds"] + r["down_seconds"]
    recorded = ROWS[f"{r['model']} {r['tokens']}"]
    assert measured == pytest.approx(recorded[0], rel=1e-3)
    check_row(ours_s(r), measured, recorded, TOLERANCE)


def test_transformers_moe_traffic_is_the_block_less_its_gemms() -> None:
    """The calibration: the block at 16,384 tokens less its two grouped GEMMs, as bytes at the H200's datasheet
    bandwidth over the 16,384 x 8 routed rows. At 8,192 tokens the same bytes a row give the block within 10%."""
    block = {r["tokens"]: r["seconds"] for r in LINES if r["kind"] == "moe_block"}
    gemm = {r["tokens"]: r["up_seconds"] + r["down_seconds"] for r in GEMMS if r["model"] == "qwen3-30b-a3b"}
    bandwidth = get_accelerator("h200").memory_bandwidth_bytes_per_s
    assert TRANSFORMERS_MOE_UNFUSED_BYTES == pytest.approx((block[16384] - gemm[16384]) * bandwidth / (16384 * 8), rel=1e-3)
    at_8192 = gemm[8192] + 8192 * 8 * TRANSFORMERS_MOE_UNFUSED_BYTES / bandwidth
    assert at_8192 == pytest.approx(block[8192], rel=0.10)
    assert (block[16384] - gemm[16384]) / block[16384] > 0.7  # most of the block is not its GEMMs
