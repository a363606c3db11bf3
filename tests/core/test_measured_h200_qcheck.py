"""QLoRA's time model out of sample (issue #27): the H200 rows of bench/gpu/harness.py's grid `qcheck`
(data/measurements/speed/h200-qcheck-2026-11-26.jsonl). The fp32 upcast's two constants (core/speed/timing.py) were
fitted on the Llama 3.1 8B and Llama 2 13B pairs of the speed grid; these shapes move its two terms apart: Qwen2.5-14B
(152k vocabulary, 48 layers of 5,120) and Gemma 2 9B's sizes (256k tied vocabulary, 42 layers of 3,584), each with its
LoRA baseline, Qwen's QLoRA without prepare_model_for_kbit_training, the 8B at one sequence a step, and Mistral NeMo
12B (131k vocabulary, 40 x 5,120) with its LoRA, run in a second call (`file: qcheck-nemo`) after the first call's
budget stopped its QLoRA case.

Every row is a CHECK row: our estimates were written down before the run (stop 37's note) and nothing was refitted
on them. Since 2026-11-27 the upcast is the profiled model of tests/core/test_upcast_terms.py (fp32 head GEMMs and
fp32 attention on SDPA's math path), calibrated on other pairs; these rows' QLoRA-over-LoRA times are its checks.
Speed within 25%, or a recorded miss whose error stays within 5 points of the recorded one and stays a miss."""

from __future__ import annotations

import pytest

from core.catalog.presets import DATA_DIR
from core.measured import Measured, load_measured
from tests.core.recorded import check_row
from tests.core.test_measured_h100 import _harness

PATH = DATA_DIR / "measurements" / "speed" / "h200-qcheck-2026-11-26.jsonl"
ROWS = load_measured(PATH)
TOLERANCE, BAND = 0.25, 0.05
TOKENS = 4 * 2048  # a step of the b4 rows

# row -> (measured tokens/s, the core's estimate before the run, a miss's reason or "")
SPEED_ROWS: dict[str, tuple[float, float, str]] = {
    "train qwen2.5-14b QLoRA r16 all-linear nf4 b4 x 2,048 +GC": (1640.2, 1832.0, ""),
    "train qwen2.5-14b LoRA r16 all-linear b4 x 2,048 +GC": (3716.3, 4067.0, ""),
    "train gemma-2-9b QLoRA r16 all-linear nf4 b4 x 2,048 +GC": (2359.4, 2135.0, ""),
    "train gemma-2-9b LoRA r16 all-linear b4 x 2,048 +GC": (5058.9, 6087.0, ""),
    "train llama-3.1-8b QLoRA r16 all-linear nf4 b1 x 2,048 +GC": (2622.5, 3016.0, ""),
    "train mistral-nemo-12b QLoRA r16 all-linear nf4 b4 x 2,048 +GC": (2178.0, 2177.0, ""),
    "train mistral-nemo-12b LoRA r16 all-linear b4 x 2,048 +GC": (4493.9, 4921.0, ""),
}
NO_PREP = "train qwen2.5-14b QLoRA r16 all-linear nf4 no-prep b4 x 2,048 +GC"
# Memory (nvidia-smi's used bytes) of the rows whose stand-in has the preset's layer: within 10%. The Gemma rows are
# not checked for memory: the harness builds a Llama with Gemma 2 9B's sizes (two norms a layer, no logit
# soft-capping) while the preset is Gemma 2's own (four norms a layer), so the estimate is of another model.
MEMORY_TOLERANCE = 0.10
MEMORY_ROWS = [*(k for k in SPEED_ROWS if "gemma" not in k), NO_PREP]


def _row(label: str) -> Measured:
    return next(m for m in ROWS if m.label == label)


def test_rows_are_the_qcheck_run() -> None:
    assert {m.row["versions"]["gpu"] for m in ROWS} == {"NVIDIA H200"}
    assert {m.label for m in ROWS} == set(SPEED_ROWS) | {NO_PREP} and all(m.ok for m in ROWS)
    assert {m.row["file"] for m in ROWS if "nemo" in m.model} == {"qcheck-nemo"}
    harness = _harness()
    cases = harness.grid("qcheck")
    assert all(any(harness._same_case(m.row, c) for c in cases) for m in ROWS)


@pytest.mark.parametrize("label", list(SPEED_ROWS))
def test_speed_out_of_sample(label: str) -> None:
    m = _row(label)
    measured, ours = m.measured_tokens_per_s, m.estimated_tokens_per_s()
    assert measured == pytest.approx(SPEED_ROWS[label][0], abs=0.05) and ours is not None
    check_row(ours, measured, SPEED_ROWS[label], TOLERANCE, BAND)


@pytest.mark.parametrize("label", MEMORY_ROWS)
def test_memory_out_of_sample(label: str) -> None:
    m = _row(label)
    if label == NO_PREP:  # the harness's stack is the Hugging Face one, whose QLoRA upcasts: see the Axolotl test below
        assert m.estimate() > (1 + MEMORY_TOLERANCE) * m.measured_used_bytes  # the fp32 norms, embeddings and head it leaves bf16
        return
    assert m.estimate() == pytest.approx(m.measured_used_bytes, rel=MEMORY_TOLERANCE)


def test_axolotls_qlora_is_the_row_without_the_upcast() -> None:
    """Axolotl runs prepare_model_for_kbit_training and then casts every norm, the embeddings and the head back to
    bf16 (core/memory/stacks.py, axolotl-ai-cloud/axolotl@067b021 src/axolotl/loaders/model.py), leaving the model as
    this row ran it: NF4 base, bf16 everything else, PEFT's fp32 adapters, checkpointing as configured. The stack was
    written from Axolotl's source after this run; nothing in it is fitted on the row. Under the Hugging Face stack the
    row's estimate is -51% speed and +23% memory; under Axolotl's, +7% and +3% (2026-11-27)."""
    m = _row(NO_PREP)
    sc = m.scenario()
    assert sc is not None
    axolotl = sc.model_copy(update={"training_stack": "axolotl", "train_tokens": 1e9})
    from core.catalog.accelerators import get_accelerator
    from core.memory.estimate import estimate_memory
    from core.speed.timing import training_time

    ours_tokens_per_s = training_time(axolotl, get_accelerator("h200"), 1).tokens_per_s
    assert ours_tokens_per_s == pytest.approx(m.measured_tokens_per_s, rel=TOLERANCE)
    sdpa = sc.model_copy(update={"flash_attention": False, "train_tokens": 1e9})  # the Hugging Face stack as the harness runs it
    assert training_time(sdpa, get_accelerator("h200"), 1).tokens_per_s < (1 - TOLERANCE) * m.measured_tokens_per_s  # the upcast's time, not run here
    assert estimate_memory(axolotl).memory_per_device_bytes.total == pytest.approx(m.measured_used_bytes, rel=MEMORY_TOLERANCE)


def test_dequantization_stays_nearly_free_at_14b() -> None:
    """Without prepare_model_for_kbit_training Qwen2.5-14B's QLoRA step ran at its LoRA's speed (3,755 vs 3,716
    tokens/s: within the runs' noise, as the 8B and 13B pairs of the speed grid); the model's dequantization traffic is
    20 ms of a 2.2 s step (1% of it), where the early-2024 Ampere rows would need 6-10 times that."""
    from core.speed.timing import dequant_seconds_per_token

    lora, no_prep = _row("train qwen2.5-14b LoRA r16 all-linear b4 x 2,048 +GC"), _row(NO_PREP)
    measured_extra_s = TOKENS / no_prep.measured_tokens_per_s - TOKENS / lora.measured_tokens_per_s
    sc = lora.scenario().model_copy(update={"method": "qlora", "weights_format": "nf4"})
    from core.catalog.accelerators import get_accelerator

    ours_s = dequant_seconds_per_token(sc, sc.architecture, get_accelerator("h200")) * TOKENS
    lora_step_s = TOKENS / lora.measured_tokens_per_s
    assert abs(measured_extra_s) < 0.05 and ours_s == pytest.approx(0.020, abs=0.002) and ours_s < 0.011 * lora_step_s


# QLoRA's time over its LoRA baseline (the upcast and the dequantization): measured, the core's estimate before the
# run, a miss's reason or "".
EXTRA_ROWS: dict[str, tuple[float, float, str]] = {
    "qwen2.5-14b": (2.790, 2.457, ""),
    "gemma-2-9b": (1.853, 2.491, ""),  # a recorded miss (+34%) until the upcast's terms were profiled: tests/core/test_upcast_terms.py
    "mistral-nemo-12b": (1.939, 2.098, ""),
}


@pytest.mark.parametrize("model", list(EXTRA_ROWS))
def test_qlora_extra_time_over_lora_out_of_sample(model: str) -> None:
    q = _row(f"train {model} QLoRA r16 all-linear nf4 b4 x 2,048 +GC")
    lora = _row(f"train {model} LoRA r16 all-linear b4 x 2,048 +GC")
    measured = TOKENS / q.measured_tokens_per_s - TOKENS / lora.measured_tokens_per_s
    ours = TOKENS / q.estimated_tokens_per_s() - TOKENS / lora.estimated_tokens_per_s()
    assert measured == pytest.approx(EXTRA_ROWS[model][0], abs=0.002)
    check_row(ours, measured, EXTRA_ROWS[model], TOLERANCE, BAND)
