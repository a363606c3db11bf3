"""Expert-parallel decode of a mixture-of-experts model: the wide-EP layout (DeepSeek's inference system, SGLang's
`--enable-dp-attention --ep-size N --moe-a2a-backend deepep`, vLLM's `--enable-expert-parallel` with
`--data-parallel-size`, TensorRT-LLM's `enable_attention_dp` with `moe_expert_parallel_size`; data/expert_parallel.csv).

Each of the n ranks runs attention and the dense layers for its own b sequences (data-parallel attention: every rank
holds the non-expert weights and its sequences' KV cache) and holds E/n whole experts of every MoE layer. Per MoE
layer each token is sent to the ranks of its k experts and their outputs are sent back: two all-to-alls (dispatch and
combine). One decode step of a rank:

    t_step = max(dense bytes + KV bytes) / (BW x eff), dense FLOPs / (peak x 0.60))           attention, dense layers
           + max(expert bytes / n / (BW x 0.76), f_max x b x 2 x routed active params / (peak x 0.60))
           + L_moe x (t_dispatch + t_combine) x f_max                                          all-to-alls
           + per-layer and per-step engine time (core/speed/roofline.py, core/speed/moe.py)

- Expert bytes: the experts of the rank that the step's n x b tokens touch (uniform count, core/speed/moe.py).
- f_max: the busiest rank's routed token-expert pairs over the mean b x k (busiest_rank_load_factor, with the router
  spread TensorRT-LLM measured with EPLB, which every engine here ships for wide EP). The step waits for that rank.
- All-to-all: a rank sends b x k copies of its tokens' hidden state (FP8 with one fp32 scale per 128 channels on
  dispatch, BF16 on combine, as DeepEP's low-latency kernels do); the share bound for other nodes crosses the NIC,
  the share for the other GPUs of its node NVLink, both at once, plus a fixed latency per call. That latency is
  calibrated on one row of DeepEP's published low-latency table (EP 32 dispatch, 155 us, H800 with a 400 Gb/s CX7 NIC,
  128 tokens a rank, hidden 7,168, top-8: deepseek-ai/DeepEP docs/legacy.md) and checked on its other 11 rows
  (tests/data/ep_all_to_all.csv).
- No overlap. Two-batch overlap (SGLang `--enable-two-batch-overlap`, DeepSeek's production system) runs one
  micro-batch's all-to-alls under the other's compute; it is opt-in and its gain depends on the balance of the two, so
  the step here adds them: the sum is an upper bound on the step, max(compute, communication) the lower bound
  (ep_decode_step reports both).
"""

from __future__ import annotations

from typing import NamedTuple

from core.catalog.accelerators import Accelerator
from core.layout import Layout
from core.memory.components import expert_parallel_weight_bytes, kv_bytes_per_sequence
from core.memory.evaluator import fit_capacity
from core.scenario import Scenario
from core.speed.attention import attention_flops_per_token
from core.speed.ep_step import (
    ALL_TO_ALL_LATENCY_S,
    COMBINE_BYTES_PER_CHANNEL,
    DISPATCH_BYTES_PER_CHANNEL,
    all_to_all_s,
    dispatch_and_combine_s,
    ep_parts,
)
from core.speed.moe import ROUTER_RANK_CV_EPLB
from core.speed.roofline import roofline

__all__ = ["ALL_TO_ALL_LATENCY_S", "COMBINE_BYTES_PER_CHANNEL", "DISPATCH_BYTES_PER_CHANNEL", "all_to_all_s"]

# DeepEP's low-latency buffers are sized for a rank's largest decode batch, and its README advises keeping that
# (num_max_dispatch_tokens_per_rank, "the actual batch size in the decoding engine") under 256
# (deepseek-ai/DeepEP docs/legacy.md, "Example use in inference decoding"); SGLang's run decodes 256 a rank.
MAX_TOKENS_PER_RANK = 256


class EpStep(NamedTuple):
    """One expert-parallel decode step of the busiest rank, in seconds, and its parts."""

    step_s: float  # compute + communication + engine time (no overlap)
    overlapped_step_s: float  # max(compute, communication) + engine time: perfect two-batch overlap
    dense_s: float
    experts_s: float
    all_to_all_s: float
    overhead_s: float
    busiest_rank_factor: float


def ep_decode_step(sc: Scenario, acc: Accelerator, ranks: int, batch_per_rank: int, context: float, router_cv: float = ROUTER_RANK_CV_EPLB) -> EpStep:
    """One decode step of `ranks` expert-parallel ranks with data-parallel attention, each decoding `batch_per_rank`
    sequences at `context` tokens of context (module docstring; the formula is core/speed/ep_step.py's)."""
    if not sc.architecture.is_moe:
        raise ValueError("expert parallelism needs a mixture-of-experts model")
    if ranks < 1 or batch_per_rank < 1:
        raise ValueError("ranks and batch per rank must be >= 1")
    p = ep_parts(roofline(sc, acc, Layout(1, 1, 1)), ranks, float(batch_per_rank), context, router_cv=router_cv)
    return EpStep(
        step_s=float(p.step_s),
        overlapped_step_s=float(p.overlapped_step_s),
        dense_s=float(p.dense_s),
        experts_s=float(p.experts_s),
        all_to_all_s=float(p.all_to_all_s),
        overhead_s=float(p.overhead_s),
        busiest_rank_factor=float(p.busiest_rank_factor),
    )


class EpCapacity(NamedTuple):
    """The largest decode batch per rank that fits, what it delivers per device decoding only (prefill on other
    devices, as in the disaggregated runs), and with each batch's prompts prefilled on the same devices (aggregated
    serving, as engines' peak-throughput tables measure it)."""

    batch_per_rank: int
    output_tokens_per_s_per_device: float  # decode only, no overlap (the step as modelled)
    overlapped_output_tokens_per_s_per_device: float  # decode only, perfect two-batch overlap: the upper bound
    step: EpStep
    prefill_s: float  # one rank's prefill of its batch's prompts
    served_output_tokens_per_s_per_device: float  # aggregated: b x output / (prefill + output x step)


def ep_prefill_s(sc: Scenario, acc: Accelerator, ranks: int, sequences: int, prompt: int) -> float:
    """One rank's prefill of `sequences` prompts of `prompt` tokens under wide EP: its tokens' FLOPs (the routed experts'
    work spread evenly: thousands of tokens balance out) at the compute roofline, the weights it reads once, and the
    two all-to-alls of every token per MoE layer."""
    roof = roofline(sc, acc, Layout(1, 1, 1))
    a = roof.arch
    tokens = float(sequences * prompt)
    total, embed, experts_all = roof.weight_parts
    weights = total - (embed + experts_all * (1.0 - 1.0 / ranks)) * a.param_scale  # total is scaled already
    expert_flops = tokens * 2.0 * roof.expert_active_params
    flops = tokens * (2.0 * a.active_params + attention_flops_per_token(a, prompt / 2.0)) - expert_flops
    a2a = dispatch_and_combine_s(roof, ranks, tokens)
    return max(flops / roof.flops_per_s + expert_flops / roof.expert_flops_per_s, weights / roof.bytes_per_s) + float(a2a) * a.moe_layers


def ep_decode_capacity(sc: Scenario, acc: Accelerator, ranks: int, prompt: int, output: int, max_batch_per_rank: int = MAX_TOKENS_PER_RANK) -> EpCapacity | None:
    """The largest batch per rank whose weights (every non-expert weight, 1/ranks of the experts) and KV cache of
    prompt + output tokens a sequence fit in the engine's share of `acc`'s memory, up to `max_batch_per_rank`, decoding
    at the average context prompt + output / 2; None when not even one sequence fits."""
    a = sc.architecture
    weights = expert_parallel_weight_bytes(a, sc.weights_format, ranks)
    room = fit_capacity(sc, float(acc.usable_memory_bytes)) - weights
    per_sequence = kv_bytes_per_sequence(a, sc.kv_cache_format, prompt + output)
    batch = min(max_batch_per_rank, int(room // per_sequence)) if room > 0 else 0
    if batch < 1:
        return None
    step = ep_decode_step(sc, acc, ranks, batch, prompt + output / 2.0)
    prefill = ep_prefill_s(sc, acc, ranks, batch, prompt)
    served = batch * output / (prefill + output * step.step_s)
    return EpCapacity(batch, batch / step.step_s, batch / step.overlapped_step_s, step, prefill, served)
