"""The training planner's fast path (core/money/run_bill.run_hours: the per-part token costs computed once, no models
written out) gives, to the last bit, what run_time gives: the same formulas in the same order, on every kind of run
the search prices (LoRA, QLoRA with its upcast, full with ZeRO-3 and offload, tensor and pipeline parallelism, a
scenario's own MFU, a power-capped T4, a TPU)."""

from __future__ import annotations

import pytest

from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.money.run_bill import run_hours, run_time
from core.scenario import Scenario
from core.speed.timing import token_costs, training_time

RUNS = {
    "LoRA 8B on 8 H100s": (Scenario(model="llama-3.1-8b", method="lora", train_tokens=2e7, batch_size=4), "h100-sxm", Layout(8, 1, 1), 4, 2),
    "QLoRA 8B, SDPA's fp32 path": (Scenario(model="llama-3.1-8b", method="qlora", train_tokens=2e7, flash_attention=False), "a100-sxm-80gb", Layout(1, 1, 1), 2, 8),
    "full 70B, ZeRO-3 + offload": (
        Scenario(model="llama-3.1-70b", method="full", train_tokens=1e9, zero_stage=3, offload="optimizer"),
        "h100-sxm",
        Layout(16, 1, 1),
        1,
        16,
    ),
    "full 70B, TP 8 x PP 4": (Scenario(model="llama-3.1-70b", method="full", train_tokens=1e10), "h200", Layout(4, 8, 4), 1, 32),
    "the scenario's own MFU": (Scenario(model="llama-3.2-1b", method="full", train_tokens=1e9, mfu=0.3), "l4", Layout(2, 1, 1), 8, 4),
    "a power-capped T4 in fp16": (Scenario(model="llama-3.2-1b", method="lora", precision="fp16", train_tokens=1e8), "t4", Layout(1, 1, 1), 4, 4),
    "a TPU slice": (Scenario(model="llama-3.1-8b", method="full", train_tokens=1e9, training_stack="hf-xla"), "tpu-v5p", Layout(8, 1, 1), 2, 8),
}


@pytest.mark.parametrize("name", RUNS)
def test_run_hours_is_run_time(name: str) -> None:
    sc, aid, layout, batch, accumulation = RUNS[name]
    acc = get_accelerator(aid)
    costs = token_costs(sc, acc)
    rt = run_time(sc, acc, layout, batch=batch, accumulation=accumulation)
    assert run_hours(sc, acc, layout, costs, batch=batch, accumulation=accumulation) == (rt.compute_hours, rt.scaling_efficiency)
    # and the token costs handed in change nothing of training_time's own answer
    assert training_time(sc, acc, layout.devices, layout=layout, costs=costs) == training_time(sc, acc, layout.devices, layout=layout)
    assert 0 < rt.scaling_efficiency <= 1 and rt.compute_hours > 0


def test_without_tokens_it_says_what_run_time_says() -> None:
    sc = Scenario(model="llama-3.1-8b", method="lora")
    acc = get_accelerator("h100-sxm")
    with pytest.raises(ValueError, match="train_tokens"):
        run_hours(sc, acc, Layout(1, 1, 1), token_costs(sc, acc), batch=1, accumulation=1)
