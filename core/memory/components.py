"""Per-device memory of a training step or of serving, by component (bytes).

Model states follow Rajbhandari et al. 2019, "ZeRO" (arXiv 1910.02054),
Sec. 3.1 and Fig. 1: mixed-precision Adam keeps 2 bytes of weights, 2 of
gradients and K = 12 of optimizer state (fp32 master copy, momentum and
variance) per parameter; ZeRO stage 1/2/3 shards the optimizer state, then the
gradients, then the weights across the N_d data-parallel ranks. Tensor and
pipeline parallelism split the weights Megatron-style (Shoeybi et al. 2019;
Narayanan et al. 2021).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from core.layout import Layout
from core.memory.activations import layer_activation_bytes, logits_bytes
from core.model.architecture import ATTENTION_ROLES, MLP_ROLES, Architecture
from core.model.formats import FORMATS, KV_CACHE_BYTES, weight_bytes
from core.scenario import Scenario
from core.units import BYTES_PER_GIB

# Runtime overhead per device. The CUDA context alone measured 287,047,680 B
# with lazy module loading (PyTorch CUDA semantics notes; 666,632,192 B
# without), 426 MiB in nvidia-smi on a recent stack; cuBLAS/cuDNN workspaces
# come on top. We budget 0.5 GiB, plus 0.5 GiB of NCCL communicator buffers
# once a device talks to others (vLLM issue threads report 0.25 GiB non-torch
# memory on one GPU and up to ~2 GiB with tensor parallelism and CUDA graphs).
CUDA_CONTEXT_BYTES = 0.5 * BYTES_PER_GIB
COMM_BUFFER_BYTES = 0.5 * BYTES_PER_GIB

# Bytes of optimizer state per trainable parameter, excluding a master copy.
# AdamW: fp32 m and v (Loshchilov & Hutter 2019); 8-bit AdamW: two uint8
# states with block-wise fp32 scales (Dettmers et al. 2022, arXiv 2110.02861);
# SGD with momentum: one fp32 buffer. Adafactor is factored (computed below).
OPTIMIZER_STATE_BYTES = {"adamw": 8.0, "adamw-8bit": 2.0, "sgd": 4.0}
MASTER_COPY_BYTES = 4.0  # fp32 master weights in mixed precision (Micikevicius et al. 2018)

# Serving engines prefill long prompts in chunks: vLLM's chunked prefill
# schedules at most `max_num_batched_tokens` tokens per step (8,192 for its
# OpenAI-compatible server on large GPUs). We size the prefill working set for
# one such step.
PREFILL_CHUNK_TOKENS = 8192


class Components(NamedTuple):
    weights: float
    gradients: float
    optimizer: float
    activations: float
    kv_cache: float
    overhead: float

    @property
    def total(self) -> float:
        return sum(self)


def lora_targets(arch: Architecture, targets: str) -> list:
    roles = set(ATTENTION_ROLES) | {"mla_q_a", "mla_q_b", "mla_kv_a", "mla_kv_b"}
    if targets == "all-linear":  # PEFT "all-linear": every linear layer but the output layer
        roles |= set(MLP_ROLES) | {"router"}
    return [g for g in arch.weight_groups if g.role in roles]


def lora_params(arch: Architecture, rank: int, targets: str) -> int:
    """LoRA adds A (r x in) and B (out x r) to each targeted matrix
    (Hu et al. 2021, arXiv 2106.09685, Sec. 4)."""
    return sum(rank * (g.in_features + g.out_features) * g.count for g in lora_targets(arch, targets))


def adafactor_state_bytes(arch: Architecture, lora_rank: int | None, targets: str) -> float:
    """Adafactor keeps fp32 row and column second-moment factors per matrix and
    no first moment (Shazeer & Stern 2018, arXiv 1804.04235, Alg. 4)."""
    if lora_rank is not None:
        groups = lora_targets(arch, targets)
        return sum(4.0 * ((g.in_features + lora_rank) + (lora_rank + g.out_features)) * g.count for g in groups)
    total = 0.0
    for g in arch.weight_groups:
        total += 4.0 * g.count * (g.in_features + g.out_features if g.out_features > 1 else g.in_features)
    return total


class TrainingStates(NamedTuple):
    """Unsharded model-state bytes for the whole model."""

    weights: float
    gradients: float
    optimizer: float
    trainable: int
    layer_bytes_per_param: float  # storage of a transformer block's linear weights


def training_states(sc: Scenario, arch: Architecture) -> TrainingStates:
    mixed = sc.precision != "fp32"
    half = 2.0 if mixed else 4.0
    if sc.method == "full":
        n = arch.total_params
        if sc.optimizer == "adafactor":
            opt = adafactor_state_bytes(arch, None, sc.lora_targets)
        else:
            opt = OPTIMIZER_STATE_BYTES[sc.optimizer] * n
        opt += MASTER_COPY_BYTES * n if mixed else 0.0
        return TrainingStates(half * n, half * n, opt, n, half)
    base_fmt = FORMATS["nf4"] if sc.method == "qlora" else FORMATS[sc.weights_format]
    n_adapter = lora_params(arch, sc.lora_rank, sc.lora_targets)
    # PEFT keeps adapter weights in fp32 even on a 16-bit base
    # (LoraConfig autocast_adapter_dtype=True), so there is no separate master copy.
    if sc.optimizer == "adafactor":
        opt = adafactor_state_bytes(arch, sc.lora_rank, sc.lora_targets)
    else:
        opt = OPTIMIZER_STATE_BYTES[sc.optimizer] * n_adapter
    weights = weight_bytes(arch, base_fmt) + 4.0 * n_adapter
    return TrainingStates(weights, 4.0 * n_adapter, opt, n_adapter, base_fmt.linear_bits / 8)


def training_components(
    sc: Scenario,
    arch: Architecture,
    layout: Layout,
    batch: int,
    seq: int,
    states: TrainingStates | None = None,
) -> tuple[Components, float]:
    """Per-device components and the CPU bytes per device that offload moves off."""
    st = states or training_states(sc, arch)
    dp, tp, pp = layout
    split = tp * pp
    weights = st.weights / split
    grads = st.gradients / split
    opt = st.optimizer / split
    if sc.zero_stage >= 1:
        opt /= dp
    if sc.zero_stage >= 2:
        grads /= dp
    if sc.zero_stage >= 3:
        weights /= dp
    cpu = 0.0
    if sc.offload != "none":
        cpu += opt
        opt = 0.0
    if sc.offload == "optimizer+params":
        cpu += weights
        weights = 0.0
    act_bytes = 4 if sc.precision == "fp32" else 2
    activations = _training_activations(sc, arch, pp, tp, batch, seq, act_bytes)
    # A distributed run (any ZeRO stage, or several devices) sets up NCCL; at
    # one rank ZeRO shards nothing and only adds these buffers.
    distributed = layout.devices > 1 or sc.zero_stage >= 1
    overhead = CUDA_CONTEXT_BYTES + (COMM_BUFFER_BYTES if distributed else 0.0)
    if sc.zero_stage == 3:
        # ZeRO-3 / FSDP gather one block's full weights, and prefetch the next,
        # in the base weights' own storage (NF4 stays NF4 under FSDP + QLoRA).
        overhead += 2 * arch.largest_layer_params / split * st.layer_bytes_per_param
    return Components(weights, grads, opt, activations, 0.0, overhead), cpu


def _training_activations(sc: Scenario, arch: Architecture, pp: int, tp: int, batch: int, seq: int, act_bytes: int) -> float:
    all_layers, largest = layer_activation_bytes(arch, seq, batch, flash=sc.flash_attention, act_bytes=act_bytes)
    if sc.method != "full":  # the low-rank intermediate x @ A of each adapted matrix
        per_layer_adapters = sum(g.count for g in lora_targets(arch, sc.lora_targets)) / arch.num_layers
        all_layers += arch.num_layers * per_layer_adapters * seq * batch * sc.lora_rank * act_bytes
    if sc.gradient_checkpointing:
        # Full recomputation keeps each block's input, 2sbh bytes (Korthikanti
        # Table 2), and rebuilds one block at a time during the backward pass.
        kept = arch.num_layers * seq * batch * arch.hidden_size * act_bytes + largest
    else:
        kept = all_layers
    # Sequence parallelism splits every activation over the TP group
    # (Korthikanti Sec. 4.2.2). Under 1F1B the first pipeline stage holds
    # L/p layers for p micro-batches in flight, i.e. L layers' worth (Sec. 4.2.3).
    logits = logits_bytes(seq, batch, arch.vocab_size) / tp  # vocab-parallel loss
    if pp == 1:
        return kept / tp + logits
    return np.maximum(kept / tp, kept / tp / pp + logits)  # first stage vs last stage


def kv_cache_bytes_per_token(arch: Architecture, kv_format: str) -> int:
    full, windowed = arch.kv_cache_elements_per_token()
    return (full + windowed) * KV_CACHE_BYTES[kv_format]


def inference_components(sc: Scenario, arch: Architecture, layout: Layout, batch: int, seq: int) -> Components:
    _, tp, pp = layout
    fmt = FORMATS[sc.weights_format]
    weights = weight_bytes(arch, fmt) / (tp * pp)
    full, windowed = arch.kv_cache_elements_per_token()
    window_tokens = np.minimum(seq, arch.sliding_window) if arch.sliding_window else seq
    kv = batch * KV_CACHE_BYTES[sc.kv_cache_format] * (full * seq + windowed * window_tokens)
    # GQA heads are split over TP ranks (replicated when fewer than ranks); the
    # MLA latent is replicated on every rank (vLLM MLA backend).
    if not arch.is_mla:
        kv *= math.ceil(arch.num_kv_heads / tp) / arch.num_kv_heads
    kv /= pp
    act_bytes = 4 if sc.weights_format == "fp32" else 2
    activations = _prefill_peak(sc, arch, tp, batch, seq, act_bytes)
    overhead = CUDA_CONTEXT_BYTES + (COMM_BUFFER_BYTES if tp * pp > 1 else 0.0)
    return Components(weights, 0.0, 0.0, activations, kv, overhead)


def _prefill_peak(sc: Scenario, arch: Architecture, tp: int, batch: int, seq: int, act_bytes: int) -> float:
    """Transient working set of one block during prefill: residual stream and
    normed input, Q/K/V and the MLP intermediates for the tokens of one
    prefill step, (without FlashAttention) their score matrix against the whole
    context, plus fp32 logits for the last token of each sequence."""
    tokens = np.minimum(seq * batch, PREFILL_CHUNK_TOKENS)
    h = arch.hidden_size
    f = arch.intermediate_size
    if arch.is_moe:
        f = max(f if arch.dense_layers else 0, arch.routed_width)
    if arch.is_mla:
        qkv = arch.num_heads * (2 * arch.qk_head_dim + arch.value_head_dim)
    else:
        qkv = (arch.num_heads + 2 * arch.num_kv_heads) * arch.head_dim
    per_tp = qkv + (2 if arch.gated_mlp else 1) * f
    peak = tokens * (2 * h + per_tp / tp) * act_bytes
    if not sc.flash_attention:
        peak = peak + math.ceil(arch.num_heads / tp) * tokens * seq * act_bytes
    return peak + 4.0 * batch * arch.vocab_size


def components(sc: Scenario, arch: Architecture, layout: Layout, batch: int, seq: int) -> tuple[Components, float]:
    if sc.mode == "training":
        return training_components(sc, arch, layout, batch, seq)
    return inference_components(sc, arch, layout, batch, seq), 0.0
