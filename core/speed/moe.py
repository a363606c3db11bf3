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

# Spread of the routed tokens over expert-parallel ranks that a real router adds to uniform routing (relative standard
# deviation between ranks), from TensorRT-LLM's published per-rank counts (module docstring: Table 1 of its tech blog 4,
# DeepSeek-R1, EP 32/36, 1,024 tokens a rank): sqrt((std/mean)^2 - (1 - 1/n)/mean), averaged over the two EPLB runs
# (0.0404 at EP 32 with 288 slots, 0.0426 at EP 36), and the run without EPLB.
_TRTLLM_MEAN_TOKENS_PER_RANK = 1024.0
ROUTER_RANK_CV_EPLB = (
    math.sqrt((52.0 / 1024.0) ** 2 - (1 - 1 / 32) / _TRTLLM_MEAN_TOKENS_PER_RANK) + math.sqrt((53.9 / 1024.0) ** 2 - (1 - 1 / 36) / _TRTLLM_MEAN_TOKENS_PER_RANK)
) / 2.0
ROUTER_RANK_CV_NO_EPLB = math.sqrt((491.6 / 1024.0) ** 2 - (1 - 1 / 32) / _TRTLLM_MEAN_TOKENS_PER_RANK)
  of 3.35 TB/s, within 6% at every batch from 1 to 128. Checked on three other published benchmarks of the same
  kernel in tests/data/moe_kernels.csv (Qwen3-30B-A3B bf16 on a B200, Qwen3-235B-A22B FP8 at TP 8 on an H200,
  Mixtral 8x7B bf16 at TP 2 on an H100).
- Routing imbalance. Under expert parallelism (each of n ranks holds E/n whole experts) a step waits for the busiest
  rank. The token-expert pairs a rank receives are a sum of many routing choices: with a mean of mu per rank the load
  is close to normal, mean mu and relative spread cv, where cv^2 = cv_router^2 + (1 - 1/n) / mu: the multinomial
  spread of uniform routing (balls into bins in the heavily loaded case, Raab & Steger 1998, "Balls into bins - a
  simple and tight analysis": max = mu + sqrt(2 mu ln n) to first order) plus the router's own persistent skew
  between ranks. The busiest of n ranks then carries mu x (1 + z_n x cv), z_n the expected largest of n standard
  normals (Blom's approximation, inverse normal of (n - 0.375) / (n + 0.25)). cv_router comes from a published
  measurement of a real router, not a fit: TensorRT-LLM's tech blog 4 (NVIDIA/TensorRT-LLM
  docs/source/blogs/tech_blog/blog4_Scaling_Expert_Parallelism_in_TensorRT-LLM.md, Table 1, DeepSeek-R1 on 32 GB200,
  machine-translation data, local batch 256, mean 1,024 routed tokens per rank) gives the standard deviation over ranks
  of 52.0 and 53.9 with EPLB (EP 32 with 9 slots a rank; EP 36) and 491.6 without it. Less the uniform spread
  (sqrt(1,024) = 32) that is a router spread of 4.1% with EPLB and 48% without. The same table's hottest-rank excess,
  (max - mean) / mean, is the check: 0.109 and 0.115 with EPLB, where this gives 0.107 and 0.109; without EPLB 1.564,
  where this gives 0.99 (a miss: two hot experts on one rank make a heavier tail than a normal one).
- Compute. Each touched expert sees about B x k / E tokens, padded by the kernel to its block of 16-64 rows; at
  decode batches that padding is a few percent of a step's FLOPs and the step stays bandwidth-bound, so the
  FLOPs stay 2 x active parameters per token (the roofline's compute side).
- Compute rate of the grouped GEMMs. Each output tile of a grouped GEMM walks the reduction dimension K (the hidden
  size for gate and up, the expert's width on this device for down) and pays a fixed prologue and epilogue (pipeline
  fill, scales, the store). With that fixed part worth K0 steps of K, a tile runs at K / (K + K0) of the rate it
  reaches on a long K, taken as the dense compute efficiency (core/speed/roofline.py COMPUTE_EFF: a grouped GEMM does
  not beat a dense one). Over one expert's three matrices (gate and up: 2/3 of its FLOPs at K = hidden; down: 1/3 at
  K = width / TP) the FLOP-weighted time gives
      efficiency = COMPUTE_EFF / (2/3 x (1 + K0 / hidden) + 1/3 x (1 + K0 / width per device)).
  Small experts split over many devices pay most: Qwen3-30B-A3B at TP 4 (down K = 192) runs its experts at a third
  of the dense rate, gpt-oss (K = 2,880) at three quarters. K0 is the one constant, fitted on one published kernel
  time in the compute-bound range: vLLM's benchmark_moe.py for Mixtral 8x7B bf16 at TP 2 on one H100 (vllm-project/
  vllm PR #24700, 2025-09-11, tuned config, batch 1,536: 1,122.9 us, 384 tokens an expert), K0 = 938. Checked on
  the same kernel at batches 256-1,024 and on another part and shape: Gemma 4's experts (E = 128, top-8, 2,816 x
  704) in bf16 on an H200, batches 8-4,096 (vllm-project/vllm PR #44818, 2026-06-08, tuned column), within 25%
  (tests/data/moe_kernels.csv). vLLM's Triton FP8 W8A8 path is slower than this at large batches (Qwen3-30B-A3B on
  an H100 from batch 512 on, recorded misses in the same table: 144-188 TFLOP/s at batches 1,024-4,096, under 10% of
  the FP8 peak and below the bf16 rate of a similar shape); it is not modelled. Another kernel family is faster:
  torch._grouped_mm (CUTLASS) on our H200 reaches 600-672 TFLOP/s from about 512 rows an expert at every shape
  tried, K = 768 included (tests/core/test_grouped_gemm.py, recorded misses of this model); the rate here is the
  Triton kernel's, which vLLM and SGLang run for bf16 experts.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

from core.model.architecture import Architecture

# Fixed time of one MoE layer's fused expert kernels per decode step (routing, sorting, two grouped GEMM launches,
# activation, weighted sum), and the share of datasheet bandwidth the grouped GEMMs reach on the touched experts'
# bytes: fitted together on vLLM's published fused-MoE kernel times (module docstring: 11 batches, two unknowns).
MOE_LAYER_FIXED_S = 32.3e-6
MOE_BANDWIDTH_EFFICIENCY = 0.76
# Fixed work of a grouped-GEMM output tile in steps of the reduction dimension (module docstring: fitted on vLLM's
# Mixtral 8x7B bf16 TP 2 fused-MoE time at batch 1,536 on an H100, vllm-project/vllm PR #24700).
MOE_GEMM_TILE_OVERHEAD_K = 938.0

# Spread of the routed tokens over expert-parallel ranks that a real router adds to uniform routing (relative standard
# deviation between ranks), from TensorRT-LLM's published per-rank counts (module docstring: Table 1 of its tech blog 4,
# DeepSeek-R1, EP 32/36, 1,024 tokens a rank): sqrt((std/mean)^2 - (1 - 1/n)/mean), averaged over the two EPLB runs
# (0.0404 at EP 32 with 288 slots, 0.0426 at EP 36), and the run without EPLB.
_TRTLLM_MEAN_TOKENS_PER_RANK = 1024.0
ROUTER_RANK_CV_EPLB = (
    math.sqrt((52.0 / 1024.0) ** 2 - (1 - 1 / 32) / _TRTLLM_MEAN_TOKENS_PER_RANK) + math.sqrt((53.9 / 1024.0) ** 2 - (1 - 1 / 36) / _TRTLLM_MEAN_TOKENS_PER_RANK)
) / 2.0
ROUTER_RANK_CV_NO_EPLB = math.sqrt((491.6 / 1024.0) ** 2 - (1 - 1 / 32) / _TRTLLM_MEAN_TOKENS_PER_RANK)


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


def grouped_gemm_compute_efficiency(hidden: int, expert_width_per_device: float, dense_efficiency: float) -> float:
    """Share of peak the grouped expert GEMMs reach when compute-bound: `dense_efficiency` scaled by each matrix's
    K / (K + K0), FLOP-weighted over gate and up (K = hidden) and down (K = the expert's width on this device)
    (module docstring)."""
    k0 = MOE_GEMM_TILE_OVERHEAD_K
    return dense_efficiency / (2.0 / 3.0 * (1.0 + k0 / hidden) + 1.0 / 3.0 * (1.0 + k0 / expert_width_per_device))


def expected_max_normal(n: int) -> float:
    """Expected largest of n independent standard normal draws (Blom 1958: the inverse normal of (n - 0.375) /
    (n + 0.25)); 0 for one draw. 2.07 for 32, within 1% of the exact value."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def busiest_rank_load_factor(ranks: int, pairs_per_rank: Any, router_cv: float = ROUTER_RANK_CV_EPLB) -> Any:
    """The busiest of `ranks` expert-parallel ranks' routed token-expert pairs over the mean (`pairs_per_rank`, which may
    be an array): 1 + z_n x sqrt(router_cv^2 + (1 - 1/n) / mean) (module docstring). 1 for one rank."""
    if ranks <= 1:
        return 1.0 + 0.0 * pairs_per_rank
    spread = (router_cv**2 + (1.0 - 1.0 / ranks) / pairs_per_rank) ** 0.5
    return 1.0 + expected_max_normal(ranks) * spread
