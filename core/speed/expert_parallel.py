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

from typing import Any, NamedTuple

import numpy as np

from core.catalog.accelerators import Accelerator
from core.layout import Layout
from core.memory.components import kv_bytes_per_sequence
from core.memory.estimate import fit_capacity
from core.scenario import Scenario
from core.speed.attention import attention_flops_per_token
from core.speed.comm import DEVICES_PER_NODE, collective_gbps, nic_gbps
from core.speed.moe import ROUTER_RANK_CV_EPLB, busiest_rank_load_factor, experts_untouched_fraction
from core.speed.roofline import roofline

# DeepEP's low-latency dispatch sends FP8 activations with one fp32 scale per 128 channels; combine sends BF16.
DISPATCH_BYTES_PER_CHANNEL = 1.0 + 4.0 / 128.0
COMBINE_BYTES_PER_CHANNEL = 2.0
# Fixed time of one low-latency all-to-all call, calibrated on DeepEP's EP 32 dispatch row (module docstring):
# 155 us less its bytes' time, 128 x 8 x 7,168 x (1 + 4/128) bytes x 24/32 off the node at 50 GB/s (113.6 us).
_DEEPEP_CAL_BYTES = 128 * 8 * 7168 * DISPATCH_BYTES_PER_CHANNEL
ALL_TO_ALL_LATENCY_S = 155e-6 - _DEEPEP_CAL_BYTES * (1.0 - 8.0 / 32.0) / 50e9
# DeepEP's low-latency buffers are sized for a rank's largest decode batch, and its README advises keeping that
# (num_max_dispatch_tokens_per_rank, "the actual batch size in the decoding engine") under 256
# (deepseek-ai/DeepEP docs/legacy.md, "Example use in inference decoding"); SGLang's run decodes 256 a rank.
MAX_TOKENS_PER_RANK = 256


def all_to_all_s(bytes_sent: Any, ranks: int, devices_per_node: int, nvlink_gbps: float, network_gbps: float) -> Any:
    """One expert-parallel all-to-all of a rank sending `bytes_sent` bytes (all its token copies, spread evenly over
    the `ranks` ranks): the share for other nodes over the NIC and the share for the other GPUs of its node over
    NVLink run at once; its own share stays local. 0 for one rank; `bytes_sent` may be an array."""
    if ranks <= 1:
        return 0.0 * bytes_sent
    in_node = min(devices_per_node, ranks)
    network = bytes_sent * (ranks - in_node) / ranks / (network_gbps * 1e9)
    nvlink = bytes_sent * (in_node - 1) / ranks / (nvlink_gbps * 1e9)
    return ALL_TO_ALL_LATENCY_S + np.maximum(network, nvlink)


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
    sequences at `context` tokens of context (module docstring)."""
    if not sc.architecture.is_moe:
        raise ValueError("expert parallelism needs a mixture-of-experts model")
    if ranks < 1 or batch_per_rank < 1:
        raise ValueError("ranks and batch per rank must be >= 1")
    roof = roofline(sc, acc, Layout(1, 1, 1))
    a = roof.arch
    total, embed, experts_all = roof.weight_parts
    b = float(batch_per_rank)
    k = a.experts_per_token
    # attention, dense layers, shared experts, head: every rank reads them for its own sequences
    dense_bytes = (total - embed - experts_all) * a.param_scale
    kv = b * kv_bytes_per_sequence(a, sc.kv_cache_format, context) * roof.kv_traffic
    dense_flops = b * (2.0 * (a.active_params - roof.expert_active_params) + attention_flops_per_token(a, context))
    dense_s = max((dense_bytes + kv) / roof.bytes_per_s, dense_flops / roof.flops_per_s)
    # this rank's experts: those the step's tokens touch, and the busiest rank's share of the routed pairs
    touched = 1.0 - float(experts_untouched_fraction(a, ranks * b))
    expert_bytes = experts_all * a.param_scale * touched / ranks
    factor = float(busiest_rank_load_factor(ranks, b * k, router_cv))
    expert_flops = factor * b * 2.0 * roof.expert_active_params
    experts_s = max(expert_bytes / roof.expert_bytes_per_s, expert_flops / roof.expert_flops_per_s)  # grouped GEMMs' rate (moe.py)
    # two all-to-alls per MoE layer, the busiest rank receiving f_max times the mean
    per_node = DEVICES_PER_NODE[acc.kind]
    nvlink = collective_gbps(acc, min(per_node, ranks)) if ranks > 1 else 1.0
    copies = b * k * a.hidden_size
    a2a = factor * (
        all_to_all_s(copies * DISPATCH_BYTES_PER_CHANNEL, ranks, per_node, nvlink, nic_gbps(acc))
        + all_to_all_s(copies * COMBINE_BYTES_PER_CHANNEL, ranks, per_node, nvlink, nic_gbps(acc))
    )
    a2a_s = float(a2a) * a.moe_layers
    overhead = roof.step_overhead_s
    compute = dense_s + experts_s
    return EpStep(
        step_s=compute + a2a_s + overhead,
        overlapped_step_s=max(compute, a2a_s) + overhead,
        dense_s=dense_s,
        experts_s=experts_s,
        all_to_all_s=a2a_s,
        overhead_s=overhead,
        busiest_rank_factor=factor,
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
    weights = (total - embed - experts_all * (1.0 - 1.0 / ranks)) * a.param_scale
    expert_flops = tokens * 2.0 * roof.expert_active_params
    flops = tokens * (2.0 * a.active_params + attention_flops_per_token(a, prompt / 2.0)) - expert_flops
    per_node = DEVICES_PER_NODE[acc.kind]
    nvlink = collective_gbps(acc, min(per_node, ranks)) if ranks > 1 else 1.0
    copies = tokens * a.experts_per_token * a.hidden_size
    a2a = all_to_all_s(copies * DISPATCH_BYTES_PER_CHANNEL, ranks, per_node, nvlink, nic_gbps(acc)) + all_to_all_s(
        copies * COMBINE_BYTES_PER_CHANNEL, ranks, per_node, nvlink, nic_gbps(acc)
    )
    return max(flops / roof.flops_per_s + expert_flops / roof.expert_flops_per_s, weights / roof.bytes_per_s) + float(a2a) * a.moe_layers


def ep_decode_capacity(sc: Scenario, acc: Accelerator, ranks: int, prompt: int, output: int, max_batch_per_rank: int = MAX_TOKENS_PER_RANK) -> EpCapacity | None:
    """The largest batch per rank whose weights (every non-expert weight, 1/ranks of the experts) and KV cache of
    prompt + output tokens a sequence fit in the engine's share of `acc`'s memory, up to `max_batch_per_rank`, decoding
    at the average context prompt + output / 2; None when not even one sequence fits."""
    roof = roofline(sc, acc, Layout(1, 1, 1))
    a = roof.arch
    total, _, experts_all = roof.weight_parts
    weights = (total - experts_all * (1.0 - 1.0 / ranks)) * a.param_scale
    room = fit_capacity(sc, float(acc.usable_memory_bytes)) - weights
    per_sequence = kv_bytes_per_sequence(a, sc.kv_cache_format, prompt + output)
    batch = min(max_batch_per_rank, int(room // per_sequence)) if room > 0 else 0
    if batch < 1:
        return None
    step = ep_decode_step(sc, acc, ranks, batch, prompt + output / 2.0)
    prefill = ep_prefill_s(sc, acc, ranks, batch, prompt)
    served = batch * output / (prefill + output * step.step_s)
    return EpCapacity(batch, batch / step.step_s, batch / step.overlapped_step_s, step, prefill, served)
