"""estimate_memory(scenario) -> MemoryResult: memory per device, whether it
fits, the smallest layout that fits, the largest batch and context, and what
would help when nothing fits. Speed, time and money are composed on top of
this result (core/estimate.py); nothing here looks up."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, computed_field

from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.memory.assumptions import memory_assumptions
from core.memory.components import (
    ActivationParts,
    Components,
    TrainingStates,
    expert_parallel_ranks,
    gpu_layer_share,
    kv_cache_bytes_per_token,
    kv_headroom,
    qlora_base,
    runtime_of,
    training_peak,
)
from core.memory.evaluator import RESULT_MODEL, Evaluator, LayoutResult, MemoryBreakdown, fewest_gpu_layers_for_host, fit_capacity, most_gpu_layers, own_layout
from core.memory.fit import borderline, max_batch, max_seq
from core.memory.fixes import advise, why_it_does_not_fit
from core.memory.layouts import devices_needed
from core.memory.problems import scenario_problem
from core.model.architecture import Architecture
from core.model.formats import FORMATS, weight_bytes
from core.scenario import Scenario
from core.text import Bytes, Text, texts
from core.units import BYTES_PER_GIB


class ParamCounts(BaseModel):
    model_config = RESULT_MODEL
    total: int
    active: int
    trainable: int


class MemoryResult(BaseModel):
    model_config = RESULT_MODEL
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
    borderline: bool = False  # the estimate is within its measured error of the capacity (fit.BORDERLINE_FRACTION)
    devices_needed: int | None
    layout_needed: LayoutResult | None
    max_batch_size: int
    max_seq_len: int
    allocated_peak_bytes: int = 0  # torch.cuda.max_memory_allocated(): the live tensors at the peak
    reserved_peak_bytes: int = 0  # torch.cuda.max_memory_reserved(): with the allocator's reserve
    engine_reserved_bytes: int | None = None  # what the serving engine takes at start (vLLM gpu_memory_utilization)
    fit_capacity_bytes: int = 0  # what the scenario must fit in: usable memory, or the engine's reservation
    peak_phase: str = ""  # training: when the peak happens, "loss" or "optimizer step"
    # training: why the scenario's training stack or part cannot run it as set (data/stack_layouts.csv: a ZeRO stage,
    # tensor or pipeline parallelism, QLoRA's kernels, Axolotl's fp16 full fine-tune); serving: why the engine has no
    # kernels on the part for the weights' format or their FP8 KV cache (data/format_kernels.csv: gpt-oss's MXFP4); or
    # None; the figures are still the scenario's
    stack_problem: str | None = None
    kv_pool_bytes: int | None = None  # engines that pre-allocate: the KV-cache pool per device (vLLM "KV cache size")
    # the pools in sequences of seq_len tokens (vLLM "Maximum concurrency"), over the replica: expert-parallel, the sum
    # of the ranks' pools (each rank holds its own sequences; vLLM logs it per data-parallel engine, 1/n of this)
    kv_pool_sequences: float | None = None
    # llama.cpp partial offload (gpu_layers): layers on the accelerators, the most that fit, and whether the rest
    # fits in system RAM (cpu_memory_per_device_bytes holds it)
    gpu_layers: int | None = None
    max_gpu_layers: int | None = None
    host_memory_fits: bool | None = None
    min_gpu_layers_for_host: int | None = None  # the fewest -ngl layers that leave system RAM enough for the rest
    # Sentences with their quantities unformatted (core/text.py): pages render them in the reader's units;
    # the CLI's `advice` and `assumptions` are the same sentences in GiB.
    advice_texts: tuple[Text, ...] = Field(default=(), exclude=True)
    why_texts: tuple[Text, ...] = Field(default=(), exclude=True)  # advice_texts' first lines: what is short
    assumption_texts: tuple[Text, ...] = Field(default=(), exclude=True)
    layout_note: Text | None = Field(default=None, exclude=True)  # why more devices cost more memory each, if they do
    # Training: the model states and the activations before sharding that memory_per_device_bytes was built from,
    # for the Explain table and the Method page to print (core/memory/explain.py), never to compute again.
    states: TrainingStates | None = Field(default=None, exclude=True)
    activation_parts: ActivationParts | None = Field(default=None, exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def advice(self) -> list[str]:
        return texts(self.advice_texts)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def assumptions(self) -> list[str]:
        return texts(self.assumption_texts)


def estimate_memory(sc: Scenario, ev: Evaluator | None = None, light: bool = False) -> MemoryResult:
    """The memory answer. `ev` may be shared between scenarios that differ only in the accelerator (memory per device
    does not depend on it); `light` leaves out what a table row across accelerators does not show (the longest
    context that fits, the advice, the assumptions)."""
    arch = sc.architecture
    acc = get_accelerator(sc.accelerator)
    usable = float(acc.usable_memory_bytes)
    capacity = fit_capacity(sc, usable)
    ev = ev or Evaluator(sc, arch)
    layout = own_layout(sc)
    # hop: Scenario -> TrainingPeak (the per-device Components and the activations before sharding)
    peak = training_peak(sc, arch, layout, sc.batch_size, sc.seq_len, ev.states) if sc.mode == "training" else None
    # the breakdown the chart draws, and (training) the pieces Explain prints: one computation
    comps, cpu = (peak.components, peak.cpu_bytes) if peak else ev.components(layout, sc.batch_size, sc.seq_len)
    phase = peak.phase if peak else ""
    fits = bool(comps.total <= capacity) and ev.host_fits(layout, sc.batch_size, sc.seq_len)
    needed = devices_needed(sc, ev, capacity)
    seq_limit = max(arch.max_context, sc.seq_len)
    fmt = qlora_base(sc) if sc.mode == "training" and sc.method == "qlora" else FORMATS[sc.weights_format]
    if sc.mode == "training" and sc.method == "full":
        fmt = FORMATS["fp32" if sc.precision == "fp32" else "bf16"]
    return MemoryResult.model_construct(
        model_name=arch.name,
        mode=sc.mode,
        accelerator=acc.id,
        params=ParamCounts.model_construct(
            total=arch.total_params,
            active=arch.active_params,
            trainable=ev.states.trainable if ev.states else 0,
        ),
        memory_per_device_bytes=MemoryBreakdown.of(comps),  # hop: Components (float bytes) -> MemoryBreakdown (int bytes)
        cpu_memory_per_device_bytes=round(float(cpu)),
        weights_bytes_total=round(weight_bytes(arch, fmt)),
        kv_cache_bytes_per_token=kv_cache_bytes_per_token(arch, sc.kv_cache_format),
        device_memory_bytes=round(usable),
        devices_in_layout=layout.devices,
        fits=fits,
        borderline=borderline(float(comps.total), capacity),
        devices_needed=needed.devices if needed else None,
        layout_needed=needed,
        max_batch_size=max_batch(ev.total, layout, sc.seq_len, capacity),
        max_seq_len=0 if light else max_seq(ev.total, layout, sc.batch_size, capacity, seq_limit),
        advice_texts=() if fits or light else tuple(advise(sc, ev, capacity, needed)),
        why_texts=() if fits or light else tuple(why_it_does_not_fit(sc, ev, capacity)),
        assumption_texts=() if light else tuple(memory_assumptions(sc, arch)),
        layout_note=_layout_note(sc, ev, comps),
        allocated_peak_bytes=round(float(comps.allocated)),
        reserved_peak_bytes=round(float(comps.allocated + comps.allocator)),
        engine_reserved_bytes=None if capacity == usable else round(capacity),
        fit_capacity_bytes=round(capacity),
        peak_phase=phase,
        stack_problem=None if light else scenario_problem(sc),
        states=ev.states,
        activation_parts=peak.parts if peak else None,
        **_kv_pool(sc, ev, layout, comps, capacity, usable),
        **_offload(sc, arch, layout, capacity, float(cpu)),
    )


def _offload(sc: Scenario, arch: Architecture, layout: Layout, capacity: float, host_bytes: float) -> dict[str, Any]:
    """llama.cpp: the layers on the accelerators and the most that fit (device memory grows by one layer's weights
    and KV cache per layer; what stays is the runtime and the compute buffers), and whether system RAM holds the rest."""
    if sc.mode != "inference" or sc.serving_engine != "llama.cpp":
        return {}
    return {
        "gpu_layers": round(gpu_layer_share(sc, arch) * arch.num_layers),
        "max_gpu_layers": most_gpu_layers(sc, arch, layout, capacity),
        "host_memory_fits": host_bytes <= sc.host_memory_gib * BYTES_PER_GIB,
        "min_gpu_layers_for_host": fewest_gpu_layers_for_host(sc, arch),
    }


def _kv_pool(sc: Scenario, ev: Evaluator, layout: Layout, comps: Components, capacity: float, usable: float) -> dict[str, Any]:
    """What an engine that reserves `capacity` at start has left for KV-cache blocks once the weights, the profiled
    prefill working set, the runtime and the allocator's reserve are in, per device (components.kv_headroom, as the
    KV chart draws it); and how many sequences of seq_len tokens the replica's pools hold: the pool over one
    sequence's bytes on a device, times the expert-parallel ranks (each holds whole sequences of its own, so one
    sequence a rank is the replica's batch of `ranks`; the batch's own KV cache over the batch, as before, counted a
    rank's ceil(B/n) sequences as B)."""
    if sc.mode != "inference" or capacity == usable:
        return {}
    pool = float(kv_headroom(comps, capacity))
    ranks = expert_parallel_ranks(sc, layout)
    one_a_rank = float(ev.components(layout, ranks, sc.seq_len)[0].kv_cache)  # one sequence on each device
    return {"kv_pool_bytes": round(pool), "kv_pool_sequences": pool / one_a_rank * ranks if one_a_rank > 0 else None}


def _layout_note(sc: Scenario, ev: Evaluator, comps: Components) -> Text | None:
    """More devices lower each device's share of the model, but a device that
    talks to others also holds communication buffers: say so when the buffers win."""
    if sc.devices == 1:
        return None
    one = ev.components(Layout(1, 1, 1), sc.batch_size, sc.seq_len)[0]
    if comps.total <= one.total:
        return None
    runtime = runtime_of(sc.accelerator)  # the part's own collective library: NCCL, RCCL, ...
    return Text.of(
        "{n} devices need {more} more per device than one device would ({single}): each device that talks to others "
        "keeps {buf} of {comm}, more than the share of the model it saves.",
        n=sc.devices,
        more=Bytes(comps.total - one.total),
        single=Bytes(one.total),
        buf=Bytes(runtime.comm_bytes),
        comm=runtime.comm or "communication buffers",
    )
