"""Serving speed from a roofline: prefill is compute-bound, decode is
bandwidth-bound until the batch is large enough to be compute-bound.

- Prefill of P prompt tokens: 2 x active params x P FLOPs (Kaplan et al. 2020,
  arXiv 2001.08361, Sec. 2.1: 2N per token forward) plus attention, 4 x layers x
  context x (heads x head_dim) per token for QK^T and the weighted sum (each a
  2 x context x width matmul), at the causal average context P/2.
- Decode step at batch B: every device reads its share of the weights once
  and the KV cache of all B sequences; time = max(bytes / (bandwidth x eff),
  FLOPs / (peak x eff)) + tensor-parallel all-reduces (core/speed/comm.py).
- Mixture of experts (core/speed/moe.py): B tokens each picking k of E experts touch a fraction
  1 - (1 - k/E)^B of each MoE layer's experts (uniform routing assumed); the touched experts stream at the
  grouped kernels' bandwidth, their FLOPs run at the grouped GEMMs' compute rate (in decode and prefill), and each
  MoE layer adds the fused kernels' fixed time to a step.
- Embedding tables are looked up (B rows), not read; lm_head is read.
- Pipeline stages run one after another for a token, so pipeline parallelism
  adds memory, not batch-1 speed (llama.cpp's layer split shows the same:
  2 x RTX 4090 run Llama 2 7B q4_0 at 66 t/s vs 149 t/s on one).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from core.catalog.accelerators import Accelerator, get_accelerator
from core.catalog.engine_timing import engine_time_s
from core.catalog.host_memory import host_memory_bandwidth_gbps
from core.layout import Layout
from core.memory.components import expert_parallel_ranks, gpu_layer_share, inference_components, kv_bytes_per_sequence, kv_share
from core.memory.engines import ENGINES
from core.memory.evaluator import fit_capacity
from core.model.architecture import MLP_ROLES, Architecture
from core.model.formats import FORMATS, KV_CACHE_BYTES, routed_expert_bytes, weight_bytes
from core.scenario import Scenario
from core.speed.attention import attention_flops_per_token
from core.speed.comm import ALLREDUCE_LATENCY_S, collective_gbps, tp_allreduces_per_layer, tp_allreduces_s
from core.speed.ep_step import EpParts, ep_parts
from core.speed.moe import MOE_LAYER_FIXED_S, experts_untouched_fraction, grouped_gemm_compute_efficiency, moe_bandwidth_efficiency
from core.speed.timing import inference_peak_tflops

_OUT = ConfigDict(frozen=True)

# The fraction of datasheet bandwidth a decode step achieves is the serving engine's (core/memory/engines.py).
# For vLLM and llama.cpp it was checked against llama.cpp batch-1 decode (XiongjieDai/GPU-Benchmarks-on-LLM-
# Inference README): 16-bit weights reach 75-87% (RTX 4090 Llama 2 7B f16 60.78 t/s = 81%, RTX 3090 51.85 t/s =
# 75%; Llama 3 8B F16 87% / 81%) -> 0.80. Integer-quantized weights are dequantized inside the matmul kernel and
# reach 49-64% (q4_0 57% / 49%, Q4_K_M 64% / 61%) -> 0.55. Marlin-style GPTQ/AWQ kernels in vLLM do better, so
# 4-bit serving estimates there are conservative.
BW_EFF_NATIVE = ENGINES["vllm"].bandwidth_efficiency
BW_EFF_DEQUANT = ENGINES["vllm"].dequant_efficiency
# FP8 weights on Turing and Ampere run in vLLM's and SGLang's FP8 Marlin kernels, weight-only, "up to 2x" FP16's speed
# in memory-bound decode (vLLM PR #5975, 2024-06): read at the native rate there too, their matmuls at the 16-bit peak
# (core/speed/timing.inference_peak_tflops).
NATIVE_FORMATS = frozenset({"fp32", "bf16", "fp16", "fp8", "mxfp4"})
# Fraction of dense peak reached by prefill and compute-bound decode. Large
# BF16 matmuls alone reach 80-87% (A100 271 of 312, H100 795 of 989 TFLOP/s,
# stas00/ml-engineering MAMF finder); attention, norms and launches lower it.
# 0.60 reproduces llama.cpp prompt processing of Llama 2 7B f16 on an RTX 4090
# (7,349 t/s measured) to 0.1%.
COMPUTE_EFF = 0.60
# llama.cpp partial offload (gpu_layers): the layers in system RAM are read by the CPU at its memory bandwidth each
# decode step (the GPU's layers and the CPU's run one after the other for a token). HOST_BW_EFF is the share of
# the RAM's theoretical bandwidth a decode reaches, calibrated on Mixtral 8x7B Q8_0 on a Ryzen 9 5900X with
# dual-channel DDR4-3600 (3.58 t/s, llama.cpp issue #4716) and checked on other CPUs (tests/data/offload_speeds.csv).
HOST_BW_EFF = 0.85
# For a prompt, llama.cpp's CUDA backend computes the RAM-resident layers on the GPU too (batches of 32 tokens or
# more), copying their weights over PCIe once per micro-batch of n_ubatch = 512 tokens. PCIe 4.0 x16 moves 31.5 GB/s
# (PCI-SIG); pinned host-to-device copies reach about 25 GB/s (CUDA bandwidthTest on current boards).
HOST_TO_DEVICE_BYTES_PER_S = 25e9
UBATCH_TOKENS = 512
# When the scenario does not split its context, a quarter is generated.
OUTPUT_FRACTION = 0.25


# KV caches the attention kernels decode to 16 bits in software as they read them: they hold more tokens, but are
# taken to decode no faster than a 16-bit cache (its traffic): no published figure shows them faster, and some slower.
# vLLM PR #49077 measured its software-FP8 Triton attention on an A100 at 484 us against 302 us for a 16-bit cache
# (FlashInfer's, vLLM's pick there, is not published); llama.cpp's Metal backend dequantizes a Q8_0 / Q4_0 cache to
# F16 before its flash attention (ggml-org/llama.cpp PR #27390, 2026-08); its CUDA kernels and mlx-lm's quantized
# attention dequantize tile by tile; vLLM's INT8 cache and Transformers' HQQ one are dequantized likewise.
SOFTWARE_DECODED_KV = frozenset({"int8", "q8_0", "q4_0"})


def software_decoded_kv(kv_cache_format: str, acc: Accelerator) -> bool:
    """Whether `acc`'s attention reads a `kv_cache_format` cache by decoding it in software (an FP8 one where the part
    has no FP8 conversions; hardware of one's own is taken at its word, as its other rates are)."""
    return kv_cache_format in SOFTWARE_DECODED_KV or (kv_cache_format == "fp8" and not acc.supports_fp8 and acc.vendor != "other")


def bandwidth_efficiency(weights_format: str, engine: str = "vllm") -> float:
    e = ENGINES[engine]
    return e.bandwidth_efficiency if weights_format in NATIVE_FORMATS else e.dequant_efficiency


def layer_overhead_s(engine: str, weights_format: str, acc: Accelerator) -> float:
    """Framework and launch time per layer and decode step: the engine's, its dequantising kernels' for a format it
    does not run natively, and its extra time on this part (data/engine_timing.csv; none on most)."""
    e = ENGINES[engine]
    return e.layer_overhead_s + (0.0 if weights_format in NATIVE_FORMATS else e.quant_layer_overhead_s) + engine_time_s("layer_overhead_s", engine, acc.id)


def memory_bound_tokens_per_s(read_bytes: float, acc: Accelerator, weights_format: str, engine: str = "vllm", layers: int = 0) -> float:
    """Batch-1 decode speed when a step reads `read_bytes` (e.g. a published file size): the bandwidth time at the
    engine's efficiency plus its per-layer time."""
    per_layer = layer_overhead_s(engine, weights_format, acc)
    return 1.0 / (read_bytes / (acc.memory_bandwidth_bytes_per_s * bandwidth_efficiency(weights_format, engine)) + layers * per_layer + ENGINES[engine].step_overhead_s)


def split_context(seq_len: int, prompt_tokens: int | None = None, output_tokens: int | None = None) -> tuple[int, int]:
    """(prompt, output) tokens; by default the last quarter of seq_len is generated."""
    if output_tokens is None:
        output_tokens = max(1, round(seq_len * OUTPUT_FRACTION)) if prompt_tokens is None else max(1, seq_len - prompt_tokens)
    if prompt_tokens is None:
        prompt_tokens = max(1, seq_len - output_tokens)
    if prompt_tokens < 1 or output_tokens < 1:
        raise ValueError("prompt and output tokens must be >= 1")
    return prompt_tokens, output_tokens


def weight_read_bytes(arch: Architecture, weights_format: str, tokens: Any) -> Any:
    """Bytes of weights one forward pass over `tokens` tokens reads (all devices); `tokens` may be an array."""
    return _weights_read(arch, _weight_parts(arch, weights_format), tokens)


@lru_cache(maxsize=256)  # the same model and format on every part the planner sizes a candidate on
def _weight_parts(arch: Architecture, weights_format: str) -> tuple[float, float, float]:
    """(all weight bytes, bytes never read: an untied embedding table, bytes of the experts' MLPs) of `arch`."""
    fmt = FORMATS[weights_format]
    embed = 0.0 if arch.tie_embeddings else sum(g.params * fmt.bits(g) / 8 for g in arch.weight_groups if g.role == "embed")
    return weight_bytes(arch, fmt), embed, routed_expert_bytes(arch, fmt)


def _weights_read(arch: Architecture, parts: tuple[float, float, float], tokens: Any) -> Any:
    total, embed, moe = parts
    return total - (embed + moe * experts_untouched_fraction(arch, tokens)) * arch.param_scale


def _routed_active_params(arch: Architecture) -> float:
    """Parameters of the routed experts one token runs through (0 for a dense model)."""
    if not arch.is_moe:
        return 0.0
    return sum(g.active_params for g in arch.weight_groups if g.role in MLP_ROLES and g.count > g.active) * arch.param_scale


def _experts_read(arch: Architecture, parts: tuple[float, float, float], tokens: Any) -> Any:
    """Of _weights_read, the routed experts' bytes (0 for a dense model)."""
    return parts[2] * (1.0 - experts_untouched_fraction(arch, tokens)) * arch.param_scale


class _Roof:
    """One scenario on one device type and layout: the roofline pieces. The part's own rates (PART_RATES) are floats
    here; _Roofs holds several parts' as columns, and the same step formulas then time every part at once."""

    # the part's own figures, the only ones that differ between parts for one scenario and layout (_Roofs)
    flops_per_s: Any
    bytes_per_s: Any
    expert_bytes_per_s: Any
    expert_flops_per_s: Any
    host_bytes_per_s: Any
    memory_bytes_per_s: Any
    tp_gbps: Any
    step_overhead_s: Any
    prefill_step_s: Any
    decode_sequence_layer_s: Any
    decode_sequence_s: Any
    prefill_launch_s: Any
    kv_traffic: Any  # KV-cache bytes read per cached byte (a cache decoded in software reads as 16 bits)

    def __init__(self, sc: Scenario, acc: Accelerator, layout: Layout):
        self.sc, self.acc, self.arch = sc, acc, sc.architecture
        self.tp, self.pp = layout.tensor_parallel, layout.pipeline_parallel
        self.memory_bytes_per_s = acc.memory_bandwidth_bytes_per_s
        self.tp_gbps = collective_gbps(acc, self.tp) if self.tp > 1 else 0.0  # the engines' all-reduces (tp_allreduces_s)
        peak = inference_peak_tflops(acc, sc.weights_format)
        self.peak = peak
        self.flops_per_s = acc.tensor_flops_per_s(peak.tflops, COMPUTE_EFF)
        self.engine = ENGINES[sc.serving_engine]
        self.bw_eff = bandwidth_efficiency(sc.weights_format, sc.serving_engine)
        self.bytes_per_s = acc.memory_bandwidth_bytes_per_s * self.bw_eff
        self.expert_bytes_per_s = acc.memory_bandwidth_bytes_per_s * moe_bandwidth_efficiency(self.bw_eff)
        self.kv_share = kv_share(self.arch, self.tp)
        self.weight_parts = _weight_parts(self.arch, sc.weights_format)
        self.expert_active_params = _routed_active_params(self.arch)
        # the grouped expert GEMMs' compute rate: lower than the dense one where a device's share of an expert is small
        self.expert_flops_per_s = self.flops_per_s
        # expert-parallel serving (sc.expert_parallel): the replica's tp devices are EP ranks with data-parallel
        # attention, each step the busiest rank's (core/speed/ep_step.py); the replica's batch is spread over them
        self.ep_ranks = expert_parallel_ranks(sc, layout) if self.arch.is_moe else 1
        if self.arch.is_moe:
            width = self.arch.moe_intermediate_size / (1 if self.ep_ranks > 1 else self.tp)  # EP: whole experts a rank
            eff = grouped_gemm_compute_efficiency(self.arch.hidden_size, width, COMPUTE_EFF)
            self.expert_flops_per_s = acc.tensor_flops_per_s(peak.tflops, eff)  # a part's measured ceiling too
        self.on_device = gpu_layer_share(sc, self.arch)  # llama.cpp gpu_layers: the rest is read from system RAM
        self.host_bytes_per_s = host_memory_bandwidth_gbps(sc, acc, self.tp * self.pp) * 1e9 * HOST_BW_EFF  # one replica's host share
        # Kernel launches and framework time per step: per layer of this device's pipeline stage. Chips whose model
        # lives in SRAM run a program their compiler scheduled ahead of time: no launches, no framework loop.
        per_layer = layer_overhead_s(sc.serving_engine, sc.weights_format, acc)
        stage_layers = math.ceil(self.on_device * self.arch.num_layers / self.pp)  # the layers of this device's pipeline stage on it
        self.step_overhead_s = per_layer * stage_layers + self.engine.step_overhead_s
        # a step that carries prompt tokens, in engines that run it without CUDA graphs: the CPU launches every kernel
        # of every layer (data/engine_timing.csv)
        self.prefill_step_s = engine_time_s("prefill_layer_overhead_s", sc.serving_engine, acc.id) * stage_layers
        # each decoding sequence's own time per layer and step, beyond its bytes and FLOPs (data/engine_timing.csv: per
        # query head this device runs for it: a tensor-parallel device runs num_heads / tp of them, an expert-parallel
        # rank with data-parallel attention all of them), and over this device's stage
        heads_here = self.arch.num_heads / (1 if self.ep_ranks > 1 else self.tp)
        self.decode_sequence_layer_s = engine_time_s("decode_sequence_head_layer_s", sc.serving_engine, acc.id) * heads_here
        self.decode_sequence_s = self.decode_sequence_layer_s * stage_layers
        # an eager prompt pass (transformers): at least the CPU's launches of every layer's kernels (core/memory/engines.py)
        self.prefill_launch_s = self.engine.prefill_launch_layer_s * stage_layers
        if acc.weights_in_sram:
            self.step_overhead_s = self.prefill_step_s = self.prefill_launch_s = self.decode_sequence_s = self.decode_sequence_layer_s = 0.0
        if acc.kind == "wafer":
            # A wafer spreads each layer's matrices over many of its 900,000 cores and reduces their partial sums over
            # the on-wafer fabric: tensor parallelism inside the chip, two reductions per layer as in Megatron-LM, each
            # taken at the collective latency used for GPUs (core/speed/comm.py; Cerebras publishes no fabric
            # latency). Llama 3.1 8B then decodes at about 1,560 tokens/s against Cerebras' published 1,800.
            layers = math.ceil(self.arch.num_layers / self.pp)
            self.step_overhead_s = tp_allreduces_per_layer(False, False) * ALLREDUCE_LATENCY_S * layers
        elif not acc.weights_in_sram:
            # the fused expert kernels' fixed time, per MoE layer of this device's stage (core/speed/moe.py)
            self.step_overhead_s += MOE_LAYER_FIXED_S * math.ceil(self.on_device * self.arch.moe_layers / self.pp)
        # transformers' repeat_kv copies grouped-query K/V out to every query head each step: the cache is read, its
        # expanded copy written and read again.
        groups = 1 if self.arch.is_mla else self.arch.num_heads / self.arch.num_kv_heads
        self.kv_traffic = 1.0 + 2.0 * groups if self.engine.kv_expanded and groups > 1 else 1.0
        if software_decoded_kv(self.sc.kv_cache_format, acc):
            self.kv_traffic *= KV_CACHE_BYTES["bf16"] / KV_CACHE_BYTES[self.sc.kv_cache_format]

    def ep_step(self, decodes: Any, context: float, prefill_tokens: Any = 0.0, prompt: float = 0.0) -> EpParts:
        """An expert-parallel step of the replica: `decodes` sequences and `prefill_tokens` prompt tokens spread evenly
        over its ranks, the busiest rank's time (core/speed/ep_step.py)."""
        n = self.ep_ranks
        return ep_parts(self, n, self.ep_decodes_per_rank(decodes), context, np.asarray(prefill_tokens, dtype=np.float64) / n, prompt)

    def ep_decodes_per_rank(self, decodes: Any) -> Any:
        """The busiest expert-parallel rank's decoding sequences: the replica's spread over its ranks, at least one
        whole sequence (data-parallel attention: a sequence lives on one rank)."""
        d = np.asarray(decodes, dtype=np.float64)
        return np.maximum(d / self.ep_ranks, np.minimum(d, 1.0))

    def decode_step(self, batch: Any, context: float) -> tuple[Any, Any, Any]:
        """(step seconds, bytes read per device, compute-bound?); `batch` may be an array."""
        return self.mixed_step(batch, context, 0.0, 0.0)

    def mixed_step(self, decodes: Any, context: float, prefill_tokens: Any, prompt: float) -> tuple[Any, Any, Any]:
        """One continuous-batching step: `decodes` sequences each generating a token at `context`, with
        `prefill_tokens` tokens of prompts of `prompt` tokens riding in the same forward pass (Sarathi-Serve's
        chunked prefill, arXiv 2403.02310, Sec. 4): the weights are read once for all of them, the FLOPs add up.
        (step seconds, bytes read per device, compute-bound?); `decodes` and `prefill_tokens` may be arrays."""
        if self.ep_ranks > 1:
            parts = self.ep_step(decodes, context, prefill_tokens, prompt)
            step = parts.step_s + np.where(np.asarray(prefill_tokens) > 0, self.prefill_step_s, 0.0)
            return step, parts.bytes_read, parts.compute_bound
        a, split, g = self.arch, self.tp * self.pp, self.on_device
        tokens = decodes + prefill_tokens
        weights = _weights_read(a, self.weight_parts, tokens)
        kv = decodes * kv_bytes_per_sequence(a, self.sc.kv_cache_format, context)
        read = g * (weights / split + kv * self.kv_share / self.pp * self.kv_traffic)
        per_token = 2.0 * a.active_params
        flops = g * (decodes * (per_token + attention_flops_per_token(a, context)) + prefill_tokens * (per_token + attention_flops_per_token(a, prompt / 2.0))) / split
        if a.is_moe:
            # The grouped expert kernels run after the layer's attention and dense matmuls, each part on its own
            # roofline: at a large batch the dense part turns compute-bound while each expert, seeing B x k / E
            # tokens, still streams its weights (core/speed/moe.py).
            experts = g * _experts_read(a, self.weight_parts, tokens) / split
            expert_flops = g * tokens * 2.0 * self.expert_active_params / split
            dense_mem, dense_cmp = (read - experts) / self.bytes_per_s, (flops - expert_flops) / self.flops_per_s
            expert_mem, expert_cmp = experts / self.expert_bytes_per_s, expert_flops / self.expert_flops_per_s
            t_mem, t_cmp = dense_mem + expert_mem, dense_cmp + expert_cmp
            roof = np.maximum(dense_mem, dense_cmp) + np.maximum(expert_mem, expert_cmp)
        else:
            t_mem, t_cmp = read / self.bytes_per_s, flops / self.flops_per_s
            roof = np.maximum(t_mem, t_cmp)
        stage = (
            roof
            + tp_allreduces_s(a, self.tp_gbps, self.tp, self.pp, tokens)
            + self.step_overhead_s
            + decodes * self.decode_sequence_s
            + np.where(np.asarray(prefill_tokens) > 0, self.prefill_step_s, 0.0)
        )
        t_host = (1.0 - g) * (weights + kv) / self.host_bytes_per_s  # layers in system RAM, read by the CPU
        return self.pp * stage + t_host, read, t_cmp > t_mem

    def prefill(self, sequences: Any, prompt: float) -> Any:
        if self.ep_ranks > 1:
            # data-parallel attention: a rank prefills its own share of the prompts, whole
            own = np.ceil(np.asarray(sequences, dtype=np.float64) / self.ep_ranks)
            return ep_parts(self, self.ep_ranks, 0.0, prompt, own * prompt, prompt).step_s + self.prefill_step_s
        a = self.arch
        tokens = sequences * prompt
        expert_flops = tokens * 2.0 * self.expert_active_params
        flops = tokens * (2.0 * a.active_params + attention_flops_per_token(a, prompt / 2.0)) - expert_flops
        t_cmp = (flops / self.flops_per_s + expert_flops / self.expert_flops_per_s) / self.tp
        t_mem = _weights_read(a, self.weight_parts, tokens) / self.tp / self.bytes_per_s
        # layers in system RAM: their weights cross PCIe once per micro-batch (computed on the GPU)
        host_weights = (1.0 - self.on_device) * self.weight_parts[0]
        t_copy = np.ceil(tokens / UBATCH_TOKENS) * host_weights / HOST_TO_DEVICE_BYTES_PER_S
        # an MoE layer that routes and combines in separate kernels (transformers): their traffic per routed row
        routed_rows = tokens * a.experts_per_token * a.moe_layers * self.on_device
        t_unfused = routed_rows * self.engine.prefill_moe_unfused_bytes / self.tp / self.memory_bytes_per_s
        # the GPU's time or the CPU's launches, whichever is longer (they overlap): checked on our H100 prefill of
        # Llama 3.1 8B, 512 tokens (38.1 ms measured, launch-bound; data/measurements/speed/h100-2026-11-26.jsonl)
        gpu = np.maximum(t_cmp, t_mem) + t_unfused
        return np.maximum(gpu, self.pp * self.prefill_launch_s) + self.pp * (tp_allreduces_s(a, self.tp_gbps, self.tp, self.pp, tokens) + self.prefill_step_s) + t_copy


# The _Roof attributes that differ between parts for one scenario and layout (_Roofs stacks them).
PART_RATES = (
    "flops_per_s",
    "bytes_per_s",
    "expert_bytes_per_s",
    "expert_flops_per_s",
    "host_bytes_per_s",
    "memory_bytes_per_s",
    "tp_gbps",
    "step_overhead_s",
    "prefill_step_s",
    "decode_sequence_layer_s",
    "decode_sequence_s",
    "prefill_launch_s",
    "kv_traffic",
)


class _Roofs(_Roof):
    """Several parts' roofs of one scenario and layout, each part's rates (PART_RATES) a row of a column: the step
    formulas of _Roof (mixed_step, decode_step, prefill) then answer a row per part in one numpy pass, every element
    the number the part's own _Roof gives. The planner's search times a candidate on every part at once this way
    (core/speed/load.load_curves). Not for an expert-parallel replica (its step is per rank: core/speed/ep_step.py)."""

    def __init__(self, roofs: list[_Roof]):  # the parts' own roofs, made already: nothing is derived twice
        first = roofs[0]
        if first.ep_ranks > 1 or any(r.sc is not first.sc or (r.tp, r.pp) != (first.tp, first.pp) for r in roofs):
            raise ValueError("_Roofs stacks one scenario and layout's roofs, not expert-parallel")
        self.__dict__.update({k: v for k, v in first.__dict__.items() if k not in ("acc", "peak")})  # no one part's
        for name in PART_RATES:
            setattr(self, name, np.array([[float(getattr(r, name))] for r in roofs]))


def roofs_of(roofs: list[_Roof]) -> _Roof:
    """The parts' roofs as one (_Roofs): what its step formulas answer has a row per part, for one part too."""
    return _Roofs(roofs)


def stage_seconds(sc: Scenario, acc: Accelerator, share: float, layers: int, batch: int, context: float, prompt: int) -> tuple[float, float]:
    """(decode seconds per step, prefill seconds of one prompt) of a pipeline stage on `acc` holding `share` of the
    model in `layers` layers: the same roofline as inference_speed() with the stage's bytes, FLOPs and per-layer
    overheads, so an even split over identical cards gives the same time as pipeline_parallel (core/speed/mixed.py)."""
    roof = _Roof(sc, acc, Layout(1, 1, 1))
    a = roof.arch
    weights = weight_read_bytes(a, sc.weights_format, batch)
    experts = _experts_read(a, roof.weight_parts, batch)
    kv = batch * kv_bytes_per_sequence(a, sc.kv_cache_format, context)
    t_mem = share * ((weights - experts + kv * roof.kv_traffic) / roof.bytes_per_s + experts / roof.expert_bytes_per_s)
    expert_flops = batch * 2.0 * roof.expert_active_params
    flops = batch * (2.0 * a.active_params + attention_flops_per_token(a, context)) - expert_flops
    t_cmp = share * (flops / roof.flops_per_s + expert_flops / roof.expert_flops_per_s)
    per_layer = (roof.step_overhead_s - roof.engine.step_overhead_s + batch * roof.decode_sequence_s) / a.num_layers
    decode = max(t_mem, t_cmp) + per_layer * layers + roof.engine.step_overhead_s
    return decode, share * float(roof.prefill(1, prompt))


class InferenceSpeed(BaseModel):
    model_config = _OUT
    accelerator: str
    tensor_parallel: int
    pipeline_parallel: int
    devices_per_replica: int
    batch_size: int
    prompt_tokens: int
    output_tokens: int
    time_to_first_token_s: float
    prefill_tokens_per_s: float
    decode_step_s: float
    decode_tokens_per_s: float  # per user
    aggregate_tokens_per_s: float  # all B users, decode only
    output_tokens_per_s: float  # with each batch's prefill amortised (cost basis)
    decode_bound: Literal["memory", "compute"]
    bytes_read_per_step_per_device: float
    peak_tflops_per_device: float
    peak_basis: str
    bandwidth_efficiency: float
    compute_efficiency: float


def inference_speed(
    sc: Scenario,
    *,
    accelerator: Accelerator | None = None,
    layout: Layout | None = None,
    batch: int | None = None,
    prompt_tokens: int | None = None,
    output_tokens: int | None = None,
) -> InferenceSpeed:
    """Time to first token, decode speed per user and in aggregate, and output
    tokens/s of a serving cycle (prefill B prompts, then decode), for one replica."""
    acc = accelerator or get_accelerator(sc.accelerator)
    layout = layout or Layout(1, sc.tensor_parallel, sc.pipeline_parallel)
    b = batch or sc.batch_size
    prompt, out = split_context(sc.seq_len, prompt_tokens, output_tokens if output_tokens is not None else sc.output_tokens)
    roof = _Roof(sc, acc, layout)
    ttft = roof.prefill(1, prompt)
    step, read, compute_bound = roof.decode_step(b, prompt + out / 2.0)
    cycle = roof.prefill(b, prompt) + out * step
    return InferenceSpeed.model_construct(
        accelerator=acc.id,
        tensor_parallel=roof.tp,
        pipeline_parallel=roof.pp,
        devices_per_replica=roof.tp * roof.pp,
        batch_size=b,
        prompt_tokens=prompt,
        output_tokens=out,
        time_to_first_token_s=ttft,
        prefill_tokens_per_s=prompt / ttft,
        decode_step_s=step,
        decode_tokens_per_s=1.0 / step,
        aggregate_tokens_per_s=b / step,
        output_tokens_per_s=b * out / cycle,
        decode_bound="compute" if compute_bound else "memory",
        bytes_read_per_step_per_device=read,
        peak_tflops_per_device=roof.peak.tflops,
        peak_basis=roof.peak.basis,
        bandwidth_efficiency=roof.bw_eff,
        compute_efficiency=COMPUTE_EFF,
    )


def roofline(sc: Scenario, acc: Accelerator, layout: Layout) -> _Roof:
    """The roofline pieces of one scenario on one part and layout, to share between serving_curve and the load model
    (core/speed/load.py) of one planner candidate."""
    return _Roof(sc, acc, layout)


def serving_curve(
    sc: Scenario, acc: Accelerator, layout: Layout, batches: np.ndarray, prompt_tokens: int, output_tokens: int, roof: _Roof | None = None
) -> dict[str, np.ndarray]:
    """inference_speed() for many batch sizes at once (the planner's search): time to first token, decode speed
    per user with no other requests arriving, and output tokens/s of one replica with each batch's prefill amortised
    (the cost basis)."""
    roof = roof or _Roof(sc, acc, layout)
    b = np.asarray(batches, dtype=np.float64)
    step, _, _ = roof.decode_step(b, prompt_tokens + output_tokens / 2.0)
    ttft = float(roof.prefill(1, prompt_tokens))
    return {
        "time_to_first_token_s": np.full(b.shape, ttft),
        "decode_tokens_per_s": 1.0 / step,
        "output_tokens_per_s": amortised_output_tokens_per_s(roof, b, step, prompt_tokens, output_tokens),
    }


def amortised_output_tokens_per_s(roof: _Roof, batches: np.ndarray, step_s: Any, prompt_tokens: int, output_tokens: int) -> Any:
    """One replica's output tokens/s at each batch (decode steps of `step_s`), each batch's prefill amortised over its
    outputs: the serving cost basis. A row per part for _Roofs."""
    cycle = roof.prefill(batches, prompt_tokens) + output_tokens * step_s
    return batches * output_tokens / cycle


def replica_output_tokens_per_s(roof: _Roof, batches: np.ndarray, prompt_tokens: int, output_tokens: int) -> Any:
    """serving_curve's output tokens/s alone (a row per part for _Roofs: the planner's search, every part at once)."""
    b = np.asarray(batches, dtype=np.float64)
    step, _, _ = roof.decode_step(b, prompt_tokens + output_tokens / 2.0)
    return amortised_output_tokens_per_s(roof, b, step, prompt_tokens, output_tokens)


class DecodePoint(BaseModel):
    model_config = _OUT
    batch_size: int
    decode_step_s: float
    decode_tokens_per_s: float
    aggregate_tokens_per_s: float
    decode_bound: Literal["memory", "compute"]
    fits: bool


def decode_curve(
    sc: Scenario,
    batches: list[int] | tuple[int, ...],
    *,
    accelerator: Accelerator | None = None,
    layout: Layout | None = None,
    prompt_tokens: int | None = None,
    output_tokens: int | None = None,
) -> tuple[DecodePoint, ...]:
    """Per-user and aggregate decode tokens/s at each batch size, and whether
    that many sequences of seq_len tokens fit in memory."""
    acc = accelerator or get_accelerator(sc.accelerator)
    layout = layout or Layout(1, sc.tensor_parallel, sc.pipeline_parallel)
    prompt, out = split_context(sc.seq_len, prompt_tokens, output_tokens if output_tokens is not None else sc.output_tokens)
    roof = _Roof(sc, acc, layout)
    capacity = fit_capacity(sc, float(acc.usable_memory_bytes))
    points = []
    for b in batches:
        step, _, compute_bound = roof.decode_step(b, prompt + out / 2.0)
        fits = inference_components(sc, roof.arch, layout, b, sc.seq_len).total <= capacity
        points.append(
            DecodePoint.model_construct(
                batch_size=b,
                decode_step_s=step,
                decode_tokens_per_s=1.0 / step,
                aggregate_tokens_per_s=b / step,
                decode_bound="compute" if compute_bound else "memory",
                fits=bool(fits),
            )
        )
    return tuple(points)
