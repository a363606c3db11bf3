"""Each memory component's formula with this scenario's numbers plugged in,
and its source: the dashboard's "explain" panel and the report."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from core.memory.activations import layer_activation_bytes, logits_bytes
from core.memory.components import (
    COMM_BUFFER_BYTES,
    CUDA_CONTEXT_BYTES,
    MASTER_COPY_BYTES,
    OPTIMIZER_STATE_BYTES,
    PREFILL_CHUNK_TOKENS,
    lora_params,
)
from core.memory.estimate import MemoryResult as Result
from core.model.formats import FORMATS, KV_CACHE_BYTES
from core.scenario import Scenario
from core.text import Text, bytes_mark, marked

ZERO_SRC = "Rajbhandari et al. 2019, ZeRO (arXiv 1910.02054), Sec. 3.1 and Fig. 1"
KORTHIKANTI_SRC = "Korthikanti et al. 2022 (arXiv 2205.05198), Sec. 4.1 and Table 2, adapted to the architecture"
KV_SRC = "Pope et al. 2022, Efficiently Scaling Transformer Inference (arXiv 2211.05102), Sec. 2; Ainslie et al. 2023 (GQA)"
OVERHEAD_SRC = "PyTorch CUDA semantics notes (CUDA context ~0.27 GiB with lazy loading); vLLM issue reports on NCCL buffers"


class Explanation(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    component: str
    formula: str
    numbers: Text  # the formula with this scenario's values; bytes render in the reader's units
    bytes: int
    source: str


def _n(x: float) -> str:
    return f"{x:,.0f}"


def explain(sc: Scenario, result: Result) -> list[Explanation]:
    arch = sc.architecture
    m = result.memory_per_device_bytes
    split = sc.tensor_parallel * sc.pipeline_parallel
    shard = f" / (TP {sc.tensor_parallel} x PP {sc.pipeline_parallel})" if split > 1 else ""
    out: list[Explanation] = []
    if sc.mode == "inference":
        fmt = FORMATS[sc.weights_format]
        out.append(
            Explanation(
                component="weights",
                formula="sum over tensors of parameters x bits per weight / 8" + (" / (TP x PP)" if split > 1 else ""),
                numbers=marked(
                    f"{_n(arch.total_params)} params in {fmt.label} ({fmt.linear_bits:.3g} bits for linear layers, "
                    f"{fmt.embed_bits:g} for embeddings){shard} = {bytes_mark(m.weights)}"
                ),
                bytes=m.weights,
                source=fmt.source,
            )
        )
        _, windowed = arch.kv_cache_elements_per_token()
        kvb = KV_CACHE_BYTES[sc.kv_cache_format]
        if arch.is_mla:
            per = f"(kv_lora_rank {arch.kv_lora_rank} + rope dim {arch.qk_rope_head_dim}) x {arch.num_layers} layers"
        else:
            per = f"2 (K,V) x {arch.num_layers} layers x {arch.num_kv_heads} KV heads x {arch.head_dim} head dim"
        window = f"; {arch.windowed_layers} sliding-window layers keep at most {arch.sliding_window:,} tokens" if windowed else ""
        out.append(
            Explanation(
                component="kv_cache",
                formula="2 x layers x KV heads x head dim x bytes x tokens x sequences",
                numbers=marked(
                    f"{per} x {kvb} B = {_n(result.kv_cache_bytes_per_token)} B per token; x {sc.seq_len:,} tokens "
                    f"x {sc.batch_size} sequences{window}{shard} = {bytes_mark(m.kv_cache)}"
                ),
                bytes=m.kv_cache,
                source=KV_SRC,
            )
        )
        out.append(
            Explanation(
                component="activations",
                formula="prefill step: tokens x (2h + (q+k+v widths + MLP widths) / TP) x 2 B + last-token fp32 logits",
                numbers=marked(
                    f"min({sc.batch_size} x {sc.seq_len:,}, {PREFILL_CHUNK_TOKENS:,}) tokens, h = {arch.hidden_size}, "
                    f"vocabulary {arch.vocab_size:,} = {bytes_mark(m.activations)}"
                ),
                bytes=m.activations,
                source="vLLM chunked prefill (max_num_batched_tokens); transient working set of one block",
            )
        )
    else:
        out += _training(sc, result)
    distributed = sc.devices > 1 or (sc.mode == "training" and sc.zero_stage >= 1)
    parts = [f"{bytes_mark(CUDA_CONTEXT_BYTES)} CUDA context"]
    rest = m.overhead - CUDA_CONTEXT_BYTES
    if distributed:
        parts.append(f"{bytes_mark(COMM_BUFFER_BYTES)} NCCL buffers")
        rest -= COMM_BUFFER_BYTES
    if rest > 1:
        parts.append(f"{bytes_mark(rest)} for two gathered blocks ({_n(arch.largest_layer_params)} params each) under ZeRO-3")
    out.append(
        Explanation(
            component="overhead",
            formula="CUDA context + workspaces (+ NCCL buffers when distributed) (+ ZeRO-3 gather/prefetch of two blocks)",
            numbers=marked(" + ".join(parts) + f" = {bytes_mark(m.overhead)}"),
            bytes=m.overhead,
            source=OVERHEAD_SRC,
        )
    )
    return out


def _training(sc: Scenario, result: Result) -> list[Explanation]:
    arch = sc.architecture
    m = result.memory_per_device_bytes
    dp = sc.data_parallel
    split = sc.tensor_parallel * sc.pipeline_parallel
    mixed = sc.precision != "fp32"
    half = 2 if mixed else 4
    z = sc.zero_stage
    out: list[Explanation] = []
    if sc.method == "full":
        n = arch.total_params
        k = OPTIMIZER_STATE_BYTES.get(sc.optimizer)
        k_txt = f"{k:g} B {sc.optimizer} state" if k is not None else "factored Adafactor state"
        k_txt += f" + {MASTER_COPY_BYTES:g} B fp32 master copy" if mixed else ""
        rows = [
            ("weights", f"Psi x {half} B / (TP x PP){' / N_d' if z >= 3 else ''}", f"{_n(n)} x {half} B", m.weights),
            ("gradients", f"Psi x {half} B / (TP x PP){' / N_d' if z >= 2 else ''}", f"{_n(n)} x {half} B", m.gradients),
            ("optimizer", f"Psi x K / (TP x PP){' / N_d' if z >= 1 else ''}", f"{_n(n)} x ({k_txt})", m.optimizer),
        ]
    else:
        n_ad = lora_params(arch, sc.lora_rank, sc.lora_targets)
        base = "NF4" if sc.method == "qlora" else FORMATS[sc.weights_format].label
        rows = [
            (
                "weights",
                f"frozen base in {base} + LoRA adapters in fp32",
                f"{_n(arch.total_params)} base params + {_n(n_ad)} adapter params (rank {sc.lora_rank} x (in + out) of each {sc.lora_targets} matrix)",
                m.weights,
            ),
            ("gradients", "adapter params x 4 B", f"{_n(n_ad)} x 4 B", m.gradients),
            ("optimizer", "adapter params x optimizer bytes", f"{_n(n_ad)} x {OPTIMIZER_STATE_BYTES.get(sc.optimizer, 0):g} B ({sc.optimizer})", m.optimizer),
        ]
    suffix = f"; TP x PP = {split}" if split > 1 else ""
    suffix += f"; ZeRO stage {z} over N_d = {dp} ranks" if z else ""
    suffix += f"; offload: {sc.offload}" if sc.offload != "none" else ""
    for comp, formula, numbers, value in rows:
        out.append(Explanation(component=comp, formula=formula, numbers=marked(f"{numbers}{suffix} = {bytes_mark(value)}"), bytes=value, source=ZERO_SRC))
    act_bytes = 4 if sc.precision == "fp32" else 2
    total, largest = layer_activation_bytes(arch, sc.seq_len, sc.batch_size, flash=sc.flash_attention, act_bytes=act_bytes)
    sbh = sc.seq_len * sc.batch_size * arch.hidden_size
    per_layer = float(total) / arch.num_layers
    logits = logits_bytes(sc.seq_len, sc.batch_size, arch.vocab_size)
    if sc.gradient_checkpointing:
        formula = "layers x 2sbh (kept block inputs) + one block recomputed + logits"
        numbers = f"{arch.num_layers} x 2 x {_n(sbh)} + {bytes_mark(float(largest))} + {bytes_mark(logits)} logits"
    else:
        attn = "no s^2 terms (FlashAttention)" if sc.flash_attention else "includes the a x s^2 score tensors"
        formula = "layers x per-layer activations (s x b x h x coefficient) + logits (10 B x s x b x vocabulary)"
        numbers = f"{arch.num_layers} x {bytes_mark(per_layer)} per layer ({per_layer / sbh:.1f} x sbh bytes, {attn}) + {bytes_mark(logits)} logits"
    if sc.tensor_parallel > 1 or sc.pipeline_parallel > 1:
        numbers += f", / TP {sc.tensor_parallel} (sequence parallel), 1F1B with PP {sc.pipeline_parallel}"
    out.append(
        Explanation(component="activations", formula=formula, numbers=marked(f"{numbers} = {bytes_mark(m.activations)}"), bytes=m.activations, source=KORTHIKANTI_SRC)
    )
    return out
