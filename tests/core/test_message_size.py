"""Collective time against message size (core/speed/comm.py ring_s): NCCL's own protocol model, checked (not fitted)
on a published all_reduce_perf sweep inside one node, and where it is used (training's in-node collectives; not
serving's, which run on the engines' own kernels, nor collectives across nodes)."""

import pytest

from core.catalog.accelerators import get_accelerator
from core.scenario import Scenario
from core.speed.comm import allreduce_s, collective_gbps, decode_tp_s, nccl_link, ring_s

# kvcache-ai/Mooncake PR #3484 (github.com/kvcache-ai/Mooncake/pull/3484, as of 2026-11-26): its NCCL baseline,
# nccl-tests all_reduce_perf, float sum, out-of-place, one node of 8 NVIDIA H20 (NVLink 4, 450 GB/s per direction,
# the host the PR prints for its runs): message bytes -> time in us. NCCL's default algorithm; a busbw of 358 GB/s at
# 1 GB is a ring's (NVLink SHARP reaches ~480, nccl-tests #212).
SWEEP_8X_NVLINK4_US = {
    32768: 18.66,
    131072: 19.25,
    524288: 20.39,
    1048576: 27.76,
    2097152: 40.66,
    4194304: 53.24,
    8388608: 81.16,
    16777216: 121.33,
    33554432: 195.40,
    134217728: 700.25,
    268435456: 1366.17,
    1073741824: 5252.64,
}


def _model_us(message_bytes: int) -> float:
    h20 = get_accelerator("h20")
    return ring_s(message_bytes, 8, collective_gbps(h20, 8), nccl_link(h20, 8)) * 1e6


@pytest.mark.parametrize(("message_bytes", "published_us"), SWEEP_8X_NVLINK4_US.items())
def test_nccl_protocol_model_follows_the_published_sweep(message_bytes, published_us):
    """Within 20% at every size (10% from 4 MB), where a fixed 10 us + plateau is 3-51% fast."""
    tolerance = 0.10 if message_bytes >= 4 * 2**20 else 0.20
    assert _model_us(message_bytes) == pytest.approx(published_us, rel=tolerance)


def test_the_fixed_latency_model_was_fast_on_medium_messages():
    """What the change fixes: 10 us + plateau is 26-51% fast from 1 to 16 MB, the sizes of tensor-parallel and bucketed
    data-parallel all-reduces; the protocol model is closer at every size of the sweep."""
    for size, published in SWEEP_8X_NVLINK4_US.items():
        old = allreduce_s(size, 8, 370) * 1e6
        assert abs(_model_us(size) / published - 1) < abs(old / published - 1), size
        if 2**20 <= size <= 16 * 2**20:
            assert old / published - 1 < -0.25, size


def test_protocols_by_size_and_the_plateau():
    # a tiny message pays LL's latency: 6.6 us + 14 steps x 0.6 us = 15 us on 8 NVLink GPUs, 7.8 us on 2
    assert ring_s(8, 8, 370, "nvlink") == pytest.approx(15.0e-6, rel=1e-3)
    assert ring_s(8, 2, 370, "nvlink") == pytest.approx(7.8e-6, rel=1e-3)
    # a 1 GiB one runs at Simple: 8.4 + 14 x 3.4 = 56 us + the plateau
    assert ring_s(2**30, 8, 370, "nvlink") == pytest.approx(56e-6 + 1.75 * 2**30 / 370e9)
    # bandwidth-bound sizes approach the plateau; a reduce-scatter has half the steps and bytes (8.4 + 7 x 3.4 = 32.2 us)
    assert ring_s(2**30, 8, 370, "nvlink") / allreduce_s(2**30, 8, 370) - 1 < 0.01
    assert ring_s(2**30, 8, 370, "nvlink", all_reduce=False) == pytest.approx(32.2e-6 + 0.875 * 2**30 / 370e9)
    # PCIe rings pay more per step (5.7 us Simple); across nodes and off NCCL, the fixed latency stays
    assert ring_s(2**30, 8, 24, "pci") == pytest.approx((8.4 + 14 * 5.7) * 1e-6 + 1.75 * 2**30 / 24e9)
    assert ring_s(2**20, 16, 100, None) == allreduce_s(2**20, 16, 100) and ring_s(1, 1, 100, "nvlink") == 0.0


def test_which_collectives_use_it():
    h100 = get_accelerator("h100-sxm")
    assert nccl_link(h100, 8) == "nvlink" and nccl_link(h100, 16) is None  # across nodes: not checked, unchanged
    assert nccl_link(get_accelerator("rtx-4090"), 2) == "pci" and nccl_link(get_accelerator("a100-pcie-80gb"), 2) == "pci"
    assert nccl_link(get_accelerator("h100-nvl"), 2) == "nvlink"  # a bridge is NVLink to NCCL's topology
    assert nccl_link(get_accelerator("mi300x"), 8) is None and nccl_link(get_accelerator("tpu-v5e"), 8) is None
    # serving keeps the engines' own all-reduce kernels (fixed latency + plateau) at every size: a 128 MiB prefill chunk
    a = Scenario(model="llama-3.1-70b", mode="inference", accelerator="h100-sxm").architecture
    for tokens in (64.0, 8192.0):
        assert decode_tp_s(a, h100, 8, 1, tokens) == pytest.approx(a.num_layers * 2 * allreduce_s(tokens * a.hidden_size * 2, 8, 370))
