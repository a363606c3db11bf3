"""The hobbyist's machine (issue #12): llama.cpp partial offload (gpu_layers) and CPU-only decode from the RAM's
bandwidth, Apple unified-memory speed, llama.cpp's quantized KV caches, and hardware typed in by hand. Published
speeds are pinned in tests/data/offload_speeds.csv and unified_speeds.csv (calibration rows apart from checks)."""

import csv
from itertools import pairwise
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.catalog.accelerators import custom_accelerator, custom_accelerator_id, get_accelerator
from core.memory.estimate import estimate_memory
from core.model.formats import KV_CACHE_BYTES
from core.scenario import Scenario
from core.speed.roofline import inference_speed

DATA = Path(__file__).resolve().parents[1] / "data"
OFFLOAD = list(csv.DictReader((DATA / "offload_speeds.csv").open(newline="")))
UNIFIED = list(csv.DictReader((DATA / "unified_speeds.csv").open(newline="")))


def _check(got: float, row: dict, measured_key: str) -> None:
    measured, tol = float(row[measured_key]), float(row["tolerance"])
    if row["expect"] in ("within", "calibration"):
        assert got == pytest.approx(measured, rel=tol), (got, row["source"])
    else:  # a known miss stays a miss until the model learns it
        assert abs(got / measured - 1) > tol, (got, row["note"])


@pytest.mark.parametrize("row", OFFLOAD, ids=[r["id"] for r in OFFLOAD])
def test_cpu_and_offload_decode_against_published_runs(row):
    prompt, out = int(row["prompt_tokens"]), int(row["output_tokens"])
    sc = Scenario(
        model=row["model"],
        weights_format=row["weights_format"],
        kv_cache_format=row["kv_cache_format"],
        accelerator=row["accelerator"],
        serving_engine="llama.cpp",
        seq_len=prompt + out,
        output_tokens=out,
        gpu_layers=int(row["gpu_layers"]),
        host_memory_bandwidth_gbps=float(row["host_bandwidth_gbps"]),
        host_memory_gib=512,
    )
    _check(inference_speed(sc).decode_tokens_per_s, row, "measured_decode_tokens_per_s")


@pytest.mark.parametrize("row", UNIFIED, ids=[r["id"] for r in UNIFIED])
def test_apple_unified_memory_decode_against_published_runs(row):
    sc = Scenario(
        model=row["model"],
        weights_format=row["weights_format"],
        accelerator=row["accelerator"],
        serving_engine="llama.cpp",
        seq_len=528,
        output_tokens=512,
        kv_cache_format="fp16",
    )
    _check(inference_speed(sc).decode_tokens_per_s, row, "measured_decode_tokens_per_s")


def test_calibration_and_checks_are_kept_apart():
    rows = OFFLOAD + UNIFIED
    assert sum(r["expect"] == "calibration" for r in rows) == 1
    assert sum(r["expect"] == "within" for r in rows) >= 8


def _serve_70b(**kw) -> Scenario:
    base = dict(model="llama-3.1-70b", weights_format="gguf-q4_k_m", accelerator="rtx-3090", serving_engine="llama.cpp", seq_len=4096, kv_cache_format="fp16")
    return Scenario(**{**base, **kw})


def test_partial_offload_moves_layers_between_the_card_and_ram():
    layers = _serve_70b().architecture.num_layers
    full, half, none = (estimate_memory(_serve_70b(gpu_layers=g)) for g in (None, layers // 2, 0))
    # what leaves the card arrives in RAM: device + RAM is the same model whatever the split (runtime stays on the card)
    totals = [r.memory_per_device_bytes.weights + r.memory_per_device_bytes.kv_cache + r.cpu_memory_per_device_bytes for r in (full, half, none)]
    assert max(totals) - min(totals) <= 2 * len(totals)  # rounding of the byte counts
    assert full.cpu_memory_per_device_bytes == 0 < half.cpu_memory_per_device_bytes < none.cpu_memory_per_device_bytes
    assert full.memory_per_device_bytes.total > half.memory_per_device_bytes.total > none.memory_per_device_bytes.total
    assert full.gpu_layers == layers and half.gpu_layers == layers // 2 and none.gpu_layers == 0


def test_the_most_layers_that_fit_is_the_edge_of_fitting():
    most = estimate_memory(_serve_70b(gpu_layers=0)).max_gpu_layers
    assert most is not None and 0 < most < 80  # a 40 GiB model on a 24 GB card: about half of the layers
    assert estimate_memory(_serve_70b(gpu_layers=most)).fits
    assert not estimate_memory(_serve_70b(gpu_layers=most + 1)).fits
    # the same whatever gpu_layers the scenario holds
    assert estimate_memory(_serve_70b()).max_gpu_layers == most


def test_ram_too_small_for_the_offloaded_layers_does_not_fit():
    r = estimate_memory(_serve_70b(gpu_layers=0, host_memory_gib=32))
    assert r.host_memory_fits is False and not r.fits
    assert estimate_memory(_serve_70b(gpu_layers=0, host_memory_gib=64)).host_memory_fits


def test_decode_slows_steadily_as_layers_leave_the_card():
    speeds = [inference_speed(_serve_70b(gpu_layers=g)).decode_tokens_per_s for g in (80, 60, 40, 20, 0)]
    assert speeds == sorted(speeds, reverse=True)
    # step time is linear in the layers left in RAM (the card's and the CPU's layers run one after the other)
    steps = [1 / s for s in speeds]
    diffs = [b - a for a, b in pairwise(steps)]
    assert max(diffs) == pytest.approx(min(diffs), rel=0.05)
    # a faster RAM helps only what stays in it
    assert inference_speed(_serve_70b(gpu_layers=0, host_memory_bandwidth_gbps=153.6)).decode_tokens_per_s == pytest.approx(2 * speeds[-1], rel=0.05)
    assert inference_speed(_serve_70b(host_memory_bandwidth_gbps=153.6)).decode_tokens_per_s == speeds[0]


def test_prompt_processing_pays_for_copying_ram_layers_over_pcie():
    full, part = (inference_speed(_serve_70b(gpu_layers=g)) for g in (None, 40))
    assert part.prefill_tokens_per_s < full.prefill_tokens_per_s


def test_gpu_layers_is_llama_cpp_only():
    vllm = estimate_memory(_serve_70b(serving_engine="vllm", gpu_layers=0))
    assert vllm.max_gpu_layers is None and vllm.cpu_memory_per_device_bytes == 0


KV = ("fp16", "q8_0", "q4_0")


def test_quantized_kv_caches_use_ggml_block_sizes():
    # ggml-common.h: block_q8_0 = fp16 scale + 32 int8 = 34 bytes per 32 values; block_q4_0 = 2 + 16 = 18 bytes
    assert KV_CACHE_BYTES["q8_0"] == 34 / 32 and KV_CACHE_BYTES["q4_0"] == 18 / 32
    per = {k: estimate_memory(Scenario(model="llama-3.1-8b", serving_engine="llama.cpp", kv_cache_format=k)).kv_cache_bytes_per_token for k in KV}
    # Llama 3.1 8B: 32 layers x 8 KV heads x 128 x (K, V) = 65,536 values per token; llama.cpp prints 512 MiB of f16
    # KV for 4,096 tokens, and 272 MiB at q8_0
    assert per["fp16"] == 131_072 and per["q8_0"] == 69_632 and per["q4_0"] == 36_864
    assert per["q8_0"] * 4096 / 2**20 == 272


def test_any_hardware_typed_in_round_trips_through_its_id():
    acc_id = custom_accelerator_id(24, 936.2, 71)
    assert acc_id == "custom-24gib-936p2gbps-71tflops"
    acc = get_accelerator(acc_id)
    assert (acc.memory_gib, acc.memory_bandwidth_gbps, acc.bf16_tflops, acc.kind) == (24, 936.2, 71, "custom")
    # the same numbers as the catalog's RTX 3090 give the same decode speed (bandwidth decides)
    cat = get_accelerator("rtx-3090")
    mine = custom_accelerator_id(cat.usable_memory_gib, cat.memory_bandwidth_gbps, cat.bf16_tflops or 1)
    sc = Scenario(model="llama-3.1-8b", weights_format="gguf-q4_k_m", serving_engine="llama.cpp")
    a, b = (inference_speed(sc.model_copy(update={"accelerator": x})).decode_tokens_per_s for x in ("rtx-3090", mine))
    assert a == pytest.approx(b, rel=1e-6)


@pytest.mark.parametrize(
    "bad", ["custom-0gib-10gbps-1tflops", "custom-24gib-936gbps", "custom-1e9gib-1gbps-1tflops", "custom-24gib-999999999gbps-1tflops", "custom--1gib-1gbps-1tflops"]
)
def test_out_of_range_or_malformed_custom_ids_are_refused(bad):
    assert custom_accelerator(bad) is None
    with pytest.raises(ValidationError, match="unknown accelerator"):
        Scenario(model="llama-3.1-8b", accelerator=bad)


def test_every_accelerator_kind_has_its_network():
    """A kind the communication model does not know would crash every multi-device estimate on it."""
    from typing import get_args

    from core.catalog.accelerators import Kind
    from core.speed.comm import DEVICES_PER_NODE, INTER_NODE_GBPS

    assert set(get_args(Kind)) <= set(DEVICES_PER_NODE) & set(INTER_NODE_GBPS)


def test_several_cards_of_your_own_split_a_model_over_pcie():
    own = custom_accelerator_id(24, 936, 71)
    one, two = (estimate_memory(Scenario(model="llama-3.1-70b", weights_format="gguf-q4_k_m", accelerator=own, tensor_parallel=tp)) for tp in (1, 2))
    assert two.memory_per_device_bytes.weights * 2 == pytest.approx(one.memory_per_device_bytes.weights, rel=1e-6)
    assert get_accelerator(own).interconnect_gbps == 31.5  # PCIe 4.0 x16, no NVLink
    assert inference_speed(Scenario(model="llama-3.1-70b", weights_format="gguf-q4_k_m", accelerator=own, tensor_parallel=2)).decode_tokens_per_s > 0


def test_llama_cpp_slots_share_one_context():
    """Issue #27: llama-server splits one -c context over its -np slots (server.cpp: n_ctx_slot = n_ctx / n_parallel),
    so B concurrent sequences of S tokens need -c = B x S. Llama 3.1 70B Q4_K_M on a 64 GB M2 Max at 4k context: the
    page said 4,096 concurrent sequences; the KV cache (320 KiB a token in FP16, 1.25 GiB a 4k sequence) fits about 5
    beside 39.6 GiB of weights in the 48 GiB the GPU may wire."""
    from core.estimate import estimate
    from core.scenario import Scenario

    one = estimate(Scenario(model="llama-3.1-70b", serving_engine="llama.cpp", weights_format="gguf-q4_k_m", accelerator="apple-m2-max", seq_len=4096))
    assert one.fits and 3 <= one.max_batch_size <= 8, one.max_batch_size
    assert one.inference is not None and one.inference.max_concurrent_sequences == one.max_batch_size
    two = estimate(Scenario(model="llama-3.1-70b", serving_engine="llama.cpp", weights_format="gguf-q4_k_m", accelerator="apple-m2-max", seq_len=4096, batch_size=2))
    kv_one, kv_two = one.memory_per_device_bytes.kv_cache, two.memory_per_device_bytes.kv_cache
    assert kv_two == 2 * kv_one and kv_one == 4096 * 327_680  # 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes
