"""Each memory component's formula with this scenario's numbers plugged in,
and its source: the dashboard's "explain" panel and the report. Quantities
stay unformatted (core/text.py) so that they show in the reader's units."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from core.layout import Layout
from core.memory.components import (
    FRAGMENTATION_FLOOR_BYTES,
    FRAGMENTATION_OF_LOSS_BUFFER,
    MASTER_COPY_BYTES,
    MATH_ATTENTION_SCORE_BYTES,
    METAL_RUNTIME,
    OPTIMIZER_STATE_BYTES,
    act_bytes,
    adapter_bytes,
    checkpointing,
    engine_reservation,
    expert_parallel_ranks,
    fp32_math_attention,
    fused_loss,
    kv_share,
    lora_params,
    loss_logits_bytes,
    qlora_base,
    qlora_upcast,
    reference_logits_bytes,
    residual_bytes,
    runtime_of,
    sram_resident,
    stack_of,
)
from core.memory.engines import ENGINES
from core.memory.estimate import MemoryResult
from core.memory.objective import preference, reference_copy, sequences_per_example
from core.model.formats import FORMATS, KV_CACHE_BYTES, routed_expert_bytes, weight_bytes
from core.scenario import Scenario
from core.text import Text, bytes_mark, marked

ZERO_SRC = "Rajbhandari et al. 2019, ZeRO (arXiv 1910.02054), Sec. 3.1 and Fig. 1"
KORTHIKANTI_SRC = "Korthikanti et al. 2022 (arXiv 2205.05198), Sec. 4.1 and Table 2, adapted to the architecture"
KV_SRC = "Pope et al. 2022, Efficiently Scaling Transformer Inference (arXiv 2211.05102), Sec. 2; Ainslie et al. 2023 (GQA)"
METAL_OVERHEAD_SRC = "llama.cpp's memory breakdown on Apple silicon: 0 MiB unaccounted beyond its model, context and compute buffers (ggml-org/llama.cpp PR #22673)"
OVERHEAD_SRC = "measured on an H100 (data/measurements/h100-2026-11-23.jsonl: nvidia-smi minus PyTorch's reserved pool); vLLM issue reports on NCCL buffers"
ALLOCATOR_SRC = "PyTorch CUDA caching allocator; calibrated on data/measurements/h100-2026-11-23.jsonl (max_memory_reserved - max_memory_allocated)"


class Explanation(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    component: str
    formula: str
    numbers: Text  # the formula with this scenario's values; bytes render in the reader's units
    bytes: int
    source: str


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _copies_text(n: int, copies_b: float, at_forward: bool) -> str:
    """Autocast's 16-bit weight copies: held through forward and backward, freed before the optimizer step."""
    if not copies_b:
        return ""
    if at_forward:
        return f" + {_n(n)} x {copies_b:g} B 16-bit copies (held until the optimizer step)"
    return f" (the {copies_b:g} B 16-bit copies are freed before the optimizer step, where the peak is)"


def _gradients_text(product: str, result: MemoryResult, full_bytes: float) -> str:
    """The gradient row's numbers: all of them at the optimizer step; at the loss (or a recomputed block) only
    what the backward pass has made so far, the output head's gradient (none for frozen-base LoRA); with the
    optimizer fused into backward, one tensor's gradient at a time."""
    held = result.memory_per_device_bytes.gradients
    if abs(held - full_bytes) <= full_bytes * 1e-6:
        return f"{product} (at the {result.peak_phase})" if result.peak_phase else product
    if held > full_bytes:  # tied input and output embeddings: the head's gradient is a second tensor until the step
        return f"{product} + {bytes_mark(held - full_bytes)} (tied embeddings: the output head's gradient, a second tensor until the step)"
    if result.peak_phase == "optimizer step":
        return f"one parameter tensor's gradient at a time, the largest (the optimizer steps inside backward; all of them: {product})"
    if held <= 0:
        return f"none yet at the {result.peak_phase}: gradients are made in the backward pass, after it (all of them: {product})"
    return f"at the {result.peak_phase} only the output head's gradient is made yet (all of them at the optimizer step: {product})"


def explain(sc: Scenario, result: MemoryResult) -> list[Explanation]:
    m = result.memory_per_device_bytes
    out = _inference(sc, result) if sc.mode == "inference" else _training(sc, result)
    distributed = sc.devices > 1 or (sc.mode == "training" and sc.zero_stage >= 1)
    runtime = runtime_of(sc.accelerator)
    parts = [f"{bytes_mark(runtime.context_bytes)} {runtime.context}"]
    rest = m.overhead - runtime.context_bytes
    if sc.mode == "inference" and ENGINES[sc.serving_engine].graphs_bytes:
        parts.append(f"{bytes_mark(ENGINES[sc.serving_engine].graphs_bytes)} CUDA graphs")
        rest -= ENGINES[sc.serving_engine].graphs_bytes
    if distributed and runtime.comm_bytes:
        parts.append(f"{bytes_mark(runtime.comm_bytes)} {runtime.comm}")
        rest -= runtime.comm_bytes
    if rest > 1:
        parts.append(f"{bytes_mark(rest)} for two gathered blocks ({_n(sc.architecture.largest_layer_params)} params each) under ZeRO-3")
    if sram_resident(sc):  # Groq LPU, Cerebras WSE: the compiler places everything ahead of time
        overhead = Explanation(
            component="overhead",
            formula="none on a chip whose model lives in on-chip SRAM: no CUDA context, CUDA graphs or NCCL buffers",
            numbers=marked(f"{bytes_mark(m.overhead)}"),
            bytes=m.overhead,
            source="Abts et al. 2020, Think Fast: A Tensor Streaming Processor (ISCA): the compiler schedules every tensor",
        )
    elif runtime == METAL_RUNTIME:
        overhead = Explanation(
            component="overhead",
            formula="the Metal runtime holds none of the GPU working set beyond the engine's own buffers (+ ZeRO-3 gather/prefetch of two blocks)",
            numbers=marked(" + ".join(parts) + f" = {bytes_mark(m.overhead)}"),
            bytes=m.overhead,
            source=METAL_OVERHEAD_SRC,
        )
    else:
        overhead = Explanation(
            component="overhead",
            formula=f"{runtime.context} (+ CUDA graphs of the serving engine) (+ {runtime.comm} when distributed) (+ ZeRO-3 gather/prefetch of two blocks)",
            numbers=marked(" + ".join(parts) + f" = {bytes_mark(m.overhead)}"),
            bytes=m.overhead,
            source=OVERHEAD_SRC,
        )
    out.append(overhead)
    if sc.mode == "training":
        formula = f"{FRAGMENTATION_FLOOR_BYTES / 2**30:.2f} GiB + {FRAGMENTATION_OF_LOSS_BUFFER:g} x the loss step's largest buffer"
    else:
        formula = "freed blocks the allocator keeps (engines that pre-allocate manage their own pool)"
    out.append(
        Explanation(
            component="allocator",
            formula=formula,
            numbers=marked(f"reserved beyond the live tensors = {bytes_mark(m.allocator)}"),
            bytes=m.allocator,
            source=ALLOCATOR_SRC,
        )
    )
    return out


def _inference(sc: Scenario, result: MemoryResult) -> list[Explanation]:
    arch = sc.architecture
    m = result.memory_per_device_bytes
    engine = ENGINES[sc.serving_engine]
    split = sc.tensor_parallel * sc.pipeline_parallel
    shard = f" / (TP {sc.tensor_parallel} x PP {sc.pipeline_parallel})" if split > 1 else ""
    fmt = FORMATS[sc.weights_format]
    ranks = expert_parallel_ranks(sc, Layout(1, sc.tensor_parallel, sc.pipeline_parallel))
    if ranks > 1:
        experts = routed_expert_bytes(arch, fmt) * arch.param_scale
        weights = Explanation(
            component="weights",
            formula="all weights - routed experts x (1 - 1/EP): every rank holds the non-expert weights and 1/EP of the experts",
            numbers=marked(
                f"{_n(arch.total_params)} params in {fmt.label} = {bytes_mark(weight_bytes(arch, fmt))}, of which routed experts "
                f"{bytes_mark(experts)}; EP {ranks}: {bytes_mark(weight_bytes(arch, fmt))} - {bytes_mark(experts)} x {ranks - 1}/{ranks} = {bytes_mark(m.weights)}"
            ),
            bytes=m.weights,
            source="core/speed/expert_parallel.py (wide-EP layout: data-parallel attention, E/n experts a rank); " + fmt.source,
        )
    else:
        weights = Explanation(
            component="weights",
            formula="sum over tensors of parameters x bits per weight / 8" + (" / (TP x PP)" if split > 1 else ""),
            numbers=marked(
                f"{_n(arch.total_params)} params in {fmt.label} ({fmt.linear_bits:.3g} bits for linear layers, "
                f"{fmt.embed_bits:g} for embeddings){shard} = {bytes_mark(m.weights)}"
            ),
            bytes=m.weights,
            source=fmt.source,
        )
    out = [weights]
    kvb = KV_CACHE_BYTES[sc.kv_cache_format]
    if arch.is_mla:
        per = f"(kv_lora_rank {arch.kv_lora_rank} + rope dim {arch.qk_rope_head_dim}) x {arch.num_layers} layers"
    else:
        per = f"2 (K,V) x {arch.num_layers} layers x {arch.num_kv_heads} KV heads x {arch.head_dim} head dim"
    window = f"; {arch.windowed_layers} sliding-window layers keep at most {arch.sliding_window:,} tokens" if arch.windowed_layers else ""
    sequences = "1 context (llama.cpp allocates n_ctx)" if sc.serving_engine == "llama.cpp" else f"{sc.batch_size} sequences"
    share = kv_share(arch, sc.tensor_parallel)
    if ranks > 1:  # attention data-parallel: a rank holds the whole cache of its own share of the sequences
        sequences, share = f"ceil({sc.batch_size} / EP {ranks}) = {-(-sc.batch_size // ranks)} sequences (this rank's own)", 1.0
    out.append(
        Explanation(
            component="kv_cache",
            formula="2 x layers x KV heads x head dim x bytes x tokens x sequences",
            numbers=marked(
                f"{per} x {kvb:g} B = {_n(result.kv_cache_bytes_per_token)} B per token; x {sc.seq_len:,} tokens x {sequences}{window}"
                + (f" x {share:.3g} (this rank's share of the heads)" if share < 1 else "")
                + (f" / PP {sc.pipeline_parallel}" if sc.pipeline_parallel > 1 else "")
                + f" = {bytes_mark(m.kv_cache)}"
            ),
            bytes=m.kv_cache,
            source=KV_SRC,
        )
    )
    chunk = (
        f"{sc.batch_size} (one token per sequence streamed through the chips)"
        if sram_resident(sc)
        else f"min({sc.batch_size} x {sc.seq_len:,}, {engine.prefill_chunk_tokens:,})"
        if engine.prefill_chunk_tokens
        else f"{sc.batch_size} x {sc.seq_len:,} (whole prompts)"
    )
    out.append(
        Explanation(
            component="activations",
            formula="prefill step: tokens x (2h + (q+k+v widths + MLP gate, up and activated widths) / TP) x 2 B + last-token fp32 logits",
            numbers=marked(f"{chunk} tokens, h = {arch.hidden_size}, vocabulary {arch.vocab_size:,} = {bytes_mark(m.activations)}"),
            bytes=m.activations,
            source=f"{engine.label}: {engine.source}",
        )
    )
    reserved = engine_reservation(sc, float(result.device_memory_bytes))
    fraction = sc.gpu_memory_utilization or engine.preallocate_fraction
    if reserved is not None:
        device = bytes_mark(result.device_memory_bytes)
        if fraction is None:  # DeepSpeed-MII: all of the device but a fixed reserve
            how, numbers = "device memory less the engine's fixed reserve", f"{device} - {bytes_mark(engine.reserve_bytes or 0.0)}"
        else:
            how, numbers = "gpu_memory_utilization x device memory", f"{fraction:g} x {device}"
        out.append(
            Explanation(
                component="engine reservation",
                formula=f"{how}, taken at start; what the model does not need becomes KV-cache blocks",
                numbers=marked(f"{numbers} = {bytes_mark(reserved)}"),
                bytes=round(reserved),
                source=engine.source,
            )
        )
    return out


def _training(sc: Scenario, result: MemoryResult) -> list[Explanation]:
    arch = sc.architecture
    m = result.memory_per_device_bytes
    stack = stack_of(sc)
    dp = sc.data_parallel
    split = sc.tensor_parallel * sc.pipeline_parallel
    z = sc.zero_stage
    # which states exist at the peak decides what the gradient and weight rows hold: the states the breakdown was built
    # from (MemoryResult.states, core/memory/components.py), not computed again
    states = result.states
    parts = result.activation_parts  # hop: MemoryResult.activation_parts -> this table's numbers (not computed again)
    if states is None or parts is None:
        raise ValueError("explain() needs the MemoryResult of estimate_memory(sc) for a training scenario")
    at_forward = result.peak_phase != "optimizer step"
    full_grads = states.gradients / split / (dp if z >= 2 else 1)
    copies_b = states.weight_copies / max(1, arch.total_params) if sc.method == "full" else 0.0
    out: list[Explanation] = []
    if sc.method == "full":
        n = arch.total_params
        table = states.bytes_per_param  # the per-precision byte table the states were sized with
        assert table is not None
        w, g, layout_txt = table.param, table.grad, table.layout
        k = OPTIMIZER_STATE_BYTES.get(sc.optimizer)
        k_txt = f"{sc.optimizer} states" if k is not None else "factored Adafactor states"
        if table.master > MASTER_COPY_BYTES:  # Megatron under fp16: the optimizer's fp32 gradient copy too
            k_txt += f" + {MASTER_COPY_BYTES:g} B fp32 master copy + {table.master - MASTER_COPY_BYTES:g} B fp32 gradient copy"
        elif table.master:
            k_txt += f" + {table.master:g} B fp32 master copy"
        twice = " x 2 (the policy and DPO's frozen reference)" if reference_copy(sc) else ""
        rows = [
            (
                "weights",
                f"Psi x {w:g} B{twice} / (TP x PP){' / N_d' if z >= 3 else ''}" + (f" + bf16 autocast copies ({copies_b:g} B per parameter)" if copies_b else ""),
                f"{_n(n)} x {w:g} B ({layout_txt}){twice}" + _copies_text(n, copies_b, at_forward),
                m.weights,
            ),
            (
                "gradients",
                f"Psi x {g:g} B / (TP x PP){' / N_d' if z >= 2 else ''}" + (" (fused into backward: one tensor's gradient)" if stack.grads_freed_in_backward else ""),
                _gradients_text(f"{_n(n)} x {g:g} B", result, full_grads),
                m.gradients,
            ),
            ("optimizer", f"Psi x K / (TP x PP){' / N_d' if z >= 1 else ''}", f"{_n(n)} x ({k_txt})", m.optimizer),
        ]
    else:
        n_ad = lora_params(arch, sc.lora_rank, sc.lora_targets)
        base = qlora_base(sc).label if sc.method == "qlora" else FORMATS[sc.weights_format].label
        upcast = " (embeddings, norms and head upcast to fp32)" if qlora_upcast(sc) else ""
        ab = adapter_bytes(sc)
        rows = [
            (
                "weights",
                f"frozen base in {base}{upcast} + LoRA adapters ({ab:g} B each)",
                f"{_n(arch.total_params)} base params + {_n(n_ad)} adapter params (rank {sc.lora_rank} x (in + out) of each {sc.lora_targets} matrix)",
                m.weights,
            ),
            ("gradients", f"adapter params x {ab:g} B", _gradients_text(f"{_n(n_ad)} x {ab:g} B", result, full_grads), m.gradients),
            ("optimizer", "adapter params x optimizer bytes", f"{_n(n_ad)} x ({sc.optimizer} states)", m.optimizer),
        ]
    suffix = f"; TP x PP = {split}" if split > 1 else ""
    suffix += f"; ZeRO stage {z} over N_d = {dp} ranks" if z else ""
    suffix += f"; offload: {sc.offload}" if sc.offload != "none" else ""
    for comp, formula, numbers, value in rows:
        out.append(Explanation(component=comp, formula=formula, numbers=marked(f"{numbers}{suffix} = {bytes_mark(value)}"), bytes=value, source=ZERO_SRC))
    # the activations before sharding that the breakdown's activations were built from (training_peak)
    tokens = sc.seq_len * sc.batch_size * sequences_per_example(sc)  # DPO: a chosen and a rejected sequence an example
    per_layer_token = float(parts.all_layers) / arch.num_layers / tokens
    fused = " (fused cross-entropy)" if fused_loss(sc) else ""
    loss_b, of = loss_logits_bytes(sc), ""
    if preference(sc):  # DPO: the reference's 16-bit logits beside the policy's loss (core/memory/objective.py)
        ref = reference_logits_bytes(sc)
        loss_b, of = loss_b + ref, f": the policy's {loss_logits_bytes(sc):g} B and the reference's {ref:g} B logits"
    loss = f"{bytes_mark(float(parts.logits))} loss step{fused} ({loss_b:g} B x {tokens:,} tokens x {arch.vocab_size:,} vocabulary{of})"
    if checkpointing(sc):
        where = "in CPU memory" if stack.checkpoints_offloaded else "on the device"
        formula = "layers x the block input (kept " + where + ") + one block recomputed + the loss step"
        inputs = f"{arch.num_layers} x {residual_bytes(sc):g} B x {tokens:,} tokens x h {arch.hidden_size} ({bytes_mark(float(parts.checkpoints))})"
        block = bytes_mark(float(parts.largest))
        if fp32_math_attention(sc, arch):  # the recomputed block's fp32 scores (components.MATH_ATTENTION_SCORE_BYTES)
            block += f" (with its fp32 attention scores, {MATH_ATTENTION_SCORE_BYTES:g} B x {arch.num_heads} heads x s^2 x batch: QLoRA's upcast on SDPA's math path)"
        numbers = f"{inputs} + {block} + {loss}"
    else:
        attn = "FlashAttention: no s^2 terms" if sc.flash_attention else "eager attention keeps the s^2 scores"
        formula = "layers x per-layer activations + the loss step (stack's bytes x tokens x vocabulary)"
        numbers = f"{arch.num_layers} x {per_layer_token:,.0f} B per token per layer ({attn}; {act_bytes(sc):g}-byte activations) x {tokens:,} tokens + {loss}"
    if float(parts.dequantized):
        kept = "one recomputed block's" if checkpointing(sc) else "every block's"
        formula += " + the GPTQ weights autograd keeps dequantized"
        numbers += f" + {bytes_mark(float(parts.dequantized))} ({kept} GPTQ weights dequantized to 2 B, kept for the backward pass)"
    if sc.tensor_parallel > 1 or sc.pipeline_parallel > 1:
        numbers += f", / TP {sc.tensor_parallel} (sequence parallel), 1F1B with PP {sc.pipeline_parallel}"
    if result.peak_phase == "optimizer step":
        numbers = "at the optimizer step activations are freed; at the loss step: " + numbers
    out.append(
        Explanation(
            component="activations",
            formula=formula,
            numbers=marked(f"{numbers} = {bytes_mark(m.activations)}"),
            bytes=m.activations,
            source=f"{KORTHIKANTI_SRC}; {stack.label}: {stack.source}",
        )
    )
    return out
