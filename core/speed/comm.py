"""A simple communication cost for tensor, pipeline and data parallelism.

- Ring all-reduce: each of r ranks sends and receives 2(r-1)/r of the message
  (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for
  clusters of workstations"; NCCL's "bus bandwidth" uses the same factor),
  plus a fixed latency per collective. The bandwidth is what NCCL/RCCL
  achieve, not the line rate: each interconnect's published bus bandwidth over
  its line rate (data/collective_bandwidth.csv, core/catalog/
  collective_bandwidth.py), e.g. 370 of 450 GB/s on H100 NVLink, 232 of 300
  on A100, 96% of an InfiniBand NIC; collective_gbps below.
- Tensor parallelism (Shoeybi et al. 2019, Megatron-LM, arXiv 1909.08053,
  Sec. 3): two all-reduces of the b x s x h activations per layer in the
  forward pass, two in the backward pass; recomputation repeats the forward
  pair. Sequence parallelism swaps each for a reduce-scatter + all-gather of
  the same volume (Korthikanti et al. 2022, Sec. 4.2.2). On the critical path.
- Pipeline parallelism: with m micro-batches per step and p stages the 1F1B
  schedule idles (p-1)/m of the ideal step (Narayanan et al. 2021,
  arXiv 2104.04473, Sec. 2.2.1).
- Data parallelism: one all-reduce of the gradients per step, overlapped with
  the backward pass of the last micro-batch (PyTorch DDP bucketing, Li et al.
  2020, "PyTorch Distributed", VLDB); ZeRO-3 reduce-scatters the gradients of
  every micro-batch and all-gathers the weights for every pass, each pass's
  gathers prefetched under that pass's own compute: 1.5x the bytes for a full
  fine-tune at one micro-batch a step (Rajbhandari et al. 2019, arXiv
  1910.02054, Sec. 7.2).

- Interruptions (failures, restarts, the work redone since the last
  checkpoint): a share of the wall time that grows with the devices a run
  holds (interruption_loss_fraction below, from the Llama 3 Herd paper's
  counts). Folded into overhead_fraction, so every bill pays it; negligible
  below a few hundred devices.

The training time it is added to (core/speed/timing.py) is fitted on single-GPU
steps and checked on single-node FSDP runs (LLM Foundry, 8 GPUs, where ZeRO-3's
traffic hides under compute, as here); at cluster scale this model supplies the
rest: Llama 3.1 405B at its published layout (TP 8, PP 16, DP 128) comes out at
45% effective MFU against the Herd paper's 41% (tests/core/test_timing.py), and its
GPU-hours with interruptions 10.5% under the model card's (docs/CLUSTER.md).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from core.catalog.accelerators import Accelerator
from core.catalog.collective_bandwidth import link_fraction, network_fraction
from core.layout import Layout
from core.memory.components import checkpointing, full_state_bytes, lora_params
from core.memory.objective import reference_forward_passes, sequences_per_example
from core.memory.stacks import STACKS
from core.model.architecture import Architecture
from core.scenario import Scenario
from core.speed.attention import attention_flops_per_token, flash_attention

_OUT = ConfigDict(frozen=True)

# Latency of one small collective where NCCL's protocol model (below) is not used: serving engines' own all-reduce
# kernels, which measure 7.2-7.6 us for 2-32 KB messages at TP 4 (sgl-project/sglang PR #6619), and collectives across
# nodes (NCCL's own model predicts about 26 us for a 4-8 KB all-reduce on a multi-node H100 cluster, NVIDIA/nccl issue
# #1453 debug log, so this is low there). No serving calibration absorbed it: the engine overheads
# (core/memory/engines.py) are fitted on one-GPU rows. Inside a node NCCL's LL protocol costs 6.6 us + 0.6 us per ring
# step (7.8 us at 2 GPUs, 15 us at 8; ring_s).
ALLREDUCE_LATENCY_S = 10e-6
# --- Message size: NCCL's protocols -------------------------------------------------------------------------------
# A ring collective reaches its plateau bus bandwidth only for large messages: NCCL picks, per message, the protocol
# its cost model predicts fastest, each a latency (a base plus one per ring step: 2(n-1) steps for an all-reduce, n-1
# for a reduce-scatter or all-gather) and a share of the bus bandwidth: LL (8-byte flag+data words) half of it, LL128
# 120/128 (0.92), Simple all of it. The constants are NCCL's own (NVIDIA/nccl src/graph/tuning.cc @5067397,
# ncclTunerConstantsDefaults: baseLatencies Ring 6.6/14.0/8.4 us, hwLatencies Ring NVLink 0.6/1.9/3.4 us and PCI
# 1.0/2.5/5.7 us per step; the LL and LL128 refinements of busBw). Checked, not fitted, against a published in-node
# sweep (nccl-tests all_reduce_perf on 8 NVLink 4 GPUs, kvcache-ai/Mooncake PR #3484: tests/core/test_message_size.py):
# within 18% from 32 KB to 1 GB (10% from 4 MB) where a fixed 10 us + plateau was 3-51% fast (46% at 1 MB, 26% at 16 MB, 8% at
# 128 MB). Used for NCCL collectives inside one node of NVIDIA GPUs: training's tensor-parallel all-reduces and
# in-node data-parallel collectives (Megatron-LM, DeepSpeed and FSDP call NCCL). Not for serving: engines reduce
# tensor-parallel activations with their own one-kernel all-reduce over NVLink peer memory (vLLM's CustomAllreduce up
# to 8 MiB, max_size=8192 * 1024, then NCCL; TensorRT-LLM and SGLang choose their own), measured at 7.2-7.6 us for
# 2-32 KB (sglang PR #6619); no sweep of those kernels at prefill sizes is checked here, so decode_tp_s keeps
# ALLREDUCE_LATENCY_S + plateau. Across nodes NCCL switches to trees and its network latencies depend on the fabric;
# no size sweep is checked there either, so a collective across nodes keeps ALLREDUCE_LATENCY_S + plateau. NCCL's cap
# on LL's bandwidth (llMaxBws, 141 GB/s on Hopper) is left out: it matters below about 4 MB only, where the latency
# dominates.
NCCL_RING_BASE_LATENCY_US = {"ll": 6.6, "ll128": 14.0, "simple": 8.4}
NCCL_RING_STEP_LATENCY_US = {"nvlink": {"ll": 0.6, "ll128": 1.9, "simple": 3.4}, "pci": {"ll": 1.0, "ll128": 2.5, "simple": 5.7}}
NCCL_PROTOCOL_BANDWIDTH_SHARE = {"ll": 0.5, "ll128": 0.92, "simple": 1.0}


# Network bandwidth per device between nodes, GB/s per direction, where the part's row in data/accelerators.csv has
# no scale_out_gbps_per_device (a part's own reference node design wins: DGX H100/H200/B200 400 Gb/s = 50 GB/s per
# GPU, DGX B300 800 Gb/s, MI300X platforms 400 Gb/s; see nic_gbps). GPUs: one 200 Gb/s HDR InfiniBand port per GPU
# in the DGX A100 reference design (NVIDIA DGX A100 datasheet: 8x single-port ConnectX-6 200 Gb/s; Llama 2's
# clusters: 200 Gbps end-points), kept for GPUs with no published node design (PCIe cloud instances share fewer
# NICs, so this is generous for them). TPUs: 50 Gb/s of data-center network
# per chip between slices (Google TPU v5p documentation, as noted in
# data/accelerators.csv). Trainium: 800 Gb/s EFA per 16-chip trn1.32xlarge
# (AWS Trn1 page). A Mac: 10 Gb Ethernet. A ring all-reduce across nodes runs
# one ring per NIC, so a rank's traffic moves at (devices per node x this),
# capped by the in-node link. Hardware of your own ("custom"): boxes joined by 10 Gb Ethernet.
# Groq LPUs: the same chip-to-chip links run between GroqNodes (no switches): 14 GB/s per link and direction (Linley
# Group, 2020). Cerebras: a CS-3 talks to the others over its system I/O, taken as the CS-2's 12 x 100 GbE = 150 GB/s.
INTER_NODE_GBPS = {"gpu": 25.0, "tpu": 6.25, "npu": 6.25, "apple": 1.25, "unified": 1.25, "custom": 1.25, "lpu": 14.0, "wafer": 150.0}
# Devices sharing the fast interconnect: an 8-GPU HGX/DGX baseboard (AWS p4d/p5,
# GCP a3, Azure ND: 8 GPUs), 16 Trainium chips in trn1.32xlarge, a 256-chip
# TPU v5e/v6e pod over ICI (the smallest pod in data/accelerators.csv), one Mac or unified-memory box
# (10 Gb Ethernet between them), up to 8 cards of your own in one box over PCIe.
# 8 GroqCards per GroqNode (Linley Group, 2020); one wafer per Cerebras CS-3.
DEVICES_PER_NODE = {"gpu": 8, "npu": 16, "tpu": 256, "apple": 1, "unified": 1, "custom": 8, "lpu": 8, "wafer": 1}
# 1F1B needs m >> p micro-batches; we assume m = 4p (bubble (p-1)/4p < 25%).
MICROBATCHES_PER_STAGE = 4


# --- Cluster-scale losses: interruptions -------------------------------------------------------------------------
# Dubey et al. 2024, "The Llama 3 Herd of Models" (arXiv 2407.21783), Sec. 3.3.4 "Reliability and Operational
# Challenges": in a 54-day snapshot of Llama 3 405B pre-training on up to 16,384 H100s there were 466 job
# interruptions (47 planned: firmware, configuration, dataset updates; 419 unexpected, 78% hardware), and the run
# kept "higher than 90% effective training time". Interruptions arrive at a rate per device-hour (each device can
# fail), and each costs the restart plus the work redone since the last checkpoint, whatever the run's size:
# the rate is 466 / (54 x 24 h x 16,384) and the hours lost per interruption (1 - 0.90) x 54 x 24 h / 466 = 0.28 h.
# Both from the one published run (16,384 GPUs at most, so the rate is a lower bound where fewer were used); applied
# to every device kind (no other cluster publishes its counts).
INTERRUPTIONS_PER_DEVICE_HOUR = 466 / (54 * 24 * 16384)
HOURS_LOST_PER_INTERRUPTION = (1.0 - 0.90) * 54 * 24 / 466
# At a share of wall time this large the run spends as long restarting as training: a run that big checkpoints more
# often than Llama 3 did, so the linear model stops there.
MAX_INTERRUPTION_LOSS = 0.5


def interruption_loss_fraction(devices: int) -> float:
    """Share of a run's wall time lost to interruptions on `devices` devices: interruptions per hour (the rate per
    device-hour x devices) x hours lost each. 10% at Llama 3's 16,384 GPUs, 1.3% at 2,048, 0.005% on one node."""
    return min(MAX_INTERRUPTION_LOSS, INTERRUPTIONS_PER_DEVICE_HOUR * max(devices, 0) * HOURS_LOST_PER_INTERRUPTION)


def interruption_overhead(devices: int) -> float:
    """Wall time added to the uninterrupted time, as a fraction of it: lost / (1 - lost)."""
    lost = interruption_loss_fraction(devices)
    return lost / (1.0 - lost)


def nic_gbps(acc: Accelerator) -> float:
    """Network bandwidth (GB/s per direction) one device has to other nodes: its catalog row's
    scale_out_gbps_per_device (the reference node design's NICs per device), else its kind's INTER_NODE_GBPS."""
    return acc.scale_out_gbps_per_device or INTER_NODE_GBPS[acc.kind]


def link_gbps(acc: Accelerator, group_size: int) -> float:
    """Per-direction line rate (GB/s) of the links a ring over `group_size` devices runs on, per rank: the in-node
    interconnect, or across nodes the node's NICs (one ring per NIC) capped by it. What collectives achieve on it:
    collective_gbps."""
    per_node = DEVICES_PER_NODE[acc.kind]
    if group_size <= per_node and acc.interconnect_gbps:
        return acc.interconnect_gbps
    across_nodes = per_node * nic_gbps(acc)
    return min(across_nodes, acc.interconnect_gbps or across_nodes)


def collective_gbps(acc: Accelerator, group_size: int) -> float:
    """Bus bandwidth (GB/s per rank and direction) a ring collective over `group_size` devices achieves: each link's
    line rate times the share NCCL/RCCL reach on it (data/collective_bandwidth.csv), in-node for the in-node part and
    the NICs' for the part across nodes, whichever is slower. Never above link_gbps."""
    per_node = DEVICES_PER_NODE[acc.kind]
    in_node = acc.interconnect_gbps * link_fraction(acc.interconnect, min(group_size, per_node)) if acc.interconnect_gbps else None
    if group_size <= per_node and in_node:
        return in_node
    across_nodes = per_node * nic_gbps(acc) * network_fraction(group_size)
    return min(across_nodes, in_node or across_nodes)


def allreduce_s(message_bytes: float, ranks: int, gbps: float) -> float:
    """Ring all-reduce time of one message over `ranks` ranks: a fixed latency plus the plateau bandwidth (engines'
    own kernels, and collectives across nodes)."""
    if ranks <= 1:
        return 0.0
    return ALLREDUCE_LATENCY_S + 2.0 * (ranks - 1) / ranks * message_bytes / (gbps * 1e9)


def nccl_link(acc: Accelerator, group_size: int) -> str | None:
    """The link NCCL's cost model times a ring over `group_size` devices on: 'nvlink' or 'pci' inside one node of
    NVIDIA GPUs (an NVLink bridge counts as NVLink, as NCCL's topology does), None elsewhere (across nodes, or no NCCL)."""
    if acc.kind != "gpu" or acc.vendor != "nvidia" or group_size > DEVICES_PER_NODE[acc.kind]:
        return None
    return "nvlink" if "NVLink" in acc.interconnect.split("(")[0] else "pci"


def ring_s(message_bytes: float, ranks: int, gbps: float, link: str | None, *, all_reduce: bool = True) -> float:
    """Time of one ring all-reduce (or, all_reduce=False, a reduce-scatter or all-gather: half the steps and bytes) of
    `message_bytes` over `ranks` ranks at plateau bus bandwidth `gbps`. On a link NCCL's cost model covers: its fastest
    protocol for the message's size (NCCL_RING_*); elsewhere ALLREDUCE_LATENCY_S + the plateau."""
    if ranks <= 1:
        return 0.0
    steps = (2 if all_reduce else 1) * (ranks - 1)
    bus_bytes = steps / ranks * message_bytes
    if link is None:
        return ALLREDUCE_LATENCY_S + bus_bytes / (gbps * 1e9)
    step_us = NCCL_RING_STEP_LATENCY_US[link]
    return min((NCCL_RING_BASE_LATENCY_US[p] + steps * step_us[p]) * 1e-6 + bus_bytes / (share * gbps * 1e9) for p, share in NCCL_PROTOCOL_BANDWIDTH_SHARE.items())


def tp_allreduces_per_layer(training: bool, recompute: bool) -> int:
    if not training:
        return 2
    return 6 if recompute else 4


class TrainingComm(BaseModel):
    model_config = _OUT
    microbatches_per_step: int
    compute_s_per_step: float  # ideal: m micro-batches at the MFU rate
    tensor_parallel_s_per_step: float
    pipeline_bubble_fraction: float  # (p-1)/m of the ideal step
    data_parallel_s_per_step: float  # the gradient all-reduce (ZeRO-3: a reduce-scatter every micro-batch)
    data_parallel_exposed_s_per_step: float  # of it and of ZeRO-3's weight gathers, what compute does not hide
    step_s: float
    interruption_loss_fraction: float = 0.0  # share of the wall time lost to failures and restarts (all devices)
    overhead_fraction: float  # wall time per step (step_s, with interruptions) / compute_s_per_step - 1


def training_comm(
    sc: Scenario,
    arch: Architecture,
    acc: Accelerator,
    layout: Layout,
    flops_per_token: float,
    achieved_tflops: float,
    *,
    batch: int | None = None,
    accumulation: int | None = None,
) -> TrainingComm:
    """Per optimizer step of one data-parallel replica. `achieved_tflops` is
    peak x MFU of one device. A step runs `accumulation` micro-batches of
    `batch` sequences (default: the scenario's) before the gradient all-reduce,
    at least 4 per pipeline stage when pipelined; only the last micro-batch's
    backward pass hides that all-reduce."""
    c = comm_step(sc, arch, acc, layout, flops_per_token, achieved_tflops, batch=batch, accumulation=accumulation)
    return TrainingComm.model_construct(
        microbatches_per_step=c.microbatches,
        compute_s_per_step=c.ideal_s,
        tensor_parallel_s_per_step=c.tensor_parallel_s,
        pipeline_bubble_fraction=c.bubble,
        data_parallel_s_per_step=c.data_parallel_s,
        data_parallel_exposed_s_per_step=c.exposed_s,
        step_s=c.step_s,
        interruption_loss_fraction=interruption_loss_fraction(c.devices),
        overhead_fraction=c.overhead_fraction,
    )


def comm_step(
    sc: Scenario,
    arch: Architecture,
    acc: Accelerator,
    layout: Layout,
    flops_per_token: float,
    achieved_tflops: float,
    *,
    batch: int | None = None,
    accumulation: int | None = None,
) -> _CommStep:
    """training_comm's formulas (its docstring), as plain numbers."""
    dp, tp, pp = layout
    act_bytes = 4 if sc.precision == "fp32" else 2
    tokens_mb = (batch or sc.batch_size) * sequences_per_example(sc) * sc.seq_len  # DPO: two sequences an example
    m = max(accumulation or sc.gradient_accumulation_steps, MICROBATCHES_PER_STAGE * pp if pp > 1 else 1)
    stage_compute = flops_per_token * tokens_mb / (tp * pp) / (achieved_tflops * 1e12)
    per_layer = tp_allreduces_per_layer(True, checkpointing(sc))
    tp_msg = tokens_mb * arch.hidden_size * act_bytes
    stage_tp = arch.num_layers / pp * per_layer * ring_s(tp_msg, tp, collective_gbps(acc, tp), nccl_link(acc, tp))
    bubble = (pp - 1) / m
    # Every parameter (all experts of an MoE) has a gradient, in the dtype the memory counts it in (components'
    # byte table: fp32 under autocast and in Megatron's bf16, 16-bit beside a master copy); LoRA only the adapters
    # (fp32 in PEFT).
    trainable = arch.total_params if sc.method == "full" else lora_params(arch, sc.lora_rank, sc.lora_targets)
    grad_bytes = (full_state_bytes(sc).grad if sc.method == "full" else 4) * trainable / (tp * pp)
    link = collective_gbps(acc, dp * tp * pp)
    nccl = nccl_link(acc, dp * tp * pp)
    # The backward pass's share of a micro-batch's compute (a recomputed forward runs inside it): what hides the
    # gradients' collectives (backward_share below).
    backward = backward_share(sc, arch, flops_per_token, flash_attention(acc))
    if sc.zero_stage == 3 and dp > 1:
        # ZeRO-3 / FSDP: every 16-bit weight (the frozen base of LoRA too) is all-gathered before each forward and
        # backward pass of every micro-batch, and the gradients are reduce-scattered (half an all-reduce's volume) as the
        # backward pass produces them: at one micro-batch a step and without recomputation, 1.5x the bytes of plain data
        # parallelism (Rajbhandari et al. 2019, Sec. 7.2.3). The weights are freed after each pass (FSDP's
        # reshard_after_forward, ZeRO-3's release), so a pass's gathers are prefetched under that pass's own compute
        # only (layer i+1's while layer i computes), and the backward's link carries its gathers and the reduce-scatter
        # at once. A recomputed forward: FSDP unshards once for it and the backward together (its pre-backward hook;
        # torch.distributed.fsdp FSDP2 _pre_forward returns early under activation checkpointing), DeepSpeed's ZeRO-3
        # gathers again for it (STACKS zero3_regathers_for_recompute), under its own forward's share of the compute.
        rs_s = ring_s(grad_bytes, dp, link, nccl, all_reduce=False)
        gather_s = ring_s(act_bytes * arch.total_params / (tp * pp), dp, link, nccl, all_reduce=False)
        # DPO's reference forward gathers its own weights (a full fine-tune's sharded copy, or LoRA's base again) under
        # its own compute
        reference = reference_share(sc, arch, flops_per_token, flash_attention(acc))
        forward = 1.0 - backward - reference  # the first forward's share; a recomputed forward's is the same
        regather = 1.0 if checkpointing(sc) and STACKS[sc.training_stack].zero3_regathers_for_recompute else 0.0
        exposed = m * (
            (1.0 + regather) * max(0.0, gather_s - forward * stage_compute)  # the forward, and the recomputed one's regather
            + max(0.0, gather_s + rs_s - (backward - regather * forward) * stage_compute)
            + reference_forward_passes(sc) * max(0.0, gather_s - reference * stage_compute)
        )
        dp_s = m * rs_s
    else:
        dp_s = ring_s(grad_bytes, dp, link, nccl)
        # the last micro-batch's backward pass overlaps the gradient all-reduce (DDP's buckets)
        exposed = max(0.0, dp_s - backward * stage_compute)
    ideal = m * stage_compute
    step = (m + pp - 1) * (stage_compute + stage_tp) + exposed
    return _CommStep(m, ideal, m * stage_tp, bubble, dp_s, exposed, step, dp * tp * pp)


class _CommStep(NamedTuple):
    """training_comm's figures before they are written out (the planner reads the overhead alone)."""

    microbatches: int
    ideal_s: float
    tensor_parallel_s: float
    bubble: float
    data_parallel_s: float
    exposed_s: float
    step_s: float
    devices: int

    @property
    def overhead_fraction(self) -> float:
        return self.step_s * (1.0 + interruption_overhead(self.devices)) / self.ideal_s - 1.0 if self.ideal_s > 0 else 0.0


def backward_share(sc: Scenario, arch: Architecture, flops_per_token: float, flash: bool) -> float:
    """The backward pass's share of a step's FLOPs (the forward: 2 per parameter and adapter parameter and the
    attention's forward, causal half with FlashAttention; a recomputed forward counts as backward: it runs inside
    the backward pass)."""
    adapters = 0.0 if sc.method == "full" else float(lora_params(arch, sc.lora_rank, sc.lora_targets))
    forward = 2.0 * (arch.active_params + adapters) + attention_flops_per_token(arch, sc.seq_len / 2.0 if flash else float(sc.seq_len))
    forward += reference_share(sc, arch, 1.0, flash)  # DPO's reference forward is a forward too
    return max(0.0, 1.0 - forward / flops_per_token) if flops_per_token > 0 else 0.0


def reference_share(sc: Scenario, arch: Architecture, flops_per_token: float, flash: bool) -> float:
    """DPO's reference forward's share of a step's FLOPs (the base without adapters; core/memory/objective.py), 0 else."""
    passes = reference_forward_passes(sc)
    if not passes or flops_per_token <= 0:
        return 0.0
    return passes * (2.0 * arch.active_params + attention_flops_per_token(arch, sc.seq_len / 2.0 if flash else float(sc.seq_len))) / flops_per_token


def decode_tp_s(arch: Architecture, acc: Accelerator, tp: int, pp: int, tokens: float) -> float:
    """Tensor-parallel all-reduces of one forward pass over `tokens` tokens, per
    pipeline stage (2 per layer, messages of tokens x hidden x 2 bytes)."""
    if tp <= 1:
        return 0.0
    return tp_allreduces_s(arch, collective_gbps(acc, tp), tp, pp, tokens)


def tp_allreduces_s(arch: Architecture, gbps: Any, tp: int, pp: int, tokens: Any) -> Any:
    """decode_tp_s at a collective bandwidth of `gbps` (GB/s; an array of several parts' may broadcast with `tokens`)."""
    if tp <= 1:
        return 0.0
    msg = tokens * arch.hidden_size * 2.0
    # the engines' own all-reduce kernels, not NCCL's protocols: see "Message size" above
    return math.ceil(arch.num_layers / pp) * tp_allreduces_per_layer(False, False) * allreduce_s(msg, tp, gbps)
