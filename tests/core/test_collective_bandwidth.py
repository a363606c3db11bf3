"""Bus bandwidth collectives achieve (data/collective_bandwidth.csv, core/catalog/collective_bandwidth.py) and its use
in core/speed/comm.py: the table's published rows with their sources, and the invariants (a ring never beats the line
rate, a larger ring never does better per device, achievable never above the line rate for any part)."""

from pathlib import Path

import pytest

from core.catalog.accelerators import CatalogError, get_accelerator, load_accelerators, read_catalog_rows
from core.catalog.collective_bandwidth import COLLECTIVE_BANDWIDTH_CSV, CollectiveBandwidth, family_of, link_fraction, load_collective_bandwidth, network_fraction
from core.speed.comm import DEVICES_PER_NODE, INTER_NODE_GBPS, collective_gbps, link_gbps
from tests.core.csv_rows import with_cells

ROWS = load_collective_bandwidth()


def test_every_row_is_sourced_and_dated():
    for r in ROWS:
        assert len(r.source) >= 10 and r.as_of and r.message_regime, r.interconnect
        assert "github.com" in r.source or "NVIDIA/nccl" in r.source or "rocm.blogs.amd.com" in r.source, r.source


def test_published_figures():
    """The rows the model leans on, as their sources give them."""
    by = {(r.interconnect, r.devices, r.algorithm): r for r in ROWS}
    # NCCL maintainer, nccl-tests #212: 370 of 450 GB/s on 8 H100s over NVLink 4 for a ring
    assert by["nvlink4", 8, "ring"].busbw_gbps == 370 and by["nvlink4", 8, "ring"].line_gbps == 450
    # nccl-tests #175: 232.54 GB/s on 8 A100s; NCCL's own A100 cap is 235 (tuning.cc)
    assert by["nvlink3", 8, "ring"].busbw_gbps == pytest.approx(232.54, abs=0.1)
    # NCCL's per-link constants (topo.h): 20.6 x 18 Hopper links = 370.8 agrees with the measured 370 within 0.3%
    assert 20.6 * 18 == pytest.approx(by["nvlink4", 8, "ring"].busbw_gbps, rel=0.003)
    assert by["nvlink5", 2, "ring"].busbw_gbps == pytest.approx(40.1 * 18)
    # nccl #1639: PCIe Gen5, 35 GB/s on 4 GPUs, 28 on 8
    assert (by["pcie-gen5", 4, "ring"].busbw_gbps, by["pcie-gen5", 8, "ring"].busbw_gbps) == (35, 28)
    # AMD: xGMI 48 of 64 GB/s per link usable
    assert by["infinity-fabric", 8, "ring"].fraction == pytest.approx(0.75)
    # nccl-tests #119: 96 of 100 GB/s across 3 nodes of A100s with 4 HDR NICs each
    assert network_fraction(24) == pytest.approx(0.96)
    # the stated default: 80% of line rate
    assert link_fraction("ICI 2D torus, 4 ports, 256-chip pod (400 GB/s bidir)", 8) == pytest.approx(0.80)


def test_a_ring_never_beats_the_line_rate():
    for r in ROWS:
        if r.algorithm == "ring":
            assert 0 < r.fraction <= 1, r.interconnect
    # NVLink SHARP's busbw is not wire bandwidth and may exceed it; those rows are kept but not used
    assert any(r.algorithm == "nvls" and r.busbw_gbps > r.line_gbps for r in ROWS)


def test_more_devices_on_a_ring_never_raise_per_device_busbw():
    families = {r.interconnect for r in ROWS}
    for family in families:
        rows = sorted((r for r in ROWS if r.interconnect == family and r.algorithm == "ring"), key=lambda r: r.devices)
        fractions = [r.fraction for r in rows]
        assert fractions == sorted(fractions, reverse=True), family
    for acc in load_accelerators():
        if not acc.interconnect_gbps:
            continue
        per_node = DEVICES_PER_NODE[acc.kind]
        previous = float("inf")
        for n in (2, 4, 8, 16, 64, 1024, 16384):
            got = collective_gbps(acc, n)
            assert 0 < got <= link_gbps(acc, n) + 1e-9, (acc.id, n)
            assert got <= previous + 1e-9, (acc.id, n)  # never faster on a larger ring
            previous = got
            if n <= per_node:
                best = max(r.busbw_gbps / r.line_gbps for r in ROWS if r.interconnect == family_of(acc.interconnect) and r.algorithm == "ring")
                assert got <= acc.interconnect_gbps * best + 1e-9, (acc.id, n)


def test_parts_map_to_their_generation():
    assert family_of(get_accelerator("a100-sxm-80gb").interconnect) == "nvlink3"
    assert family_of(get_accelerator("h200").interconnect) == "nvlink4"
    assert family_of(get_accelerator("gb200").interconnect) == "nvlink5"
    assert family_of(get_accelerator("mi300x").interconnect) == "infinity-fabric"
    assert family_of(get_accelerator("rtx-4090").interconnect) == "pcie-gen4"
    assert family_of(get_accelerator("rtx-5090").interconnect) == "pcie-gen5"
    # a PCIe card whose catalog rate is its NVLink bridge's is not taken for PCIe: no published ring figure, the default
    assert family_of(get_accelerator("h200-nvl").interconnect) == "default"
    assert family_of(get_accelerator("quadro-rtx-8000").interconnect) == "default"


def test_collective_rates_inside_and_across_nodes():
    h100, a100 = get_accelerator("h100-sxm"), get_accelerator("a100-sxm-80gb")
    assert collective_gbps(h100, 8) == pytest.approx(370)
    assert collective_gbps(a100, 2) == pytest.approx(232.5)
    # across nodes: the node's NICs (8 x 25 GB/s) at 97.6% on two nodes (nccl-tests #29), 96% from 24 GPUs (#119)
    assert collective_gbps(a100, 16) == pytest.approx(8 * INTER_NODE_GBPS["gpu"] * 12.2 / 12.5)
    assert collective_gbps(a100, 2048) == pytest.approx(8 * INTER_NODE_GBPS["gpu"] * 0.96)
    assert collective_gbps(get_accelerator("rtx-5090"), 2) == pytest.approx(64 * 35 / 64, rel=0.02)


def _write(tmp_path: Path, **changes: str) -> Path:
    return with_cells(COLLECTIVE_BANDWIDTH_CSV, tmp_path, 2, changes)


@pytest.mark.parametrize(
    "changes",
    [{"busbw_gbps": "500"}, {"busbw_gbps": "-1"}, {"pattern": "(unclosed"}, {"source": ""}, {"as_of": "soon"}, {"algorithm": "tree"}, {"pattern": ""}],
)
def test_bad_rows_are_refused_on_load(tmp_path, changes):
    with pytest.raises(CatalogError):
        read_catalog_rows(_write(tmp_path, **changes), CollectiveBandwidth)
