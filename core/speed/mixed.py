"""Different cards in one box (issue #12: "will a 3090 + 4090 do?"): llama.cpp's default layer split.

llama.cpp (--split-mode layer, the default) gives each GPU a contiguous run of layers in proportion to its memory
(--tensor-split defaults to each device's free VRAM; ggml-org/llama.cpp tools/main README, "--tensor-split") and
runs them one after the other for every token, so:
- each card holds its layers' weights and KV cache, plus its own compute buffer and CUDA context;
- a token's time is the sum of each card's time for its layers (the slowest card does not set the pace, every
  card adds its share), and the hidden state crossing PCIe between cards is a few kB a token (no NVLink needed);
- when the proportional split overflows a card whose fixed buffers are large for its size, layers move to cards
  with room (what a user does with --tensor-split).
Two identical cards split evenly give exactly the pipeline_parallel answer (tested), which is checked against
published 2x/4x/6x RTX 3090 and 2x/8x RTX 4090 llama.cpp runs (tests/data/engine_speeds.csv).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from core.catalog.accelerators import get_accelerator
from core.memory.estimate import estimate_memory
from core.memory.evaluator import fit_capacity
from core.scenario import Scenario
from core.speed.comm import decode_tp_s, link_gbps
from core.speed.roofline import inference_speed, split_context, stage_seconds

_OUT = ConfigDict(frozen=True)
MAX_CARDS = 8  # llama.cpp's GGML_CUDA_MAX_DEVICES is 16; boards with more than 8 x16-capable slots are rare


class Card(BaseModel):
    model_config = _OUT
    accelerator: str
    name: str
    layers: int
    weights_bytes: int  # its layers' share of the weights
    kv_cache_bytes: int  # its layers' share of the KV cache
    other_bytes: int  # compute buffer, activations, CUDA context: each card's own
    total_bytes: int
    capacity_bytes: int
    fits: bool
    decode_step_s: float  # its layers' time in one decode step


class MixedBox(BaseModel):
    model_config = _OUT
    cards: tuple[Card, ...]
    fits: bool
    split: str  # "proportional to memory" or "moved to fit"
    decode_tokens_per_s: float
    time_to_first_token_s: float
    short_by_bytes: int  # when it does not fit: memory the cards lack in all
    notes: tuple[str, ...]
    # identical cards: the same box as one tensor-parallel group (vLLM, llama.cpp --split-mode row), its all-reduces
    # over the cards' link (PCIe for GeForce cards: no NVLink on 40- and 50-series)
    tensor_parallel_tokens_per_s: float | None = None
    tensor_parallel_allreduce_s: float | None = None  # per decode step
    link_gbps: float | None = None


def _largest_remainder(total: int, weights: Sequence[float]) -> list[int]:
    raw = [total * w / sum(weights) for w in weights]
    out = [math.floor(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - out[i], reverse=True)[: total - sum(out)]:
        out[i] += 1
    return out


def mixed_box(sc: Scenario, accelerator_ids: Sequence[str]) -> MixedBox:
    """The scenario served by one llama.cpp process over these cards (ids may repeat: ["rtx-3090", "rtx-4090"])."""
    n = len(accelerator_ids)
    if not 1 <= n <= MAX_CARDS:
        raise ValueError(f"a box holds 1 to {MAX_CARDS} cards")
    accs = [get_accelerator(a) for a in accelerator_ids]
    base = Scenario(**(dict(sc) | {"mode": "inference", "tensor_parallel": 1, "pipeline_parallel": n, "data_parallel": 1, "gpu_layers": None}))
    arch = base.architecture
    layers_total = arch.num_layers
    if n > layers_total:
        raise ValueError(f"{arch.name} has {layers_total} layers: at most that many cards")
    # An even split's per-device memory on the first card: the layer-proportional parts scale with each card's layers,
    # the rest (activations, engine buffers, context) is each card's own.
    even = estimate_memory(Scenario(**(dict(base) | {"accelerator": accs[0].id}))).memory_per_device_bytes
    per_layer = (even.weights + even.kv_cache) * n / layers_total
    fixed = even.total - even.weights - even.kv_cache
    capacity = [fit_capacity(base, float(a.usable_memory_bytes)) for a in accs]
    layers = _largest_remainder(layers_total, [a.memory_bytes for a in accs])
    room = [max(0, math.floor((c - fixed) / per_layer)) if per_layer > 0 else layers_total for c in capacity]
    split = "proportional to memory"
    if any(k > r for k, r in zip(layers, room, strict=True)) and sum(room) >= layers_total:
        layers = [min(k, r) for k, r in zip(layers, room, strict=True)]
        while sum(layers) < layers_total:  # to the card with the most room left
            i = max(range(n), key=lambda i: room[i] - layers[i])
            layers[i] += 1
        split = "moved to fit"
    prompt, out = split_context(base.seq_len, output_tokens=base.output_tokens)
    cards, decode_s, ttft_s = [], 0.0, 0.0
    for acc, k, cap in zip(accs, layers, capacity, strict=True):
        share = k / layers_total
        step, prefill = stage_seconds(Scenario(**(dict(base) | {"accelerator": acc.id})), acc, share, k, base.batch_size, prompt + out / 2.0, prompt)
        w, kv = round(even.weights * n * share), round(even.kv_cache * n * share)
        total = w + kv + fixed
        cards.append(
            Card(
                accelerator=acc.id,
                name=acc.name,
                layers=k,
                weights_bytes=w,
                kv_cache_bytes=kv,
                other_bytes=fixed,
                total_bytes=total,
                capacity_bytes=round(cap),
                fits=total <= cap,
                decode_step_s=step,
            )
        )
        decode_s += step
        ttft_s += prefill
    short = sum(max(0, c.total_bytes - c.capacity_bytes) for c in cards)
    notes = (
        f"layers split {split} ({' + '.join(str(c.layers) for c in cards)} of {layers_total}); each card runs its layers in turn for every token",
        "activations cross PCIe between cards: a few kB a token, no NVLink needed for a layer split",
        "embedding and output matrices counted with the layers (llama.cpp puts the output matrix on the last card)",
    )
    tp = _tensor_parallel(base, accelerator_ids) if len(set(accelerator_ids)) == 1 else None
    return MixedBox(
        **(tp or {}),
        cards=tuple(cards),
        fits=all(c.fits for c in cards),
        split=split,
        decode_tokens_per_s=base.batch_size / decode_s if decode_s > 0 else 0.0,
        time_to_first_token_s=ttft_s,
        short_by_bytes=short,
        notes=notes,
    )


def _tensor_parallel(sc: Scenario, ids: Sequence[str]) -> dict | None:
    """The same identical cards as a tensor-parallel group, when the attention heads split evenly over them."""
    n, arch = len(ids), sc.architecture
    if n < 2 or not arch.splits_over(n):
        return None
    acc = get_accelerator(ids[0])
    s = inference_speed(Scenario(**(dict(sc) | {"accelerator": acc.id, "tensor_parallel": n, "pipeline_parallel": 1})))
    return {
        "tensor_parallel_tokens_per_s": s.decode_tokens_per_s,
        "tensor_parallel_allreduce_s": decode_tp_s(arch, acc, n, 1, float(sc.batch_size)),
        "link_gbps": link_gbps(acc, n),
    }
