"""Per-device memory of a training step or of serving, by component (bytes).

Model states follow Rajbhandari et al. 2019, "ZeRO" (arXiv 1910.02054),
Sec. 3.1 and Fig. 1: mixed-precision Adam keeps 2 bytes of weights, 2 of
gradients and K = 12 of optimizer state (fp32 master copy, momentum and
variance) per parameter; ZeRO stage 1/2/3 shards the optimizer state, then the
gradients, then the weights across the N_d data-parallel ranks. Tensor and
pipeline parallelism split the weights Megatron-style (Shoeybi et al. 2019;
Narayanan et al. 2021). What the training software adds on top (autocast
copies, fp32 losses, PEFT's fp32 adapters, QLoRA's fp32 upcast) comes from its
profile in core/memory/stacks.py; what a serving engine allocates, from
core/memory/engines.py.

The components of a training step are taken at its peak: either at the loss
(weights, optimizer states, every kept activation and the loss's own
buffers; gradients only where the stack keeps them allocated) or at the
optimizer step (weights, all gradients, optimizer states), whichever is
larger. PyTorch's caching allocator then holds more than the live tensors
(the `allocator` component): freed blocks of the loss step's large buffers
are kept and split. Finally the CUDA context and communication buffers sit
outside PyTorch (`overhead`). The sum is what nvidia-smi shows, and what
decides whether it fits.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.memory.activations import LayerCosts, layer_activation_bytes, logits_bytes
from core.memory.engines import ENGINES
from core.memory.objective import preference, reference_copy, sequences_per_example
from core.memory.stacks import FUSED_CROSS_ENTROPY_STACKS, FUSED_LOSS_LOGITS_BYTES, STACKS, TrainingStack, trains_on_gptq
from core.model.architecture import ATTENTION_ROLES, MLP_ROLES, Architecture, WeightGroup
from core.model.formats import FORMATS, KV_CACHE_BYTES, WeightFormat, routed_expert_bytes, weight_bytes
from core.scenario import Scenario
from core.units import BYTES_PER_GIB

# Outside PyTorch's allocator, per device: the CUDA context and library handles. Measured on an H100 with
# PyTorch 2.11 / CUDA 13: nvidia-smi's used memory minus torch.cuda.max_memory_reserved() = 0.75 GiB in every
# run (data/measurements/h100-2026-11-23.jsonl). NCCL communicators add about 0.5 GiB once a device talks to others
# (vLLM issue reports: ~0.25 GiB non-torch memory on one GPU, up to ~2 GiB with tensor parallelism).
CUDA_CONTEXT_BYTES = 0.75 * BYTES_PER_GIB
COMM_BUFFER_BYTES = 0.5 * BYTES_PER_GIB


class Runtime(NamedTuple):
    """What a part's runtime holds per device outside the framework's allocator, and what it is called."""

    name: str  # for a chart's legend and the assumptions: "CUDA context, NCCL"
    context: str  # the allowance in an assumption line: "CUDA context and libraries"
    context_bytes: float
    comm: str  # what devices that cooperate add: "NCCL buffers" ("" when nothing is counted)
    comm_bytes: float
    basis: str  # where context_bytes comes from, in a few words


# The measured CUDA figures stand in for the other driver runtimes (ROCm, XLA, Neuron, Gaudi): no measurement of
# theirs here, so they are named for what they are and counted as on the H100.
_MEASURED_ON_H100 = "measured on an H100"
CUDA_RUNTIME = Runtime("CUDA context, NCCL", "CUDA context and libraries", CUDA_CONTEXT_BYTES, "NCCL buffers", COMM_BUFFER_BYTES, _MEASURED_ON_H100)


def _as_cuda(name: str, context: str, comm: str = "collective buffers") -> Runtime:
    return Runtime(name, context, CUDA_CONTEXT_BYTES, comm, COMM_BUFFER_BYTES, "as CUDA's, " + _MEASURED_ON_H100)


_OTHER_RUNTIMES = {
    "amd": _as_cuda("ROCm context, RCCL", "ROCm (HIP) context and libraries", "RCCL buffers"),
    "google": _as_cuda("TPU runtime", "TPU runtime (XLA) and libraries"),
    "aws": _as_cuda("Neuron runtime", "Neuron runtime and libraries"),
    "intel": _as_cuda("Gaudi runtime", "Gaudi runtime and libraries"),
    "other": _as_cuda("runtime context, collectives", "runtime context and libraries"),
}
# Apple silicon (Metal: llama.cpp, MLX, PyTorch MPS): nothing. What decides a fit there is the GPU working set
# (MTLDevice.recommendedMaxWorkingSetSize, the catalog's usable memory), and the Metal runtime takes none of it beyond
# the engine's own buffers: llama.cpp reports free = recommendedMaxWorkingSetSize - currentAllocatedSize
# (ggml/src/ggml-metal/ggml-metal-device.m, ggml_metal_device_get_memory) and prints what the device holds beyond its
# model, context and compute buffers as "unaccounted": 0 MiB on an M1 Max 64 GB (37,515 MiB model, 105 MiB context,
# 489 MiB compute, 14,973 MiB free of the working set; ggml-org/llama.cpp PR #22673, comment of 2026-05-10, read
# 2026-11-26). MLX's own peak (mx.get_peak_memory) likewise counts its arrays only (tests/core/test_mlx.py). No NCCL:
# the planner runs one Mac per replica (engines.SINGLE_DEVICE_ENGINES).
METAL_RUNTIME = Runtime("Metal", "Metal runtime", 0.0, "", 0.0, "llama.cpp's Metal memory breakdown leaves 0 MiB of the GPU working set unaccounted")


def runtime_of(accelerator: str) -> Runtime:
    """The runtime of the part `accelerator` (an id) runs, by its kind (apple: Metal) or else its vendor."""
    acc = get_accelerator(accelerator)
    if acc.kind == "apple":
        return METAL_RUNTIME
    return CUDA_RUNTIME if acc.vendor == "nvidia" else _OTHER_RUNTIMES.get(acc.vendor, _OTHER_RUNTIMES["other"])


# Bytes of optimizer state per trainable parameter, excluding a master copy, in fp32 states.
# AdamW: m and v (Loshchilov & Hutter 2019); 8-bit AdamW: two uint8 states with block-wise scales
# (Dettmers et al. 2022, arXiv 2110.02861); SGD with momentum: one buffer. Adafactor is factored (below).
# States follow the parameters' dtype: half of these in a "-true" 16-bit run (8-bit AdamW stays 2).
OPTIMIZER_STATE_BYTES = {"adamw": 8.0, "adamw-8bit": 2.0, "sgd": 4.0}
MASTER_COPY_BYTES = 4.0  # fp32 master weights in mixed precision (Micikevicius et al. 2018)
FP32_GRADIENT_COPY_BYTES = 4.0  # an optimizer's fp32 copy of fp16 gradients (Megatron-LM's main_grad under --fp16)

# PyTorch's caching allocator keeps freed blocks for reuse: with the large, short-lived buffers of the loss step
# the reserved pool exceeds the allocated peak. Calibrated on the Llama 3.2 1B full fine-tuning rows of
# data/measurements/h100-2026-11-23.jsonl (reserved - allocated = 0.06-13 GiB, about 0.75 of the largest fp32 loss
# buffer, 4 x tokens x vocabulary bytes), checked on the Llama 3.1 8B LoRA rows.
FRAGMENTATION_OF_LOSS_BUFFER = 0.75
FRAGMENTATION_FLOOR_BYTES = 0.25 * BYTES_PER_GIB
PREFILL_FRAGMENTATION = 0.3

COMPONENT_NAMES = ("weights", "gradients", "optimizer", "activations", "kv_cache", "overhead", "allocator")


class Components(NamedTuple):
    weights: Any
    gradients: Any
    optimizer: Any
    activations: Any
    kv_cache: Any
    overhead: Any  # outside PyTorch: CUDA context, NCCL buffers, CUDA graphs (and ZeRO-3's gathered blocks)
    allocator: Any = 0.0  # reserved by PyTorch's caching allocator beyond the live tensors

    @property
    def total(self) -> Any:
        """What nvidia-smi shows: every component."""
        return sum(self)

    @property
    def allocated(self) -> Any:
        """torch.cuda.max_memory_allocated(): the live tensors at the peak."""
        return self.weights + self.gradients + self.optimizer + self.activations + self.kv_cache


def lora_targets(arch: Architecture, targets: str) -> list[WeightGroup]:
    roles = set(ATTENTION_ROLES) | {"mla_q_a", "mla_q_b", "mla_kv_a", "mla_kv_b"}
    if targets == "all-linear":  # PEFT "all-linear": every linear layer but the output layer
        roles |= set(MLP_ROLES) | {"router"}
    return [g for g in arch.weight_groups if g.role in roles]


@lru_cache(maxsize=256)  # the training planner asks it for every layout of a shape
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


def stack_of(sc: Scenario) -> TrainingStack:
    return STACKS[sc.training_stack]


def mixed(sc: Scenario) -> bool:
    """Mixed precision as it runs: bf16 / fp16 keep fp32 weights or an fp32 master copy, except on a stack that loads
    the model in the 16-bit type outside DeepSpeed (TrainingStack.mixed_loads_16bit: Axolotl), which trains as -true,
    and on a stack without mixed precision (TrainingStack.mixed_precision: torchtune, mlx-lm)."""
    stack = stack_of(sc)
    if sc.precision not in ("bf16", "fp16") or not stack.mixed_precision:
        return False
    return not (stack.mixed_loads_16bit and sc.zero_stage not in (1, 2))


def master_layout(sc: Scenario) -> bool:
    """Mixed precision with bf16 parameters and an fp32 master copy in the optimizer (DeepSpeed, Megatron, and any
    ZeRO stage), rather than fp32 parameters under autocast."""
    return mixed(sc) and (stack_of(sc).mixed_layout == "master" or sc.zero_stage >= 1)


def qlora_base(sc: Scenario) -> WeightFormat:
    """QLoRA's frozen 4-bit base: the scenario's weights_format where the stack trains LoRA on that format
    (TrainingStack.qlora_other_bases: a GPTQ checkpoint), else the stack's own (bitsandbytes NF4; MLX's 4-bit)."""
    stack = stack_of(sc)
    return FORMATS[sc.weights_format if sc.weights_format in stack.qlora_other_bases else stack.qlora_base_format]


def gptq_base(sc: Scenario) -> bool:
    """LoRA on a GPTQ checkpoint (QLoRA on a GPTQ base, or LoRA with GPTQ weights: one PEFT run, stacks.trains_on_gptq):
    its linears dequantize in PyTorch ops under autograd (core/speed/timing.py GPTQ_DEQUANT_BYTES_PER_PARAM; the
    dequantized weights kept for the backward pass: dequantized_weight_bytes)."""
    return trains_on_gptq(sc.method, sc.weights_format, sc.training_stack)


def qlora_upcast(sc: Scenario) -> bool:
    """prepare_model_for_kbit_training's fp32 upcast, which PEFT skips for a GPTQ model (huggingface/peft@5d602fd
    src/peft/utils/other.py: `if not is_gptq_quantized and ...` around the cast)."""
    return sc.method == "qlora" and stack_of(sc).qlora_upcast and not gptq_base(sc)


def fp32_attention(sc: Scenario, acc: Any = None) -> bool:
    """QLoRA's fp32 upcast makes q, k and v fp32 (the norms' outputs are fp32; bitsandbytes' Linear4bit returns its
    input's dtype). FlashAttention-2 (the scenario's FlashAttention, on a part that runs it) casts them back to the
    16-bit type (transformers' flash-attention integration); SDPA, taken without it, runs attention in fp32, where no
    FlashAttention kernel does (our H200 profile, 2026-11-27: data/measurements/speed/h200-upcast-profile-2026-11-27.jsonl).
    `acc`: the part it runs on (an Accelerator; default the scenario's). Memory and time on a part take it from there, so
    a caller that sizes one scenario for many parts keys its sizing on this answer."""
    if not qlora_upcast(sc):
        return False
    part = acc if acc is not None else get_accelerator(sc.accelerator)
    return not (sc.flash_attention and part.runs_flash_attention_2)


def fp32_math_attention(sc: Scenario, arch: Architecture, acc: Any = None) -> bool:
    """fp32 attention of grouped-query heads: SDPA's math path (transformers passes enable_gqa, which the memory-efficient
    kernel does not take), the whole square of fp32 scores. Multi-head attention takes the memory-efficient kernel."""
    return fp32_attention(sc, acc) and arch.num_kv_heads < arch.num_heads


def part_memory_key(sc: Scenario) -> tuple[bool, bool]:
    """What a scenario's per-device memory takes from its part: SRAM residence (no GPU runtime) and QLoRA's attention
    path. A caller that sizes one scenario for many parts keeps one Evaluator per key."""
    return sram_resident(sc), fp32_attention(sc)


# The math path's fp32 scores at the peak, bytes a score element of the block being recomputed: the softmax's fp32
# probabilities it keeps for the backward pass and the two fp32 gradients its backward holds with them.
MATH_ATTENTION_SCORE_BYTES = 12.0


def dequantized_weight_bytes(sc: Scenario, arch: Architecture) -> tuple[float, float]:
    """A GPTQ base's linears dequantize to a 16-bit weight and multiply it in PyTorch (GPTQModel's / auto-gptq's torch
    QuantLinear: dequantize_weight, then matmul), so autograd keeps each dequantized weight for the backward pass (the
    input's gradient needs it). Bytes for every block's (what a step without checkpointing keeps) and for the largest
    block's (what recomputing one checkpointed block keeps); (0, 0) for any other base."""
    if not gptq_base(sc):
        return 0.0, 0.0
    return 2.0 * quantized_params(arch), 2.0 * arch.largest_layer_params  # the largest block's (norms included: a few kB)


def quantized_params(arch: Architecture) -> float:
    """The weights a 4-bit base quantizes: every linear layer's (the blocks'; embeddings and norms stay 16-bit)."""
    return sum(g.params for g in arch.weight_groups if g.is_linear) * arch.param_scale


def act_bytes(sc: Scenario) -> float:
    """Bytes per activation value: 4 in fp32 (and under QLoRA's fp32 upcast), else 2."""
    return 4.0 if sc.precision == "fp32" or qlora_upcast(sc) else 2.0


def residual_bytes(sc: Scenario) -> float:
    """The residual stream: fp32 under autocast (fp32 embeddings and parameters), else the activation dtype."""
    if mixed(sc) and not master_layout(sc) and sc.method == "full":
        return 4.0
    return act_bytes(sc)


def checkpointing(sc: Scenario) -> bool:
    """Gradient checkpointing as it will run: QLoRA through prepare_model_for_kbit_training turns it on."""
    return sc.gradient_checkpointing or qlora_upcast(sc)


class StateBytes(NamedTuple):
    """A full fine-tune's bytes per parameter by precision: the one table that training_states sizes the states
    with and that the Explain table and the Method page print (core/memory/explain.py)."""

    param: float  # the parameters' storage
    grad: float
    state_scale: float  # the optimizer states' precision (4: fp32; their K bytes scale by it / 4)
    master: float  # an fp32 master copy kept by the optimizer (0: none)
    copies: float  # autocast's 16-bit copies of the weights while computing (0: none)
    layout: str  # the layout in words


class TrainingStates(NamedTuple):
    """Unsharded model-state bytes for the whole model."""

    weights: float  # parameter storage
    weight_copies: float  # autocast's 16-bit copies of the weights, alive during forward and backward
    gradients: float
    optimizer: float
    trainable: int
    layer_bytes_per_param: float  # storage of a transformer block's linear weights
    largest_gradient: float  # one parameter tensor's gradient (what an optimizer fused into backward keeps)
    head_gradient: float  # the output head's gradient, made first in the backward pass
    bytes_per_param: StateBytes | None = None  # full fine-tune: the per-precision byte table these were sized with


def _state_bytes_per_param(sc: Scenario, precision_bytes: float) -> float:
    k = OPTIMIZER_STATE_BYTES[sc.optimizer]
    if sc.optimizer == "adamw-8bit":
        return k
    return k * precision_bytes / 4.0


def full_state_bytes(sc: Scenario) -> StateBytes:
    """The per-precision byte table of a full fine-tune (ZeRO Sec. 3.1 for the master layout)."""
    if sc.precision == "fp32":
        return StateBytes(4.0, 4.0, 4.0, 0.0, 0.0, "fp32")
    if not mixed(sc):  # bf16-true / fp16-true: states in the training dtype, no master copy
        return StateBytes(2.0, 2.0, 2.0, 0.0, 0.0, f"{sc.precision}: weights, gradients and optimizer states in 16-bit")
    if master_layout(sc):  # ZeRO Sec. 3.1: 2 + 2 + (4 master + states)
        if stack_of(sc).fp32_grads_under_bf16:  # Megatron-LM's Distributed Optimizer table
            if sc.precision == "bf16":  # "bf16 param, fp32 grads": 2 + 4 + (4 + 8), 18 bytes
                return StateBytes(2.0, 4.0, 4.0, MASTER_COPY_BYTES, 0.0, "mixed precision, fp32 gradients and master copy")
            # "fp16 param, fp16 grads": 20 bytes, 4 + 16/d sharded: the optimizer keeps fp32 copies of the parameters
            # and of the gradients (its main_grad) beside its states, 2 + 2 + (4 + 4 + 8)
            master = MASTER_COPY_BYTES + FP32_GRADIENT_COPY_BYTES
            return StateBytes(2.0, 2.0, 4.0, master, 0.0, "mixed precision, fp32 master copy and fp32 gradient copy in the optimizer")
        return StateBytes(2.0, 2.0, 4.0, MASTER_COPY_BYTES, 0.0, "mixed precision, fp32 master copy in the optimizer")
    # autocast: fp32 parameters, gradients and states, bf16 copies of the weights while computing
    return StateBytes(4.0, 4.0, 4.0, 0.0, 2.0, "mixed precision under autocast: fp32 parameters")


def fused_loss(sc: Scenario) -> bool:
    """The scenario asks for a fused cross-entropy and its stack takes one (stacks.FUSED_CROSS_ENTROPY_STACKS). DPO's
    loss is not a cross-entropy over the vocabulary: its trainers take each response's log-probabilities from the whole
    logits (core/memory/objective.py), so no fused cross-entropy applies."""
    return sc.fused_cross_entropy and sc.training_stack in FUSED_CROSS_ENTROPY_STACKS and not preference(sc)


def loss_logits_bytes(sc: Scenario) -> float:
    """Bytes per token and vocabulary entry at the loss step: the stack's own loss, or a fused cross-entropy."""
    own = stack_of(sc).logits_bytes
    return min(own, FUSED_LOSS_LOGITS_BYTES) if fused_loss(sc) else own


def reference_logits_bytes(sc: Scenario) -> float:
    """Bytes per token and vocabulary entry of DPO's reference logits, held at the loss beside the policy's: the
    activation dtype's (0 without a reference model)."""
    return act_bytes(sc) if preference(sc) else 0.0


def lora_fp32_inputs(sc: Scenario) -> bool:
    """PEFT runs each adapter on an fp32 copy of its input (the stack's lora_fp32_inputs), unless the sharding engine
    (DeepSpeed, FSDP) runs the adapters in the 16-bit type (TrainingStack.adapters_16bit_zero_stages). By the ZeRO stage
    alone: the planner sizes a layout before its data-parallel degree is in the scenario, and one answer needs the same
    rule for the plan and for `estimate` on its scenario (a one-process ZeRO run, which the launch starts without an
    engine, is counted as if it had one)."""
    stack = stack_of(sc)
    return stack.lora_fp32_inputs and not (sc.precision != "fp32" and sc.zero_stage in stack.adapters_16bit_zero_stages)


def adapter_bytes(sc: Scenario) -> float:
    """Bytes of a LoRA adapter parameter, and of its gradient and activation x @ A: fp32 in fp32, else the stack's."""
    return 4.0 if sc.precision == "fp32" else stack_of(sc).lora_adapter_bytes


def training_states(sc: Scenario, arch: Architecture) -> TrainingStates:
    if sc.method == "full":
        n = arch.total_params
        head = arch.vocab_size * arch.hidden_size
        table = full_state_bytes(sc)
        param, grad, state_scale, master, copies_per_param, _ = table
        if sc.optimizer == "adafactor":
            opt = adafactor_state_bytes(arch, None, sc.lora_targets) * state_scale / 4.0
        else:
            opt = _state_bytes_per_param(sc, state_scale) * n
        opt += master * n
        copies = copies_per_param * n
        largest = max(g.in_features * g.out_features for g in arch.weight_groups) * arch.param_scale
        return TrainingStates(param * n, copies, grad * n, opt, n, param, grad * largest, grad * head, table)
    base = qlora_base(sc) if sc.method == "qlora" else FORMATS[sc.weights_format]
    if sc.method == "lora" and sc.precision == "fp32":
        base = FORMATS["fp32"]
    if qlora_upcast(sc):  # prepare_model_for_kbit_training: every non-quantized parameter in fp32
        base = base._replace(embed_bits=32.0, lm_head_bits=32.0, other_bits=32.0)
    n_adapter = lora_params(arch, sc.lora_rank, sc.lora_targets)
    ab = adapter_bytes(sc)
    if sc.optimizer == "adafactor":
        opt = adafactor_state_bytes(arch, sc.lora_rank, sc.lora_targets) * ab / 4.0
    else:
        opt = _state_bytes_per_param(sc, ab) * n_adapter
    weights = _base_weight_bytes(arch, base) + ab * n_adapter
    adapter_grad = ab * n_adapter
    largest = max((ab * sc.lora_rank * max(g.in_features, g.out_features) for g in lora_targets(arch, sc.lora_targets)), default=0.0)
    return TrainingStates(weights, 0.0, adapter_grad, opt, n_adapter, base.linear_bits / 8, largest, 0.0)


def _base_weight_bytes(arch: Architecture, fmt: WeightFormat) -> float:
    return weight_bytes(arch, fmt)


def layer_costs(sc: Scenario, arch: Architecture) -> LayerCosts:
    """What the stack's implementation keeps per block beyond the textbook tensors (core/memory/activations.py)."""
    stack = stack_of(sc)
    a = act_bytes(sc)
    if sc.training_stack == "megatron":
        return LayerCosts(act_bytes=a, norm_bytes=2 * a)
    r = residual_bytes(sc)
    if not stack.norm_fp32_copy:
        norm = r + a  # the norm's input (the residual) and its output
    elif a >= 4:
        norm = 12.0 if stack.norm_fp32_copy else 8.0  # input (already fp32), normalized, scaled
    else:
        norm = 4.0 + r + 2.0  # the fp32 copy (or the fp32 residual itself), the normalized value, the 16-bit projection input
    extra = 0.0
    if sc.method != "full":
        groups = lora_targets(arch, sc.lora_targets)
        modules = sum(g.count for g in groups) / arch.num_layers
        extra += modules * sc.lora_rank * adapter_bytes(sc)  # x @ A of each adapted matrix
        if lora_fp32_inputs(sc) and a < 4:
            # PEFT runs each adapter on an fp32 copy of its input: one copy per distinct input width of the block
            roles = {g.role for g in groups}
            widths = 0
            if roles & {"attn_q", "attn_k", "attn_v", "mla_q_a", "mla_kv_a"}:
                widths += arch.hidden_size
            if "attn_o" in roles:
                widths += arch.num_heads * arch.value_head_dim
            if roles & {"mlp_gate", "mlp_up"}:
                widths += arch.hidden_size
            if "mlp_down" in roles:
                widths += arch.routed_width if arch.is_moe and not arch.dense_layers else arch.intermediate_size
            extra += 4.0 * widths
    # Eager attention keeps the fp32 softmax and its 16-bit copy (transformers eager_attention_forward).
    return LayerCosts(act_bytes=a, norm_bytes=norm, softmax_bytes=4.0 + a, extra_per_token=extra)


class ActivationParts(NamedTuple):
    """A training step's activations before TP and PP split them: what training_peak builds the activations
    component from, and what the Explain table prints (it never computes them again)."""

    all_layers: Any  # every block's activations kept for the backward pass (core/memory/activations.py)
    largest: Any  # one block's: what checkpointing rebuilds at a time
    checkpoints: Any  # under checkpointing, each block's input (layers x tokens x h x residual bytes); else 0
    logits: Any  # the loss step's buffer (stack's bytes x tokens x vocabulary)
    dequantized: Any = 0.0  # a GPTQ base's 16-bit weights autograd keeps (every block's, or one recomputed block's)


class TrainingPeak(NamedTuple):
    """The pieces of a training step's peak on one device (already sharded)."""

    components: Components
    cpu_bytes: float
    phase: str  # "loss" or "optimizer step"
    logits: Any
    kept: Any  # activations kept for the backward pass (or checkpoints)
    parts: ActivationParts  # the activations before sharding


def training_peak(sc: Scenario, arch: Architecture, layout: Layout, batch: Any, seq: Any, states: TrainingStates | None = None) -> TrainingPeak:
    st = states or training_states(sc, arch)
    stack = stack_of(sc)
    dp, tp, pp = layout
    split = tp * pp
    batch = batch * sequences_per_example(sc)  # DPO: a chosen and a rejected sequence an example (core/memory/objective.py)
    # DPO's frozen reference model of a full fine-tune: a copy of the weights as loaded, sharded and offloaded as they are
    reference = st.weights if reference_copy(sc) else 0.0
    weights = (st.weights + reference) / split
    copies = st.weight_copies / split
    grads = st.gradients / split
    opt = st.optimizer / split
    if sc.zero_stage >= 1:
        opt /= dp
    if sc.zero_stage >= 2:
        grads /= dp
    if sc.zero_stage >= 3:
        weights /= dp
        copies /= dp
    cpu = 0.0
    if sc.offload != "none":
        # ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840, Sec. 4.1): the fp16 gradients and every optimizer state
        # (fp32 master, momentum, variance) live in CPU memory, the fp16 parameters on the GPU; DeepSpeed copies each
        # gradient to pinned CPU memory as the backward pass produces it, so a device holds one weight group's
        # gradient in flight (FSDP's CPUOffload moves gradients with the parameters too).
        cpu += opt + grads
        opt = 0.0
        grads = min(grads, st.largest_gradient / split)
    if sc.offload == "optimizer+params":
        cpu += weights
        weights = 0.0
    fused_step = stack.grads_freed_in_backward and sc.method == "full" and sc.gradient_accumulation_steps == 1
    if fused_step:
        grads = min(grads, st.largest_gradient / split)
    resident = stack.grads_resident or sc.gradient_accumulation_steps > 1
    kept, logits, parts = _training_activations(sc, arch, pp, tp, batch, seq)  # hop: block bytes -> what a device keeps (/TP, PP)
    if checkpointing(sc) and stack.checkpoints_offloaded:
        cpu = cpu + kept.offloaded
    grads_early = grads if resident else min(grads, st.head_gradient / split)
    at_loss = weights + copies + opt + grads_early + kept.on_device + logits
    # With checkpointing, each block is rebuilt during the backward pass, after the loss buffers are gone.
    at_recompute = weights + copies + opt + grads_early + kept.on_device + kept.recompute
    tied_extra = st.head_gradient / split if sc.method == "full" and arch.tie_embeddings and not fused_step else 0.0
    at_step = weights + grads + opt + tied_extra
    forward = np.maximum(at_loss, at_recompute)
    loss_wins = np.asarray(forward >= at_step)
    # A distributed run (any ZeRO stage, or several devices) sets up NCCL; at one rank ZeRO shards nothing and only
    # adds these buffers.
    distributed = layout.devices > 1 or sc.zero_stage >= 1
    runtime = runtime_of(sc.accelerator)
    overhead = runtime.context_bytes + (runtime.comm_bytes if distributed else 0.0)
    if sc.zero_stage == 3:
        # ZeRO-3 / FSDP gather one block's full weights, and prefetch the next, in the base weights' own storage.
        overhead += 2 * arch.largest_layer_params / split * st.layer_bytes_per_param
    # The largest short-lived buffer: the fp32 copy of the logits for a loss that upcasts them whole, else what the
    # chunked loss holds at a time.
    loss_buffer = min(4.0, loss_logits_bytes(sc)) * seq * batch * arch.vocab_size / tp
    allocator = FRAGMENTATION_FLOOR_BYTES + FRAGMENTATION_OF_LOSS_BUFFER * loss_buffer
    comps = Components(
        weights=np.where(loss_wins, weights + copies, weights),
        gradients=np.where(loss_wins, grads_early, grads + tied_extra),
        optimizer=opt,
        activations=np.where(loss_wins, kept.on_device + np.maximum(logits, kept.recompute), 0.0),  # hop: kept + loss buffer -> activations
        kv_cache=0.0,
        overhead=overhead,
        allocator=allocator,
    )
    if np.ndim(loss_wins) == 0:
        comps = Components(*(float(x) for x in comps))
    if not bool(np.all(loss_wins)):
        phase = "optimizer step"
    else:
        phase = "loss" if bool(np.all(at_loss >= at_recompute)) else "recomputation of a checkpointed block"
    return TrainingPeak(comps, cpu, phase, logits, kept.on_device, parts)


def training_components(sc: Scenario, arch: Architecture, layout: Layout, batch: Any, seq: Any, states: TrainingStates | None = None) -> tuple[Components, float]:
    """Per-device components and the CPU bytes per device that offload moves off."""
    peak = training_peak(sc, arch, layout, batch, seq, states)
    return peak.components, peak.cpu_bytes


class _Kept(NamedTuple):
    on_device: Any  # kept for the backward pass on the device (all activations, or the checkpoints)
    recompute: Any  # with checkpointing: one block rebuilt during the backward pass
    offloaded: Any  # checkpoints kept in CPU memory


def _training_activations(sc: Scenario, arch: Architecture, pp: int, tp: int, batch: Any, seq: Any) -> tuple[_Kept, Any, ActivationParts]:
    costs = layer_costs(sc, arch)  # hop: Scenario (rank, targets, precision, stack) -> LayerCosts (bytes per token)
    stack = stack_of(sc)
    # hop: LayerCosts x seq x batch -> bytes of every block, and of the largest
    flash = sc.flash_attention
    if fp32_attention(sc):  # SDPA in fp32: the math path keeps the scores, the memory-efficient kernel none
        flash = not fp32_math_attention(sc, arch)
        costs = costs._replace(softmax_bytes=MATH_ATTENTION_SCORE_BYTES)
    all_layers, largest = layer_activation_bytes(arch, seq, batch, flash=flash, costs=costs)
    offloaded: Any = 0.0
    recompute: Any = 0.0
    inputs: Any = 0.0
    every_block, one_block = dequantized_weight_bytes(sc, arch)
    if checkpointing(sc):
        # Full recomputation keeps each block's input (2sbh bytes in 16-bit; Korthikanti Table 2) and rebuilds one
        # block at a time during the backward pass.
        inputs = arch.num_layers * seq * batch * arch.hidden_size * residual_bytes(sc)
        if stack.checkpoints_offloaded:
            offloaded, inputs = inputs, 2 * seq * batch * arch.hidden_size * residual_bytes(sc)  # a block in flight
        dequantized = one_block
        kept, recompute = inputs, largest + dequantized
    else:
        dequantized = every_block
        kept = all_layers + dequantized
    # Sequence parallelism splits every activation over the TP group (Korthikanti Sec. 4.2.2); the loss is
    # vocabulary-parallel. Under 1F1B the first pipeline stage holds L/p layers for p micro-batches in flight, i.e.
    # L layers' worth (Sec. 4.2.3); the last stage holds the loss.
    whole_loss = logits_bytes(seq, batch, arch.vocab_size, loss_logits_bytes(sc))
    if preference(sc):  # DPO: the reference's forward runs while the policy's logits are held (core/memory/objective.py)
        whole_loss = whole_loss + logits_bytes(seq, batch, arch.vocab_size, reference_logits_bytes(sc))
    # hop: the unsharded pieces -> ActivationParts (MemoryResult.activation_parts, what Explain prints)
    parts = ActivationParts(all_layers, largest, inputs if not stack.checkpoints_offloaded else offloaded, whole_loss, dequantized)
    loss = whole_loss / tp
    if pp == 1:
        return _Kept(kept / tp, recompute / tp, offloaded / tp), loss, parts
    first, last_kept = kept / tp, kept / tp / pp  # the first stage holds every micro-batch in flight; the last, the loss
    last_wins = last_kept + loss > first
    return _Kept(np.where(last_wins, last_kept, first), recompute / tp, offloaded / tp), np.where(last_wins, loss, 0.0), parts


# ------------------------------------------------------------------------------------------------------ serving


def kv_cache_bytes_per_token(arch: Architecture, kv_format: str) -> int:
    full, windowed = arch.kv_cache_elements_per_token()
    return round((full + windowed) * KV_CACHE_BYTES[kv_format])


def kv_bytes_per_sequence(arch: Architecture, kv_format: str, context: Any) -> Any:
    """KV cache of one sequence of `context` tokens: sliding-window layers keep at most the window."""
    full, windowed = arch.kv_cache_elements_per_token()
    window_tokens = np.minimum(context, arch.sliding_window) if arch.sliding_window else context
    return KV_CACHE_BYTES[kv_format] * (full * context + windowed * window_tokens)


def kv_share(arch: Architecture, tp: int) -> float:
    """Fraction of the KV cache one tensor-parallel rank holds: GQA heads are split over the ranks (replicated when
    fewer heads than ranks); the MLA latent is replicated on every rank (vLLM MLA backend)."""
    return 1.0 if arch.is_mla else math.ceil(arch.num_kv_heads / tp) / arch.num_kv_heads


def gpu_layer_share(sc: Scenario, arch: Architecture) -> float:
    """The share of the model on the accelerators: llama.cpp's n_gpu_layers of the transformer layers (their weights
    and KV cache go together; llama.cpp's offload_kqv default), the rest stays in system RAM. Other engines, training,
    or gpu_layers unset: all of it. The embedding and output matrices are counted pro rata with the layers (llama.cpp
    keeps the output matrix off the GPU until every layer is on it: a few percent of a model)."""
    if sc.mode != "inference" or sc.serving_engine != "llama.cpp" or sc.gpu_layers is None:
        return 1.0
    return min(sc.gpu_layers, arch.num_layers) / arch.num_layers


def _kv_sequences(sc: Scenario, batch: Any) -> Any:
    """Sequences whose KV cache is held: one per concurrent sequence, with every engine. llama.cpp allocates one cache
    of -c (n_ctx) tokens at load and splits it over its -np parallel slots (llama.cpp tools/server/server.cpp:
    n_ctx_slot = n_ctx / n_parallel), so serving `batch` sequences of `seq` tokens takes -c = batch x seq; before, the
    cache was counted once whatever the batch, and the Inference page offered 4,096 concurrent sequences where 5 fit."""
    return batch


def host_resident_bytes(sc: Scenario, arch: Architecture, batch: Any, seq: Any, weights_total: float) -> Any:
    """System RAM holding the layers llama.cpp keeps off the accelerators (gpu_layers): their weights and KV cache."""
    share = gpu_layer_share(sc, arch)
    if share >= 1.0:
        return 0.0
    return (1.0 - share) * (weights_total + _kv_sequences(sc, batch) * kv_bytes_per_sequence(arch, sc.kv_cache_format, seq))


def sram_resident(sc: Scenario) -> bool:
    """Serving on chips whose model lives in on-chip SRAM (Groq LPU, Cerebras WSE): their compiler lays out every
    tensor ahead of time and streams the tokens through the chips (Abts et al. 2020, "Think Fast: A Tensor Streaming
    Processor (TSP) for Accelerating Deep Learning Workloads", ISCA), so no GPU runtime, allocator or engine pool
    takes a share of the memory, and a prompt is not held as one large chunk."""
    return sc.mode == "inference" and get_accelerator(sc.accelerator).weights_in_sram


def expert_parallel_weight_bytes(arch: Architecture, weights_format: str, ranks: int) -> float:
    """Weights one of `ranks` expert-parallel ranks holds (core/speed/expert_parallel.py): every non-expert weight
    (attention, dense layers, shared experts, embeddings: data-parallel attention replicates them) and 1/ranks of the
    routed experts (E/n whole experts a rank)."""
    fmt = FORMATS[weights_format]
    return weight_bytes(arch, fmt) - routed_expert_bytes(arch, fmt) * arch.param_scale * (1.0 - 1.0 / ranks)


def expert_parallel_ranks(sc: Scenario, layout: Layout) -> int:
    """The expert-parallel ranks of a serving replica: its tensor-parallel devices when the scenario serves
    expert-parallel (attention data-parallel over them), else 1."""
    return layout.tensor_parallel if sc.mode == "inference" and sc.expert_parallel and layout.pipeline_parallel == 1 else 1


def inference_components(sc: Scenario, arch: Architecture, layout: Layout, batch: Any, seq: Any, weights_total: float | None = None) -> Components:
    """What serving `batch` sequences of `seq` tokens needs per device with the scenario's engine (the engine's
    pre-allocation is not included: see engine_reservation()). On SRAM-resident chips (sram_resident): the weights,
    the KV cache and one token per sequence in flight, nothing else."""
    engine = ENGINES[sc.serving_engine]
    _, tp, pp = layout
    share = gpu_layer_share(sc, arch)
    a_bytes = 4 if sc.weights_format == "fp32" else 2
    sram = sram_resident(sc)
    if (ranks := expert_parallel_ranks(sc, layout)) > 1:
        # expert-parallel: each rank holds the non-expert weights, E/n experts, and the KV cache and prefill of its own
        # share of the sequences (data-parallel attention, whole KV heads)
        weights = expert_parallel_weight_bytes(arch, sc.weights_format, ranks)
        own = np.ceil(np.asarray(batch, dtype=np.float64) / ranks)
        kv = own * kv_bytes_per_sequence(arch, sc.kv_cache_format, seq)
        activations = _prefill_peak(sc, arch, 1, own, seq, a_bytes)
    else:
        weights = share * (weight_bytes(arch, FORMATS[sc.weights_format]) if weights_total is None else weights_total) / (tp * pp)
        kv = share * _kv_sequences(sc, batch) * kv_bytes_per_sequence(arch, sc.kv_cache_format, seq) * kv_share(arch, tp) / pp
        activations = _prefill_peak(sc, arch, tp, batch, seq, a_bytes, streamed=sram)
    if sram:
        return Components(weights, 0.0, 0.0, activations, kv, 0.0, 0.0)
    runtime = runtime_of(sc.accelerator)
    overhead = runtime.context_bytes + engine.graphs_bytes + (runtime.comm_bytes if tp * pp > 1 else 0.0)
    # Engines that pre-allocate manage their own pool; generate() leaves PyTorch's allocator to split the prefill's
    # buffers (reserved - allocated grew to about 0.3 of the prefill working set on our H100 runs). llama.cpp plans
    # its compute buffer ahead (ServingEngine.planned_buffers): no reserve.
    if engine.planned_buffers:
        allocator = 0.0
    else:
        allocator = FRAGMENTATION_FLOOR_BYTES + (PREFILL_FRAGMENTATION * activations if engine.preallocate_fraction is None else 0.0)
    return Components(weights, 0.0, 0.0, activations, kv, overhead, allocator)


def kv_headroom(comps: Components, capacity: Any) -> Any:
    """Memory left for the KV cache on a device: `capacity` (usable memory, or the engine's reservation: fit_capacity)
    less every other component, the allocator's reserve included, never below 0. The one computation of it: the
    engine's KV pool (estimate._kv_pool) and the KV chart's "Memory left for KV cache" line (sweep's kv_headroom)
    read it, and the KV cache fits exactly when it is at most this (as `fits`: total <= capacity)."""
    return np.maximum(capacity - (comps.total - comps.kv_cache), 0.0)


def engine_reservation(sc: Scenario, capacity: float) -> float | None:
    """Bytes the engine takes at start whatever the model needs (vLLM gpu_memory_utilization), or None (also on
    SRAM-resident chips, which run no such engine)."""
    if sram_resident(sc):
        return None
    engine = ENGINES[sc.serving_engine]
    fraction = sc.gpu_memory_utilization or engine.preallocate_fraction
    if fraction is None and engine.reserve_bytes is not None:
        return max(0.0, capacity - engine.reserve_bytes)
    return None if fraction is None else fraction * capacity


def _prefill_peak(sc: Scenario, arch: Architecture, tp: int, batch: Any, seq: Any, act_bytes: int, streamed: bool = False) -> Any:
    """Transient working set of one block during prefill: the hidden state and residual, the normed input, Q/K/V,
    and the MLP's gate, up and activated values for the tokens of one prefill step (the engine's chunk, or every
    prompt token of the batch for generate(); `streamed`: one token per sequence, as SRAM-resident chips pipeline a
    prompt through), without FlashAttention their score matrix against the whole context, plus fp32 logits for the
    last token of each sequence."""
    engine = ENGINES[sc.serving_engine]
    if streamed:
        tokens = batch
    else:
        tokens = seq * batch if engine.prefill_chunk_tokens is None else np.minimum(seq * batch, engine.prefill_chunk_tokens)
    h = arch.hidden_size
    f = arch.intermediate_size
    if arch.is_moe:
        f = max(f if arch.dense_layers else 0, arch.routed_width)
    if arch.is_mla:
        qkv = arch.num_heads * (2 * arch.qk_head_dim + arch.value_head_dim)
    else:
        qkv = (arch.num_heads + 2 * arch.num_kv_heads) * arch.head_dim
    per_tp = qkv + (3 if arch.gated_mlp else 2) * f
    peak = tokens * (2 * h + per_tp / tp) * act_bytes
    if not sc.flash_attention:
        peak = peak + math.ceil(arch.num_heads / tp) * tokens * seq * act_bytes
    return peak + 4.0 * batch * arch.vocab_size


def components(sc: Scenario, arch: Architecture, layout: Layout, batch: Any, seq: Any) -> tuple[Components, float]:
    if sc.mode == "training":
        return training_components(sc, arch, layout, batch, seq)
    return inference_components(sc, arch, layout, batch, seq), 0.0
