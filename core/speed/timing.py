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
Attention's own FLOPs (QK^T and the weighted sum, which grow with context) are
left out, as in the 6N rule the published GPU-hours were planned with.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from core.catalog.accelerators import Accelerator
from core.memory.components import lora_params
from core.model.architecture import Architecture
from core.scenario import Scenario
from core.units import SECONDS_PER_HOUR

_OUT = ConfigDict(frozen=True)

# Model FLOPs utilisation defaults by setup: the fraction of the device's dense
# peak that the counted FLOPs (recomputation included when on) achieve.
MFU_DEFAULTS: dict[str, tuple[float, str]] = {
    # Llama 3.1 405B: 38-43% BF16 MFU on 8K-16K H100s (Llama 3 Herd of Models,
    # arXiv 2407.21783, Table 4); Megatron-LM GPT-3 175B: 140 of 312 TFLOP/s =
    # 45% on A100 (Narayanan et al. 2021, Sec. 5.1); torchtune Llama 3.2 3B full
    # fine-tune on one A100: 7,075 tokens/s = 44% of 6N (torchtune README). With
    # 0.40 the Llama 2 7B/13B/70B A100 hours are reproduced within 8%.
    "full": (0.40, "full training: 0.40, the low end of well-tuned large runs (Llama 3.1 405B 38-43%, Megatron GPT-3 45%)"),
    # Same large base matmuls, but each adapted layer adds two rank-r matmuls
    # that are too thin to fill the tensor cores and extra kernel launches; no
    # paper publishes a LoRA MFU. Measured: torchtune Llama 3.2 3B LoRA on A100
    # 8,210 tokens/s (34% of 4N, compiled, packed); PEFT Llama 3.2 3B LoRA on
    # L40S about 6,750 tokens/s (24% of 4N, eager, short sequences).
    "lora": (0.35, "LoRA: 0.35 (assumed; thin rank-r adapter matmuls and extra launches; measured 24-34% on one GPU)"),
    # QLoRA runs the same matmuls as LoRA; dequantizing the NF4 base weights before each of them is time of its
    # own, per micro-batch (dequant_seconds_per_token below), not a lower MFU.
    "qlora": (0.35, "QLoRA: 0.35 for the matmuls (as LoRA) + the time to dequantize the NF4 base before each of them"),
}


class PeakCompute(NamedTuple):
    tflops: float
    basis: str  # which catalog figure was used
    flagged: bool  # True when it is not the figure the precision asks for


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
        return PeakCompute(acc.bf16_tflops, "no BF16 hardware: FP16 tensor-core figure used (train in fp16)", True)
    return PeakCompute(acc.bf16_tflops, "BF16 dense tensor figure", False)


def inference_peak_tflops(acc: Accelerator, weights_format: str) -> PeakCompute:
    """Peak for serving: FP8 weights run FP8 matmuls where the device has them
    (e.g. vLLM FP8 W8A8 on Hopper); weight-only int/4-bit formats dequantize to
    16-bit and run at the 16-bit rate."""
    if weights_format == "fp8" and acc.fp8_tflops:
        return PeakCompute(acc.fp8_tflops, "FP8 dense tensor figure", False)
    return peak_tflops(acc, "fp32" if weights_format == "fp32" else "bf16")


def default_mfu(sc: Scenario) -> tuple[float, str]:
    """(MFU, why): the scenario's own `mfu` wins, else the default for its method."""
    if sc.mfu is not None:
        return sc.mfu, f"MFU {sc.mfu:.0%} set by the scenario"
    return MFU_DEFAULTS[sc.method]


def training_flops_per_token(sc: Scenario, arch: Architecture) -> float:
    n = float(arch.active_params)
    if sc.method == "full":
        return (8.0 if sc.gradient_checkpointing else 6.0) * n
    adapters = float(lora_params(arch, sc.lora_rank, sc.lora_targets))
    per_token = 4.0 * n + 6.0 * adapters
    if sc.gradient_checkpointing:
        per_token += 2.0 * (n + adapters)
    return per_token


# QLoRA dequantizes every NF4 base weight to 16-bit before each matmul: in the forward pass, in the backward pass
# (gradient with respect to the input) and, with checkpointing, in the recomputed forward (Dettmers et al. 2023,
# arXiv 2305.14314, Sec. 3). The time is per step, so it is paid per micro-batch: seconds per quantized parameter
# and pass. bitsandbytes (Hugging Face, LitGPT): calibrated on issue #10's H100 measurement, Llama 3.1 8B, batch
# 4 x 2,048 with checkpointing: QLoRA 2,630 tokens/s against LoRA 5,936 (1.73 s more per step over 3 passes of
# 6.98e9 quantized parameters). torchao NF4 under torch.compile (torchtune; Unsloth's fused kernels assumed alike):
# torchtune's Llama 3.2 3B table, QLoRA 8,035 against LoRA 8,210 tokens/s (README 'Optimization flags').
DEQUANT_S_PER_PARAM = {"bnb": 1.735 / (3 * 6.98e9), "compiled": (8192 / 8035 - 8192 / 8210) / (3 * 2.82e9)}
DEQUANT_KIND = {"hf": "bnb", "litgpt": "bnb", "deepspeed": "bnb", "megatron": "bnb", "torchtune": "compiled", "unsloth": "compiled", "mlx-lm": "compiled"}
# mlx-lm's base is dequantized inside MLX's fused quantized matmuls, as the compiled kernels do


def dequant_seconds_per_token(sc: Scenario, arch: Architecture) -> float:
    """QLoRA's dequantization time per token on one device (0 for other methods)."""
    if sc.method != "qlora":
        return 0.0
    from core.memory.components import checkpointing

    quantized = sum(g.params for g in arch.weight_groups if g.is_linear) * arch.param_scale / (sc.tensor_parallel * sc.pipeline_parallel)
    passes = 3 if checkpointing(sc) else 2
    per_step = passes * quantized * DEQUANT_S_PER_PARAM[DEQUANT_KIND[sc.training_stack]]
    return per_step / (sc.batch_size * sc.seq_len)


class TrainingTime(BaseModel):
    model_config = _OUT
    tokens: float
    flops_per_token: float
    flops: float
    devices: int
    peak_tflops_per_device: float
    peak_basis: str
    mfu: float
    mfu_source: str
    tokens_per_s: float
    wall_hours: float
    gpu_hours: float
    dequant_fraction: float = 0.0  # share of the time QLoRA spends dequantizing weights


def training_time(sc: Scenario, acc: Accelerator, devices: int, tokens: float | None = None) -> TrainingTime:
    """Ideal training time on `devices` devices: FLOPs / (devices x peak x MFU)."""
    tokens = sc.train_tokens if tokens is None else tokens
    if tokens is None or tokens <= 0:
        raise ValueError("train_tokens must be set (> 0) to estimate training time")
    if devices < 1:
        raise ValueError("devices must be >= 1")
    arch = sc.architecture
    per_token = training_flops_per_token(sc, arch)
    peak = peak_tflops(acc, sc.precision)
    mfu, why = default_mfu(sc)
    if peak.tflops <= 0:
        raise ValueError(f"{acc.id} has no throughput figure in the catalog")
    flops = per_token * tokens
    rate = devices * peak.tflops * 1e12 * mfu  # FLOP/s achieved by all devices
    compute_s = flops / rate
    dequant_s = tokens / devices * dequant_seconds_per_token(sc, arch)
    seconds = compute_s + dequant_s
    return TrainingTime.model_construct(
        tokens=tokens,
        flops_per_token=per_token,
        flops=flops,
        devices=devices,
        peak_tflops_per_device=peak.tflops,
        peak_basis=peak.basis,
        mfu=mfu,
        mfu_source=why,
        tokens_per_s=tokens / seconds,
        wall_hours=seconds / SECONDS_PER_HOUR,
        gpu_hours=devices * seconds / SECONDS_PER_HOUR,
        dequant_fraction=dequant_s / seconds,
    )
