"""Serving engines: how each one uses memory and how fast one decode step is.

Memory: what the engine allocates besides the weights (its KV cache policy,
the prefill working set, CUDA graphs, pre-allocation). Speed: a decode step
takes the roofline time at the engine's bandwidth efficiency plus a fixed
per-layer overhead (kernel launches and framework time, which dominate small
batches when there are no CUDA graphs). Each constant is calibrated on one
measurement, named below, and checked against others in
tests/core/test_roofline.py (tests/data/engine_speeds.csv).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from core.units import BYTES_PER_GIB

# Calibrations on our H100 measurements (data/measurements/h100-2026-11-23.jsonl), Llama-3.1-8B bf16 at batch 1:
# eager static-cache decode 40.6 ms, compiled 8.6 ms, generate() 61.9 ms per token; vLLM: 6.44 ms per token at
# zero context on an H100 (vLLM blog ITL fit; tests/data/engine_speeds.csv). The roofline part: a decode step reads
# 15.01 GB of weights (all but the embedding table) at 80% of 3.35 TB/s = 5.60 ms, and with transformers'
# repeat_kv a 1,024-token cache three times over for 4 query heads per KV head (1 + 2 x 4 = 9 x 134 MB) = 0.45 ms.
_ROOF_8B_S = 15.01e9 / (3.35e12 * 0.80)
_KV_1K_EXPANDED_S = 9 * 1024 * 131_072 / (3.35e12 * 0.80)
EAGER_LAYER_OVERHEAD_S = (40.6e-3 - _ROOF_8B_S - _KV_1K_EXPANDED_S) / 32
COMPILED_LAYER_OVERHEAD_S = (8.6e-3 - _ROOF_8B_S - _KV_1K_EXPANDED_S) / 32
GENERATE_LOOP_S = 61.9e-3 - 40.6e-3
# transformers' MoE layer with grouped_mm experts (integrations/moe.py): the router, top-k, sort, gather, histc,
# cumsum, masks, gate and weighted sum run as separate kernels over the tokens x k routed rows, around the two grouped
# GEMMs. Measured on our H200 (data/measurements/speed/h200-grouped-2026-11-26.jsonl, bench/gpu/grouped_gemm.py):
# Qwen3-30B-A3B's whole block took 6.638 ms at 16,384 tokens, its two grouped GEMMs 1.847 ms; the rest, taken as
# traffic at the H200's 4.8 TB/s over 16,384 x 8 routed rows, is about 175 kB a routed row and MoE layer.
TRANSFORMERS_MOE_UNFUSED_BYTES = (6.638e-3 - 1.847e-3) * 4.8e12 / (16_384 * 8)
VLLM_LAYER_OVERHEAD_S = (6.44e-3 - _ROOF_8B_S) / 32
# llama.cpp: 16-bit weights run at about 80% of the bandwidth with no measurable per-layer time (RTX 4090/3090 and
# L40S, XiongjieDai/GPU-Benchmarks-on-LLM-Inference); k-quant dequantization kernels reach 75% on the 70B models'
# large matrices but cost time per layer: calibrated on Llama-3-8B Q4_K_M on an H100 PCIe, 145.55 tokens/s
# (4.62 GB read per token at 75% of 2.0 TB/s = 3.08 ms; the rest over 32 layers).
# TensorRT-LLM behind NVIDIA NIM: each user sees 4.63 ms between tokens of Llama 3.1 8B fp8 on one H100 at one user,
# 200 prompt / 200 output tokens (NIM 1.8.0 benchmark, docs.nvidia.com/nim/benchmarking/llm/latest/performance.html,
# read 2026-11-26). The roofline's step reads 8.05 GB at 85% of 3.35 TB/s (2.83 ms) plus 32 layers x 10 us; the rest
# is the executor's and the streaming server's time per step. Checked on the other one-user rows of
# tests/data/load_latency.csv (Llama 3.3 70B fp8 TP2, other prompt lengths).
TRTLLM_STEP_OVERHEAD_S = 4.63e-3 - (8.05e9 / (3.35e12 * 0.85) + 32 * 10e-6)
LLAMACPP_QUANT_LAYER_OVERHEAD_S = (1 / 145.55 - 4.6174e9 / (2000e9 * 0.75)) / 32

# MLX (mlx-lm's generate / server) on Apple silicon: one efficiency for 16-bit and MLX-quantized weights, no per-layer
# time (MLX evaluates a decode step as one lazily built graph). Calibrated on Llama-3.3-70B-Instruct-4bit on an M3 Max
# (40-core GPU, 64 GB, 400 GB/s), 9.351 tokens/s at a 260-token prompt (ml-explore/mlx-examples issue #1029, MLX 0.21.1,
# mlx-lm 0.20.4): a step reads 39.10 GB (the MLX 4-bit weights but the embedding table), so 39.10e9 x 9.351 / 400e9.
# The same M3 Max runs llama.cpp q4_0 at 9.07 tokens/s and Q4_K_M at 8.15 (same thread): about 90% of the datasheet
# bandwidth on the 70B model's large matrices for both engines, so the figure is not MLX's alone. Checked in
# tests/core/test_mlx.py (tests/data/mlx_speeds.csv).
MLX_BANDWIDTH_EFFICIENCY = 39.10e9 * 9.351 / 400e9
# mlx_lm.generate_step(prefill_step_size=2048): a prompt is prefilled 2,048 tokens at a time.
MLX_PREFILL_STEP_TOKENS = 2048

# Engines the planner serves from one device per replica: the launch command here is mlx_lm.server on one machine;
# MLX's distributed inference over several Macs (mlx.launch) is not generated, so no plan splits a model for it.
SINGLE_DEVICE_ENGINES = frozenset({"mlx"})

EngineId = Literal["vllm", "sglang", "tensorrt-llm", "llama.cpp", "hf-transformers", "hf-transformers-compiled", "deepspeed-mii", "mlx"]

# DeepSpeed-MII / FastGen (DeepSpeed-Inference v2, deepspeed/inference/v2/ragged/manager_configs.py): the KV cache is
# allocated in blocks from all the memory left after the weights but MemoryConfig.size = 1_000_000_000 bytes kept back
# (AllocationMode.RESERVE); a forward pass holds at most max_ragged_batch_size = 768 tokens (Dynamic SplitFuse chunks
# long prompts to that budget); max_context = 8192 tokens per sequence by default.
MII_RESERVED_BYTES = 1_000_000_000
MII_RAGGED_BATCH_TOKENS = 768


class ServingEngine(NamedTuple):
    id: str
    label: str
    prefill_chunk_tokens: int | None  # tokens prefilled per step; None: the whole batch of prompts at once
    kv_whole_context: bool  # the KV cache is allocated for the whole context up front (llama.cpp n_ctx, static caches)
    preallocate_fraction: float | None  # the engine reserves this fraction of device memory at start (vLLM, SGLang)
    graphs_bytes: float  # CUDA graphs captured at start
    bandwidth_efficiency: float  # fraction of datasheet bandwidth a decode step reaches (16-bit weights)
    dequant_efficiency: float  # the same for integer-quantized weights (dequantized in the kernel)
    layer_overhead_s: float  # per layer and decode step: kernel launches and framework time
    quant_layer_overhead_s: float  # more per layer for integer-quantized weights (dequantization kernels)
    step_overhead_s: float  # per decode step, whatever the model: the generation loop's own time
    kv_expanded: bool  # grouped-query K/V are copied out to every query head each step (transformers repeat_kv)
    source: str
    notes: tuple[str, ...]
    reserve_bytes: float | None = None  # the engine takes all device memory but this many bytes at start (DeepSpeed-MII)
    # The engine sizes its compute buffer ahead from the graph (ggml-alloc's gallocr in llama.cpp: the "compute buffer"
    # its log prints), so no caching allocator keeps a reserve beyond it: llama.cpp's memory breakdown reports model,
    # context and compute buffers and 0 MiB unaccounted (ggml-org/llama.cpp PR #22673, comment of 2026-05-10).
    planned_buffers: bool = False
    # Per layer: the CPU's time to launch one layer's kernels when a prompt's forward pass runs eagerly (no CUDA
    # graph). The GPU runs each kernel as soon as it is launched, so the pass takes the longer of its GPU time and
    # layers x this, not their sum (core/speed/roofline.py _Roof.prefill).
    prefill_launch_layer_s: float = 0.0
    # Per MoE layer and routed (token, expert) row of an eager prompt pass: the bytes, at the datasheet bandwidth, of
    # an MoE layer whose routing and combining are not fused into the expert GEMMs (transformers).
    prefill_moe_unfused_bytes: float = 0.0


ENGINES: dict[str, ServingEngine] = {
    e.id: e
    for e in (
        ServingEngine(
            "vllm",
            "vLLM",
            8192,
            False,
            0.9,
            0.5 * BYTES_PER_GIB,
            0.80,
            0.55,
            VLLM_LAYER_OVERHEAD_S,
            0.0,
            0.0,
            False,
            "vLLM docs (gpu_memory_utilization=0.9, chunked prefill max_num_batched_tokens=8192, CUDA graphs); decode step "
            "calibrated on vLLM Llama-3.1-8B bf16 on H100, batch 1: 6.44 ms per token (tests/data/engine_speeds.csv)",
            (
                "vLLM reserves gpu_memory_utilization (90%) of device memory at start and fills what the model does not use with KV-cache blocks",
                "prefill in chunks of 8,192 tokens (max_num_batched_tokens)",
                "CUDA graphs for decode: about 0.5 GiB, no per-token launch overhead",
            ),
        ),
        ServingEngine(
            "sglang",
            "SGLang",
            8192,
            False,
            0.88,
            0.5 * BYTES_PER_GIB,
            0.80,
            0.55,
            VLLM_LAYER_OVERHEAD_S,
            0.0,
            0.0,
            False,
            "SGLang server arguments (mem_fraction_static about 0.88 on 80 GB GPUs, chunked_prefill_size 8192, CUDA graphs); speed as vLLM",
            (
                "SGLang reserves mem_fraction_static (about 88%) of device memory for weights and the KV pool",
                "prefill in chunks of 8,192 tokens",
            ),
        ),
        ServingEngine(
            "tensorrt-llm",
            "TensorRT-LLM",
            8192,
            False,
            0.9,
            0.5 * BYTES_PER_GIB,
            0.85,
            0.60,
            10e-6,
            0.0,
            TRTLLM_STEP_OVERHEAD_S,
            False,
            "TensorRT-LLM docs (kv_cache_free_gpu_mem_fraction 0.9 of the memory left after the weights, max_num_tokens 8192, "
            "CUDA graphs); fused kernels: slightly more of the bandwidth than vLLM; step time calibrated on NIM 1.8.0 "
            "Llama 3.1 8B fp8 on H100, one user: 4.63 ms per token",
            ("TensorRT-LLM gives 90% of the memory left after the weights to the KV cache", "prefill in chunks of 8,192 tokens"),
        ),
        ServingEngine(
            "llama.cpp",
            "llama.cpp",
            512,
            True,
            None,
            0.0,
            0.80,
            0.75,
            0.0,
            LLAMACPP_QUANT_LAYER_OVERHEAD_S,
            0.0,
            False,
            "llama.cpp (n_ctx KV cache allocated at start, n_ubatch 512 micro-batches); XiongjieDai/GPU-Benchmarks-on-LLM-Inference "
            "(decode of 16-bit and Q4 weights on RTX 4090/3090); k-quant per-layer time calibrated on Llama-3-8B Q4_K_M on H100 PCIe, "
            "145.6 tokens/s",
            (
                "llama.cpp allocates the KV cache for the whole context (n_ctx) when the model loads",
                "prompts are processed in micro-batches of 512 tokens (n_ubatch)",
            ),
            planned_buffers=True,
        ),
        ServingEngine(
            "hf-transformers",
            "Hugging Face transformers generate()",
            None,
            False,
            None,
            0.0,
            0.80,
            0.55,
            EAGER_LAYER_OVERHEAD_S,
            0.0,
            GENERATE_LOOP_S,
            True,
            "transformers generate() (whole-prompt prefill, dynamic KV cache, eager kernels); per-layer launch time "
            "calibrated on our H100 eager decode step of Llama-3.1-8B bf16 at batch 1 (40.6 ms), generate()'s own loop "
            "time on its batch-1 generate() run (61.9 ms per token) (data/measurements/h100-2026-11-23.jsonl)",
            (
                "generate() prefills every prompt of the batch at once: its working set grows with batch x prompt",
                "eager PyTorch: one step is bound by kernel launches at small batches (about 1 ms per layer), plus "
                "generate()'s own loop (logits processing, cache bookkeeping: about 21 ms a step)",
                "grouped-query K and V are copied out to every query head each step (repeat_kv)",
            ),
            prefill_launch_layer_s=EAGER_LAYER_OVERHEAD_S,
            prefill_moe_unfused_bytes=TRANSFORMERS_MOE_UNFUSED_BYTES,
        ),
        ServingEngine(
            "hf-transformers-compiled",
            "transformers generate() with a static cache and torch.compile",
            None,
            True,
            None,
            0.3 * BYTES_PER_GIB,
            0.80,
            0.55,
            COMPILED_LAYER_OVERHEAD_S,
            0.0,
            0.0,
            True,
            "transformers static cache + torch.compile(mode='reduce-overhead') (CUDA graphs); the per-layer time "
            "calibrated on our H100 measurement of Llama-3.1-8B bf16, batch 1: 8.6 ms per step "
            "(data/measurements/h100-2026-11-23.jsonl), checked at batch 32",
            (
                "the static cache is allocated for the whole context at start",
                "CUDA graphs remove most launch overhead (about 80 microseconds per layer remain)",
                "grouped-query K and V are copied out to every query head each step (repeat_kv): the KV cache is read once and its expanded copy written and read again",
                "the prompt's forward pass runs eagerly (generate() calls the compiled forward for decode steps only: transformers 5.17 generation/utils.py _prefill)",
            ),
            prefill_launch_layer_s=EAGER_LAYER_OVERHEAD_S,
            prefill_moe_unfused_bytes=TRANSFORMERS_MOE_UNFUSED_BYTES,
        ),
        ServingEngine(
            "deepspeed-mii",
            "DeepSpeed-MII (FastGen)",
            MII_RAGGED_BATCH_TOKENS,
            False,
            None,
            0.0,
            0.80,
            0.55,
            VLLM_LAYER_OVERHEAD_S,
            0.0,
            0.0,
            False,
            "DeepSpeed-Inference v2 ragged state manager (deepspeed/inference/v2/ragged/manager_configs.py: MemoryConfig RESERVE "
            "1,000,000,000 bytes, max_ragged_batch_size 768, max_context 8192); DeepSpeed-FastGen blog (blocked KV cache, "
            "continuous batching, Dynamic SplitFuse); decode speed taken as vLLM's (no calibration of its own)",
            (
                "DeepSpeed-MII gives the KV cache all the memory left after the weights but 1 GB (1,000,000,000 bytes) kept for other allocations",
                "Dynamic SplitFuse: prompts are cut into forward passes of at most 768 tokens, filled up with decode tokens",
                "sequences of at most 8,192 tokens by default (max_context)",
            ),
            MII_RESERVED_BYTES,
        ),
        ServingEngine(
            "mlx",
            "MLX (mlx-lm)",
            MLX_PREFILL_STEP_TOKENS,
            False,
            None,
            0.0,
            MLX_BANDWIDTH_EFFICIENCY,
            MLX_BANDWIDTH_EFFICIENCY,
            0.0,
            0.0,
            0.0,
            False,
            "mlx-lm (ml-explore/mlx-lm: generate_step prefill_step_size 2048; KVCache grown 256 tokens at a time; "
            "mlx_lm.server); decode efficiency calibrated on Llama-3.3-70B 4-bit on an M3 Max, 9.35 tokens/s "
            "(ml-explore/mlx-examples issue #1029), checked on an M2 Ultra (tests/data/mlx_speeds.csv)",
            (
                "MLX allocates from unified memory as it goes: no pool is reserved at start, and the KV cache grows 256 tokens at a time",
                "prompts are prefilled 2,048 tokens at a time (prefill_step_size)",
                "on Apple silicon the GPU may use macOS's wired-memory limit of the unified memory, not all of it",
                "decode speed is fitted on Apple silicon; MLX's CUDA backend is not calibrated here",
            ),
        ),
    )
}
