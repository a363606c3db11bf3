"""A power-capped part's sustained matmul rate (data/accelerators.csv `sustained_tensor_tflops`,
Accelerator.tensor_flops_per_s): the T4's 70 W cap holds a long FP16 GEMM near 24 of its 65 TFLOP/s (NVIDIA Developer
Forums, 'About GPU peak performance', 2023), so training's matmuls and serving's compute-bound prefill run at the
models' efficiencies of that ceiling (scaled by the H100's own ceiling, 80% of its peak, on which they were fitted),
not of the datasheet peak. Checked on Unsloth's TinyLlama notebook on a T4 (tests/data/finetune_speeds.csv: +40%
without the cap, -7% with the cap itself as the rate, about -4% with it scaled)."""

from __future__ import annotations

import pytest

from core.catalog.accelerators import REFERENCE_CEILING, get_accelerator
from core.layout import Layout
from core.scenario import Scenario
from core.speed.roofline import COMPUTE_EFF, roofline
from core.speed.timing import MATMUL_EFFICIENCY


def test_only_the_power_capped_part_is_capped_and_only_its_16_bit_peak() -> None:
    t4, h100 = get_accelerator("t4"), get_accelerator("h100-sxm")
    assert t4.sustained_tensor_tflops == 24 and h100.sustained_tensor_tflops is None
    reference = REFERENCE_CEILING["16-bit"]
    assert reference == pytest.approx(0.803, abs=0.001)  # the H100's 794.5 of 989
    # 78% of 65 = 50.5 TFLOP/s; the T4's ceiling at the H100's share of its own: 0.777 x 24 / 0.803 = 23.2
    assert t4.tensor_flops_per_s(65, MATMUL_EFFICIENCY) == pytest.approx(MATMUL_EFFICIENCY * 24e12 / reference)
    assert t4.tensor_flops_per_s(65, 0.3) == pytest.approx(0.3 * 24e12 / reference)  # any efficiency: of the ceiling
    assert t4.tensor_flops_per_s(8.1, MATMUL_EFFICIENCY) == pytest.approx(8.1e12 * MATMUL_EFFICIENCY)  # FP32 units: not the tensor cap
    assert h100.tensor_flops_per_s(989, MATMUL_EFFICIENCY) == pytest.approx(989e12 * MATMUL_EFFICIENCY)


def test_a_t4_prompt_pass_runs_at_the_sustained_rate() -> None:
    """Serving's compute on a T4 (the roofline's flops_per_s, what a long prompt's prefill divides by): COMPUTE_EFF of
    its 24 TFLOP/s ceiling scaled as the H100's (0.60 x 24 / 0.80 = 17.9), where the datasheet's 65 x COMPUTE_EFF
    would say 39; the H100's is its datasheet's."""
    sc = Scenario(model="llama-3.2-1b", accelerator="t4", seq_len=8192, batch_size=1, weights_format="fp16", kv_cache_format="fp16")
    assert 65 * COMPUTE_EFF > 24
    assert roofline(sc, get_accelerator("t4"), Layout(1, 1, 1)).flops_per_s == pytest.approx(COMPUTE_EFF * 24e12 / REFERENCE_CEILING["16-bit"])
    h100 = sc.model_copy(update={"accelerator": "h100-sxm"})
    assert roofline(h100, get_accelerator("h100-sxm"), Layout(1, 1, 1)).flops_per_s == pytest.approx(989e12 * COMPUTE_EFF)
