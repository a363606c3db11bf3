"""Network bandwidth per device between nodes (data/accelerators.csv's scale_out_gbps_per_device, core/speed/comm.py's
nic_gbps): each part's reference node design, the per-kind default where none is published, and the loader's checks."""

import pytest

from core.catalog.accelerators import ACCELERATORS_CSV, CatalogError, get_accelerator, load_accelerators
from core.speed.comm import INTER_NODE_GBPS, collective_gbps, link_gbps, nic_gbps

HEADER = ACCELERATORS_CSV.read_text().splitlines()[0]
ROW = "x1,Test GPU,nvidia,gpu,80,79,2000,300,,,600,19.5,400,NVLink,300,2020,,true,false,https://example.com/datasheet,2026-11-23,,{}"


def _load(tmp_path, value: str):
    path = tmp_path / "acc.csv"
    path.write_text(HEADER + "\n" + ROW.format(value) + "\n")
    return load_accelerators(path)


# Datasheets (as-of 2026-11-26), Gb/s per device / 8 = GB/s: DGX A100 8x ConnectX-6 200 Gb/s; DGX H100, DGX H200,
# DGX B200 8x ConnectX-7 400 Gb/s; DGX B300 8x ConnectX-8 800 Gb/s; Azure ND MI300X v5 8x 400 Gb/s per 8 GPUs;
# DGX-1 (V100) 4x 100 Gb/s per 8 GPUs; trn1.32xlarge 800 Gbps and trn2.48xlarge 3.2 Tbps per 16 chips.
PUBLISHED_GBPS = {
    "a100-sxm-80gb": 25.0,
    "a100-sxm-40gb": 25.0,
    "h100-sxm": 50.0,
    "h200": 50.0,
    "b200": 50.0,
    "b300": 100.0,
    "mi300x": 50.0,
    "v100-16gb": 6.25,
    "trainium": 6.25,
    "trainium2": 25.0,
}


@pytest.mark.parametrize(("acc_id", "gbps"), PUBLISHED_GBPS.items())
def test_reference_node_designs(acc_id, gbps):
    acc = get_accelerator(acc_id)
    assert acc.scale_out_gbps_per_device == gbps and nic_gbps(acc) == gbps
    assert "scale-out:" in acc.source and f"{gbps * 8:g} Gb/s per device" in acc.notes


def test_every_row_with_a_figure_names_its_node_design_and_the_rest_use_the_kind_default():
    for acc in load_accelerators():
        if acc.scale_out_gbps_per_device is None:
            assert nic_gbps(acc) == INTER_NODE_GBPS[acc.kind], acc.id
        else:
            assert "scale-out:" in acc.source and "scale_out_gbps_per_device" in acc.notes, acc.id
    # PCIe cards, H20, GH200, GB200/GB300, MI325X/MI35x, TPUs publish no per-device figure here: kind default
    assert nic_gbps(get_accelerator("rtx-4090")) == INTER_NODE_GBPS["gpu"] == 25.0
    assert nic_gbps(get_accelerator("tpu-v5p")) == INTER_NODE_GBPS["tpu"]


def test_across_nodes_a_ring_moves_at_the_nics_of_the_node():
    h100, a100 = get_accelerator("h100-sxm"), get_accelerator("a100-sxm-80gb")
    # one ring per NIC: 8 x 50 GB/s per H100 node x the network row's 96% from 24 GPUs (nccl-tests #119) = 384 GB/s,
    # above the NVLink ring's 370 inside the node, which then bounds it (at 200 Gb/s it was the network's 192)
    assert collective_gbps(h100, 16384) == pytest.approx(min(8 * 50 * 0.96, 370))
    assert collective_gbps(a100, 2048) == pytest.approx(8 * 25 * 0.96)
    # B300's 800 Gb/s NICs give 800 GB/s per node: below NVLink 5's 900, so the network still bounds it
    assert link_gbps(get_accelerator("b300"), 16) == 800


@pytest.mark.parametrize(("value", "problem"), [("-5", "must be > 0"), ("400", "not Gb/s"), ("fast", "not a number")])
def test_loader_refuses_bad_values(tmp_path, value, problem):
    with pytest.raises(CatalogError) as info:
        _load(tmp_path, value)
    assert info.value.field in ("scale_out_gbps_per_device", "row") and problem in info.value.problem


def test_blank_is_the_kind_default(tmp_path):
    (acc,) = _load(tmp_path, "")
    assert acc.scale_out_gbps_per_device is None and nic_gbps(acc) == INTER_NODE_GBPS["gpu"]
    (acc,) = _load(tmp_path, "50")
    assert nic_gbps(acc) == 50.0
