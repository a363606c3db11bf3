"""Different cards in one box (issue #12: "3090 + 4090"), llama.cpp's layer split (core/speed/mixed.py).

No published run of a mixed pair on a model we carry states its split and settings, so the model is anchored on
what is published: identical cards split evenly are exactly the pipeline_parallel answer, which is pinned to
llama.cpp runs on 2x/4x/6x RTX 3090 and 2x/8x RTX 4090 (tests/data/engine_speeds.csv) — checked again here
through mixed_box — and a mixed box must sit between the all-slow and the all-fast boxes."""

import csv
from pathlib import Path

import pytest

from core.memory.estimate import estimate_memory
from core.scenario import Scenario
from core.speed.comm import ALLREDUCE_LATENCY_S
from core.speed.mixed import mixed_box
from core.speed.roofline import inference_speed

ROWS = [
    r
    for r in csv.DictReader((Path(__file__).resolve().parents[1] / "data" / "engine_speeds.csv").open(newline=""))
    if r["engine"] == "llama.cpp" and int(r["pipeline_parallel"]) > 1 and r["metric"] == "decode_tokens_per_s"
]
L70 = {"model": "llama-3.1-70b", "weights_format": "gguf-q4_k_m", "serving_engine": "llama.cpp", "mode": "inference", "seq_len": 8192}


def _sc(**kw) -> Scenario:
    return Scenario(**(L70 | kw))


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_identical_cards_reproduce_published_multi_gpu_runs(row):
    assert len(ROWS) >= 5
    sc = Scenario(
        model=row["model"],
        weights_format=row["weights_format"],
        kv_cache_format=row["kv_cache_format"],
        serving_engine="llama.cpp",
        mode="inference",
        accelerator=row["accelerator"],
        seq_len=int(row["prompt_tokens"]) + int(row["output_tokens"]),
        output_tokens=int(row["output_tokens"]),
    )
    box = mixed_box(sc, [row["accelerator"]] * int(row["pipeline_parallel"]))
    assert box.decode_tokens_per_s == pytest.approx(float(row["measured"]), rel=float(row["tolerance"])), row["source"]


@pytest.mark.parametrize("acc, n", [("rtx-3090", 2), ("rtx-4090", 2), ("rtx-3090", 4)])
def test_an_even_split_of_identical_cards_is_the_pipeline_answer(acc, n):
    sc = _sc(accelerator=acc)
    box = mixed_box(sc, [acc] * n)
    pipe = Scenario(**(dict(sc) | {"pipeline_parallel": n}))
    speed = inference_speed(pipe)
    assert box.decode_tokens_per_s == pytest.approx(speed.decode_tokens_per_s, rel=1e-9)
    assert box.time_to_first_token_s == pytest.approx(speed.time_to_first_token_s, rel=1e-9)
    per_device = estimate_memory(pipe).memory_per_device_bytes.total
    for card in box.cards:
        assert card.total_bytes == pytest.approx(per_device, rel=0.02)


def test_a_3090_and_a_4090_sit_between_two_of_either():
    slow, fast = (mixed_box(_sc(accelerator=a), [a, a]).decode_tokens_per_s for a in ("rtx-3090", "rtx-4090"))
    mixed = mixed_box(_sc(accelerator="rtx-3090"), ["rtx-3090", "rtx-4090"])
    assert slow < mixed.decode_tokens_per_s < fast
    assert mixed.fits and [c.layers for c in mixed.cards] == [40, 40]  # both 24 GB: half the 80 layers each


def test_the_split_follows_memory_and_the_parts_add_up():
    sc = _sc(accelerator="rtx-4090", seq_len=4096)
    box = mixed_box(sc, ["rtx-4090", "rtx-3060-12gb", "rtx-3060-12gb"])
    layers = [c.layers for c in box.cards]
    assert sum(layers) == sc.architecture.num_layers and layers[0] > layers[1]
    even = estimate_memory(Scenario(**(dict(sc) | {"pipeline_parallel": 3}))).memory_per_device_bytes
    assert sum(c.weights_bytes for c in box.cards) == pytest.approx(3 * even.weights, abs=3)
    assert sum(c.kv_cache_bytes for c in box.cards) == pytest.approx(3 * even.kv_cache, abs=3)
    for c in box.cards:
        assert c.total_bytes == c.weights_bytes + c.kv_cache_bytes + c.other_bytes


def test_layers_move_off_a_card_the_proportional_split_overflows():
    # 24 GB next to 24 GB with less usable, at a context (12k) where the per-card fixed costs tip the smaller card over
    box = mixed_box(_sc(accelerator="rtx-3090", seq_len=12288), ["rtx-3090", "l4"])
    assert box.split == "moved to fit" and box.fits
    assert all(c.total_bytes <= c.capacity_bytes for c in box.cards)


def test_a_box_that_cannot_hold_the_model_says_by_how_much():
    box = mixed_box(_sc(accelerator="rtx-3090"), ["rtx-3090", "rtx-3060-12gb"])
    assert not box.fits and box.short_by_bytes > 0
    assert box.short_by_bytes == sum(max(0, c.total_bytes - c.capacity_bytes) for c in box.cards)


def test_more_cards_never_mean_more_memory_per_card():
    totals = [max(c.total_bytes for c in mixed_box(_sc(accelerator="rtx-3090"), ["rtx-3090"] * n).cards) for n in (2, 3, 4, 6, 8)]
    assert totals == sorted(totals, reverse=True)


@pytest.mark.parametrize("ids", [[], ["rtx-3090"] * 9])
def test_box_size_is_bounded(ids):
    with pytest.raises(ValueError):
        mixed_box(_sc(accelerator="rtx-3090"), ids)


def test_identical_cards_also_show_the_tensor_parallel_cost_of_pcie():
    box = mixed_box(_sc(accelerator="rtx-4090", seq_len=1024), ["rtx-4090"] * 2)
    assert box.link_gbps == 32.0  # PCIe 4.0 x16, no NVLink on the 4090 (data/accelerators.csv)
    assert box.tensor_parallel_allreduce_s > 0 and box.tensor_parallel_tokens_per_s > box.decode_tokens_per_s
    # 2 all-reduces a layer of one token's hidden state (8,192 x 2 bytes): latency-bound, not bandwidth-bound
    # at the 24 of 32 GB/s NCCL reaches on a PCIe 4.0 x16 link (data/collective_bandwidth.csv)
    assert box.tensor_parallel_allreduce_s == pytest.approx(80 * 2 * (ALLREDUCE_LATENCY_S + 8192 * 2 / 24e9), rel=1e-6)
    assert mixed_box(_sc(accelerator="rtx-3090"), ["rtx-3090", "rtx-4090"]).tensor_parallel_tokens_per_s is None
