"""The host's system RAM bandwidth when the scenario leaves it unset (data/host_memory.csv, core/catalog/host_memory.py):
an accelerator's usual server, the share of it the devices rent; a desktop's for the rest. Worked by hand."""

from __future__ import annotations

import datetime as dt

import pytest

from core.catalog.accelerators import CatalogError, get_accelerator, read_catalog_rows
from core.catalog.host_memory import DESKTOP_HOST_MEMORY_GBPS, HOST_MEMORY_CSV, HostMemory, host_memory_bandwidth_gbps, load_host_memory
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
    assert rows["b200"].bandwidth_gbps == pytest.approx(716.8)  # DGX B200: 2 x Xeon 8570, 8 ch x 8 B x 5600 MT/s
    assert rows["mi300x"].bandwidth_gbps == pytest.approx(921.6)  # AMD's MI300X platform: 2 x EPYC 9374F, 12 ch x 8 B x 4800
    assert rows["mi355x"].bandwidth_gbps == pytest.approx(1228.8)  # AMD's MI355X platform: 2 x EPYC 9575F, 12 ch x 8 B x 6400
    assert rows["mi350x"].bandwidth_gbps == pytest.approx(1228.8)  # the same CPU tray (DIMM speed assumed, as its row says)
    assert rows["mi325x"].bandwidth_gbps == pytest.approx(1228.8)  # AMD's MI325X MLPerf system: the same CPU (DIMMs assumed)
    assert DESKTOP_HOST_MEMORY_GBPS == pytest.approx(76.8)  # dual-channel DDR5-4800: 2 x 8 B x 4800 MT/s
    for r in rows.values():
        get_accelerator(r.accelerator)  # each row names a catalog accelerator
        assert r.source.startswith(("DGX: https://", "Host: https://")) and r.as_of <= dt.date(2026, 12, 31)
        assert r.gpus == 8 and r.sockets == 2  # every reference host found is a two-socket 8-GPU server


# Data-centre accelerators with no published reference host (docs/OFFLOAD.md lists why): they keep the desktop
# fallback. A row added for one of them must leave this list, so the gap stays written down.
NO_REFERENCE_HOST = (
    "b300",  # DGX B300's CPU (2 x Xeon 6776P) seen only in third-party notes, its memory layout unsourced
    "gh200",  # Grace: LPDDR5X on the package, no DIMM channels; its ~500 GB/s needs a column this table lacks
    "gb200",
    "gb300",
    "h100-pcie",  # PCIe cards: the server, and how many cards share it, is the buyer's or the cloud's choice
    "h100-nvl",
    "h200-nvl",
    "a100-pcie-40gb",
    "a100-pcie-80gb",
    "l40s",
    "l4",
    "a10g",
    "a10",
    "a40",
    "l20",
    "h20",
    "t4",
    "gaudi3",
)


@pytest.mark.parametrize("accelerator", NO_REFERENCE_HOST)
def test_parts_without_a_reference_host_keep_the_desktop_fallback(accelerator):
    assert accelerator not in load_host_memory()
    sc = Scenario(model="llama-3.1-8b", accelerator=accelerator)
    assert host_memory_bandwidth_gbps(sc, get_accelerator(accelerator), 8) == pytest.approx(DESKTOP_HOST_MEMORY_GBPS)


@pytest.mark.parametrize(
    ("accelerator", "devices", "set_gbps", "want"),
    [
        ("h100-sxm", 1, None, 76.8),  # one GPU of a DGX H100 rents 1/8 of its 614.4 GB/s
        ("h100-sxm", 4, None, 307.2),
        ("h100-sxm", 8, None, 614.4),  # the whole server
        ("h100-sxm", 16, None, 614.4),  # two servers: each one's RAM serves its own 8 GPUs
        ("a100-sxm-40gb", 8, None, 409.6),
        ("b200", 1, None, 89.6),  # 716.8 / 8
        ("b200", 8, None, 716.8),
        ("mi300x", 1, None, 115.2),  # 921.6 / 8
        ("mi300x", 4, None, 460.8),  # one socket's worth: 921.6 x 4 / 8
        ("mi355x", 8, None, 1228.8),
        ("mi355x", 32, None, 1228.8),  # four servers: each one's RAM serves its own 8 GPUs
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


def test_offload_on_a_whole_mi300x_server_uses_its_ram():
    """8 MI300X: before this row they sat on a desktop's 76.8 GB/s (9.6 a device); AMD's platform host gives 921.6
    (115.2 a device), 12x as much, so the CPU step is 12x shorter, worked by hand."""
    acc = get_accelerator("mi300x")
    eight = OFFLOADED.replace(accelerator="mi300x", data_parallel=8)
    tokens, compute_s = 50e6, 3600.0
    steps = tokens / (eight.batch_size * eight.seq_len * eight.gradient_accumulation_steps * 8)
    cpu_s = cpu_step_bytes_per_device(eight, eight.architecture, 8) / (115.2e9 * CPU_ADAM_BANDWIDTH_EFFICIENCY)
    got = offload_time(eight, eight.architecture, acc, 8, tokens, compute_s, 1.0)
    assert got.step_s == pytest.approx(steps * cpu_s, rel=1e-9)
    desktop = offload_time(eight.replace(host_memory_bandwidth_gbps=76.8), eight.architecture, acc, 8, tokens, compute_s, 1.0)
    assert desktop.step_s == pytest.approx(12 * got.step_s, rel=1e-9)


def test_a_row_with_an_unquoted_comma_is_a_catalog_error_naming_the_row(tmp_path):
    """A host name with a comma not in quotes shifts every cell after it (it happened writing the MI325X row): the
    loader says which row, where it raised a TypeError from deep inside."""
    lines = HOST_MEMORY_CSV.read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "host_memory.csv"
    bad.write_text("\n".join([lines[0], "mi325x,Quanta (D74A, 2 x EPYC),2,12,6400,8,Host: https://example.org/x,2026-11-26,n"]) + "\n")
    with pytest.raises(CatalogError, match="row 1: 1 more cells than columns"):
        read_catalog_rows(bad, HostMemory)
