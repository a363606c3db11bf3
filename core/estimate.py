"""estimate(scenario) -> Result: memory per device, fit, device count, limits,
and what would help when nothing fits."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from core.architecture import Architecture
from core.fit import candidate_layouts, max_batch, max_seq, smallest_fitting
from core.formats import FORMATS, weight_bytes
from core.hardware import get_accelerator
from core.memory import (
    COMM_BUFFER_BYTES,
    CUDA_CONTEXT_BYTES,
    PREFILL_CHUNK_TOKENS,
    Components,
    Layout,
    inference_components,
    kv_cache_bytes_per_token,
    training_components,
    training_states,
)
from core.scenario import Scenario
from core.time_cost import FitInfo, InferenceEstimate, TrainingEstimate, inference_estimate, training_estimate
from core.units import bytes_to_gib

_OUT = ConfigDict(frozen=True)


class ParamCounts(BaseModel):
    model_config = _OUT
    total: int
    active: int
    trainable: int


class MemoryBreakdown(BaseModel):
    model_config = _OUT
    weights: int
    gradients: int
    optimizer: int
    activations: int
    kv_cache: int
    overhead: int
    total: int

    @classmethod
    def of(cls, c: Components) -> MemoryBreakdown:
        parts = [round(float(x)) for x in c]
        return cls.model_construct(
            weights=parts[0], gradients=parts[1], optimizer=parts[2], activations=parts[3],
            kv_cache=parts[4], overhead=parts[5], total=sum(parts),
        )


class LayoutResult(BaseModel):
    model_config = _OUT
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    zero_stage: int
    devices: int


class Result(BaseModel):
    model_config = _OUT
    model_name: str
    mode: str
    accelerator: str
    params: ParamCounts
    memory_per_device_bytes: MemoryBreakdown
    cpu_memory_per_device_bytes: int
    weights_bytes_total: int
    kv_cache_bytes_per_token: int
    device_memory_bytes: int
    devices_in_layout: int
    fits: bool
    devices_needed: int | None
    layout_needed: LayoutResult | None
    max_batch_size: int
    max_seq_len: int
    advice: list[str]
    assumptions: list[str]
    training: TrainingEstimate | None = None    # when train_tokens is set
    inference: InferenceEstimate | None = None  # in inference mode


class Evaluator:
    """Memory of one scenario at other batch sizes, lengths and layouts."""

    def __init__(self, sc: Scenario, arch: Architecture):
        self.sc = sc
        self.arch = arch
        self.states = training_states(sc, arch) if sc.mode == "training" else None

    def components(self, layout: Layout, batch: int, seq: int, zero_stage: int | None = None) -> tuple[Components, float]:
        sc = self.sc
        if sc.mode == "inference":
            return inference_components(sc, self.arch, layout, batch, seq), 0.0
        if zero_stage is not None and zero_stage != sc.zero_stage:
            sc = sc.model_copy(update={"zero_stage": zero_stage})
        return training_components(sc, self.arch, layout, batch, seq, self.states)

    def total(self, layout: Layout, batch: int, seq: int) -> float:
        return float(self.components(layout, batch, seq)[0].total)


def estimate(sc: Scenario) -> Result:
    arch = sc.architecture
    acc = get_accelerator(sc.accelerator)
    capacity = float(acc.usable_memory_bytes)
    ev = Evaluator(sc, arch)
    layout = Layout(sc.data_parallel, sc.tensor_parallel, sc.pipeline_parallel)
    comps, cpu = ev.components(layout, sc.batch_size, sc.seq_len)
    fits = bool(comps.total <= capacity)
    needed = _devices_needed(sc, ev, capacity)
    seq_limit = max(arch.max_context, sc.seq_len)
    max_b = max_batch(ev.total, layout, sc.seq_len, capacity)
    info = FitInfo(tuple(layout), fits, None if needed is None else (
        needed.data_parallel, needed.tensor_parallel, needed.pipeline_parallel, needed.zero_stage))
    fmt = FORMATS["nf4"] if sc.mode == "training" and sc.method == "qlora" else FORMATS[sc.weights_format]
    if sc.mode == "training" and sc.method == "full":
        fmt = FORMATS["fp32" if sc.precision == "fp32" else "bf16"]
    return Result.model_construct(
        model_name=arch.name,
        mode=sc.mode,
        accelerator=acc.id,
        params=ParamCounts.model_construct(
            total=arch.total_params, active=arch.active_params,
            trainable=ev.states.trainable if ev.states else 0,
        ),
        memory_per_device_bytes=MemoryBreakdown.of(comps),
        cpu_memory_per_device_bytes=round(float(cpu)),
        weights_bytes_total=round(weight_bytes(arch, fmt)),
        kv_cache_bytes_per_token=kv_cache_bytes_per_token(arch, sc.kv_cache_format),
        device_memory_bytes=round(capacity),
        devices_in_layout=layout.devices,
        fits=fits,
        devices_needed=needed.devices if needed else None,
        layout_needed=needed,
        max_batch_size=max_b,
        max_seq_len=max_seq(ev.total, layout, sc.batch_size, capacity, seq_limit),
        advice=[] if fits else advise(sc, ev, capacity, needed),
        assumptions=_assumptions(sc, arch),
        training=training_estimate(sc, acc, info) if sc.train_tokens else None,
        inference=inference_estimate(sc, acc, info, ev.total, max_b) if sc.mode == "inference" else None,
    )


def devices_needed_by_accelerator(sc: Scenario, accelerator_ids: list[str]) -> dict[str, LayoutResult | None]:
    """Smallest fitting layout on each accelerator. Per-device memory does not
    depend on the device, so one evaluator serves them all."""
    ev = Evaluator(sc, sc.architecture)
    return {a: _devices_needed(sc, ev, float(get_accelerator(a).usable_memory_bytes)) for a in accelerator_ids}


def _devices_needed(sc: Scenario, ev: Evaluator, capacity: float) -> LayoutResult | None:
    """Smallest layout that fits: the user's own strategy first (data parallel
    with their ZeRO stage, or tensor then pipeline parallel), then ZeRO-3."""
    base = Layout(1, sc.tensor_parallel, sc.pipeline_parallel)
    options: list[tuple[Layout, int]] = []
    b, s = sc.batch_size, sc.seq_len
    if sc.mode == "training" and sc.zero_stage >= 1:
        found = smallest_fitting(ev.total, candidate_layouts(base, "data"), b, s, capacity)
        if found:
            options.append((found, sc.zero_stage))
    found = smallest_fitting(ev.total, candidate_layouts(base, "model", max_stages=ev.arch.num_layers), b, s, capacity)
    if found:
        options.append((found, sc.zero_stage))
    if sc.mode == "training" and sc.zero_stage < 3:
        def zero3(layout: Layout, batch: int, seq: int) -> float:
            return ev.components(layout, batch, seq, zero_stage=3)[0].total

        found = smallest_fitting(zero3, candidate_layouts(base, "data"), b, s, capacity)
        if found:
            options.append((found, 3))
    if not options:
        return None
    layout, zero = min(options, key=lambda o: o[0].devices)  # stable: the user's strategy wins ties
    return LayoutResult.model_construct(
        data_parallel=layout.data_parallel, tensor_parallel=layout.tensor_parallel,
        pipeline_parallel=layout.pipeline_parallel, zero_stage=zero if sc.mode == "training" else 0,
        devices=layout.devices,
    )


def advise(sc: Scenario, ev: Evaluator, capacity: float, needed: LayoutResult | None) -> list[str]:
    """Say why it does not fit, and which single change makes it fit on the
    current layout."""
    comps, _ = ev.components(Layout(sc.data_parallel, sc.tensor_parallel, sc.pipeline_parallel), sc.batch_size, sc.seq_len)
    names = ("weights", "gradients", "optimizer", "activations", "KV cache", "overhead")
    biggest = max(zip(comps, names, strict=True))
    out = [
        f"Needs {bytes_to_gib(comps.total):.1f} GiB per device but the device has "
        f"{bytes_to_gib(capacity):.1f} GiB usable; the largest part is {biggest[1]} "
        f"({bytes_to_gib(biggest[0]):.1f} GiB)."
    ]
    for label, update in _alternatives(sc):
        try:
            alt = Scenario(**(dict(sc) | update))
        except ValueError:
            continue
        alt_ev = Evaluator(alt, ev.arch)
        total = alt_ev.total(Layout(alt.data_parallel, alt.tensor_parallel, alt.pipeline_parallel), alt.batch_size, alt.seq_len)
        if total <= capacity:
            out.append(f"{label}: {bytes_to_gib(total):.1f} GiB per device fits.")
    if needed:
        parts = [f"{needed.devices} devices"]
        if needed.tensor_parallel > 1 or needed.pipeline_parallel > 1:
            parts.append(f"tensor parallel {needed.tensor_parallel} x pipeline parallel {needed.pipeline_parallel}")
        if needed.data_parallel > 1:
            parts.append(f"{needed.data_parallel} data-parallel ranks with ZeRO stage {needed.zero_stage}")
        out.append("More devices: fits on " + ", ".join(parts) + ".")
    else:
        out.append("No layout of up to 65,536 devices fits this setup on this accelerator.")
    return out


def _alternatives(sc: Scenario) -> list[tuple[str, dict]]:
    if sc.mode == "inference":
        alts = [(f"Weights in {FORMATS[f].label}", {"weights_format": f}) for f in ("fp8", "int8", "awq-4bit", "gguf-q4_k_m") if f != sc.weights_format]
        if sc.kv_cache_format in ("bf16", "fp16"):
            alts.append(("KV cache in FP8", {"kv_cache_format": "fp8"}))
        if not sc.flash_attention:
            alts.append(("FlashAttention", {"flash_attention": True}))
        return alts
    alts: list[tuple[str, dict]] = []
    if sc.method == "full":
        alts += [("LoRA instead of full fine-tuning", {"method": "lora"}), ("QLoRA (4-bit base + LoRA)", {"method": "qlora"})]
    elif sc.method == "lora":
        alts.append(("QLoRA (4-bit base + LoRA)", {"method": "qlora"}))
    if not sc.gradient_checkpointing:
        alts.append(("Gradient checkpointing", {"gradient_checkpointing": True}))
    if not sc.flash_attention:
        alts.append(("FlashAttention", {"flash_attention": True}))
    if sc.optimizer == "adamw":
        alts.append(("8-bit AdamW", {"optimizer": "adamw-8bit"}))
    if sc.offload == "none" and sc.zero_stage >= 1:
        alts.append(("Offload optimizer state to CPU", {"offload": "optimizer"}))
    if sc.zero_stage == 3 and sc.offload != "optimizer+params":
        alts.append(("Offload optimizer state and parameters to CPU", {"offload": "optimizer+params"}))
    if sc.zero_stage < 3 and sc.data_parallel > 1:
        alts.append(("ZeRO stage 3 / FSDP full sharding", {"zero_stage": 3}))
    return alts


def _assumptions(sc: Scenario, arch: Architecture) -> list[str]:
    out = list(arch.assumptions)
    out.append(
        f"runtime overhead: {bytes_to_gib(CUDA_CONTEXT_BYTES):.1f} GiB CUDA context and workspaces per device, "
        f"+{bytes_to_gib(COMM_BUFFER_BYTES):.1f} GiB communication buffers when devices cooperate"
    )
    if sc.seq_len > arch.max_context:
        out.append(f"seq_len {sc.seq_len:,} exceeds the model's trained context of {arch.max_context:,} tokens")
    if sc.mode == "training":
        if sc.method == "qlora" and sc.weights_format != "nf4":
            out.append("QLoRA keeps the frozen base in NF4 with double quantization; weights_format is not used")
        if sc.method != "full":
            out.append("LoRA adapters are kept in fp32 (PEFT default), so no separate master copy")
        if sc.tensor_parallel > 1:
            out.append("tensor parallelism with sequence parallelism: activations split over the TP group")
        if sc.pipeline_parallel > 1:
            out.append("1F1B pipeline schedule: the first stage holds as many micro-batches as there are stages")
        out.append("loss: bf16 logits + fp32 upcast + fp32 log-softmax (10 bytes per token x vocabulary entry)")
    else:
        out.append(
            f"prefill in chunks of {PREFILL_CHUNK_TOKENS:,} tokens (serving-engine chunked prefill); "
            "logits for the last token only"
        )
        if arch.is_mla and sc.tensor_parallel > 1:
            out.append("the MLA latent KV cache is replicated on every tensor-parallel rank")
    return out
