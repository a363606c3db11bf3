"""The scenario: everything a user chooses. The same model serves the CLI,
the dashboard and the URL."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, PrivateAttr, Tag, field_validator, model_validator

from core.catalog.presets import preset
from core.jsontext import MAX_CONFIG_DEPTH, depth
from core.memory.engines import EngineId
from core.memory.stacks import StackId
from core.model.architecture import Architecture
from core.model.formats import FORMATS, WeightFormatId
from core.model.hf_config import ConfigError, parse_hf_config
from core.model.shape import representative_architecture

_STRICT = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
MAX_TRAIN_TOKENS = 1e16  # 1,000x Llama 3's 15T-token pretraining (Meta, 2024): a run beyond it is a typo


class ParamCount(BaseModel):
    """A bare parameter count, taken as exact."""

    model_config = _STRICT
    params: float = Field(ge=1e6, le=1e14, description="total parameters (e.g. 7.5e9)")
    name: str | None = Field(default=None, max_length=120)
    _arch: Architecture | None = PrivateAttr(default=None)

    @property
    def architecture(self) -> Architecture:
        if self._arch is None:
            self._arch = representative_architecture(self.params, self.name)
        return self._arch


class HFConfig(BaseModel):
    """A pasted Hugging Face config.json object."""

    model_config = _STRICT
    hf_config: dict[str, Any]
    name: str | None = Field(default=None, max_length=120)
    _arch: Architecture | None = PrivateAttr(default=None)

    @field_validator("hf_config")
    @classmethod
    def _shallow(cls, value: dict[str, Any]) -> dict[str, Any]:
        if depth(value) > MAX_CONFIG_DEPTH:
            raise ValueError(f"config.json is nested more than {MAX_CONFIG_DEPTH} levels deep")
        return value

    @model_validator(mode="after")
    def _parse(self) -> HFConfig:
        try:
            self._arch = parse_hf_config(self.hf_config, self.name)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    @property
    def architecture(self) -> Architecture:
        assert self._arch is not None
        return self._arch


def _model_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "preset"
    if isinstance(value, ParamCount) or (isinstance(value, dict) and "params" in value):
        return "count"
    if isinstance(value, HFConfig) or (isinstance(value, dict) and "hf_config" in value):
        return "config"
    return None


ModelSpec = Annotated[
    Annotated[str, Tag("preset")] | Annotated[ParamCount, Tag("count")] | Annotated[HFConfig, Tag("config")],
    Discriminator(
        _model_kind,
        custom_error_type="model_spec",
        custom_error_message="model must be a preset id, {'params': N} or {'hf_config': {...}}",
    ),
]
MODEL_SPEC_TAGS = ("preset", "count", "config")

Mode = Literal["training", "inference"]
Method = Literal["full", "lora", "qlora"]
# What a training run optimises: supervised fine-tuning's next-token loss, or Direct Preference Optimization's
# (Rafailov et al. 2023, arXiv 2305.18290): each example a prompt with a chosen and a rejected response, the policy's
# preference scored against a frozen reference model (core/memory/objective.py).
Objective = Literal["sft", "dpo"]
Optimizer = Literal["adamw", "adamw-8bit", "sgd", "adafactor"]
# "bf16"/"fp16": mixed precision (fp32 kept for the update); "-true": everything in the 16-bit type, optimizer
# states included (LitGPT bf16-true, a Trainer run on a model loaded in bf16, torchtune's default).
Precision = Literal["bf16", "fp16", "fp32", "bf16-true", "fp16-true"]
LoraTargets = Literal["attention", "all-linear"]
Offload = Literal["none", "optimizer", "optimizer+params"]
KvFormat = Literal["bf16", "fp16", "fp8", "int8", "q8_0", "q4_0"]  # q8_0/q4_0: llama.cpp cache types
# How users' requests reach a serving engine (core/speed/load.py): independently (production traffic) or all at once
# with identical requests (a benchmark's closed loop, e.g. genai-perf's concurrency mode).
Arrivals = Literal["steady", "synchronised"]


class Scenario(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: ModelSpec = Field(description="preset id, {'params': N} or {'hf_config': {...}}")
    mode: Mode = "inference"
    weights_format: WeightFormatId = "bf16"
    method: Method = "full"
    objective: Objective = Field(
        default="sft",
        description="the training objective: 'sft' (next-token loss) or 'dpo' (Direct Preference Optimization: a chosen and a rejected "
        "response per example, batch_size counts pairs, against a frozen reference model); train_tokens counts both responses",
    )
    optimizer: Optimizer = "adamw"
    precision: Precision = "bf16"
    batch_size: int = Field(default=1, ge=1, le=4096, description="per-device micro-batch; in inference, concurrent sequences")
    seq_len: int = Field(default=2048, ge=1, le=2_097_152, description="training sequence length; in inference, prompt + generated tokens")
    gradient_checkpointing: bool = False
    flash_attention: bool = True
    fused_cross_entropy: bool = Field(
        default=False,
        description="a fused cross-entropy that never holds the whole logits (Liger Kernel's fused linear cross-entropy, Cut Cross-Entropy) "
        "on the stacks whose own loss upcasts them (core/memory/stacks.py FUSED_CROSS_ENTROPY_STACKS)",
    )
    lora_rank: int = Field(default=16, ge=1, le=4096)
    lora_targets: LoraTargets = "all-linear"
    zero_stage: int = Field(default=0, ge=0, le=3)
    offload: Offload = "none"
    data_parallel: int = Field(default=1, ge=1, le=100_000)
    tensor_parallel: int = Field(default=1, ge=1, le=512)
    pipeline_parallel: int = Field(default=1, ge=1, le=512)
    expert_parallel: bool = Field(
        default=False,
        description="serving a mixture-of-experts model expert-parallel over the replica's tensor_parallel devices, attention data-parallel "
        "(vLLM --enable-expert-parallel, SGLang --ep-size with --enable-dp-attention, TensorRT-LLM enable_attention_dp: data/expert_parallel.csv)",
    )
    kv_cache_format: KvFormat = "bf16"
    training_stack: StackId = Field(default="hf", description="the training software (core/memory/stacks.py)")
    serving_engine: EngineId = Field(default="vllm", description="the serving software (core/memory/engines.py)")
    output_tokens: int | None = Field(default=None, ge=1, le=2_097_151, description="generated tokens per sequence (inference); default: the last quarter of seq_len")
    gradient_accumulation_steps: int = Field(default=1, ge=1, le=100_000, description="micro-batches per optimizer step (gradients stay allocated between them)")
    gpu_memory_utilization: float | None = Field(
        default=None, gt=0, le=1, description="fraction of device memory the serving engine reserves (vLLM); default: the engine's"
    )
    gpu_layers: int | None = Field(
        default=None, ge=0, le=1024, description="llama.cpp n_gpu_layers: layers on the accelerators, the rest in system RAM (0 = CPU only); default: all"
    )
    max_num_seqs: int | None = Field(
        default=None, ge=1, le=65_536, description="the serving engine's most running requests (vLLM --max-num-seqs, TensorRT-LLM max_batch_size); default: the engine's"
    )
    max_num_batched_tokens: int | None = Field(
        default=None,
        ge=16,
        le=2_097_152,
        description="tokens one engine step carries at most (vLLM --max-num-batched-tokens: the chunk of a prompt prefilled per step); default: the engine's",
    )
    prefix_cache_hit_fraction: float = Field(
        default=0.0, ge=0, le=0.99, description="share of each prompt the engine finds in its prefix cache and does not prefill again (0: caching off or no hits)"
    )
    arrivals: Arrivals = Field(
        default="steady",
        description="how requests arrive for the latency-under-load figures: 'steady' (independent users) or 'synchronised' (a benchmark's users all at once)",
    )
    host_memory_gib: float = Field(default=64.0, gt=0, le=65536, description="system RAM in GiB (holds the layers llama.cpp keeps off the accelerators)")
    host_memory_bandwidth_gbps: float | None = Field(
        default=None,
        gt=0,
        le=100_000,
        description="system RAM bandwidth of the host in GB/s (dual-channel DDR5-4800: 76.8; DDR4-3200: 51.2); default: the accelerator's "
        "usual server's share (data/host_memory.csv: a DGX H100 slice 76.8 per GPU), else a desktop's 76.8",
    )
    accelerator: str = Field(default="h100-sxm", max_length=64)
    train_tokens: float | None = Field(default=None, ge=1, le=MAX_TRAIN_TOKENS)
    mfu: float | None = Field(default=None, ge=0.001, le=1)

    @field_validator("model", mode="before")
    @classmethod
    def _model_spec(cls, value: Any) -> Any:
        if isinstance(value, str):
            from core.catalog.presets import preset_ids, suggest

            if value not in preset_ids():
                raise ValueError(f"unknown model preset {value!r}{suggest(value, preset_ids())}")
        return value

    @field_validator("accelerator")
    @classmethod
    def _known_accelerator(cls, value: str) -> str:
        from core.catalog.accelerators import CUSTOM_ID_HELP, custom_accelerator
        from core.catalog.presets import accelerator_ids, suggest

        if value not in accelerator_ids() and custom_accelerator(value) is None:
            if value.startswith("custom-"):
                raise ValueError(f"unknown accelerator {value!r}: hardware of your own is written {CUSTOM_ID_HELP}")
            raise ValueError(f"unknown accelerator {value!r}{suggest(value, accelerator_ids())}")
        return value

    @model_validator(mode="after")
    def _coherent(self) -> Scenario:
        if self.output_tokens is not None and self.output_tokens >= self.seq_len:
            raise ValueError(
                f"the output tokens (output_tokens, {self.output_tokens:,}) must be fewer than the sequence length (seq_len, {self.seq_len:,}): "
                "it is the prompt and the output together"
            )
        if self.mode == "training":
            if self.method == "full" and FORMATS[self.weights_format].is_quantized:
                raise ValueError(
                    f"weights_format {self.weights_format!r} is quantized: full fine-tuning needs bf16/fp16/fp32 weights (use method 'qlora' to train on a 4-bit base)"
                )
            if self.offload != "none" and self.zero_stage == 0:
                raise ValueError("offload needs zero_stage >= 1 (DeepSpeed ZeRO-Offload)")
            if self.offload == "optimizer+params" and self.zero_stage != 3:
                raise ValueError("offloading parameters needs zero_stage 3 (ZeRO-Infinity / FSDP)")
        else:
            from core.catalog.accelerators import get_accelerator
            from core.catalog.engine_hardware import engine_problem

            if (problem := engine_problem(self.serving_engine, get_accelerator(self.accelerator))) is not None:
                raise ValueError(problem)
            if self.expert_parallel and (problem := self._expert_parallel_problem()) is not None:
                raise ValueError(problem)
        return self

    def _expert_parallel_problem(self) -> str | None:
        """Why this serving scenario cannot run expert-parallel (one line), or None."""
        from core.catalog.expert_parallel import supports_expert_parallel

        if not self.architecture.is_moe:
            return "expert parallelism needs a mixture-of-experts model: this one is dense"
        if not supports_expert_parallel(self.serving_engine):
            return f"{self.serving_engine} has no expert-parallel serving (data/expert_parallel.csv): use vLLM, SGLang or TensorRT-LLM"
        return None

    def replace(self, **changes: Any) -> Scenario:
        """A copy with `changes`, validated like a new scenario. model_copy(update=...) validates nothing: a Plan goal's
        2,048-token sequence beside the sidebar's 2,048 output tokens made a scenario no rule had seen, which failed
        deep in a chart. The model spec passes as the validated object it is (not parsed again)."""
        return Scenario.model_validate({**dict(self), **changes})

    @property
    def architecture(self) -> Architecture:
        if isinstance(self.model, str):
            return preset(self.model).architecture
        return self.model.architecture

    @property
    def devices(self) -> int:
        return self.data_parallel * self.tensor_parallel * self.pipeline_parallel
