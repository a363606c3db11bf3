"""The time ZeRO-Offload and ZeRO-Infinity add to a training step (issue #26 item 6, issue #27): the copies over the
host link and the optimizer step on the CPU, with what overlaps the GPU's work as DeepSpeed does by default.

Per optimizer step, on each device (Ren et al. 2021, "ZeRO-Offload", arXiv 2101.06840):
- gradients go to the CPU (2 bytes per trainable parameter in 16-bit training, Sec. 3.3 and 4.1), each as the backward
  pass makes it, so the copy hides under the backward pass (Sec. 4.1); DeepSpeed accumulates them in CPU memory, so
  with gradient accumulation every micro-batch's backward pass sends its gradients;
- the CPU runs the optimizer (DeepSpeed's CPU-Adam, Sec. 5.1) on the device's partition: memory-bandwidth bound, it
  reads the gradient and every optimizer state (fp32 master, momentum, variance) and writes the states and the new
  16-bit parameters back;
- the updated 16-bit parameters go back to the GPU, tile by tile while CPU-Adam works on the next tile (Sec. 5.1,
  Algorithm 1 line 15), so the step's tail is the longer of the CPU step and that copy; the GPU waits for both: the
  one-step delayed parameter update that would hide them under the next forward (DPU, Sec. 5.2) is off by default.
ZeRO partitions these over the data-parallel ranks (Sec. 4.2), so each device moves and updates 1/devices of the
trainable parameters; the devices of one host share its memory bandwidth.

ZeRO-Infinity's parameter offload (Rajbhandari et al. 2021, arXiv 2104.07857, Sec. 5-6) also streams every weight
from CPU memory for each pass (forward, backward, and the recomputed forward under checkpointing) of every
micro-batch, prefetched under the compute of that micro-batch: only what the compute does not cover is added.

A link moves data at PCIE_EFFICIENCY of its per-direction rate; both directions run at once (gradients down while
parameters stream up)."""

from __future__ import annotations

from typing import NamedTuple

from core.catalog.accelerators import Accelerator
from core.catalog.host_memory import host_memory_bandwidth_gbps
from core.layout import Layout
from core.memory.components import checkpointing, training_states
from core.memory.objective import micro_batch_tokens
from core.model.architecture import Architecture
from core.scenario import Scenario
from core.speed.comm import DEVICES_PER_NODE, backward_share

# Achieved fraction of a PCIe link's per-direction rate for large pinned copies: A100 (Gen4 x16) 25 of 31.5 GB/s,
# measured peak quoted in the BaM system paper (ZaidQureshi/bam issue #54, 2025-02-14). Checked on a P100 (Gen3 x16)
# bandwidthTest, 12.15 / 12.89 GB/s pinned H2D / D2H of 15.75 (mpicbg-scicomp/gearshifft PR #82) and an H100 (Gen5
# x16) nvbandwidth D2H copy, 52.8 of 63 GB/s (NVIDIA/nvbandwidth issue #24): tests/data/zero_offload_speeds.csv.
PCIE_EFFICIENCY = 0.79
# The host link of each module whose catalog `interconnect` is NVLink / Infinity Fabric (PCIe cards state theirs):
# GB/s per direction of a PCIe x16 link (Gen3 15.75, Gen4 31.5, Gen5 63) or of NVLink-C2C to a Grace CPU (450).
# V100 SXM2/SXM3: Gen3 x16 (NVIDIA DGX-1 / DGX-2 system architecture whitepapers); A100 SXM4: Gen4 x16 (DGX A100
# datasheet); H100 / H200 / H20 SXM5, B200 / B300 HGX: Gen5 x16 (DGX H100 / HGX B200 datasheets); GH200 / GB200 /
# GB300: NVLink-C2C 900 GB/s bidirectional (NVIDIA Grace Hopper / GB200 NVL72 datasheets); MI250X: Gen4 x16, MI300X
# and later OAM: Gen5 x16 (AMD Instinct datasheets); Quadro RTX 6000 / 8000: Gen3 x16 (NVIDIA datasheets).
HOST_LINK_GBPS = {
    "v100-16gb": 15.75,
    "v100-32gb": 15.75,
    "quadro-rtx-8000": 15.75,
    "quadro-rtx-6000": 15.75,
    "a100-sxm-40gb": 31.5,
    "a100-sxm-80gb": 31.5,
    "mi250x": 31.5,
    "h100-sxm": 63.0,
    "h100-nvl": 63.0,
    "h200": 63.0,
    "h20": 63.0,
    "b200": 63.0,
    "b300": 63.0,
    "mi300x": 63.0,
    "mi325x": 63.0,
    "mi350x": 63.0,
    "mi355x": 63.0,
    "gh200": 450.0,
    "gb200": 450.0,
    "gb300": 450.0,
}
# Parts with neither (TPU, Trainium, Gaudi hosts): a PCIe Gen4 x16 link, assumed.
ASSUMED_HOST_LINK_GBPS = 31.5
# Achieved fraction of the host's memory bandwidth for CPU-Adam's bytes (CPU_STEP_BYTES below). Calibrated on one
# row: DeepSpeed's CPU-Adam on an 11.6B GPT-2, 8.2 s per step (deepspeedai/DeepSpeed PR #735, the CPU-Adam author,
# 2021-02-08), on the DeepSpeed team's DGX-2 (the paper's machine: 2 x Xeon Platinum 8168, 6 channels of DDR4-2666
# each, 256 GB/s): 11.6e9 x 28 B / 8.2 s / 256 GB/s = 0.155. Well below a STREAM-like 70-80%: writes allocate
# cache lines (reads of what is written), the ranks of a node cross NUMA sockets, DeepSpeed casts the 16-bit
# gradients to fp32 before the step. Checked on GLM-4.5-Air on 4 H100 nodes and Qwen 72B on 4 A100 nodes
# (tests/data/zero_offload_speeds.csv).
CPU_ADAM_BANDWIDTH_EFFICIENCY = 0.155


class OffloadTime(NamedTuple):
    """Seconds an offloaded run adds, over the whole run, to the GPU's time (all devices together)."""

    seconds: float  # what the GPU waits for: the sum of the three below
    gradients_s: float  # gradient copies the backward passes do not cover
    step_s: float  # the CPU optimizer step and the parameter copy back (the longer of the two), every step
    stream_s: float  # ZeRO-Infinity's parameter streaming the compute does not cover
    host_link_gbps: float  # per direction, before PCIE_EFFICIENCY
    link_basis: str


NO_OFFLOAD = OffloadTime(0.0, 0.0, 0.0, 0.0, 0.0, "no offload")


def host_link(acc: Accelerator) -> tuple[float, str]:
    """(GB/s per direction, where it comes from) of the link between a device and its host's memory."""
    if acc.kind in ("apple", "unified"):
        return acc.memory_bandwidth_gbps, "unified memory: CPU and accelerator share it"
    if acc.id in HOST_LINK_GBPS:
        return HOST_LINK_GBPS[acc.id], "host link of the module (core/speed/offload.py HOST_LINK_GBPS)"
    if "pcie" in acc.interconnect.lower() and acc.interconnect_gbps:
        return acc.interconnect_gbps, f"{acc.interconnect} (data/accelerators.csv)"
    return ASSUMED_HOST_LINK_GBPS, "no host link in the catalog: PCIe Gen4 x16 assumed"


def cpu_step_bytes_per_device(sc: Scenario, arch: Architecture, devices: int) -> float:
    """Host-memory bytes the CPU optimizer moves per step for one device's partition: every optimizer state (with
    the fp32 master) read and written, the gradient read, the new 16-bit parameters written."""
    st = training_states(sc, arch)
    return (2.0 * st.optimizer + 2.0 * st.gradients) / devices


def offload_time(
    sc: Scenario,
    arch: Architecture,
    acc: Accelerator,
    devices: int,
    tokens: float,
    compute_s: float,
    flops_per_token: float,
    flash: bool = True,
    layout: Layout | None = None,
) -> OffloadTime:
    """The offload's time over a run of `tokens` whose GPU work takes `compute_s` on `devices` devices: the
    scenario's micro-batch and accumulation, on `layout` (default: the scenario's tensor and pipeline split, data
    parallel the rest)."""
    if sc.mode != "training" or sc.offload == "none":
        return NO_OFFLOAD
    link_gbps, basis = host_link(acc)
    link = link_gbps * 1e9 * PCIE_EFFICIENCY
    per_host = max(1, min(devices, DEVICES_PER_NODE.get(acc.kind, 8)))
    host_bw = host_memory_bandwidth_gbps(sc, acc, per_host) * 1e9 / per_host * CPU_ADAM_BANDWIDTH_EFFICIENCY
    dp = layout.data_parallel if layout is not None else max(1, devices // (sc.tensor_parallel * sc.pipeline_parallel))
    accumulation = sc.gradient_accumulation_steps
    steps = tokens / (micro_batch_tokens(sc) * accumulation * dp)
    micro_s = compute_s / (steps * accumulation)  # one micro-batch's GPU work on a device
    st = training_states(sc, arch)
    grads = st.gradients / devices  # the device's partition, 16-bit in mixed precision (fp32 in fp32)
    backward_s = micro_s * backward_share(sc, arch, flops_per_token, flash)
    gradients_s = steps * accumulation * max(0.0, grads / link - backward_s)
    cpu_s = cpu_step_bytes_per_device(sc, arch, devices) / host_bw
    params_back_s = grads / link  # the updated parameters, the gradients' size and dtype
    step_s = steps * max(cpu_s, params_back_s)
    stream_s = 0.0
    if sc.offload == "optimizer+params":
        passes = 3.0 if checkpointing(sc) else 2.0
        stream_s = steps * accumulation * max(0.0, passes * st.weights / devices / link - micro_s)
    return OffloadTime(gradients_s + step_s + stream_s, gradients_s, step_s, stream_s, link_gbps, basis)
