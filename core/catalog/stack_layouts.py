"""What each training stack can run (data/stack_layouts.csv, one sourced row per stack): data parallelism, which
ZeRO / FSDP sharding stages, tensor and pipeline parallelism, several nodes, LoRA, QLoRA and QLoRA under sharding.
The planner never proposes what its stack cannot run; a sidebar scenario that asks for it is told so in one line.

bitsandbytes' 4-bit kernels (QLoRA) need a CUDA or ROCm GPU: bitsandbytes docs, "Installation" (CUDA; ROCm for AMD;
other backends preview only), so no TPU, Trainium, Gaudi or Apple part trains QLoRA here. 8-bit AdamW is bitsandbytes'
block-wise AdamW8bit (or torchao's AdamW8bit where bitsandbytes' breaks under FSDP2 or tensor parallelism: Axolotl's
validation), CUDA or ROCm kernels as well: the same parts (torchao: "We only test on CPU and CUDA", torchao/optim/README.md).

Each stack's `optimizers` are the scenario's optimizers (core/scenario.Optimizer) its launch command sets with the
trainer's own names (core/plan/launch/), `qlora_optimizers` those it runs on a QLoRA base where fewer (LitGPT's
bitsandbytes precision builds PagedAdamW whatever is asked), each row with its `optimizers_source`."""

from __future__ import annotations

import functools
from typing import get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.catalog.accelerators import DATA_DIR, Accelerator, read_catalog_rows
from core.catalog.engine_hardware import engine_problem
from core.memory.stacks import STACKS
from core.scenario import Method, Offload, Optimizer
from core.text import listed

LAYOUTS_CSV = DATA_DIR / "stack_layouts.csv"
QLORA_VENDORS = frozenset({"nvidia", "amd"})
# mlx-lm trains where MLX runs (data/engine_hardware.csv's mlx row: Apple silicon, and NVIDIA through MLX's CUDA
# backend); its QLoRA base is MLX's own 4-bit format, not bitsandbytes', so it needs no bitsandbytes kernels.
MLX_STACK = "mlx-lm"
# Axolotl loads the model in fp16 when fp16 is on, and its own validation warns that a full fine-tune that way "is likely
# to raise errors" ("Attempting to unscale FP16 gradients", or fp32 norms meeting fp16 weights where the norms are not
# cast back: axolotl-ai-cloud/axolotl@067b021 src/axolotl/utils/schemas/validation.py check_fft_possible_bad_config,
# loaders/model.py _configure_embedding_dtypes): no full fine-tune on a part without bf16.
AXOLOTL_STACK = "axolotl"
KINDS = frozenset({"gpu", "npu", "tpu", "apple", "unified", "lpu", "wafer"})  # data/accelerators.csv kinds
OPTIMIZERS: tuple[str, ...] = get_args(Optimizer)
METHODS: tuple[str, ...] = get_args(Method)
METHOD_NAMES = {"full": "a full fine-tune", "lora": "LoRA", "qlora": "QLoRA"}
OPTIMIZER_LABELS = {"adamw": "AdamW", "adamw-8bit": "8-bit AdamW", "sgd": "SGD with momentum", "adafactor": "Adafactor"}
OFFLOADS = frozenset(o for o in get_args(Offload) if o != "none")
EIGHT_BIT_OPTIMIZERS = frozenset({"adamw-8bit"})  # bitsandbytes' (or torchao's) 8-bit states: CUDA or ROCm kernels


class StackLayouts(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    stack: str
    data_parallel: bool
    zero_stages: tuple[int, ...]
    tensor_parallel: bool
    pipeline_parallel: bool
    multi_node: bool
    lora: bool
    qlora: bool
    qlora_sharded: bool  # QLoRA under ZeRO-3 / FSDP (FSDP + QLoRA)
    as_of: str
    source: str = Field(min_length=10)
    pipeline_zero_stages: tuple[int, ...] | None = None  # the ZeRO stages it runs with pipeline parallelism (None: all)
    hardware: tuple[str, ...] = ("gpu", "npu")  # accelerator kinds it runs on (npu: Optimum Neuron / Habana; apple: PyTorch MPS or MLX; unified: DGX Spark, Strix Halo)
    optimizers: tuple[str, ...]  # the scenario optimizers its launch sets (core/scenario.Optimizer)
    optimizers_source: str = Field(min_length=10)
    qlora_optimizers: tuple[str, ...] | None = None  # those it runs on a QLoRA base, where fewer (None: all of optimizers)
    offload: tuple[str, ...] = ()  # the scenario's CPU offloads its launch sets (core/scenario.Offload, not "none")
    offload_source: str = Field(min_length=10)
    dpo_methods: tuple[str, ...] = ()  # the methods it runs Direct Preference Optimization with (core/memory/objective.py)
    dpo_source: str = Field(min_length=10)

    @field_validator("zero_stages", "pipeline_zero_stages", mode="before")
    @classmethod
    def _stages(cls, value: object) -> object:
        if value == "":
            return None
        return tuple(int(s) for s in value.split(";")) if isinstance(value, str) else value

    @field_validator("optimizers", "qlora_optimizers", mode="before")
    @classmethod
    def _optimizers(cls, value: object) -> object:
        names = tuple(value.split(";")) if isinstance(value, str) else value
        if not isinstance(names, tuple | list) or not names or not set(names) <= set(OPTIMIZERS):
            raise ValueError(f"optimizers must name optimizers among {list(OPTIMIZERS)}")
        return names

    @field_validator("dpo_methods", mode="before")
    @classmethod
    def _dpo_methods(cls, value: object) -> object:
        names = tuple(n for n in value.split(";") if n) if isinstance(value, str) else value
        if not isinstance(names, tuple | list) or not set(names) <= set(METHODS):
            raise ValueError(f"dpo_methods must name methods among {list(METHODS)}")
        return names

    @field_validator("offload", mode="before")
    @classmethod
    def _offloads(cls, value: object) -> object:
        names = tuple(n for n in value.split(";") if n) if isinstance(value, str) else value
        if not isinstance(names, tuple | list) or not set(names) <= OFFLOADS:
            raise ValueError(f"offload must name offloads among {sorted(OFFLOADS)}")
        return names

    @model_validator(mode="after")
    def _qlora_subset(self) -> StackLayouts:
        if self.qlora_optimizers is not None and not set(self.qlora_optimizers) <= set(self.optimizers):
            raise ValueError("qlora_optimizers must be among optimizers")
        return self

    @field_validator("hardware", mode="before")
    @classmethod
    def _kinds(cls, value: object) -> object:
        kinds = tuple(value.split(";")) if isinstance(value, str) else value
        if not isinstance(kinds, tuple | list) or not kinds or not set(kinds) <= KINDS:
            raise ValueError(f"hardware must name kinds among {sorted(KINDS)}")
        return kinds


@functools.cache
def load_stack_layouts() -> dict[str, StackLayouts]:
    return {r.stack: r for r in read_catalog_rows(LAYOUTS_CSV, StackLayouts)}


def layout_problem(
    stack: str,
    method: str,
    zero_stage: int,
    tensor_parallel: int,
    pipeline_parallel: int,
    data_parallel: int = 1,
    optimizer: str = "adamw",
    offload: str = "none",
) -> str | None:
    """Why `stack` cannot run this layout (with this optimizer and CPU offload), in one line, or None."""
    s = load_stack_layouts().get(stack)
    if s is None:
        return None  # a stack the table does not describe is not held to it
    if data_parallel > 1 and zero_stage == 0 and not s.data_parallel:
        if 3 in s.zero_stages:
            return f"{stack} has no replicated data parallelism (it shards)"
        return f"{stack} trains on one device (no data parallelism)"
    if zero_stage not in s.zero_stages:
        return f"{stack} has no ZeRO stage {zero_stage} (it runs {', '.join(map(str, s.zero_stages))})"
    if tensor_parallel > 1 and not s.tensor_parallel:
        return f"{stack} has no tensor parallelism"
    if pipeline_parallel > 1 and not s.pipeline_parallel:
        return f"{stack} has no pipeline parallelism"
    if pipeline_parallel > 1 and s.pipeline_zero_stages is not None and zero_stage not in s.pipeline_zero_stages:
        return f"{stack} runs pipeline parallelism only with ZeRO stage {' or '.join(map(str, s.pipeline_zero_stages))}"
    if method == "lora" and not s.lora:
        return f"{stack} has no LoRA"
    if method == "qlora" and not s.qlora:
        return f"{stack} has no QLoRA (bitsandbytes 4-bit base)"
    if method == "qlora" and zero_stage == 3 and not s.qlora_sharded:
        return f"{stack} does not shard a QLoRA base (FSDP + QLoRA)"
    if method == "qlora" and tensor_parallel > 1:
        return "a bitsandbytes 4-bit base is not split by tensor parallelism"
    return offload_problem(stack, offload) or offload_optimizer_problem(stack, zero_stage, offload, optimizer) or stack_optimizer_problem(stack, method, optimizer)


def objective_problem(stack: str, objective: str, method: str) -> str | None:
    """Why `stack` cannot train `method` with `objective` (data/stack_layouts.csv `dpo_methods`), or None."""
    s = load_stack_layouts().get(stack)
    if s is None or objective != "dpo" or method in s.dpo_methods:
        return None
    name = stack_name(stack)
    if not s.dpo_methods:
        trainers = ["Hugging Face (TRL)" if k == "hf" else stack_name(k) for k, row in load_stack_layouts().items() if row.dpo_methods]
        return f"{name} has no DPO trainer; preference tuning runs on {listed(trainers, 'stacks', len(trainers))}"
    runs = [METHOD_NAMES.get(m, m) for m in s.dpo_methods]
    return f"{name} has no DPO recipe for {METHOD_NAMES.get(method, method)} (it runs DPO with {listed(runs, 'methods', len(runs))})"


def stack_name(stack: str) -> str:
    """A training stack as its users call it: the label's first name ("Hugging Face Trainer", "Megatron-LM"), with
    the part it runs on where that is what sets it apart (PyTorch/XLA on a TPU)."""
    if stack not in STACKS:
        return stack
    label = STACKS[stack].label
    if stack == "hf-xla":
        return "Hugging Face on PyTorch/XLA (how TPUs train here)"
    return label.split(" (")[0].split(" + ")[0].split(" / ")[0]


def offload_problem(stack: str, offload: str) -> str | None:
    """Why `stack` cannot offload as asked (data/stack_layouts.csv `offload`), or None."""
    s = load_stack_layouts().get(stack)
    if s is None or offload == "none" or offload in s.offload:
        return None
    if s.offload:
        return f"{stack} offloads the optimizer states to the CPU, not the parameters"
    return f"{stack} has no CPU offload"


# The optimizer that steps offloaded states. DeepSpeed's ZeRO-Offload steps them with its own CPU Adam: Accelerate
# replaces the trainer's optimizer by DeepSpeedCPUAdam when offload_optimizer is on (zero_force_ds_cpu_optimizer,
# true by default: huggingface/accelerate accelerator.py _prepare_deepspeed), and DeepSpeed refuses a client optimizer
# with ZeRO-Offload (deepspeedai/DeepSpeed runtime/engine.py _configure_optimizer: ZeRORuntimeException); its own
# config can build a torch optimizer by name (SGD, Adafactor). FSDP's CPU offload steps the trainer's torch optimizer on
# CPU tensors, which bitsandbytes' and torchao's 8-bit kernels (CUDA) do not take. Megatron's --optimizer-cpu-offload is
# its HybridDeviceOptimizer, built around Adam. Not run here: read from the sources.
DEEPSPEED_ENGINE_OFFLOAD_STACKS = frozenset({"hf", "axolotl"})  # ZeRO 1-2 through Accelerate's DeepSpeed
FSDP_OFFLOAD_STACKS = frozenset({"hf", "axolotl", "torchtune"})  # their ZeRO-3 is FSDP: CPUOffload takes the parameters too


def offload_optimizer_problem(stack: str, zero_stage: int, offload: str, optimizer: str) -> str | None:
    """Why the offloaded optimizer states cannot be `optimizer`'s under `stack`, or None (AdamW always can)."""
    if offload == "none" or optimizer == "adamw":
        return None
    label = OPTIMIZER_LABELS.get(optimizer, optimizer)
    if stack in DEEPSPEED_ENGINE_OFFLOAD_STACKS and zero_stage in (1, 2):
        return f"ZeRO-Offload steps with DeepSpeed's CPU Adam (Accelerate replaces the trainer's optimizer): AdamW, not {label}"
    if stack == "deepspeed" and optimizer in EIGHT_BIT_OPTIMIZERS:
        return "ZeRO-Offload refuses a client optimizer such as bitsandbytes' 8-bit AdamW"
    if stack in FSDP_OFFLOAD_STACKS and zero_stage == 3 and optimizer in EIGHT_BIT_OPTIMIZERS:
        return "FSDP's CPU offload steps the optimizer on CPU tensors, which 8-bit AdamW's GPU kernels do not take"
    if stack == "megatron":
        return f"Megatron's CPU offload (its hybrid-device optimizer) runs Adam, not {label}"
    return None


def base_problem(base: str, zero_stage: int, offload: str, tensor_parallel: int) -> str | None:
    """Why a GPTQ base cannot be laid out so, or None: GPTQ's QuantLinear keeps its 4-bit weights as buffers
    (AutoGPTQ@9f7d370 qlinear_cuda_old.py register_buffer; GPTQModel's likewise), and ZeRO-3 / FSDP shard and offload
    parameters only, nor does PEFT split them for tensor parallelism."""
    if base != "gptq-4bit":
        return None
    if zero_stage == 3 or offload == "optimizer+params":
        return "a GPTQ base's 4-bit weights are buffers: ZeRO-3 / FSDP neither shard nor offload them (every device holds all of them)"
    if tensor_parallel > 1:
        return "a GPTQ base is not split by tensor parallelism"
    return None


def stack_optimizer_problem(stack: str, method: str, optimizer: str) -> str | None:
    """Why `stack` cannot run `optimizer` (data/stack_layouts.csv `optimizers`, `qlora_optimizers`), or None."""
    s = load_stack_layouts().get(stack)
    if s is None:
        return None
    label = OPTIMIZER_LABELS.get(optimizer, optimizer)
    if optimizer not in s.optimizers:
        return f"{stack} has no {label} (it runs {', '.join(OPTIMIZER_LABELS[o] for o in s.optimizers)})"
    if method == "qlora" and s.qlora_optimizers is not None and optimizer not in s.qlora_optimizers:
        return f"{stack} trains a QLoRA base with {' or '.join(OPTIMIZER_LABELS[o] for o in s.qlora_optimizers)} only, not {label}"
    return None


def part_optimizer_problem(acc: Accelerator, optimizer: str) -> str | None:
    """Why `acc` cannot run `optimizer`'s kernels (8-bit AdamW: bitsandbytes' CUDA or ROCm kernels), or None."""
    if optimizer in EIGHT_BIT_OPTIMIZERS and (acc.vendor not in QLORA_VENDORS or acc.kind != "gpu"):
        return f"{acc.name}: no bitsandbytes 8-bit optimizer kernels (8-bit AdamW needs a CUDA or ROCm GPU)"
    return None


def optimizer_problem(stack: str, method: str, optimizer: str, acc: Accelerator | None) -> str | None:
    """Why `stack` on `acc` cannot run `optimizer`, or None: the stack's table row, then the part's kernels (mlx-lm's
    optimizers are MLX's own, on whatever MLX runs on)."""
    problem = stack_optimizer_problem(stack, method, optimizer)
    if problem is None and acc is not None and stack != MLX_STACK:
        problem = part_optimizer_problem(acc, optimizer)
    return problem


def stack_for(stack: str, kind: str) -> str | None:
    """The stack a part of this kind trains under: the asked-for one where it runs there, else the first stack of
    the table that does (TPUs: PyTorch/XLA), else None (nothing in the table runs on it)."""
    table = load_stack_layouts()
    if stack not in table or kind in table[stack].hardware:
        return stack
    return next((s.stack for s in table.values() if kind in s.hardware), None)


# A part's kind in words, for a sentence ("runs on a custom" read oddly: stop 50's hosting review, LOW 8)
KIND_WORDS = {
    "gpu": "a GPU",
    "tpu": "a TPU",
    "npu": "this NPU",
    "lpu": "a Groq LPU (it serves only)",
    "wafer": "a Cerebras wafer (it serves only)",
    "apple": "Apple silicon",
    "unified": "this unified-memory part",
    "custom": "a part given only by its memory, bandwidth and TFLOP/s (the stacks name the hardware they run on)",
}

# AWS documents Inferentia for inference only (Trainium for training).
INFERENCE_ONLY = frozenset({"inferentia2"})


def no_stack_problem(acc: Accelerator) -> str:
    """The line for a part no training stack of the table runs on (the planner's skipped line and the pages' reason)."""
    return f"{acc.id}: no training stack in data/stack_layouts.csv runs on {KIND_WORDS.get(acc.kind, 'this kind of part')}"


def training_part_problem(acc: Accelerator, method: str, stack: str, optimizer: str = "adamw", objective: str = "sft") -> str | None:
    """Why no run of `method` (with `objective`) trains on `acc` with `stack` (or the stack that part trains under,
    stack_for), or None: an inference-only part, a part no stack of the table runs on, the part's kernels
    (part_problem), or no DPO trainer in the stack it trains under. The Training page's sweep over parts asks it, as
    the planner's search does of each part."""
    if acc.id in INFERENCE_ONLY:
        return f"{acc.id}: an inference-only part"
    run_stack = stack_for(stack, acc.kind)
    if run_stack is None:
        return no_stack_problem(acc)
    if (problem := objective_problem(run_stack, objective, method)) is not None:
        return f"{acc.id}: {problem}"
    return part_problem(acc, method, run_stack, optimizer)


def spans_nodes_ok(stack: str) -> bool:
    s = load_stack_layouts().get(stack)
    return s is None or s.multi_node


def part_problem(acc: Accelerator, method: str, stack: str | None = None, optimizer: str = "adamw") -> str | None:
    """Why `acc` cannot train with `method` and `optimizer` (under `stack`), or None (QLoRA and 8-bit AdamW need
    bitsandbytes' CUDA or ROCm kernels, but for mlx-lm, which runs where MLX runs and quantizes its own base)."""
    if stack == MLX_STACK:
        problem = engine_problem("mlx", acc)
        return None if problem is None else problem.replace("mlx does not run", "mlx-lm (MLX) does not run", 1)
    if method == "qlora" and (acc.vendor not in QLORA_VENDORS or acc.kind != "gpu"):
        return f"{acc.name}: no bitsandbytes 4-bit kernels (QLoRA needs a CUDA or ROCm GPU)"
    if (problem := part_optimizer_problem(acc, optimizer)) is not None:
        return problem
    if stack == AXOLOTL_STACK and method == "full" and not acc.supports_bf16:
        return f"{acc.name}: no bf16, and Axolotl's full fine-tune in fp16 fails (fp16 gradients that AMP cannot unscale, or fp32 norms meeting fp16 weights)"
    return None
