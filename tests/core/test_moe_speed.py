"""Mixture-of-experts decode (core/speed/moe.py): the fused expert kernels against published kernel benchmarks
(tests/data/moe_kernels.csv), the experts a step touches, and dense models left exactly as they were."""

import csv
from pathlib import Path

import numpy as np
import pytest

import core.speed.roofline as roofline_module
from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.scenario import Scenario
from core.speed.moe import MOE_BANDWIDTH_EFFICIENCY, MOE_LAYER_FIXED_S, experts_untouched_fraction
from core.speed.roofline import inference_speed, roofline, weight_read_bytes

BYTES_PER_WEIGHT = {"fp8": 1, "bf16": 2}
KERNELS = list(csv.DictReader((Path(__file__).resolve().parents[1] / "data" / "moe_kernels.csv").open(newline="")))


def kernel_us(row: dict) -> float:
    """One MoE layer's fused expert kernels at the row's batch: the fixed time plus the touched experts' gate, up and
    down matrices (3 x hidden x width per device) at the grouped kernels' bandwidth."""
    e, k, b = int(row["experts"]), int(row["experts_per_token"]), int(row["batch"])
    touched = e * (1.0 - (1.0 - k / e) ** b)
    bytes_per_expert = 3 * int(row["hidden"]) * int(row["expert_width_per_device"]) * BYTES_PER_WEIGHT[row["weights_format"]]
    bandwidth = get_accelerator(row["accelerator"]).memory_bandwidth_bytes_per_s * MOE_BANDWIDTH_EFFICIENCY
    return (MOE_LAYER_FIXED_S + touched * bytes_per_expert / bandwidth) * 1e6


@pytest.mark.parametrize("row", KERNELS, ids=[r["id"] for r in KERNELS])
def test_fused_moe_kernel_times(row):
    got, measured = kernel_us(row), float(row["measured_us"])
    assert got == pytest.approx(measured, rel=float(row["tolerance"])), (got, row["source"])


def test_kernel_table_has_checks_on_other_parts_and_shapes():
    checks = [r for r in KERNELS if r["expect"] == "within"]
    calibration = [r for r in KERNELS if r["expect"] == "calibration"]
    assert len(calibration) >= 2 * 2  # two constants, from many more batches than unknowns
    assert {r["accelerator"] for r in checks} >= {"b200", "h200", "h100-sxm"}
    assert {r["experts"] for r in checks} == {"8", "128"}


def test_experts_touched_from_active_to_all():
    a = Scenario(model="qwen3-30b-a3b").architecture
    assert experts_untouched_fraction(a, 1) == pytest.approx(1 - 8 / 128)
    full = weight_read_bytes(a, "bf16", 10_000)
    one = weight_read_bytes(a, "bf16", 1)
    reads = weight_read_bytes(a, "bf16", np.array([1, 2, 8, 64, 512]))
    assert np.all(np.diff(reads) > 0)
    assert one < 0.25 * full  # 8 of 128 experts at batch 1: about 3.3B of the 30.5B parameters, plus the head
    assert full == pytest.approx(weight_read_bytes(a, "bf16", 1e9))  # every expert
    assert experts_untouched_fraction(Scenario(model="llama-3.1-8b").architecture, 64) == 0.0


def test_moe_decode_step_adds_the_fixed_kernel_time_per_moe_layer():
    sc = Scenario(model="qwen3-30b-a3b", accelerator="h100-sxm", seq_len=2)
    acc = get_accelerator("h100-sxm")
    roof = roofline(sc, acc, Layout(1, 1, 1))
    dense_like = roofline_module.ENGINES["vllm"].layer_overhead_s * sc.architecture.num_layers
    assert roof.step_overhead_s == pytest.approx(dense_like + MOE_LAYER_FIXED_S * sc.architecture.moe_layers)
    # the step is never shorter than its bytes at the datasheet bandwidth
    step, read, _ = roof.decode_step(np.array([1.0, 8.0, 64.0]), 1.0)
    assert np.all(step > read / acc.memory_bandwidth_bytes_per_s)


@pytest.mark.parametrize("model,accelerator,fmt,tp", [("llama-3.1-8b", "h100-sxm", "fp8", 1), ("llama-3.1-70b", "h100-sxm", "bf16", 4), ("qwen3-4b", "l4", "bf16", 1)])
def test_dense_models_do_not_depend_on_the_moe_terms(monkeypatch, model, accelerator, fmt, tp):
    """Dense rows must not move: the MoE constants could be anything and a dense model's speed stays the same."""
    sc = Scenario(model=model, accelerator=accelerator, weights_format=fmt, tensor_parallel=tp, seq_len=2000, output_tokens=1000, batch_size=64)
    before = inference_speed(sc)
    monkeypatch.setattr(roofline_module, "MOE_LAYER_FIXED_S", 1.0)
    monkeypatch.setattr(roofline_module, "moe_bandwidth_efficiency", lambda _: 1e-3)
    after = inference_speed(sc)
    assert after == before
    moe = Scenario(model="qwen3-30b-a3b", accelerator=accelerator, weights_format=fmt, seq_len=2000, output_tokens=1000, batch_size=64)
    assert inference_speed(moe).decode_step_s > 1.0  # the same patch does reach an MoE model


def test_experts_and_dense_part_each_on_their_own_roofline():
    """Qwen3-30B-A3B bf16 on one H100 at 1,024 tokens a step: attention and the output head are compute-bound
    (2 x 1.2B FLOPs a token, 4 ms), while every expert sees 64 tokens and streams (58 GB of experts, 23 ms). The two
    run one after the other, so the step is their sum, above the single roofline over the totals."""
    sc = Scenario(model="qwen3-30b-a3b", accelerator="h100-sxm", seq_len=2)
    roof = roofline(sc, get_accelerator("h100-sxm"), Layout(1, 1, 1))
    step = float(roof.decode_step(1024.0, 1.0)[0]) - roof.step_overhead_s
    experts = float(roofline_module._experts_read(roof.arch, roof.weight_parts, 1024.0))
    dense_bytes = float(weight_read_bytes(roof.arch, "bf16", 1024.0)) - experts
    flops = 1024.0 * 2.0 * roof.arch.active_params
    single = max((dense_bytes + experts) / roof.bytes_per_s, flops / roof.flops_per_s)
    expert_flops = 1024.0 * 2.0 * roof.expert_active_params
    split = max(dense_bytes / roof.bytes_per_s, (flops - expert_flops) / roof.flops_per_s) + max(experts / roof.expert_bytes_per_s, expert_flops / roof.flops_per_s)
    assert step == pytest.approx(split, rel=0.01)  # the KV cache of 1,024 one-token contexts is negligible
    assert step > 1.1 * single
