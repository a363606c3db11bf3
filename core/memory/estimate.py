"""estimate_memory(scenario) -> MemoryResult: memory per device, whether it
fits, the smallest layout that fits, the largest batch and context, and what
would help when nothing fits. Speed, time and money are composed on top of
this result (core/estimate.py); nothing here looks up."""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from core.catalog.accelerators import get_accelerator
from core.catalog.engine_formats import kv_format_name, load_problem, loads, planned_formats
from core.catalog.engine_models import model_problem
from core.catalog.format_kernels import four_bit_format, kernels_problem
from core.catalog.kv_cache_kernels import kv_cache_problem
from core.catalog.stack_layouts import base_problem, layout_problem, part_problem
from core.catalog.wired_limit import raise_limit_advice, wired_limit_text
from core.layout import Layout
from core.memory.components import (
    COMPONENT_NAMES,
    ActivationParts,
    Components,
    TrainingStates,
    checkpointing,
    engine_reservation,
    expert_parallel_ranks,
    fused_loss,
    gptq_base,
    gpu_layer_share,
    host_resident_bytes,
    inference_components,
    kv_cache_bytes_per_token,
    kv_headroom,
    part_memory_key,
    qlora_base,
    qlora_upcast,
    runtime_of,
    sram_resident,
    training_peak,
    training_states,
)
from core.memory.engines import ENGINES
from core.memory.fit import MAX_DEVICES, borderline, max_batch, max_seq, smallest_count
from core.memory.stacks import FUSED_CROSS_ENTROPY_STACKS, STACKS
from core.model.architecture import Architecture
from core.model.formats import FORMATS, weight_bytes
from core.scenario import Scenario
from core.text import Bytes, Text, joined, texts
from core.units import BYTES_PER_GIB

_OUT = ConfigDict(frozen=True, arbitrary_types_allowed=True)
# Tensor-parallel sizes tried when looking for the smallest layout: one NVLink
# domain of an 8-GPU HGX/DGX baseboard (Megatron-LM keeps TP inside a node).
TP_CANDIDATES = (1, 2, 4, 8)
SRAM_TP_CANDIDATES = (16, 32, 64)


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
    allocator: int = 0  # reserved by PyTorch's caching allocator beyond the live tensors (counted in total)

    @classmethod
    def of(cls, c: Components) -> MemoryBreakdown:
        parts = [round(float(x)) for x in c]
        return cls.model_construct(
            weights=parts[0],
            gradients=parts[1],
            optimizer=parts[2],
            activations=parts[3],
            kv_cache=parts[4],
            overhead=parts[5],
            allocator=parts[6],
            total=sum(parts),
        )


class LayoutResult(BaseModel):
    model_config = _OUT
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    zero_stage: int
    devices: int
    # serving: the replica's tensor_parallel devices are expert-parallel ranks (attention data-parallel), as the
    # scenario's expert_parallel asks; a CLI result field added (False: a tensor-parallel layout, as before)
    expert_parallel: bool = False


class MemoryResult(BaseModel):
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


class Evaluator:
    """Memory of one scenario at other batch sizes, lengths and layouts."""

    def __init__(self, sc: Scenario, arch: Architecture):
        self.sc = sc
        self.arch = arch
        self.states = training_states(sc, arch) if sc.mode == "training" else None
        self.weights_total = weight_bytes(arch, FORMATS[sc.weights_format]) if sc.mode == "inference" else 0.0
        # llama.cpp's layers off the accelerators live in system RAM: a layout, batch or context fits only if they do
        self.host_limit_bytes = sc.host_memory_gib * BYTES_PER_GIB if sc.mode == "inference" else math.inf
        self._zero: dict[int, Any] = {}
        self._memo: dict[tuple[Any, ...], tuple[Components, float]] = {}  # scalar look-ups (layout searches repeat them)

    def components(self, layout: Layout, batch: Any, seq: Any, zero_stage: int | None = None) -> tuple[Components, float]:
        if isinstance(batch, int | float) and isinstance(seq, int | float):
            key = (tuple(layout), batch, seq, zero_stage)
            if key not in self._memo:
                self._memo[key] = self._components(layout, batch, seq, zero_stage)
            return self._memo[key]
        return self._components(layout, batch, seq, zero_stage)

    def _components(self, layout: Layout, batch: Any, seq: Any, zero_stage: int | None) -> tuple[Components, float]:
        sc, states = self.sc, self.states
        if sc.mode == "inference":
            comps = inference_components(sc, self.arch, layout, batch, seq, self.weights_total)
            return comps, host_resident_bytes(sc, self.arch, batch, seq, self.weights_total)
        if zero_stage is not None and zero_stage != sc.zero_stage:
            if zero_stage not in self._zero:
                other = sc.model_copy(update={"zero_stage": zero_stage})
                self._zero[zero_stage] = (other, training_states(other, self.arch))
            sc, states = self._zero[zero_stage]
        peak = training_peak(sc, self.arch, layout, batch, seq, states)
        return peak.components, peak.cpu_bytes

    def total(self, layout: Layout, batch: int, seq: int) -> float:
        """Device memory per device, or infinity where system RAM cannot hold what stays off the devices: every search
        for what fits (devices, batch, context, advice) asks this, so none offers what the host cannot hold."""
        comps, host = self.components(layout, batch, seq)
        return float(comps.total) if float(host) <= self.host_limit_bytes else math.inf

    def host_fits(self, layout: Layout, batch: int, seq: int) -> bool:
        return float(self.components(layout, batch, seq)[1]) <= self.host_limit_bytes


def own_layout(sc: Scenario) -> Layout:
    return Layout(sc.data_parallel, sc.tensor_parallel, sc.pipeline_parallel)


def fit_capacity(sc: Scenario, usable_bytes: float) -> float:
    """What a scenario must fit in on a device: its usable memory, or in serving with an engine that reserves a
    fraction of it at start (vLLM gpu_memory_utilization), that fraction."""
    if sc.mode == "inference":
        reserved = engine_reservation(sc, usable_bytes)
        if reserved is not None:
            return reserved
    return usable_bytes


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
        assumption_texts=() if light else tuple(_assumptions(sc, arch)),
        layout_note=_layout_note(sc, ev, comps),
        allocated_peak_bytes=round(float(comps.allocated)),
        reserved_peak_bytes=round(float(comps.allocated + comps.allocator)),
        engine_reserved_bytes=None if capacity == usable else round(capacity),
        fit_capacity_bytes=round(capacity),
        peak_phase=phase,
        stack_problem=None if light else _problem(sc),
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
        "max_gpu_layers": _most_layers(sc, arch, layout, capacity),
        "host_memory_fits": host_bytes <= sc.host_memory_gib * BYTES_PER_GIB,
        "min_gpu_layers_for_host": _fewest_layers_for_host(sc, arch),
    }


def _most_layers(sc: Scenario, arch: Architecture, layout: Layout, capacity: float) -> int:
    """llama.cpp: the most layers the accelerators hold (device memory grows by one layer's weights and KV cache per
    layer; what stays is the runtime and the compute buffers)."""
    none_on = inference_components(sc.model_copy(update={"gpu_layers": 0}), arch, layout, sc.batch_size, sc.seq_len).total
    all_on = inference_components(sc.model_copy(update={"gpu_layers": None}), arch, layout, sc.batch_size, sc.seq_len).total
    per_layer = (float(all_on) - float(none_on)) / arch.num_layers
    room = capacity - float(none_on)
    return 0 if room < 0 else arch.num_layers if per_layer <= 0 else min(arch.num_layers, int(room // per_layer))


def _fewest_layers_for_host(sc: Scenario, arch: Architecture) -> int | None:
    """llama.cpp: the fewest layers on the accelerators (-ngl) that leave system RAM enough for the rest (the RAM they
    need falls as layers move over, so a bisection finds it); None when that is not even all of them."""
    limit = sc.host_memory_gib * BYTES_PER_GIB
    weights = weight_bytes(arch, FORMATS[sc.weights_format])

    def host_fits(n: int) -> bool:
        return bool(host_resident_bytes(sc.model_copy(update={"gpu_layers": n}), arch, sc.batch_size, sc.seq_len, weights) <= limit)

    k = smallest_count(lambda k: host_fits(k - 1), arch.num_layers + 1)  # k = n + 1: the count starts at 1
    return k - 1 if k else None


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


def devices_needed_by_accelerator(sc: Scenario, accelerator_ids: list[str]) -> dict[str, LayoutResult | None]:
    """Smallest fitting layout on each accelerator. Per-device memory does not depend on the device but for
    SRAM-resident chips and QLoRA's attention path (components.fp32_attention), so a few evaluators serve them all."""
    out: dict[str, LayoutResult | None] = {}
    evs: dict[tuple[bool, bool], Evaluator] = {}
    for a in accelerator_ids:
        sc_a = sc.model_copy(update={"accelerator": a})
        key = part_memory_key(sc_a)  # SRAM chips carry no GPU runtime; QLoRA's attention path: an evaluator each
        ev = evs[key] if key in evs else evs.setdefault(key, Evaluator(sc_a, sc.architecture))
        out[a] = devices_needed(sc_a, ev, fit_capacity(sc_a, float(get_accelerator(a).usable_memory_bytes)))
    return out


def _tp_sizes(sc: Scenario, arch: Architecture) -> list[int]:
    """Tensor-parallel sizes that split the attention heads evenly (vLLM and
    Megatron require heads % TP == 0), plus the scenario's own. SRAM-resident
    chips split each layer over many chips (Groq runs a 70B model on hundreds of
    230 MB chips), so up to 64 there."""
    candidates = TP_CANDIDATES + SRAM_TP_CANDIDATES if sram_resident(sc) else TP_CANDIDATES
    sizes = {t for t in candidates if arch.num_heads % t == 0}
    return sorted(sizes | {sc.tensor_parallel})


def devices_needed(sc: Scenario, ev: Evaluator, capacity: float) -> LayoutResult | None:
    """Smallest layout that fits, counting any whole number of devices, among layout_options.
    Ties go to the scenario's own layout, then to fewer pipeline stages; with llama.cpp to fewer tensor-parallel
    ranks instead (its default --split-mode layer is a pipeline over the cards; row split is opt-in)."""
    options = layout_options(sc, ev, capacity)
    if sc.mode == "training":  # only layouts the training stack runs (data/stack_layouts.csv), as the planner plans
        options = [o for o in options if _runnable(sc, o[0])]
    return min(options, key=lambda o: (o[0].devices, o[1]))[0] if options else None


def _runnable(sc: Scenario, r: LayoutResult) -> bool:
    return layout_problem(sc.training_stack, sc.method, r.zero_stage, r.tensor_parallel, r.pipeline_parallel, r.data_parallel) is None


def layout_options(sc: Scenario, ev: Evaluator, capacity: float, tensor: bool = True, pipeline: bool = True) -> list[tuple[LayoutResult, int]]:
    """The smallest fitting layout of each kind, with its preference (lower first on a tie of devices):
    - model parallel: for each tensor-parallel size, the fewest pipeline stages (at most one per layer);
    - in training, more data-parallel ranks under the scenario's ZeRO stage (>= 1), or under ZeRO-3, with the
      scenario's tensor-parallel size or another (tensor parallel x ZeRO data parallel);
    - the scenario's own layout, when it fits.
    `tensor`, `pipeline` False: only the scenario's own tensor-parallel size, one pipeline stage (a stack without)."""
    arch = ev.arch
    b, s = sc.batch_size, sc.seq_len
    if sc.mode == "inference" and sc.expert_parallel:
        if ep := _expert_parallel_option(sc, ev, capacity):
            return [ep]
        # no expert-parallel replica fits: the tensor x pipeline layouts, served without it
        sc = sc.model_copy(update={"expert_parallel": False})
        ev = Evaluator(sc, arch)
    options: list[tuple[int, int, Layout, int]] = []  # (devices, preference, layout, zero stage)
    own = own_layout(sc)
    if ev.total(own, b, s) <= capacity:
        options.append((own.devices, 0, own, sc.zero_stage))
    layer_split = sc.mode == "inference" and sc.serving_engine == "llama.cpp"
    for tp in _tp_sizes(sc, arch) if tensor else [sc.tensor_parallel]:

        def stages_fit(p: int, t: int = tp) -> bool:
            return ev.total(Layout(1, t, p), b, s) <= capacity

        pp = smallest_count(stages_fit, min(arch.num_layers, MAX_DEVICES // tp) if pipeline else 1)
        if pp:
            options.append((tp * pp, 1 + (tp if layer_split else pp), Layout(1, tp, pp), sc.zero_stage))
    if sc.mode == "training":
        stages = {sc.zero_stage, 3} if sc.zero_stage >= 1 else {3}
        # data-parallel ranks under the scenario's tensor-parallel size, and (2-D: tensor parallel within a node, ZeRO /
        # FSDP across, as Accelerate's ParallelismConfig and Megatron run) under each other tensor-parallel size
        for tp in sorted({sc.tensor_parallel} | (set(_tp_sizes(sc, arch)) if tensor else set())):
            group = tp * sc.pipeline_parallel
            for zero in sorted(stages):

                def ranks_fit(d: int, z: int = zero, t: int = tp) -> bool:
                    return float(ev.components(Layout(d, t, sc.pipeline_parallel), b, s, zero_stage=z)[0].total) <= capacity

                dp = smallest_count(ranks_fit, MAX_DEVICES // group)
                if dp:
                    preference = (1 if zero == sc.zero_stage else 2) + (0 if tp == sc.tensor_parallel else 2)
                    options.append((dp * group, preference, Layout(dp, tp, sc.pipeline_parallel), zero))
    return [
        (
            LayoutResult.model_construct(
                data_parallel=layout.data_parallel,
                tensor_parallel=layout.tensor_parallel,
                pipeline_parallel=layout.pipeline_parallel,
                zero_stage=zero if sc.mode == "training" else 0,
                devices=devices,
            ),
            preference,
        )
        for devices, preference, layout, zero in options
    ]


def expert_parallel_sizes(arch: Architecture) -> list[int]:
    """Expert-parallel sizes the fewest-devices search tries: 1 (one device, where EP does not apply) and the sizes
    that split the routed experts into whole, equal shares (E/n experts a rank, as expert_parallel_weight_bytes
    counts), up to one expert a rank. Attention is data-parallel under EP, so the heads need not split (the tensor-
    parallel search's constraint), and EP groups span nodes (DeepSeek's and SGLang's wide EP: 32-320 ranks)."""
    return [1] + [n for n in range(2, arch.num_experts + 1) if arch.num_experts % n == 0]


def _expert_parallel_option(sc: Scenario, ev: Evaluator, capacity: float) -> tuple[LayoutResult, int] | None:
    """The fewest devices of an expert-parallel replica that fit (no pipeline stages: EP with them is not served,
    components.expert_parallel_ranks): memory per rank falls as n grows (weights: all non-expert ones plus 1/n of the
    routed experts; KV cache and prefill of a rank's ceil(B/n) sequences), so the first size that fits."""
    for n in expert_parallel_sizes(ev.arch):
        if ev.total(Layout(1, n, 1), sc.batch_size, sc.seq_len) <= capacity:
            return LayoutResult.model_construct(data_parallel=1, tensor_parallel=n, pipeline_parallel=1, zero_stage=0, devices=n, expert_parallel=n > 1), 0
    return None


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


# ------------------------------------------------------------------------------------------------------------ advice


class Fix(BaseModel):
    """A change that makes a scenario fit: the changes in words, the scenario fields they set (a layout's included),
    and what it then needs per device, on the accelerators and in system RAM."""

    model_config = _OUT
    changes: tuple[str | Text, ...]  # a Text where a change names a memory size (rendered in the reader's units)
    update: dict[str, Any]
    memory_per_device_bytes: int
    host_memory_bytes: int  # system RAM per device: offloaded states, llama.cpp's layers off the accelerators
    devices: int

    @property
    def label_text(self) -> Text:
        """The changes in words, their memory sizes left for the reader's units."""
        first, *rest = self.changes
        return joined([first[0].upper() + first[1:] if isinstance(first, str) else first, *rest], " + ")

    @property
    def label(self) -> str:
        """The changes in words, sizes in GiB (the CLI's)."""
        return self.label_text.render()


# The smaller KV cache the help offers: the first of these the engine keeps on the part for the model, 8 bits a value
# (vLLM's INT8 cache where its FP8 one is refused, on a T4; llama.cpp's and mlx-lm's Q8_0 blocks). Q4_0's 4.5 bits
# cost quality a user should choose knowingly (the field offers it).
SMALLER_KV_CACHES = ("fp8", "int8", "q8_0")


def _alternatives(sc: Scenario, arch: Architecture, capacity: float) -> list[tuple[str, dict[str, Any]]]:
    alts: list[tuple[str, dict[str, Any]]]
    if sc.mode == "inference":
        # smaller weights in the formats the planner serves with the engine (data/engine_formats.csv: llama.cpp's GGUF
        # files, mlx-lm's MLX packing), and bitsandbytes' INT8 where the engine loads it; of AWQ's and GPTQ's equal
        # bytes the first the engine has kernels for on the part
        planned = planned_formats(sc.serving_engine)
        acc = get_accelerator(sc.accelerator)
        four_bit = four_bit_format(sc.serving_engine, acc)
        formats = ("fp8", "int8", four_bit, "gguf-q8_0", "gguf-q4_k_m", "mlx-q8", "mlx-q4")
        runs = [f for f in formats if f is not None and (f in planned or f == "int8") and loads(sc.serving_engine, f)]
        alts = [(f"weights in {FORMATS[f].label}", {"weights_format": f}) for f in runs if f != sc.weights_format]
        if sc.serving_engine == "llama.cpp" and sc.gpu_layers is not None:  # -ngl: fewer to fit the device, more to fit RAM
            fewest, most = _fewest_layers_for_host(sc, arch), _most_layers(sc, arch, own_layout(sc), capacity)
            for n in sorted({fewest, most} - {None, sc.gpu_layers}):  # type: ignore[type-var]
                alts.append((f"{n} layers on the GPU (-ngl {n})", {"gpu_layers": n}))
        if sc.kv_cache_format in ("bf16", "fp16"):  # the engine's 8-bit cache it keeps on this part for this model
            eight = next((k for k in SMALLER_KV_CACHES if kv_cache_problem(k, sc.serving_engine, acc, arch=arch) is None), None)
            alts += [(f"KV cache in {kv_format_name(eight)}", {"kv_cache_format": eight})] if eight else []
        if not sc.flash_attention:
            alts.append(("FlashAttention", {"flash_attention": True}))
        return alts
    alts = []
    if sc.method == "full":
        alts += [("LoRA instead of full fine-tuning", {"method": "lora"}), ("QLoRA (4-bit base + LoRA)", {"method": "qlora"})]
    elif sc.method == "lora":
        alts.append(("QLoRA (4-bit base + LoRA)", {"method": "qlora"}))
    if sc.batch_size > 1:  # the same sequences per optimizer step, one at a time (gradient accumulation)
        steps = sc.batch_size * sc.gradient_accumulation_steps
        alts.append((f"micro-batch 1 with {steps} accumulation steps", {"batch_size": 1, "gradient_accumulation_steps": steps}))
    if not sc.gradient_checkpointing:
        alts.append(("gradient checkpointing", {"gradient_checkpointing": True}))
    if not sc.flash_attention:
        alts.append(("FlashAttention", {"flash_attention": True}))
    if sc.optimizer == "adamw":
        alts.append(("8-bit AdamW", {"optimizer": "adamw-8bit"}))
    if not sc.fused_cross_entropy and sc.training_stack in FUSED_CROSS_ENTROPY_STACKS:
        alts.append(("a fused cross-entropy (Liger / Cut Cross-Entropy)", {"fused_cross_entropy": True}))
    # ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840) moves the gradients and the optimizer states to CPU memory, on
    # one GPU too (ZeRO stage 2 there); ZeRO-Infinity (arXiv 2104.07857) the parameters as well, under ZeRO-3.
    if sc.offload == "none":
        offload = {"offload": "optimizer"} | ({} if sc.zero_stage >= 1 else {"zero_stage": 2})
        alts.append(("ZeRO-Offload (optimizer state and gradients in CPU RAM)", offload))
    if sc.offload != "optimizer+params":
        alts.append(("ZeRO-Infinity (parameters, gradients and optimizer state in CPU RAM)", {"zero_stage": 3, "offload": "optimizer+params"}))
    if sc.zero_stage < 3 and sc.data_parallel > 1:
        alts.append(("ZeRO stage 3 / FSDP full sharding", {"zero_stage": 3}))
    return alts


def _problem(sc: Scenario) -> str | None:
    """Why the scenario's training stack or part cannot run it, its optimizer included (data/stack_layouts.csv), or
    why its serving engine has no kernels there for its weights' format or their FP8 KV cache (data/format_kernels.csv),
    or None."""
    if sc.mode != "training":
        return serving_problem(sc, ENGINES[sc.serving_engine].label)
    stack = sc.training_stack
    base = base_problem(qlora_base(sc).id, sc.zero_stage, sc.offload, sc.tensor_parallel) if gptq_base(sc) else None
    return (
        base
        or layout_problem(stack, sc.method, sc.zero_stage, sc.tensor_parallel, sc.pipeline_parallel, sc.data_parallel, sc.optimizer, sc.offload)
        or part_problem(get_accelerator(sc.accelerator), sc.method, stack, sc.optimizer)
    )


def serving_problem(sc: Scenario, engine_name: str | None = None) -> str | None:
    """Why the serving engine (written `engine_name`, else its id) cannot serve the scenario on its part, in one line:
    no implementation of the model's architecture (data/engine_models.csv), or the weights' format not loaded or
    without kernels there, or their FP8 KV cache (data/engine_formats.csv, data/format_kernels.csv). None on the SRAM
    chips, which run their vendor's own stack. The estimate's warning, the every-accelerator table's and the
    comparison's one rule."""
    if sram_resident(sc):
        return None
    return model_problem(sc.serving_engine, sc.model, sc.architecture.name, engine_name) or kernels_problem(
        sc.weights_format, sc.kv_cache_format, sc.serving_engine, get_accelerator(sc.accelerator), engine_name, sc.architecture
    )


def _fix(sc: Scenario, changes: tuple[str | Text, ...], update: dict[str, Any], capacity: float, own_problem: str | None) -> Fix | None:
    """The fix, when the changed scenario is valid, runnable by its stack and part (or no less than the scenario was),
    and fits on its layout."""
    try:
        alt = sc.replace(**update)
    except ValueError:
        return None
    if (problem := _problem(alt)) is not None and problem != own_problem:
        return None
    ev = Evaluator(alt, alt.architecture)
    layout = own_layout(alt)
    comps, host = ev.components(layout, alt.batch_size, alt.seq_len)
    if not (float(comps.total) <= capacity and float(host) <= ev.host_limit_bytes):
        return None
    return Fix.model_construct(
        changes=changes, update=update, memory_per_device_bytes=MemoryBreakdown.of(comps).total, host_memory_bytes=round(float(host)), devices=layout.devices
    )


# A context cut to less than a quarter of the one asked for is another workload, not a fix (a policy, not a source).
MIN_CONTEXT_FRACTION = 0.25


def _smaller_runs(sc: Scenario, ev: Evaluator, capacity: float) -> list[tuple[str, dict[str, Any]]]:
    """What fits with less at once on the same devices: the longest context that fits (in whole 128-token blocks when
    it is that long, and at least MIN_CONTEXT_FRACTION of the one asked for); in serving, the largest batch that fits."""
    out: list[tuple[str, dict[str, Any]]] = []
    layout = own_layout(sc)
    n = max_seq(ev.total, layout, sc.batch_size, capacity, sc.seq_len - 1) if sc.seq_len > 1 else 0
    n = n // 128 * 128 if n >= 128 else n
    if n >= max(1, MIN_CONTEXT_FRACTION * sc.seq_len) and (sc.output_tokens is None or sc.output_tokens < n):
        out.append((f"a context of {n:,} tokens", {"seq_len": n}))
    b = max_batch(ev.total, layout, sc.seq_len, capacity) if sc.batch_size > 1 and sc.mode == "inference" else 0
    if 1 <= b < sc.batch_size:  # (training: micro-batch 1 with more accumulation steps is among _alternatives)
        out.append((f"{b} concurrent sequence{'s' if b > 1 else ''}", {"batch_size": b}))
    return out


def same_device_fixes(sc: Scenario, ev: Evaluator, capacity: float) -> list[Fix]:
    """The changes that make the scenario fit on its own devices: every combination of one, two or three that fits
    and holds no smaller one that does (a cheaper fix may take two changes where one alone fits); and the longest
    context that fits as it is. None the stack or part cannot run."""
    alts = _alternatives(sc, ev.arch, capacity)
    own_problem = _problem(sc)
    found: list[Fix] = []
    fitting: list[set[str]] = []
    for size in (1, 2, 3):
        for combo in combinations(alts, size):
            labels = {label for label, _ in combo}
            if any(smaller <= labels for smaller in fitting):
                continue  # a part of it already fits
            update: dict[str, Any] = {}
            for _, u in combo:
                update |= u
            if len(update) < sum(len(u) for _, u in combo):
                continue  # two choices for the same setting
            if (fix := _fix(sc, tuple(label for label, _ in combo), update, capacity, own_problem)) is not None:
                found.append(fix)
                fitting.append(labels)
    singles: list[tuple[str | Text, dict[str, Any]]] = list(_smaller_runs(sc, ev, capacity))
    host = float(ev.components(own_layout(sc), sc.batch_size, sc.seq_len)[1])
    if host > ev.host_limit_bytes:  # llama.cpp: the layers kept off the devices need more system RAM than is set
        gib = math.ceil(host / BYTES_PER_GIB)  # the sidebar's System RAM is set in whole GiB (host_memory_gib)
        singles.append((Text.of("{ram:0} of system RAM", ram=Bytes(gib * BYTES_PER_GIB)), {"host_memory_gib": float(gib)}))
    for label, update in singles:
        if (fix := _fix(sc, (label,), update, capacity, own_problem)) is not None:
            found.append(fix)
    return found


def more_device_fixes(sc: Scenario, ev: Evaluator, capacity: float) -> list[Fix]:
    """More devices, as the scenario is or with one change: the smallest layout of each kind that fits
    (layout_options) that the stack runs."""
    own_problem = _problem(sc)
    stack = sc.training_stack
    # the searches a training stack cannot use are not made (data/stack_layouts.csv): no TP or PP layouts it cannot run
    tensor = sc.mode != "training" or layout_problem(stack, "full", 0, 2, 1) is None
    pipeline = sc.mode != "training" or layout_problem(stack, "full", 0, 1, 2) is None
    out: list[Fix] = []
    for changes, change in [((), {})] + [((label,), u) for label, u in _alternatives(sc, ev.arch, capacity)]:
        try:
            base = sc.replace(**change) if change else sc
        except ValueError:
            continue
        base_ev = ev if not change else Evaluator(base, base.architecture)
        if base_ev.total(own_layout(base), base.batch_size, base.seq_len) <= capacity:
            continue  # fits on its own devices: a same-device fix
        for lay, _ in layout_options(base, base_ev, capacity, tensor, pipeline):
            words = f"{lay.devices:,} devices"
            split = [f"{'expert' if lay.expert_parallel else 'tensor'} parallel {lay.tensor_parallel}"] if lay.tensor_parallel > 1 else []
            split += [f"{lay.pipeline_parallel} pipeline stages"] if lay.pipeline_parallel > 1 else []
            if split:
                words += f" ({' x '.join(split)})"
            if lay.data_parallel > 1 and sc.mode == "training":
                words += f" ({lay.data_parallel} data-parallel ranks, ZeRO stage {lay.zero_stage})"
            layout_update = {"data_parallel": lay.data_parallel, "tensor_parallel": lay.tensor_parallel, "pipeline_parallel": lay.pipeline_parallel}
            if sc.mode == "training":
                layout_update["zero_stage"] = lay.zero_stage
            if sc.expert_parallel:  # the expert-parallel search's layout, or (none fitting) a tensor-parallel one
                layout_update["expert_parallel"] = lay.expert_parallel
            if (fix := _fix(sc, (*changes, words), change | layout_update, capacity, own_problem)) is not None:
                out.append(fix)
    return out


def why_it_does_not_fit(sc: Scenario, ev: Evaluator, capacity: float) -> list[Text]:
    """What is short (the device's memory or, with llama.cpp, the system RAM) and its largest part; on Apple silicon,
    the wired-memory limit to raise when that is what is short."""
    comps, host = ev.components(own_layout(sc), sc.batch_size, sc.seq_len)
    value, name = max(zip(comps, COMPONENT_NAMES, strict=True))
    host_short = float(host) > ev.host_limit_bytes  # llama.cpp: what stays off the devices does not fit in RAM
    if host_short and comps.total <= capacity:
        first = Text.of(
            "System RAM is what is short: the {n} layers kept off the devices (-ngl {ngl}) need {host}, and the machine has "
            "{ram}. The device holds its part ({total} of {capacity} usable).",
            n=ev.arch.num_layers - (sc.gpu_layers or 0),
            ngl=sc.gpu_layers,
            host=Bytes(host),
            ram=Bytes(ev.host_limit_bytes),
            total=Bytes(comps.total),
            capacity=Bytes(capacity),
        )
    else:
        first = Text.of(
            "Needs {total} per device but the device has {capacity} usable; the largest part is {name} ({part}).",
            total=Bytes(comps.total),
            capacity=Bytes(capacity),
            name=name.replace("_", " "),
            part=Bytes(value),
        )
    out = [first]
    if not host_short and (wired := raise_limit_advice(get_accelerator(sc.accelerator), float(comps.total))) is not None:
        out.append(wired)  # Apple silicon: the default wired-memory limit, not the memory, is what is short
    return out


def advise(sc: Scenario, ev: Evaluator, capacity: float, needed: LayoutResult | None) -> list[Text]:
    """Why it does not fit, which changes make it fit on the same devices (same_device_fixes, the least memory first),
    and how many devices it needs as it is."""
    out = why_it_does_not_fit(sc, ev, capacity)
    host = float(ev.components(own_layout(sc), sc.batch_size, sc.seq_len)[1])
    host_short = host > ev.host_limit_bytes  # llama.cpp: what stays off the devices does not fit in RAM
    fixes = same_device_fixes(sc, ev, capacity)
    fewest = min((len(f.changes) for f in fixes), default=1)  # the fewest changes that fit; the priced search weighs the rest
    fixes = [f for f in fixes if len(f.changes) == fewest]
    for fix in sorted(fixes, key=lambda f: (f.memory_per_device_bytes, f.label))[: 4 if fewest == 1 else 2]:
        needs_ram = fix.host_memory_bytes > 0 and (sc.mode == "training" or sc.serving_engine == "llama.cpp")
        template = ": {total} per device fits" + (", with {host} of system RAM per device." if needs_ram else ".")
        out.append(joined([fix.label_text, Text.of(template, total=Bytes(fix.memory_per_device_bytes), host=Bytes(fix.host_memory_bytes))]))
    if needed:
        parts = [f"{needed.devices} devices"]
        if needed.expert_parallel:
            parts.append(f"expert parallel over {needed.tensor_parallel}, attention data-parallel")
        elif needed.tensor_parallel > 1 or needed.pipeline_parallel > 1:
            parts.append(f"tensor parallel {needed.tensor_parallel} x pipeline parallel {needed.pipeline_parallel}")
        if needed.data_parallel > 1:
            parts.append(f"{needed.data_parallel} data-parallel ranks with ZeRO stage {needed.zero_stage}")
        out.append(Text.of("More devices: fits on {parts}.", parts=", ".join(parts)))
    elif host_short:
        out.append(Text.of("More devices alone do not help: the layers kept off them stay in system RAM. {host} of RAM would hold them.", host=Bytes(host)))
    else:
        out.append(Text.of("No layout of up to {n:,} devices fits this setup on this accelerator.", n=MAX_DEVICES))
    return out


def _assumptions(sc: Scenario, arch: Architecture) -> list[Text]:
    out = [Text.of("{a}", a=a) for a in arch.assumptions]
    sram = sram_resident(sc)
    if sram:
        out.append(
            Text.of(
                "{name} keeps the model in on-chip SRAM: its compiler places the weights, the KV cache and one token per sequence "
                "in flight over the chips ahead of time; no CUDA context, allocator or serving-engine pool (the sidebar's "
                "serving engine does not run on it)",
                name=get_accelerator(sc.accelerator).name,
            )
        )
    else:
        if (wired := wired_limit_text(get_accelerator(sc.accelerator))) is not None:
            out.append(wired)
        runtime = runtime_of(sc.accelerator)
        if runtime.context_bytes or runtime.comm_bytes:
            out.append(
                Text.of(
                    "outside the framework's allocator: {ctx} {what} per device ({basis}), +{buf} {comm} when devices cooperate",
                    ctx=Bytes(runtime.context_bytes),
                    what=runtime.context,
                    basis=runtime.basis,
                    buf=Bytes(runtime.comm_bytes),
                    comm=runtime.comm,
                )
            )
        else:
            out.append(Text.of("{what}: nothing counted beyond the engine's own buffers ({basis})", what=runtime.context, basis=runtime.basis))
    fmt = FORMATS[sc.weights_format]
    if sc.mode == "inference" and fmt.kernels:
        out.append(Text.of("weights in {label}: run by {kernels}", label=fmt.label, kernels=fmt.kernels))
        if not sram and (problem := load_problem(sc.weights_format, sc.serving_engine, ENGINES[sc.serving_engine].label)) is not None:
            out.append(Text.of("{problem}; the estimate counts its size as if it did", problem=problem))  # data/engine_formats.csv
    if sc.seq_len > arch.max_context:
        out.append(Text.of("seq_len {s:,} exceeds the model's trained context of {c:,} tokens", s=sc.seq_len, c=arch.max_context))
    if sc.mode == "training":
        stack = STACKS[sc.training_stack]
        out.append(Text.of("training stack: {label} ({source})", label=stack.label, source=stack.source))
        if get_accelerator(sc.accelerator).weights_in_sram:
            out.append(
                Text.of(
                    "training on {name} is not modelled (Groq's LPU serves only; Cerebras trains by streaming weights from "
                    "MemoryX): this is the GPU estimate on a device of its memory",
                    name=get_accelerator(sc.accelerator).name,
                )
            )
        out += [Text.of("{note}", note=note) for note in stack.notes]
        if fused_loss(sc):
            out.append(
                Text.of(
                    "fused cross-entropy (Liger Kernel / Cut Cross-Entropy, for the model types they patch): the loss holds a chunk of the logits "
                    "at a time, not all of them"
                )
            )
        elif sc.fused_cross_entropy:
            out.append(Text.of("fused_cross_entropy is not used: {label} has its own loss", label=stack.label))
        if sc.method == "qlora" and sc.weights_format != qlora_base(sc).id:
            out.append(Text.of("QLoRA keeps the frozen base in {label}; weights_format is not used", label=qlora_base(sc).label))
        if gptq_base(sc):
            out.append(
                Text.of(
                    "LoRA on a GPTQ checkpoint: no fp32 upcast (PEFT skips it for GPTQ); every forward pass dequantizes each weight in "
                    "PyTorch ops, and autograd keeps the 16-bit weight for the backward pass ({kept}); the time is auto-gptq's "
                    "unfused dequantization, an upper bound for GPTQModel's compiled one",
                    kept="one block's at a time, with checkpointing" if checkpointing(sc) else "every block's, without checkpointing",
                )
            )
        if sc.method == "qlora" and qlora_upcast(sc) and not sc.gradient_checkpointing:
            out.append(Text.of("gradient checkpointing counted on: prepare_model_for_kbit_training enables it"))
        if sc.tensor_parallel > 1:
            out.append(Text.of("tensor parallelism with sequence parallelism: activations split over the TP group"))
        if sc.pipeline_parallel > 1:
            out.append(Text.of("1F1B pipeline schedule: the first stage holds as many micro-batches as there are stages"))
        if sc.gradient_accumulation_steps > 1:
            out.append(Text.of("gradient accumulation: gradients stay allocated through every micro-batch's forward pass"))
        out.append(
            Text.of(
                "the peak is taken at the loss step or at the optimizer step, whichever is larger; PyTorch's caching "
                "allocator keeps part of the loss step's large buffers reserved (the allocator reserve)"
            )
        )
    elif not sram:
        engine = ENGINES[sc.serving_engine]
        out.append(Text.of("serving engine: {label} ({source})", label=engine.label, source=engine.source))
        out += [Text.of("{note}", note=note) for note in engine.notes]
        out.append(Text.of("logits for the last token of each sequence only"))
        if expert_parallel_ranks(sc, Layout(1, sc.tensor_parallel, sc.pipeline_parallel)) > 1:
            out.append(
                Text.of(
                    "expert-parallel over {n} devices: each holds 1/{n} of the routed experts, every other weight, and the KV cache "
                    "of its own sequences (attention data-parallel)",
                    n=sc.tensor_parallel,
                )
            )
        elif arch.is_mla and sc.tensor_parallel > 1:
            out.append(Text.of("the MLA latent KV cache is replicated on every tensor-parallel rank"))
    return out
