"""The pieces of one wide-EP step of the busiest rank (the formula of core/speed/expert_parallel.py's docstring), on
the roofline pieces of one device (`roof`: core/speed/roofline.py's `_Roof`, passed in so that this module imports no
roofline and the roofline can price an expert-parallel replica with it). `decodes` and `prefill_tokens` are per rank
and may be arrays; prefill tokens ride in the same forward pass as the decodes (chunked prefill), their FLOPs added
to each part, their token copies to the all-to-alls."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from core.memory.components import kv_bytes_per_sequence
from core.speed.attention import attention_flops_per_token
from core.speed.comm import DEVICES_PER_NODE, collective_gbps, nic_gbps
from core.speed.moe import ROUTER_RANK_CV_EPLB, busiest_rank_load_factor, experts_untouched_fraction

# DeepEP's low-latency dispatch sends FP8 activations with one fp32 scale per 128 channels; combine sends BF16.
DISPATCH_BYTES_PER_CHANNEL = 1.0 + 4.0 / 128.0
COMBINE_BYTES_PER_CHANNEL = 2.0
# Fixed time of one low-latency all-to-all call, calibrated on DeepEP's EP 32 dispatch row (core/speed/expert_parallel.py):
# 155 us less its bytes' time, 128 x 8 x 7,168 x (1 + 4/128) bytes x 24/32 off the node at 50 GB/s (113.6 us).
_DEEPEP_CAL_BYTES = 128 * 8 * 7168 * DISPATCH_BYTES_PER_CHANNEL
ALL_TO_ALL_LATENCY_S = 155e-6 - _DEEPEP_CAL_BYTES * (1.0 - 8.0 / 32.0) / 50e9


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


def dispatch_and_combine_s(roof: Any, ranks: int, tokens: Any) -> Any:
    """Both all-to-alls of one MoE layer for `tokens` tokens of a rank (each sent to its k experts' ranks and back)."""
    acc, a = roof.acc, roof.arch
    per_node = DEVICES_PER_NODE[acc.kind]
    nvlink = collective_gbps(acc, min(per_node, ranks)) if ranks > 1 else 1.0
    copies = tokens * a.experts_per_token * a.hidden_size
    return all_to_all_s(copies * DISPATCH_BYTES_PER_CHANNEL, ranks, per_node, nvlink, nic_gbps(acc)) + all_to_all_s(
        copies * COMBINE_BYTES_PER_CHANNEL, ranks, per_node, nvlink, nic_gbps(acc)
    )


class EpParts(NamedTuple):
    """One step of the busiest rank, in seconds (arrays where the inputs are): attention and dense layers, its
    experts, the all-to-alls, the engine's time, the busiest rank's load factor."""

    dense_s: Any
    experts_s: Any
    all_to_all_s: Any
    overhead_s: float
    busiest_rank_factor: Any
    bytes_read: Any  # per rank: non-expert weights, its sequences' KV cache, its touched experts
    compute_bound: Any  # whether the FLOPs, not the bytes, set the compute parts' time

    @property
    def step_s(self) -> Any:
        """No overlap: compute + communication + engine time (the upper bound)."""
        return self.dense_s + self.experts_s + self.all_to_all_s + self.overhead_s

    @property
    def overlapped_step_s(self) -> Any:
        """Perfect two-batch overlap: max(compute, communication) + engine time (the lower bound)."""
        return np.maximum(self.dense_s + self.experts_s, self.all_to_all_s) + self.overhead_s


def ep_parts(roof: Any, ranks: int, decodes: Any, context: float, prefill_tokens: Any = 0.0, prompt: float = 0.0, router_cv: float = ROUTER_RANK_CV_EPLB) -> EpParts:
    """One step of `ranks` expert-parallel ranks, each decoding `decodes` sequences at `context` tokens of context with
    `prefill_tokens` prompt tokens (of `prompt`-token prompts) alongside (module docstring)."""
    a = roof.arch
    total, embed, experts_all = roof.weight_parts
    d = np.asarray(decodes, dtype=np.float64)
    p = np.asarray(prefill_tokens, dtype=np.float64)
    tokens = np.maximum(d + p, 1e-9)
    k = a.experts_per_token
    # attention, dense layers, shared experts, head: every rank reads them for its own sequences
    dense_bytes = total - (embed + experts_all) * a.param_scale  # total is scaled already (_weight_parts)
    kv = d * kv_bytes_per_sequence(a, roof.sc.kv_cache_format, context) * roof.kv_traffic
    dense_per_token = 2.0 * (a.active_params - roof.expert_active_params)
    dense_flops = d * (dense_per_token + attention_flops_per_token(a, context))
    if np.any(p > 0):
        dense_flops = dense_flops + p * (dense_per_token + attention_flops_per_token(a, prompt / 2.0))
    # each decoding sequence's own time per layer (data/engine_timing.csv decode_sequence_head_layer_s x its heads), on its rank
    dense_s = np.maximum((dense_bytes + kv) / roof.bytes_per_s, dense_flops / roof.flops_per_s) + d * roof.decode_sequence_s
    # this rank's experts: those the step's tokens touch, and the busiest rank's share of the routed pairs
    touched = 1.0 - experts_untouched_fraction(a, ranks * tokens)
    expert_bytes = experts_all * a.param_scale * touched / ranks
    factor = busiest_rank_load_factor(ranks, tokens * k, router_cv)
    expert_flops = factor * tokens * 2.0 * roof.expert_active_params
    experts_s = np.maximum(expert_bytes / roof.expert_bytes_per_s, expert_flops / roof.expert_flops_per_s)  # grouped GEMMs' rate (moe.py)
    # two all-to-alls per MoE layer, the busiest rank receiving f_max times the mean
    a2a_s = factor * dispatch_and_combine_s(roof, ranks, tokens) * a.moe_layers
    t_mem = (dense_bytes + kv) / roof.bytes_per_s + expert_bytes / roof.expert_bytes_per_s
    t_cmp = dense_flops / roof.flops_per_s + expert_flops / roof.expert_flops_per_s
    return EpParts(dense_s, experts_s, a2a_s, roof.step_overhead_s, factor, dense_bytes + kv + expert_bytes, t_cmp > t_mem)
