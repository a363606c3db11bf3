"""Mixture-of-experts decode: which expert weights a step streams, and what the grouped expert kernels cost.

- Experts touched. B tokens, each routed to k of the E experts of an MoE layer, touch on average
  E x (1 - (1 - k/E)^B) distinct experts when routing is uniform (each expert is missed by all B tokens with
  probability (1 - k/E)^B). A step therefore reads the active experts at batch 1 and tends to every expert as B
  grows; shared experts and the dense parts (attention, dense layers, the output head) are read at every step.
  Real routers are less even than uniform, which touches fewer distinct experts, so under tensor parallelism
  (each device holds a slice of every expert: vLLM's and SGLang's default, `--enable-expert-parallel` and
  `--ep-size` are off by default) the uniform count is an upper bound on the bytes.
- Grouped expert kernels. vLLM's and SGLang's fused MoE kernel (Triton) runs all the touched experts of a layer in
  one launch pair (gate/up, then down) plus routing, token sorting, activation and the weighted sum: a fixed time
  per MoE layer and step, then the touched experts' bytes at a bandwidth below the dense GEMMs'. Both constants
  come from a published kernel benchmark, not from serving runs: vLLM's benchmarks/kernels/benchmark_moe.py for
  Qwen3-30B-A3B (E = 128, top-8, 2,048 x 768 experts, FP8 W8A8, one H100 SXM; vllm-project/vllm PR #24700,
  2025-09-11, "Main" column, batches 1-128). A least-squares line through kernel time against the bytes of the
  experts touched (the uniform count above) gives MOE_LAYER_FIXED_S = 32.3 us and MOE_BANDWIDTH_EFFICIENCY = 0.76
  of 3.35 TB/s, within 6% at every batch from 1 to 128. Checked on three other published benchmarks of the same
  kernel in tests/data/moe_kernels.csv (Qwen3-30B-A3B bf16 on a B200, Qwen3-235B-A22B FP8 at TP 8 on an H200,
  Mixtral 8x7B bf16 at TP 2 on an H100).
- Compute. Each touched expert sees about B x k / E tokens, padded by the kernel to its block of 16-64 rows; at
  decode batches that padding is a few percent of a step's FLOPs and the step stays bandwidth-bound, so the
  FLOPs stay 2 x active parameters per token (the roofline's compute side).
"""

from __future__ import annotations

from typing import Any

from core.model.architecture import Architecture

# Fixed time of one MoE layer's fused expert kernels per decode step (routing, sorting, two grouped GEMM launches,
# activation, weighted sum), and the share of datasheet bandwidth the grouped GEMMs reach on the touched experts'
# bytes: fitted together on vLLM's published fused-MoE kernel times (module docstring: 11 batches, two unknowns).
MOE_LAYER_FIXED_S = 32.3e-6
MOE_BANDWIDTH_EFFICIENCY = 0.76


def experts_untouched_fraction(arch: Architecture, tokens: Any) -> Any:
    """Expected share of an MoE layer's routed experts that none of `tokens` tokens is routed to (uniform routing);
    0 for a dense model. `tokens` may be an array."""
    if not arch.is_moe:
        return 0.0
    return (1.0 - arch.experts_per_token / arch.num_experts) ** tokens


def moe_bandwidth_efficiency(dense_efficiency: float) -> float:
    """Share of datasheet bandwidth the grouped expert GEMMs reach: the kernel's, or the engine's dense figure where
    that is lower (weights dequantized inside the kernel)."""
    return min(dense_efficiency, MOE_BANDWIDTH_EFFICIENCY)
