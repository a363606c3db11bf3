"""Training time: FLOPs per token, the peak each device offers, the utilisation
(MFU) defaults by setup, and time = FLOPs / (devices x peak x MFU).

FLOPs per token (N = active parameters, so mixture-of-experts models count
only the experts a token visits):
- full training: 6N, forward 2N + backward 4N (Kaplan et al. 2020, "Scaling
  Laws for Neural Language Models", arXiv 2001.08361, Sec. 2.1, C ~ 6N per token);
- full activation recomputation adds one more forward pass: 8N (Narayanan et
  al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters",
  arXiv 2104.04473, Sec. 5.1: the end-to-end time 8TP/(nX));
- LoRA / QLoRA: the frozen base needs the forward (2N) and the gradient with
  respect to its inputs (2N) but no weight gradient, so 4N, plus 6 per adapter
  parameter (Hu et al. 2021, "LoRA", arXiv 2106.09685, Sec. 4.2: no gradients
  for most parameters, 25% faster than full fine-tuning on GPT-3 175B);
  recomputation adds another forward (2N).
- attention's own FLOPs (QK^T and the weighted sum), which grow with the context: forward
  4 x layers x context x (heads x head_dim) per token, causal (FlashAttention skips the masked half, so the
  average context is half the sequence); backward twice the forward, recomputation once more (the FLOP count of
  LLM Foundry's MFU, mosaicml/llm-foundry scripts/train/benchmarking/README.md, halved for the causal mask).
  Parts without FlashAttention-2 (pre-Ampere: no bf16, trained in fp16) compute the masked half too.

Time per token on one device is not FLOPs / a fixed MFU: the matmuls run at a fraction of the peak
(MATMUL_EFFICIENCY), and the work that scales with tokens x layers x hidden (norms, activations, residuals, rotary,
casts, the optimizer-free part of every step) is bandwidth-bound (OVERHEAD_BYTES_PER_LAYER_HIDDEN). That second
term is why small models reach a lower MFU than large ones (measured on one H200: 0.39 / 0.44 / 0.54 for Llama
3.2 1B / 3.2 3B / 3.1 8B full fine-tunes). LoRA through PEFT adds its fp32 adapters' traffic; QLoRA adds the
NF4 dequantization (traffic at the bandwidth) and, with prepare_model_for_kbit_training, an fp32 output head and
residual stream (STACKS flags). Checked on published fine-tunes per stack: tests/data/finetune_speeds.csv.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from core.catalog.accelerators import Accelerator
from core.catalog.format_kernels import weights_problem
from core.layout import Layout
from core.memory.components import checkpointing, fp32_attention, fp32_math_attention, gptq_base, lora_fp32_inputs, lora_params, qlora_upcast, quantized_params
from core.memory.engines import EAGER_LAYER_OVERHEAD_S
from core.memory.objective import micro_batch_tokens, reference_forward_passes
from core.memory.stacks import STACKS
from core.model.architecture import Architecture
from core.scenario import Scenario
from core.speed.attention import attention_flops_per_token, flash_attention
from core.speed.offload import offload_time
from core.units import SECONDS_PER_HOUR

_OUT = ConfigDict(frozen=True)

# Model FLOPs utilisation when the scenario sets one (`mfu`): time = FLOPs / (devices x peak x MFU), the rule the
# published large-run MFUs are quoted in (Llama 3.1 405B 38-43%, Llama 3 Herd of Models arXiv 2407.21783 Table 4;
# Megatron-LM GPT-3 175B 45%, Narayanan et al. 2021 Sec. 5.1). Without one, the time comes from the per-token
# model below, and the MFU reported is what it achieves.

# The fraction of dense peak the matmuls of a training step reach, and the bytes per token of bandwidth-bound work
# per (layer x hidden unit): fitted together on the two full fine-tuning speed rows of our H100 run
# (data/measurements/h100-2026-11-23.jsonl: Llama 3.2 1B b8 x 2,048, 47,307 tokens/s; Llama 3.2 3B b4 x 2,048
# with checkpointing, 15,610 tokens/s; two rows, two unknowns). Checked on the H200 run (1B / 3B / 8B full within
# 10%) and torchtune's Llama 3.2 3B full fine-tune on an A100 (+4%). 0.78 is what large bf16 matmuls reach alone
# (H100 795 of 989 TFLOP/s, A100 271 of 312: stas00/ml-engineering MAMF finder), so the step's other work is the
# second term, not a lower matmul rate.
MATMUL_EFFICIENCY = 0.777
OVERHEAD_BYTES_PER_LAYER_HIDDEN = 1121.0
# PEFT keeps LoRA adapters in fp32 and casts each adapted layer's input (and the adapters' output and gradients) to
# and from fp32 (STACKS lora_fp32_inputs): bytes per token per adapter dimension (in + out features of every adapted
# linear, lora_params / r). Fitted on our H100 Llama 3.1 8B LoRA r16 all-linear b4 x 2,048 row (5,936 tokens/s);
# checked on the H200 rows (3B, 8B, 13B, 8B at 8,192 within 17%) and torchtune's 3B LoRA on an A100 (-7%).
LORA_FP32_BYTES_PER_ADAPTER_DIM = 75.0
# QLoRA's NF4 dequantization, per quantized parameter and pass (forward, backward, recomputed forward: Dettmers et
# al. 2023, arXiv 2305.14314, Sec. 3), as memory traffic at the device's bandwidth: the kernel reads the 4-bit codes
# (0.5 B) and their block scales (an fp32 absmax per 64 weights, or 8-bit with double quantization: under 0.07 B)
# and writes the 16-bit weight (2 B) that the matmul then reads (bitsandbytes dequantize_4bit before F.linear;
# torchao's NF4 tensor does the same cast under torch.compile). Not fitted: on our H200 (bitsandbytes 0.50.2,
# tests/core/test_measured_h200_speed.py) QLoRA without prepare_model_for_kbit_training ran at LoRA's speed (Llama
# 3.1 8B 6,530 vs 6,562 tokens/s, Llama 2 13B 3,985 vs 3,987: 0.006 and 0.001 s a step; this says 0.011 and 0.020 s),
# and torchtune's Llama 3.2 3B QLoRA on an A100 ran at 0.98 of its LoRA (this says 0.99).
# RECORDED MISSES (tests/data/qlora_speeds.csv, tests/data/finetune_speeds.csv): published runs of early 2024 on
# Ampere cards at small micro-batches (LitGPT on an A10G at 512-1,024 tokens; Answer.AI's FSDP-QLoRA on two A100s
# at 2,048) are slower than this, at about 14-24 bytes a parameter and pass (tests/core/test_finetune_speeds.py), an older
# bitsandbytes or the Ampere part; nothing here separates the two.
DEQUANT_BYTES_PER_PARAM = 2.5
# QLoRA on a GPTQ checkpoint (components.gptq_base): at training's token counts auto-gptq's QuantLinear (and
# GPTQModel's torch kernel) dequantizes the whole weight in PyTorch ops and multiplies it with torch.matmul
# (AutoGPTQ/AutoGPTQ@9f7d370 auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py forward, from kernel_switch_threshold =
# 128 rows on), so autograd keeps the 16-bit weight for the backward pass: it is dequantized in every forward pass (2
# with recomputation, 1 without), not again in the backward. The ops read and write about 18 bytes a weight (the int32
# words shifted into an expanded int32 tensor, cast to int8, masked, the zeros subtracted, the fp16 scales multiplied
# in, the 16-bit weight written, then read by the matmul). Calibrated on ms-swift's benchmark (modelscope/ms-swift
# docs/source_en/LLM/Benchmark.md, "Quantization": A100, auto_gptq 0.5.1, batch 1, max length 2,048, checkpointing):
# a GPTQ Int4 sample takes 0.256 s longer than a bf16 one on Qwen-7B-Chat (2.05 vs 4.31 samples/s) and 0.485 s on
# Qwen-14B-Chat (1.15 vs 2.60), 40.2 and 39.2 bytes a quantized weight and forward pass at the A100's 2.04 TB/s
# (tests/core/test_qlora_gptq.py): these small-integer elementwise kernels run at under half the bandwidth. Checked
# on the same table's Qwen-72B (38.7) and on Qwen's own README (finetune.py, auto-gptq, A100: Qwen-7B and -14B Q-LoRA
# at 256-8,192 tokens, twelve rows of tests/data/finetune_speeds.csv). An upper bound for today's stack: PEFT now
# trains GPTQ through GPTQModel (huggingface/peft@5d602fd src/peft/tuners/lora/gptq.py), whose torch kernel compiles
# the dequantization into one kernel (about 5-7 bytes a weight by its ops); not measured here.
GPTQ_DEQUANT_BYTES_PER_PARAM = 40.0
# peft.prepare_model_for_kbit_training (STACKS qlora_upcast) casts every parameter bitsandbytes left unquantized to
# fp32: norms, embeddings and the output head. What that costs, read off a profile of one step on our H200 (2026-11-27,
# bench/gpu/upcast_profile.py; pairs with and without it, bench/gpu/harness.py grid `head`):
# - the output head's two matmuls (forward and input gradient: 4 FLOPs a head parameter and token) run as fp32 GEMMs;
# - the norms' fp32 outputs make q, k and v fp32 (bitsandbytes' Linear4bit returns its input's dtype), so attention
#   runs in fp32, where no FlashAttention kernel does. PyTorch's SDPA then takes its math path for grouped-query
#   attention (transformers passes enable_gqa, which the memory-efficient kernel does not take): the whole square of
#   scores as fp32 GEMMs, plus the scores' elementwise passes (scale, mask, softmax and their gradients) at the
#   bandwidth. Multi-head attention takes the memory-efficient kernel in fp32 (causal, no scores kept).
# fp32 GEMMs (cuBLAS SGEMM; TF32 off, as PyTorch leaves it) at FP32_GEMM_EFFICIENCY of the FP32 peak: 49.4-51.2 of
# 67 TFLOP/s for the head's two matmuls at seven head shapes on our H200 (bench/gpu/head_gemm.py, 2026-11-27).
FP32_GEMM_EFFICIENCY = 0.75
# Bytes a score element moves per pass of the step (forward_passes) on the math path: fitted on one pair, Llama 3.2 1B's
# body with a 32k head at b4 x 2,048 (the pair where attention is most of the upcast); every other pair is a check
# (tests/core/test_upcast_terms.py).
UPCAST_SCORE_BYTES_PER_PASS = 34.0
# The memory-efficient kernel's fp32 rate for multi-head attention, as a fraction of the FP32 peak: fitted on the one
# multi-head pair we measured (Llama 2 13B, our H200's speed grid); no check row.
FP32_EFFICIENT_ATTENTION_FRACTION = 0.47
# Kept for readers of earlier results: the fixed MFUs this model replaced (issue #27).
MFU_DEFAULTS: dict[str, tuple[float, str]] = {
    "full": (0.40, "former default for full training (Llama 3.1 405B 38-43%, Megatron GPT-3 45%)"),
    "lora": (0.35, "former default for LoRA (assumed)"),
    "qlora": (0.35, "former default for QLoRA's matmuls, plus a dequantization time"),
}


class PeakCompute(NamedTuple):
    tflops: float
    basis: str  # which catalog figure was used
    flagged: bool  # True when it is not the figure the precision asks for


# A part without BF16 (T4, V100, Turing Quadros): the catalog's 16-bit column holds its FP16 matrix figure, which a
# run in FP16 gets (training with loss scaling; serving FP16 weights). Said for the workload (a serving page read
# "train in fp16") and without NVIDIA's word for the units.
NO_BF16_TRAINING = "no BF16 hardware: its FP16 matrix figure used (train in FP16)"
NO_BF16_SERVING = "no BF16 hardware: its FP16 matrix figure used (served in FP16)"


def peak_tflops(acc: Accelerator, precision: str) -> PeakCompute:
    """Dense peak for training at `precision` (bf16/fp16/fp32) from the catalog."""
    if precision == "fp32":
        if acc.fp32_tflops:
            return PeakCompute(acc.fp32_tflops, "FP32 (no tensor cores)", False)
        return PeakCompute(acc.bf16_tflops or 0.0, "no FP32 figure in the catalog: 16-bit tensor figure used (optimistic)", True)
    if acc.bf16_tflops is None:
        # K80 / M60: no 16-bit tensor units at all.
        return PeakCompute(acc.fp32_tflops or 0.0, "no 16-bit tensor units: FP32 figure used", True)
    if not acc.supports_bf16:
        # T4, V100, Turing Quadros: the catalog's 16-bit column holds the FP16 tensor figure.
        return PeakCompute(acc.bf16_tflops, NO_BF16_TRAINING, True)
    return PeakCompute(acc.bf16_tflops, "BF16 dense tensor figure", False)


def fp8_weight_only(weights_format: str, acc: Accelerator) -> bool:
    """Whether FP8 weights run weight-only on `acc` (no FP8 matmuls there: the engines' FP8 Marlin kernels multiply
    them against 16-bit activations on Turing and Ampere, data/format_kernels.csv): their memory and decode traffic
    are FP8's, their matmuls the 16-bit rate's (inference_peak_tflops)."""
    return weights_format == "fp8" and not acc.supports_fp8


def weight_only_note(weights_format: str, engine: str, acc: Accelerator, engine_name: str | None = None) -> str | None:
    """FP8 weights on a part without FP8 that `engine` (written `engine_name`) serves them on (data/format_kernels.csv's
    Turing and Ampere rows: vLLM's and SGLang's FP8 Marlin; Transformers dequantizes there and TensorRT-LLM has no
    row, so their weights_problem says so instead), in one line: how they run and what it means for speed. None
    elsewhere. The Inference and Memory pages' caption and the launch's comment."""
    if not fp8_weight_only(weights_format, acc) or weights_problem(weights_format, engine, acc) is not None:
        return None
    said = f"FP8 weights on {acc.name} run weight-only in {engine_name or engine} (FP8 Marlin, 16-bit activations)"
    return f"{said}: FP8's memory and decode, prompts at the 16-bit rate"


def inference_peak_tflops(acc: Accelerator, weights_format: str) -> PeakCompute:
    """Peak for serving: FP8 weights run FP8 matmuls where the device has them
    (e.g. vLLM FP8 W8A8 on Hopper); weight-only int/4-bit formats dequantize to
    16-bit and run at the 16-bit rate."""
    if weights_format == "fp8" and not fp8_weight_only(weights_format, acc):
        return PeakCompute(acc.fp8_tflops or 0.0, "FP8 dense tensor figure", False)
    peak = peak_tflops(acc, "fp32" if weights_format == "fp32" else "bf16")
    return peak._replace(basis=NO_BF16_SERVING) if peak.basis == NO_BF16_TRAINING else peak


def default_mfu(sc: Scenario, acc: Accelerator | None = None) -> tuple[float | None, str]:
    """(MFU, why): the scenario's own `mfu`, or None: the per-token model decides (training_time). With the part,
    `why` names its matmul rate where a measured ceiling caps it (Accelerator.sustained_tensor_tflops)."""
    if sc.mfu is not None:
        return sc.mfu, f"MFU {sc.mfu:.0%} set by the scenario"
    matmuls = f"matmuls at {MATMUL_EFFICIENCY:.0%} of peak"
    if acc is not None and (peak_t := peak_tflops(acc, sc.precision).tflops) > 0 and (rate := _matmul_flops(sc, acc)) < (peak := peak_t * 1e12) * MATMUL_EFFICIENCY:
        ceilings = acc.measured_ceilings(peak_t)
        named = f", {ceilings[0][0]:,.0f} TFLOP/s" if ceilings else ""
        matmuls = f"matmuls at {rate / 1e12:,.0f} TFLOP/s ({rate / peak:.0%} of peak: set by the part's measured matmul ceiling{named})"
    why = f"{matmuls} plus bandwidth-bound work per layer and token (fitted on our H100 runs)"
    if gptq_base(sc):
        why += f"; QLoRA's GPTQ dequantization in PyTorch ops as {GPTQ_DEQUANT_BYTES_PER_PARAM:g} bytes of traffic a weight and forward pass"
    elif sc.method == "qlora":
        why += f"; QLoRA's NF4 dequantization as {DEQUANT_BYTES_PER_PARAM:g} bytes of traffic a weight and pass"
        if qlora_upcast(sc):
            why += "; prepare_model_for_kbit_training's fp32 output head and fp32 attention (profiled on our H200 QLoRA runs)"
    return None, why


def forward_passes(sc: Scenario) -> float:
    """A training step in forward passes' worth: the forward, the backward at about twice it (each op's gradient with
    respect to its inputs and its trainable weights) and, with recomputation, the forward again: 3, or 4; DPO's
    reference model adds its own forward (core/memory/objective.py)."""
    return (4.0 if checkpointing(sc) else 3.0) + reference_forward_passes(sc)


def training_attention_flops_per_token(sc: Scenario, arch: Architecture, flash: bool = True) -> float:
    """QK^T and the weighted sum over a training sequence: forward, backward (2x) and a recomputed forward;
    causal (half the context on average) with FlashAttention, the whole square without it. Recomputation as it
    runs: QLoRA through prepare_model_for_kbit_training turns it on (core/memory/components.checkpointing)."""
    return forward_passes(sc) * attention_flops_per_token(arch, sc.seq_len / 2.0 if flash else float(sc.seq_len))


def training_flops_per_token(sc: Scenario, arch: Architecture, flash: bool = True) -> float:
    n = float(arch.active_params)
    attention = training_attention_flops_per_token(sc, arch, flash)
    reference = 2.0 * n * reference_forward_passes(sc)  # DPO: the frozen reference's forward (the base, adapters off)
    if sc.method == "full":
        return (8.0 if checkpointing(sc) else 6.0) * n + reference + attention
    adapters = float(lora_params(arch, sc.lora_rank, sc.lora_targets))
    per_token = 4.0 * n + 6.0 * adapters
    if checkpointing(sc):
        per_token += 2.0 * (n + adapters)
    return per_token + reference + attention


def _fp32_ops_per_s(acc: Accelerator) -> float:
    return peak_tflops(acc, "fp32").tflops * 1e12


def dequant_words(sc: Scenario) -> str:
    """What QLoRA's dequantization time is, in words for a sentence ("... is 20% of the time")."""
    if gptq_base(sc):
        return "dequantizing the GPTQ base in PyTorch ops in every forward pass"
    return "dequantizing the 4-bit base in every pass"


def dequant_seconds_per_token(sc: Scenario, arch: Architecture, acc: Accelerator) -> float:
    """QLoRA's dequantization time per token (0 for other methods): every 4-bit weight, every pass of every
    micro-batch that dequantizes it (NF4: each forward and backward pass; GPTQ: each forward pass), as traffic at the
    device's bandwidth; devices splitting the model split it too (training_time divides the tokens by all devices)."""
    if sc.method != "qlora" and not gptq_base(sc):
        return 0.0
    if gptq_base(sc):
        passes, per_param = (2 if checkpointing(sc) else 1), GPTQ_DEQUANT_BYTES_PER_PARAM
    else:
        passes, per_param = (3 if checkpointing(sc) else 2), DEQUANT_BYTES_PER_PARAM
    passes += reference_forward_passes(sc)  # DPO's reference forward runs the same 4-bit base
    traffic_bytes = passes * quantized_params(arch) * per_param
    return traffic_bytes / acc.memory_bandwidth_bytes_per_s / micro_batch_tokens(sc)


def overhead_seconds_per_token(sc: Scenario, arch: Architecture, acc: Accelerator) -> float:
    """The bandwidth-bound work of a step per token, all devices of a replica together (the time the matmuls do not
    account for): norms, activations and casts per layer; PEFT's fp32 adapter traffic. QLoRA's fp32 upcast is
    upcast_seconds_per_token's (training_time adds both)."""
    bandwidth = acc.memory_bandwidth_bytes_per_s
    seconds = OVERHEAD_BYTES_PER_LAYER_HIDDEN * arch.num_layers * arch.hidden_size / bandwidth
    if (reference := reference_forward_passes(sc)) > 0:  # DPO's reference forward does a forward pass's share of it again
        seconds *= forward_passes(sc) / (forward_passes(sc) - reference)  # (its adapters are off: no adapter traffic)
    if sc.method != "full" and lora_fp32_inputs(sc):
        seconds += LORA_FP32_BYTES_PER_ADAPTER_DIM * lora_params(arch, sc.lora_rank, sc.lora_targets) / sc.lora_rank / bandwidth
    return seconds


def upcast_seconds_per_token(sc: Scenario, arch: Architecture, acc: Accelerator) -> float:
    """prepare_model_for_kbit_training's fp32 upcast per token, all devices of a replica together (0 unless QLoRA on
    a stack that calls it): the fp32 output head and attention in fp32 in place of the 16-bit attention the matmuls
    count (the comment above FP32_GEMM_EFFICIENCY)."""
    if not qlora_upcast(sc):
        return 0.0
    sgemm = _fp32_ops_per_s(acc) * FP32_GEMM_EFFICIENCY
    head_s = 4.0 * arch.vocab_size * arch.hidden_size / sgemm
    if not fp32_attention(sc, acc):  # FlashAttention-2 takes q, k and v back to 16-bit: the head alone
        return head_s
    if fp32_math_attention(sc, arch, acc):  # SDPA's math path: the whole square, its scores' passes at the bandwidth
        scores = forward_passes(sc) * arch.num_heads * sc.seq_len * arch.num_layers  # score elements a token
        # the whole masked square on every layer, sliding-window layers too (the math path computes it, then masks)
        width = arch.num_heads * (arch.qk_head_dim + arch.value_head_dim)
        fp32_attention_s = forward_passes(sc) * 2.0 * width * sc.seq_len * arch.num_layers / sgemm
        fp32_attention_s += UPCAST_SCORE_BYTES_PER_PASS * scores / acc.memory_bandwidth_bytes_per_s
    else:
        fp32_attention_s = training_attention_flops_per_token(sc, arch) / (_fp32_ops_per_s(acc) * FP32_EFFICIENT_ATTENTION_FRACTION)
    half_attention_s = training_attention_flops_per_token(sc, arch, flash_attention(acc)) / _matmul_flops(sc, acc)
    return head_s + max(0.0, fp32_attention_s - half_attention_s)


def _matmul_flops(sc: Scenario, acc: Accelerator) -> float:
    """The training matmuls' rate: MATMUL_EFFICIENCY of the precision's peak, capped where power holds the clocks down."""
    return acc.tensor_flops_per_s(peak_tflops(acc, sc.precision).tflops, MATMUL_EFFICIENCY)


# A stack that runs PyTorch eagerly (STACKS eager_launches) launches every op's kernels from the CPU, one after another;
# the GPU runs them as they come, so a micro-batch takes the longer of its GPU work and its launches (as an eager prompt
# pass does: core/speed/roofline.py _Roof.prefill), not their sum. Launches per layer and forward pass take
# EAGER_LAYER_OVERHEAD_S (core/memory/engines.py: 1.08 ms, fitted on our H100's eager decode step of Llama 3.1 8B),
# forward_passes(sc) of them a micro-batch (3, or 4 with recomputation). Every device of a tensor-parallel group launches
# every layer for the group's micro-batch; a pipeline stage launches its own layers for each micro-batch. Only on GPUs
# and unified-memory machines: Trainium (torch-neuronx) and Gaudi trace lazily into compiled graphs, TPUs run XLA.
# Not fitted on any training row: checked on Qwen's 256-token LoRA steps on an A100 (tests/data/finetune_speeds.csv,
# with recomputation), whose measured time a micro-batch does not fall with the tokens below 512. Known gaps: an eager
# mixture-of-experts layer launches more (2.6 ms a layer in our H100 prefill run, tests/core/test_measured_h100_prefill.py),
# and the 3-pass case (no recomputation) has no published row that reaches the floor.
LAUNCH_FLOOR_KINDS = ("gpu", "unified")
# The share of the time below which the estimate and the Training page do not mention the launches (it would read 0%).
LAUNCH_BOUND_NOTED_FRACTION = 0.005


def launch_floor_seconds_per_token(sc: Scenario, arch: Architecture, acc: Accelerator, tensor_parallel: int = 1) -> float:
    """The kernel launches' time a micro-batch, per token and device (0 for stacks that compile or fuse their kernels,
    and for parts that run compiled graphs): a device's GPU work per token cannot take less."""
    if not STACKS[sc.training_stack].eager_launches or acc.kind not in LAUNCH_FLOOR_KINDS:
        return 0.0
    return forward_passes(sc) * arch.num_layers * EAGER_LAYER_OVERHEAD_S * max(tensor_parallel, 1) / micro_batch_tokens(sc)


class TrainingTime(BaseModel):
    model_config = _OUT
    tokens: float
    flops_per_token: float
    flops: float
    devices: int
    peak_tflops_per_device: float
    peak_basis: str
    mfu: float  # achieved: counted FLOPs / (peak x the time not spent dequantizing)
    mfu_source: str
    tokens_per_s: float
    wall_hours: float
    gpu_hours: float
    dequant_fraction: float = 0.0  # share of the time QLoRA spends dequantizing weights
    upcast_fraction: float = 0.0  # share of the time prepare_model_for_kbit_training's fp32 upcast takes (QLoRA, hf stack)
    offload_fraction: float = 0.0  # share of the time the GPU waits for ZeRO-Offload's copies and CPU step (core/speed/offload.py)
    launch_bound_fraction: float = 0.0  # share of the time the GPU waits for an eager stack's kernel launches (short micro-batches)


class TokenCosts(NamedTuple):
    """What training_time takes from the scenario and the part alone, the same on any number of devices (the
    planner's search times one scenario on many layouts of a part: core/plan/train.py)."""

    flops_per_token: float
    peak: PeakCompute
    mfu: float | None  # the scenario's own MFU, or None: the per-token model
    why: str
    upcast_token_s: float  # QLoRA's fp32 upcast per token (per-token model only)
    per_device_token_s: float  # a token's time, all devices of a replica together (per-token model only)
    dequant_token_s: float
    flash: bool  # FlashAttention on this part


def token_costs(sc: Scenario, acc: Accelerator) -> TokenCosts:
    arch = sc.architecture
    flash = flash_attention(acc)
    per_token = training_flops_per_token(sc, arch, flash)
    peak = peak_tflops(acc, sc.precision)
    if peak.tflops <= 0:
        raise ValueError(f"{acc.id} has no throughput figure in the catalog")
    mfu, why = default_mfu(sc, acc)
    upcast_token_s = per_device_token_s = 0.0
    if mfu is None:
        upcast_token_s = upcast_seconds_per_token(sc, arch, acc)
        per_device_token_s = per_token / _matmul_flops(sc, acc) + overhead_seconds_per_token(sc, arch, acc) + upcast_token_s
    return TokenCosts(per_token, peak, mfu, why, upcast_token_s, per_device_token_s, dequant_seconds_per_token(sc, arch, acc), flash)


class TrainingSeconds(NamedTuple):
    """training_time's parts in seconds (no model built: the planner's search times thousands of layouts)."""

    flops: float
    work_s: float  # the matmuls and bandwidth-bound work, with the launches' wait
    dequant_s: float
    offload_s: float
    upcast_s: float  # of work_s
    launch_wait_s: float  # of work_s
    mfu: float  # achieved, over the GPU's whole time

    @property
    def seconds(self) -> float:
        return self.work_s + self.dequant_s + self.offload_s


def training_seconds(sc: Scenario, acc: Accelerator, devices: int, tokens: float, layout: Layout | None, c: TokenCosts) -> TrainingSeconds:
    """training_time's formulas (its docstring), for `tokens` > 0 on `devices` >= 1 with the part's token_costs `c`."""
    arch = sc.architecture
    per_token, peak = c.flops_per_token, c.peak
    mfu = c.mfu
    flops = per_token * tokens
    peak_flops = peak.tflops * 1e12
    upcast_s = 0.0
    if mfu is not None:
        work_s = flops / (devices * peak_flops * mfu)
    else:
        upcast_s = tokens / devices * c.upcast_token_s
        work_s = tokens / devices * c.per_device_token_s
        mfu = flops / (devices * peak_flops * work_s)
    dequant_s = tokens / devices * c.dequant_token_s
    launch_wait_s = 0.0
    if sc.mfu is None:  # the CPU's launches bound the GPU's work from below (launch_floor_seconds_per_token)
        tensor_parallel = layout.tensor_parallel if layout is not None else sc.tensor_parallel
        launch_wait_s = max(0.0, tokens / devices * launch_floor_seconds_per_token(sc, arch, acc, tensor_parallel) - work_s - dequant_s)
        work_s += launch_wait_s
        mfu = flops / (devices * peak_flops * work_s)
    # --- ZeRO-Offload / ZeRO-Infinity (core/speed/offload.py): host-link copies and the CPU optimizer step the GPU
    # waits for; the MFU reported is over the GPU's whole time, waits included.
    offload_s = offload_time(sc, arch, acc, devices, tokens, work_s + dequant_s, per_token, c.flash, layout).seconds
    if offload_s > 0 and sc.mfu is None:
        mfu = mfu * work_s / (work_s + offload_s)
    # --- end of the offload term
    return TrainingSeconds(flops, work_s, dequant_s, offload_s, upcast_s, launch_wait_s, mfu)


def training_time(
    sc: Scenario, acc: Accelerator, devices: int, tokens: float | None = None, *, layout: Layout | None = None, costs: TokenCosts | None = None
) -> TrainingTime:
    """Training time on `devices` devices (communication not included: core/speed/comm.py). With the scenario's
    `mfu`: FLOPs / (devices x peak x MFU); otherwise per token, the matmuls at MATMUL_EFFICIENCY of the peak plus
    the bandwidth-bound work (overhead_seconds_per_token) and QLoRA's fp32 upcast (upcast_seconds_per_token); QLoRA's
    dequantization on top of either. `costs`: token_costs(sc, acc), when the caller has it already."""
    tokens = sc.train_tokens if tokens is None else tokens
    if tokens is None or tokens <= 0:
        raise ValueError("train_tokens must be set (> 0) to estimate training time")
    if devices < 1:
        raise ValueError("devices must be >= 1")
    c = costs or token_costs(sc, acc)
    s = training_seconds(sc, acc, devices, tokens, layout, c)
    seconds, mfu = s.seconds, s.mfu
    return TrainingTime.model_construct(
        tokens=tokens,
        flops_per_token=c.flops_per_token,
        flops=s.flops,
        devices=devices,
        peak_tflops_per_device=c.peak.tflops,
        peak_basis=c.peak.basis,
        mfu=mfu,
        mfu_source=c.why if sc.mfu is not None else f"{mfu:.0%} achieved: {c.why}" + ("; kernel launches set the time" if s.launch_wait_s > 0 else ""),
        tokens_per_s=tokens / seconds,
        wall_hours=seconds / SECONDS_PER_HOUR,
        gpu_hours=devices * seconds / SECONDS_PER_HOUR,
        dequant_fraction=s.dequant_s / seconds,
        upcast_fraction=s.upcast_s / seconds,
        offload_fraction=s.offload_s / seconds,
        launch_bound_fraction=s.launch_wait_s / seconds,
    )
