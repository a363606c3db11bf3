"""What would make a scenario fit when it does not: why (the largest part, what is short), the changes that fit on
the same devices (same_device_fixes) and on more (more_device_fixes), in words with the memory each needs."""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

from pydantic import BaseModel

from core.catalog.accelerators import get_accelerator
from core.catalog.engine_formats import kv_format_name, loads, planned_formats
from core.catalog.format_kernels import four_bit_format
from core.catalog.kv_cache_kernels import kv_cache_problem
from core.catalog.stack_layouts import layout_problem
from core.catalog.wired_limit import raise_limit_advice
from core.memory.components import (
    COMPONENT_NAMES,
)
from core.memory.evaluator import RESULT_MODEL, Evaluator, LayoutResult, MemoryBreakdown, fewest_gpu_layers_for_host, most_gpu_layers, own_layout
from core.memory.fit import MAX_DEVICES, max_batch, max_seq
from core.memory.layouts import layout_options
from core.memory.objective import preference
from core.memory.problems import scenario_problem
from core.memory.stacks import FUSED_CROSS_ENTROPY_STACKS
from core.model.architecture import Architecture
from core.model.formats import FORMATS
from core.scenario import Scenario
from core.text import Bytes, Text, joined
from core.units import BYTES_PER_GIB


class Fix(BaseModel):
    """A change that makes a scenario fit: the changes in words, the scenario fields they set (a layout's included),
    and what it then needs per device, on the accelerators and in system RAM."""

    model_config = RESULT_MODEL
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
        # a real step down: at least 10% fewer bits a weight than the current format (MXFP4's gpt-oss re-quantized to AWQ
        # saves 1 GiB of 61: not advice; the estimate helper's review of stop 48, L5)
        bits = FORMATS[sc.weights_format].linear_bits
        alts = [(f"weights in {FORMATS[f].label}", {"weights_format": f}) for f in runs if FORMATS[f].linear_bits <= 0.9 * bits]
        if sc.serving_engine == "llama.cpp" and sc.gpu_layers is not None:  # -ngl: fewer to fit the device, more to fit RAM
            fewest, most = fewest_gpu_layers_for_host(sc, arch), most_gpu_layers(sc, arch, own_layout(sc), capacity)
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
    if not sc.fused_cross_entropy and sc.training_stack in FUSED_CROSS_ENTROPY_STACKS and not preference(sc):  # DPO's loss is no cross-entropy
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


def _fix(sc: Scenario, changes: tuple[str | Text, ...], update: dict[str, Any], capacity: float, own_problem: str | None) -> Fix | None:
    """The fix, when the changed scenario is valid, runnable by its stack and part (or no less than the scenario was),
    and fits on its layout."""
    try:
        alt = sc.replace(**update)
    except ValueError:
        return None
    if (problem := scenario_problem(alt)) is not None and problem != own_problem:
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
    own_problem = scenario_problem(sc)
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
    own_problem = scenario_problem(sc)
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
            split = [f"{'expert' if lay.expert_parallel else 'tensor'} parallel {lay.tensor_parallel}"] if lay.tensor_parallel > 1 else []
            split += [f"{lay.pipeline_parallel} pipeline stages"] if lay.pipeline_parallel > 1 else []
            details = [" x ".join(split)] if split else []
            if lay.data_parallel > 1 and sc.mode == "training":
                details.append(f"{lay.data_parallel} data-parallel ranks, ZeRO stage {lay.zero_stage}")
            words = f"{lay.devices:,} devices" + (f" ({'; '.join(details)})" if details else "")
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
        # not a dead end where one change and more devices fit (gradient checkpointing for an 8B full fine-tune on
        # TPU v5e chips; the estimate helper's review of stop 48, M7): the change alone, its layout and price being the
        # help options' (core/money/help_options.py), one answer
        changes = list(dict.fromkeys(str(f.changes[0]) for f in more_device_fixes(sc, ev, capacity) if len(f.changes) == 2))
        if changes:
            out.append(Text.of("With one change it fits on more devices: {changes} (the options give each one's layout and price).", changes=" or ".join(changes)))
    return out
