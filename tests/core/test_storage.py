"""Loading the weights from a drive (core/speed/storage.py, a seed-note topic: NVMe SSDs rather than hard disks):
the checkpoint's bytes over each drive's rated sequential read, worked out by hand from the data sheets."""

import pytest

from core.estimate import estimate
from core.model.formats import FORMATS, weight_bytes
from core.scenario import Scenario
from core.speed.storage import duration_text, load_drives, load_seconds, load_sentence


def test_the_drives_and_their_data_sheets():
    drives = {d.id: d for d in load_drives()}
    assert drives["nvme-gen4"].read_gbps == 7.45  # Samsung 990 PRO: 7,450 MB/s
    assert drives["sata-ssd"].read_gbps == 0.56  # Samsung 870 EVO: 560 MB/s
    assert drives["hdd"].read_gbps == 0.285  # Seagate Exos X20: 285 MB/s
    assert drives["cloud-volume"].read_gbps == pytest.approx(1000 * 2**20 / 1e9)  # EBS gp3: 1,000 MiB/s
    assert [d.read_gbps for d in load_drives()] == sorted((d.read_gbps for d in load_drives()), reverse=True)


def test_llama_70b_in_bf16_loads_in_19_s_from_nvme_and_8_min_from_a_hard_disk():
    """141.1 GB of BF16 weights (70.55 billion parameters x 2 bytes): 141.1 / 7.45 = 18.9 s; / 0.285 = 495 s."""
    sc = Scenario(model="llama-3.1-70b")
    weights = weight_bytes(sc.architecture, FORMATS["bf16"])
    assert weights == pytest.approx(2 * sc.architecture.total_params, rel=1e-3)
    drives = {d.id: d for d in load_drives()}
    assert load_seconds(weights, drives["nvme-gen4"]) == pytest.approx(weights / 7.45e9)
    assert load_seconds(weights, drives["hdd"]) / load_seconds(weights, drives["nvme-gen4"]) == pytest.approx(7.45 / 0.285)
    said = load_sentence(weights)
    assert f"{weights / 1e9:,.1f} GB" in said and "19 s from an NVMe SSD" in said and "8.3 min from a hard disk" in said


@pytest.mark.parametrize(("seconds", "text"), [(0.44, "0.4 s"), (29.4, "29 s"), (495, "8.2 min"), (2520, "42 min"), (9000, "2.5 h")])
def test_durations_read_in_the_right_unit(seconds, text):
    assert duration_text(seconds) == text


def test_the_estimate_says_it_for_a_served_model_in_its_format():
    r = estimate(Scenario(model="llama-3.1-8b", weights_format="gguf-q4_k_m", serving_engine="llama.cpp", accelerator="rtx-4090"))
    assert r.inference is not None
    assert load_sentence(r.weights_bytes_total) in r.inference.assumptions
    assert r.weights_bytes_total < 0.35 * 2 * r.params.total  # the 4-bit file, not the 16-bit one
