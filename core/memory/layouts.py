"""The smallest layout that fits: tensor-parallel sizes, pipeline stages, ZeRO data-parallel ranks and expert
parallelism, per accelerator (devices_needed, layout_options)."""

from __future__ import annotations

from core.catalog.accelerators import get_accelerator
from core.catalog.stack_layouts import layout_problem
from core.catalog.tpu_slices import rentable_chips
from core.layout import Layout
from core.memory.components import (
    part_memory_key,
    sram_resident,
)
from core.memory.evaluator import Evaluator, LayoutResult, fit_capacity, own_layout
from core.memory.fit import MAX_DEVICES, smallest_count
from core.model.architecture import Architecture
from core.scenario import Scenario

# Tensor-parallel sizes tried when looking for the smallest layout: one NVLink
# domain of an 8-GPU HGX/DGX baseboard (Megatron-LM keeps TP inside a node).
TP_CANDIDATES = (1, 2, 4, 8)


SRAM_TP_CANDIDATES = (16, 32, 64)


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
    """Tensor-parallel sizes that split the attention heads evenly (Architecture.splits_over: serving engines
    replicate KV heads, training stacks divide them), plus the scenario's own. SRAM-resident
    chips split each layer over many chips (Groq runs a 70B model on hundreds of
    230 MB chips), so up to 64 there."""
    candidates = TP_CANDIDATES + SRAM_TP_CANDIDATES if sram_resident(sc) else TP_CANDIDATES
    sizes = {t for t in candidates if arch.splits_over(t, replicate_kv=sc.mode == "inference")}
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

        most = min(arch.num_layers, MAX_DEVICES // tp) if pipeline else 1
        pp = _rentable(sc.accelerator, tp, smallest_count(stages_fit, most), most)
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

                dp = _rentable(sc.accelerator, group, smallest_count(ranks_fit, MAX_DEVICES // group), MAX_DEVICES // group)
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


def _rentable(accelerator_id: str, group: int, count: int | None, most: int) -> int | None:
    """`count` groups of `group` devices raised to the fewest whose devices the part can be rented for: on a TPU
    (data/tpu_slices.csv) a number of chips that divides the smallest slice holding them, so that slice runs whole
    copies of the layout (14 v5e chips is no slice and leaves 2 of 16 idle: 16 is; one v7 chip is a quarter of a
    4-chip slice), within `most`; None where none is (or `count` was None). Raising a stage or rank count only
    lowers each device's memory, so the layout still fits."""
    if not count:
        return None
    slice_chips = rentable_chips(accelerator_id, group * count)
    for c in range(count, min(most, slice_chips // group) + 1):
        if slice_chips % (group * c) == 0:
            return c
    return None


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
