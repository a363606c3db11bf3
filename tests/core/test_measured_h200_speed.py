"""Our training-speed model against the H200 speed rows of issue #27 (data/measurements/speed/h200-2026-11-26.jsonl,
bench/gpu/harness.py's grid `speed`): LoRA baselines for the 13B QLoRA row of the H200 run and a 1B LoRA row.

The LoRA rows are CHECK rows: nothing was fitted on them. The two no-prep QLoRA rows are not checked as rows: each
with its QLoRA run with the upcast (h200-2026-11-26.jsonl) is one of the two pairs prepare_model_for_kbit_training's
upcast constants were fitted on (core/speed/timing.py, 2026-11-26). Speed within 25%, or a recorded miss whose error stays
within 5 points of the recorded one and stays a miss. The grid's three QLoRA cases did not run in the first call
(the lent machine had no bitsandbytes); the lead's second call (bitsandbytes 0.50.2 carried as a wheel, same card,
file `speed-qlora`) ran them: Llama 3.1 8B and Llama 2 13B QLoRA without prepare_model_for_kbit_training
("no-prep": bf16 norms, embeddings and head), and Llama 3.2 1B QLoRA with it. Memory of these rows is not checked here (the file lives
outside the directory the memory checks and the borderline band read; see data/measurements/README.md)."""

from __future__ import annotations

import pytest

from core.catalog.presets import DATA_DIR
from core.measured import Measured, load_measured
from tests.core.recorded import check_row
from tests.core.test_measured_h100 import _harness

ROWS = load_measured(DATA_DIR / "measurements" / "speed" / "h200-2026-11-26.jsonl")
TOLERANCE, BAND = 0.25, 0.05

# row -> (measured tokens/s, the core's estimate when recorded, a miss's reason or "")
SPEED_ROWS: dict[str, tuple[float, float, str]] = {
    "train llama-2-13b LoRA r16 all-linear b4 x 2,048 +GC": (3987.4, 4638.4, ""),
    "train llama-3.2-1b QLoRA r16 all-linear nf4 b4 x 2,048 +GC": (8991.0, 8900.0, ""),
    "train llama-3.2-1b LoRA r16 all-linear b4 x 2,048 +GC": (
        26772.5,
        34333.8,
        "PEFT's adapter overhead is modelled as bandwidth-bound traffic fitted on the H100's 8B LoRA row, but the "
        "H200 ran that 8B row only 1.11x faster than the H100 (its bandwidth is 1.43x): the overhead is partly not "
        "bandwidth (thin fp32 matmuls, launches). On the 1B it is most of the step, so the model is 28% fast here "
        "while the 8B and 13B rows are 11-16% fast",
    ),
}


# QLoRA without prepare_model_for_kbit_training: the scenario has no such switch (the hf stack always upcasts), so
# these rows check the dequantization term alone (test_bitsandbytes_dequantization_is_nearly_free_on_the_h200).
NO_PREP = {"train llama-3.1-8b QLoRA r16 all-linear nf4 no-prep b4 x 2,048 +GC", "train llama-2-13b QLoRA r16 all-linear nf4 no-prep b4 x 2,048 +GC"}
CHECKED = [m for m in ROWS if m.label not in NO_PREP]


def test_rows_are_the_speed_run() -> None:
    assert {m.row["versions"]["gpu"] for m in ROWS} == {"NVIDIA H200"} and all(m.ok for m in ROWS)
    assert {m.label for m in ROWS} == set(SPEED_ROWS) | NO_PREP
    cases = _harness().grid("speed")
    assert all(any(_harness()._same_case(m.row, c) for c in cases) for m in ROWS)


@pytest.mark.parametrize("m", CHECKED, ids=lambda m: m.label)
def test_speed_check_rows(m: Measured) -> None:
    measured, ours = m.measured_tokens_per_s, m.estimated_tokens_per_s()
    assert measured == pytest.approx(SPEED_ROWS[m.label][0], abs=0.05) and ours is not None
    check_row(ours, measured, SPEED_ROWS[m.label], TOLERANCE, BAND)


def test_qlora_extra_time_over_lora() -> None:
    """What the 13B LoRA baseline shows: QLoRA's extra time over LoRA is 0.95 s per step on Llama 2 13B against
    1.55 s on Llama 3.1 8B (H200 run), with 1.8x the quantized parameters, so it is not dequantization. The model
    puts it in prepare_model_for_kbit_training's fp32 upcast (a head term with the vocabulary, a residual-stream
    term with layers x hidden), whose two constants were fitted on these two cards' pairs with and without it
    (core/speed/timing.py): both extras come out within 10%. (Until 2026-11-26 the 13B's was a recorded miss at
    1.93x the measured, from a dequantization constant at the FP32 rate.)"""
    from core.measured import load_measured as load

    h200 = {m.label: m for m in load(DATA_DIR / "measurements" / "h200-2026-11-26.jsonl")}
    lora13 = next(m for m in ROWS if m.model == "llama-2-13b")
    q13 = h200["train llama-2-13b QLoRA r16 all-linear nf4 b4 x 2,048 +GC"]
    q8, lora8 = h200["train llama-3.1-8b QLoRA r16 all-linear nf4 b4 x 2,048 +GC"], h200["train llama-3.1-8b LoRA r16 all-linear b4 x 2,048 +GC"]
    tokens = 4 * 2048

    def extra(q: Measured, lora: Measured, measured: bool) -> float:
        speed = (lambda m: m.measured_tokens_per_s) if measured else (lambda m: m.estimated_tokens_per_s())
        return tokens / speed(q) - tokens / speed(lora)

    assert extra(q13, lora13, True) == pytest.approx(0.95, abs=0.01) and extra(q8, lora8, True) == pytest.approx(1.55, abs=0.01)
    assert extra(q8, lora8, False) == pytest.approx(extra(q8, lora8, True), rel=0.10)
    assert extra(q13, lora13, False) == pytest.approx(extra(q13, lora13, True), rel=0.10)


def test_bitsandbytes_dequantization_is_nearly_free_on_the_h200() -> None:
    """QLoRA's time over LoRA, parted on one card at b4 x 2,048 with checkpointing: without
    prepare_model_for_kbit_training the NF4 base costs 0.006 s a step on Llama 3.1 8B (6,530 against LoRA's 6,562
    tokens/s) and 0.001 s on Llama 2 13B (3,985 against 3,987): dequantizing is under 0.5% of the step. The model's
    dequantization is traffic at the bandwidth (2.5 bytes a weight and pass, not fitted): 0.011 s and 0.020 s a step
    here, under 2% of it. (Until 2026-11-26 it was a recorded miss: a constant at the FP32 rate, fitted on LitGPT's
    A10G runtimes, said 0.86 s and 1.56 s.)"""
    from core.catalog.accelerators import get_accelerator
    from core.speed.timing import dequant_seconds_per_token

    rows = {m.label: m for m in ROWS}
    tokens = 4 * 2048
    for size, lora_label, measured_extra, modelled_extra in (
        ("llama-3.1-8b", None, 0.006, 0.011),
        ("llama-2-13b", "train llama-2-13b LoRA r16 all-linear b4 x 2,048 +GC", 0.0014, 0.020),
    ):
        q = rows[f"train {size} QLoRA r16 all-linear nf4 no-prep b4 x 2,048 +GC"]
        if lora_label is None:  # the 8B LoRA baseline is in the first H200 file
            from core.measured import load_measured as load

            h200 = {m.label: m for m in load(DATA_DIR / "measurements" / "h200-2026-11-26.jsonl")}
            lora = h200["train llama-3.1-8b LoRA r16 all-linear b4 x 2,048 +GC"]
        else:
            lora = rows[lora_label]
        step = tokens / lora.measured_tokens_per_s
        extra = tokens / q.measured_tokens_per_s - step
        assert extra == pytest.approx(measured_extra, abs=0.003) and extra < 0.01 * step
        sc = q.scenario()
        modelled = dequant_seconds_per_token(sc, sc.architecture, get_accelerator(q.accelerator)) * tokens
        assert modelled == pytest.approx(modelled_extra, abs=0.002) and modelled < 0.02 * step


def test_the_upcast_share_of_the_step_is_the_measured_one() -> None:
    """TrainingTime.upcast_fraction (shown on the Training page and by the CLI): on the H200's Llama 3.1 8B QLoRA pair,
    prepare_model_for_kbit_training's share of the step is 1 - 2,924.7 / 6,530.3 = 55% measured; the model's share is
    within 3 points (its constants were fitted on this pair and the 13B's). None on a stack that skips it, none when
    the scenario sets an MFU (no per-token model then)."""
    from core.catalog.accelerators import get_accelerator
    from core.measured import load_measured as load
    from core.speed.timing import training_time

    h200 = {m.label: m for m in load(DATA_DIR / "measurements" / "h200-2026-11-26.jsonl")}
    prep = h200["train llama-3.1-8b QLoRA r16 all-linear nf4 b4 x 2,048 +GC"]
    no_prep = next(m for m in ROWS if m.label == "train llama-3.1-8b QLoRA r16 all-linear nf4 no-prep b4 x 2,048 +GC")
    measured = 1 - prep.measured_tokens_per_s / no_prep.measured_tokens_per_s
    sc, acc = prep.scenario(), get_accelerator("h200")
    assert sc is not None and measured == pytest.approx(0.552, abs=0.002)
    t = training_time(sc.model_copy(update={"train_tokens": 1e9}), acc, 1)
    assert t.upcast_fraction == pytest.approx(measured, abs=0.03) and t.dequant_fraction < 0.02
    assert training_time(sc.model_copy(update={"train_tokens": 1e9, "training_stack": "torchtune"}), acc, 1).upcast_fraction == 0.0
    assert training_time(sc.model_copy(update={"train_tokens": 1e9, "mfu": 0.4}), acc, 1).upcast_fraction == 0.0
