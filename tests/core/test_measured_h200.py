"""Our estimates against our own H200 measurements (data/measurements/h200-2026-11-26.jsonl, bench/gpu/harness.py's
grid `h200`).

Every row here is a CHECK row except the two QLoRA rows' speeds: since 2026-11-26 prepare_model_for_kbit_training's
two upcast constants (core/speed/timing.py) are fitted on them, each less its run without the upcast
(speed/h200-2026-11-26.jsonl), so their speeds check only the LoRA part and the dequantization. Memory is held to the H100 tests'
tolerances (nvidia-smi within 15%, allocated and reserved peaks within 10%); speed to 25%. A row the core misses is
listed below with what was measured, what the core estimated when the row was recorded, and why we think it
misses: it stays a miss (it is not deleted), its error must stay within 5 points of the recorded one, and a miss
that comes within the tolerance must be promoted to a hit. So a change of the model that moves a recorded miss,
either way, fails here and has to be looked at."""

from __future__ import annotations

import pytest

from core.catalog.presets import DATA_DIR
from core.measured import Measured, load_measured
from tests.core.test_measured_h100 import _harness  # bench/gpu/harness.py loaded as a module, once

H200 = DATA_DIR / "measurements" / "h200-2026-11-26.jsonl"
ROWS = load_measured(H200)
MEMORY = [m for m in ROWS if m.kind != "decode"]
SPEED = [m for m in ROWS if m.measured_tokens_per_s]
BAND = 0.05  # how far a recorded miss's error may move before the test asks for a look

MEMORY_TOLERANCE = {"nvidia-smi": 0.15, "allocated": 0.10, "reserved": 0.10}

# (row, quantity) -> (measured bytes, estimated bytes when recorded, why we think the core misses)
MEMORY_MISSES: dict[tuple[str, str], tuple[float, float, str]] = {
    ("train llama-2-13b QLoRA r16 all-linear nf4 b4 x 2,048 +GC", "reserved"): (
        23_542_628_352,
        20_044_420_096,
        "allocated is right (-2.5%) but PyTorch's allocator held 4.1 GB (21%) more than it allocated: the core's "
        "fragmentation allowance was fitted on Llama 3.2 1B full fine-tuning; bitsandbytes dequantizes every NF4 "
        "weight into a fresh bf16 buffer per pass (5,120 x 13,824 here), a likely source of the extra cache",
    ),
    ("train llama-3.1-8b bf16-true b4 x 2,048 +GC", "reserved"): (
        77_305_217_024,
        69_509_603_328,
        "allocated is right (+1.4%) but the allocator held 12.1 GB (19%) over the allocated peak: 8B-sized gradient "
        "and AdamW-state tensors fragment the cache more than the 1B rows the allowance was fitted on",
    ),
}

SPEED_TOLERANCE = 0.25

# Every speed row, as recorded: row -> (measured tokens/s, the core's estimate when recorded, a miss's reason or "")
SPEED_ROWS: dict[str, tuple[float, float, str]] = {
    "train llama-3.1-8b LoRA r16 all-linear b4 x 2,048 +GC": (6561.8, 7272.7, ""),
    "train llama-3.2-1b bf16-true b8 x 2,048": (51887.2, 56098.5, ""),
    "train llama-3.2-3b bf16-true b4 x 2,048 +GC": (16914.4, 18060.8, ""),
    "train llama-3.1-8b QLoRA r16 all-linear nf4 b4 x 2,048 +GC": (2924.7, 3053.1, ""),  # 2,861.0 before the upcast refit
    "decode llama-3.1-8b b1 ctx 1,024 compiled": (154.2, 147.7, ""),
    "train llama-3.2-3b LoRA r16 all-linear b4 x 2,048": (16692.7, 16097.7, ""),
    "train llama-3.1-8b LoRA r16 all-linear b1 x 8,192 +GC": (6040.2, 6854.7, ""),
    "train llama-2-13b QLoRA r16 all-linear nf4 b4 x 2,048 +GC": (2729.4, 2999.2, ""),  # 2,276.6 before the upcast refit
    "decode llama-3.1-8b b64 ctx 1,024 compiled": (37.9, 37.6, ""),
    "decode llama-3.1-8b b1 ctx 1,024 eager": (
        35.4,
        25.8,
        "eager decoding at batch 1 is bound by kernel launches on the host; the core's per-step overhead is a "
        "constant in seconds fitted on the H100 machine's row (24.7 tokens/s). The H200 machine ran the same step "
        "1.43x faster, more than its memory bandwidth (compiled: 1.33x): the host, not the card, differs",
    ),
    "train llama-3.1-8b bf16-true b4 x 2,048 +GC": (8357.8, 8546.7, ""),
}


def _error(ours: float, measured: float) -> float:
    return ours / measured - 1


def _memory(m: Measured) -> dict[str, tuple[float, float]]:
    res = m.result()
    assert res is not None
    return {
        "nvidia-smi": (m.device_used_bytes, float(res.memory_per_device_bytes.total)),
        "allocated": (m.peak_allocated_bytes, float(res.allocated_peak_bytes)),
        "reserved": (m.peak_reserved_bytes, float(res.reserved_peak_bytes)),
    }


def test_rows_are_the_h200_run() -> None:
    """The file is the run the README describes: one card, every row ran, the cases the brief asked for."""
    assert {m.row["versions"]["gpu"] for m in ROWS} == {"NVIDIA H200"}
    assert {m.accelerator for m in ROWS} == {"h200"}
    assert all(m.ok for m in ROWS) and len(ROWS) == 11
    train = [m for m in ROWS if m.kind == "train"]
    assert {m.row["precision"] for m in train} == {"bf16-true", "lora", "qlora"}
    assert {m.model for m in train if m.row["precision"] == "bf16-true"} >= {"llama-3.2-1b", "llama-3.2-3b"}
    assert {m.model for m in train if m.row["precision"] == "lora"} == {"llama-3.2-3b", "llama-3.1-8b"}
    assert {m.model for m in train if m.row["precision"] == "qlora"} == {"llama-3.1-8b", "llama-2-13b"}
    assert max(m.row["seq_len"] for m in train if m.row["precision"] == "lora") == 8192
    assert {(m.batch_size, m.row["compiled"]) for m in ROWS if m.kind == "decode"} == {(1, True), (64, True), (1, False)}


def test_every_speed_row_is_recorded() -> None:
    assert set(SPEED_ROWS) == {m.label for m in SPEED}
    assert len({m.label for m in ROWS}) == len(ROWS)


@pytest.mark.parametrize("m", MEMORY, ids=lambda m: m.label)
def test_memory_check_rows(m: Measured) -> None:
    """nvidia-smi within 15%, allocated and reserved within 10%, except the recorded misses, which must stay put."""
    for quantity, (measured, ours) in _memory(m).items():
        err, tol = _error(ours, measured), MEMORY_TOLERANCE[quantity]
        miss = MEMORY_MISSES.get((m.label, quantity))
        if miss is None:
            assert abs(err) <= tol, f"{quantity}: {err:+.1%} (tolerance {tol:.0%})"
            continue
        recorded_measured, recorded_ours, reason = miss
        assert reason and measured == recorded_measured
        assert abs(err - _error(recorded_ours, recorded_measured)) <= BAND, f"{quantity}: recorded miss moved to {err:+.1%}"
        assert abs(err) > tol, f"{quantity}: a recorded miss is now within {tol:.0%} ({err:+.1%}): promote it"


def test_memory_misses_name_real_rows() -> None:
    labels = {m.label for m in MEMORY}
    assert all(label in labels and quantity in MEMORY_TOLERANCE for label, quantity in MEMORY_MISSES)


@pytest.mark.parametrize("m", MEMORY, ids=lambda m: m.label)
def test_fit_verdict_matches_the_run(m: Measured) -> None:
    """Every row ran on the 139 GiB card, and every one is called a fit."""
    assert m.predicted_fits() is m.ok


@pytest.mark.parametrize("m", SPEED, ids=lambda m: m.label)
def test_speed_check_rows(m: Measured) -> None:
    """Within 25%, or a recorded miss whose error stays within 5 points of the recorded one and stays a miss."""
    recorded_measured, recorded_ours, reason = SPEED_ROWS[m.label]
    measured, ours = m.measured_tokens_per_s, m.estimated_tokens_per_s()
    assert measured is not None and ours is not None
    assert measured == pytest.approx(recorded_measured, abs=0.05)
    err = _error(ours, measured)
    if not reason:
        assert abs(err) <= SPEED_TOLERANCE, f"{err:+.1%}"
        return
    assert abs(err - _error(recorded_ours, recorded_measured)) <= BAND, f"recorded miss moved to {err:+.1%}"
    assert abs(err) > SPEED_TOLERANCE, f"a recorded miss is now within 25% ({err:+.1%}): promote it"


def test_misses_are_few() -> None:
    """One of the eleven speed rows is a miss (eager decoding); more would mean the model has drifted, not the rows.
    Three earlier misses (3B LoRA +60%, 13B QLoRA -40%, 8B full -26%) came within 25% with issue #27's training
    model (matmuls at 78% of peak + bandwidth-bound work per layer, PEFT's fp32 adapter traffic, QLoRA's
    dequantization at the FP32 rate and fp32 head), fitted on the H100 rows, LitGPT's and torchtune's tables."""
    assert sum(bool(reason) for *_, reason in SPEED_ROWS.values()) == 1


def test_harness_grid_h200_is_what_ran() -> None:
    """Every row is a case of the grid `h200` (so a rerun refreshes them), with the parameter counts it reported."""
    from core.model.hf_config import parse_hf_config

    harness = _harness()
    cases = harness.grid("h200")
    assert "h200" in harness.GRIDS and len(cases) == len(ROWS)
    for m in ROWS:
        assert any(harness._same_case(m.row, c) for c in cases), m.label
    for m in ROWS:
        if m.kind == "train" and m.row["precision"] == "bf16-true":
            assert parse_hf_config(harness.harness_config(m.model)).total_params == m.row["total_params"]


def test_the_borderline_band_is_the_measured_error():
    """fit.BORDERLINE_FRACTION is the 90th percentile of |estimate / measured - 1| over every measured training and
    generate() peak of our H100 and H200 runs: recomputed here, so a change to the model or a new run that moves
    it fails until the constant (and its stated basis) follow."""
    import statistics

    from core.measured import measured_peaks
    from core.memory.fit import BORDERLINE_BASIS, BORDERLINE_FRACTION, borderline

    errors = [abs(p.estimated_bytes / p.measured_bytes - 1) for p in measured_peaks()]
    assert len(errors) == 48 and "48" in BORDERLINE_BASIS
    assert {p.accelerator for p in measured_peaks()} == {"h100-sxm", "h200"}
    assert statistics.quantiles(errors, n=10)[-1] == pytest.approx(BORDERLINE_FRACTION, abs=0.005)
    assert borderline(100.0, 106.0) and borderline(100.0, 94.0) and not borderline(100.0, 108.0) and not borderline(100.0, 92.0)
