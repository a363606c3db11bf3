"""The host's system RAM bandwidth when the scenario leaves it unset (data/host_memory.csv, core/catalog/host_memory.py):
an accelerator's usual server, the share of it the devices rent; a desktop's for the rest. Worked by hand."""

from __future__ import annotations

import datetime as dt

import pytest

from core.catalog.accelerators import get_accelerator
from core.catalog.host_memory import DESKTOP_HOST_MEMORY_GBPS, host_memory_bandwidth_gbps, load_host_memory
from core.scenario import Scenario
from core.speed.offload import CPU_ADAM_BANDWIDTH_EFFICIENCY, cpu_step_bytes_per_device, offload_time
from core.speed.timing import training_time

# 70B full fine-tune, ZeRO-3 with the optimizer in CPU RAM: the CPU step moves the optimizer states and gradients
OFFLOADED = Scenario(
    model="llama-3.1-70b",
    mode="training",
    method="full",
    accelerator="h100-sxm",
    seq_len=4096,
    gradient_accumulation_steps=8,
    zero_stage=3,
    offload="optimizer",
    gradient_checkpointing=True,
    train_tokens=50e6,
)


def test_rows_are_sourced_and_their_bandwidth_is_channels_times_speed():
    rows = load_host_memory()
    assert rows["h100-sxm"].bandwidth_gbps == pytest.approx(614.4)  # DGX H100: 2 sockets x 8 ch x 8 B x 4800 MT/s
    assert rows["h200"].bandwidth_gbps == pytest.approx(614.4)  # DGX H200: the same CPU tray
    assert rows["a100-sxm-80gb"].bandwidth_gbps == pytest.approx(409.6)  # DGX A100: 2 x 8 ch x 8 B x 3200 MT/s
    assert DESKTOP_HOST_MEMORY_GBPS == pytest.approx(76.8)  # dual-channel DDR5-4800: 2 x 8 B x 4800 MT/s
    for r in rows.values():
        get_accelerator(r.accelerator)  # each row names a catalog accelerator
        assert r.source.startswith("DGX: https://") and r.as_of <= dt.date(2026, 12, 31)


@pytest.mark.parametrize(
    ("accelerator", "devices", "set_gbps", "want"),
    [
        ("h100-sxm", 1, None, 76.8),  # one GPU of a DGX H100 rents 1/8 of its 614.4 GB/s
        ("h100-sxm", 4, None, 307.2),
        ("h100-sxm", 8, None, 614.4),  # the whole server
        ("h100-sxm", 16, None, 614.4),  # two servers: each one's RAM serves its own 8 GPUs
        ("a100-sxm-40gb", 8, None, 409.6),
        ("rtx-4090", 1, None, 76.8),  # no server row: a desktop's
        ("h100-pcie", 2, None, 76.8),
        ("h100-sxm", 8, 200.0, 200.0),  # set: the scenario's, whatever the part
    ],
)
def test_unset_bandwidth_is_the_usual_hosts_share(accelerator, devices, set_gbps, want):
    sc = Scenario(model="llama-3.1-8b", accelerator=accelerator, host_memory_bandwidth_gbps=set_gbps)
    assert host_memory_bandwidth_gbps(sc, get_accelerator(accelerator), devices) == pytest.approx(want)


def test_offload_on_a_whole_dgx_h100_uses_its_ram_and_one_gpu_is_as_before():
    """8 H100s: the CPU step's per-device bandwidth is 614.4 / 8 = 76.8 GB/s (it was the desktop's 76.8 / 8 = 9.6), so
    the step is 8x shorter; one H100 (a slice of 614.4 / 8 = 76.8 GB/s) times as it did at the old default."""
    acc = get_accelerator("h100-sxm")
    eight = OFFLOADED.replace(data_parallel=8)
    tokens, compute_s = 50e6, 3600.0
    steps = tokens / (eight.batch_size * eight.seq_len * eight.gradient_accumulation_steps * 8)
    # by hand: (2 x optimizer states + 2 x gradients) / 8 devices over 76.8 GB/s each at CPU-Adam's efficiency; ~20 s a
    # step, far above the 0.35 s of copying the 17.6 GB of new parameters back over PCIe, so it is the step
    cpu_s = cpu_step_bytes_per_device(eight, eight.architecture, 8) / (76.8e9 * CPU_ADAM_BANDWIDTH_EFFICIENCY)
    got = offload_time(eight, eight.architecture, acc, 8, tokens, compute_s, 1.0)
    assert got.step_s == pytest.approx(steps * cpu_s, rel=1e-9) and cpu_s > 10.0
    assert got == offload_time(eight.replace(host_memory_bandwidth_gbps=614.4), eight.architecture, acc, 8, tokens, compute_s, 1.0)
    old = offload_time(eight.replace(host_memory_bandwidth_gbps=76.8), eight.architecture, acc, 8, tokens, compute_s, 1.0)
    assert old.step_s == pytest.approx(8 * got.step_s, rel=1e-9)
    assert training_time(eight, acc, 8).wall_hours < training_time(eight.replace(host_memory_bandwidth_gbps=76.8), acc, 8).wall_hours
    assert training_time(OFFLOADED, acc, 1).wall_hours == training_time(OFFLOADED.replace(host_memory_bandwidth_gbps=76.8), acc, 1).wall_hours


def test_a_link_without_rambw_leaves_it_unset_and_a_set_one_is_kept():
    """The sidebar's System RAM bandwidth (URL key rambw, a contract): 0 = unset (the accelerator's usual host); a
    link's 90 stays 90."""
    from app_pages.shared.fields import fields

    f = fields()["rambw"]
    assert f.to_scenario(f.default) is None and f.to_scenario(90.0) == 90.0 and f.parse("90") == 90.0 and f.parse("76.8") == 76.8
