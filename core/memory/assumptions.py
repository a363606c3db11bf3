"""What the memory estimate assumes, in sentences (the Memory page's assumptions and the CLI's `assumptions`)."""

from __future__ import annotations

from core.catalog.accelerators import get_accelerator
from core.catalog.engine_formats import load_problem
from core.catalog.wired_limit import wired_limit_text
from core.layout import Layout
from core.memory.components import (
    checkpointing,
    expert_parallel_ranks,
    fused_loss,
    gptq_base,
    qlora_base,
    qlora_upcast,
    runtime_of,
    sram_resident,
)
from core.memory.engines import ENGINES
from core.memory.objective import preference, preference_note
from core.memory.stacks import STACKS
from core.model.architecture import Architecture
from core.model.formats import FORMATS
from core.scenario import Scenario
from core.text import Bytes, Text


def memory_assumptions(sc: Scenario, arch: Architecture) -> list[Text]:
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
        out += [Text.of("{note}", note=note) for note in stack.notes if _note_applies(note, sc.method)]
        if fused_loss(sc):
            out.append(
                Text.of(
                    "fused cross-entropy (Liger Kernel / Cut Cross-Entropy, for the model types they patch): the loss holds a chunk of the logits "
                    "at a time, not all of them"
                )
            )
        elif sc.fused_cross_entropy and preference(sc):
            out.append(Text.of("fused_cross_entropy is not used: DPO's loss reads each response's log-probabilities from the whole logits"))
        elif sc.fused_cross_entropy:
            out.append(Text.of("fused_cross_entropy is not used: {label} has its own loss", label=stack.label))
        if (note := preference_note(sc)) is not None:
            out.append(Text.of("{note}", note=note))
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


def _note_applies(note: str, method: str) -> bool:
    """A stack note about LoRA's adapters or QLoRA's base (it says so first) is left out of a setup without them."""
    if note.startswith("QLoRA"):
        return method == "qlora"
    return not (note.startswith("LoRA") and method == "full")
