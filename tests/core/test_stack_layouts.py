"""data/stack_layouts.csv's optimizer columns (`optimizers`, `qlora_optimizers`, `optimizers_source`): validated on
load, and held by layout_problem / part_problem (the estimate's stack_problem) with the planner's AdamW untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.catalog.accelerators import CatalogError, get_accelerator, read_catalog_rows
from core.catalog.stack_layouts import LAYOUTS_CSV, OPTIMIZERS, StackLayouts, layout_problem, load_stack_layouts, optimizer_problem, part_problem
from tests.core.csv_rows import with_cells


def test_every_stack_names_its_optimizers_with_a_source():
    rows = load_stack_layouts()
    assert set(OPTIMIZERS) == {"adamw", "adamw-8bit", "sgd", "adafactor"}
    for s in rows.values():
        assert "adamw" in s.optimizers, s.stack  # the planner plans AdamW on every stack
        assert set(s.optimizers) <= set(OPTIMIZERS) and len(set(s.optimizers)) == len(s.optimizers)
        assert "http" in s.optimizers_source, s.stack
    assert set(rows["megatron"].optimizers) == {"adamw", "sgd"}  # --optimizer: adam, sgd, muon, ... (no Adafactor)
    assert "adamw-8bit" not in rows["mlx-lm"].optimizers and "adamw-8bit" not in rows["hf-xla"].optimizers
    assert rows["litgpt"].qlora_optimizers == ("adamw",)


def _rewritten(tmp_path: Path, **cells: str) -> Path:
    """The table with the hf row's cells replaced."""
    return with_cells(LAYOUTS_CSV, tmp_path, 0, cells)


@pytest.mark.parametrize(
    "cells",
    [
        {"optimizers": "adamw;lion"},  # not a scenario optimizer
        {"optimizers": ""},  # required
        {"optimizers_source": ""},  # unsourced
        {"optimizers": "adamw;sgd", "qlora_optimizers": "adafactor"},  # QLoRA's must be among the stack's
    ],
)
def test_a_bad_optimizer_cell_is_refused_on_load(tmp_path, cells):
    with pytest.raises(CatalogError):
        read_catalog_rows(_rewritten(tmp_path, **cells), StackLayouts)
    assert read_catalog_rows(_rewritten(tmp_path), StackLayouts)  # the table itself loads


def test_the_optimizer_checks():
    h100, tpu, mac, gaudi = (get_accelerator(a) for a in ("h100-sxm", "tpu-v5e", "apple-m3-max", "gaudi3"))
    # the stack's row
    assert layout_problem("megatron", "full", 0, 8, 4, 1, "adafactor") == "megatron has no Adafactor (it runs AdamW, SGD with momentum)"
    assert layout_problem("megatron", "full", 0, 8, 4, 1, "sgd") is None
    assert layout_problem("mlx-lm", "lora", 0, 1, 1, 1, "adamw-8bit") is not None
    assert layout_problem("litgpt", "qlora", 0, 1, 1, 1, "adamw-8bit") is not None and layout_problem("litgpt", "lora", 0, 1, 1, 1, "adamw-8bit") is None
    # the part's kernels: 8-bit AdamW needs bitsandbytes' CUDA or ROCm kernels, like QLoRA's 4-bit base
    assert part_problem(h100, "full", "hf", "adamw-8bit") is None
    for part in (tpu, mac, gaudi):
        assert "bitsandbytes 8-bit" in (part_problem(part, "full", "hf", "adamw-8bit") or ""), part.id
        assert part_problem(part, "full", "hf", "sgd") is None
    assert part_problem(mac, "lora", "mlx-lm", "adafactor") is None  # MLX's own optimizers
    assert optimizer_problem("hf", "full", "adamw-8bit", mac) == part_problem(mac, "full", "hf", "adamw-8bit")
    assert optimizer_problem("mlx-lm", "lora", "sgd", mac) is None
    # the default is the planner's AdamW: every caller that names no optimizer gets the answers it had
    for stack in load_stack_layouts():
        assert layout_problem(stack, "full", 0, 1, 1) == layout_problem(stack, "full", 0, 1, 1, 1, "adamw")
        assert part_problem(h100, "qlora", stack) == part_problem(h100, "qlora", stack, "adamw")


def test_the_estimate_says_it_and_offers_no_8bit_adamw_where_it_cannot_run():
    """The estimate's stack_problem names the optimizer's problem; its fixes no longer offer 8-bit AdamW on a part
    or stack that cannot run it (a fix may not add a problem: core/memory/fixes._fix)."""
    from core.memory.estimate import estimate_memory
    from core.memory.fixes import _fix
    from core.scenario import Scenario

    base = {"model": "llama-3.1-8b", "mode": "training", "method": "full", "batch_size": 1, "seq_len": 2048}
    eight = estimate_memory(Scenario.model_validate({**base, "accelerator": "tpu-v5e", "training_stack": "hf-xla", "optimizer": "adamw-8bit"}))
    assert eight.stack_problem and "8-bit AdamW" in eight.stack_problem
    for part, stack, offered in (("tpu-v5e", "hf-xla", False), ("h100-sxm", "megatron", False), ("apple-m3-max", "mlx-lm", False), ("h100-sxm", "hf", True)):
        sc = Scenario.model_validate({**base, "accelerator": part, "training_stack": stack})
        assert estimate_memory(sc).stack_problem is None, (part, stack)
        fix = _fix(sc, ("8-bit AdamW",), {"optimizer": "adamw-8bit"}, 1e30, None)  # room for anything: only the problem can refuse it
        assert (fix is not None) is offered, (part, stack)


def test_every_stack_names_its_cpu_offloads_and_the_estimate_holds_it():
    """The `offload` column (stop 39): the stacks whose launch sets the scenario's CPU offload, validated on load; a
    scenario that asks a stack for one it lacks gets one line, the planner (no offload) is untouched."""
    rows = load_stack_layouts()
    assert {k for k, s in rows.items() if s.offload} == {"hf", "torchtune", "deepspeed", "megatron", "axolotl"}
    assert rows["megatron"].offload == ("optimizer",)  # --optimizer-cpu-offload: no parameter offload
    assert all(len(s.offload_source) > 10 for s in rows.values())
    assert layout_problem("litgpt", "full", 3, 1, 1, 4, offload="optimizer") == "litgpt has no CPU offload"
    assert layout_problem("megatron", "full", 1, 1, 1, 4, offload="optimizer") is None
    assert layout_problem("deepspeed", "full", 3, 1, 1, 4, offload="optimizer+params") is None
    assert layout_problem("litgpt", "full", 3, 1, 1, 4) is None


def test_a_bad_offload_cell_is_refused(tmp_path):
    with pytest.raises(CatalogError):
        read_catalog_rows(_rewritten(tmp_path, offload="gpu"), StackLayouts)


def test_a_part_no_stack_trains_on_is_named_in_words():
    """ "no training stack ... runs on a custom" (and "a lpu", "a wafer") read oddly (stop 50's hosting review, LOW 8):
    the part's kind is said in words, and why where it only serves."""
    from core.catalog.accelerators import custom_accelerator_id
    from core.catalog.stack_layouts import training_part_problem

    said = {aid: training_part_problem(get_accelerator(aid), "lora", "hf") for aid in ("groq-lpu", "cerebras-wse-3", custom_accelerator_id(48, 1000, 200))}
    assert said["groq-lpu"] == "groq-lpu: no training stack in data/stack_layouts.csv runs on a Groq LPU (it serves only)"
    assert said["cerebras-wse-3"].endswith("runs on a Cerebras wafer (it serves only)")
    custom = said[custom_accelerator_id(48, 1000, 200)]
    assert custom is not None and "runs on a part given only by its memory, bandwidth and TFLOP/s" in custom and "a custom" not in custom
    assert training_part_problem(get_accelerator("h100-sxm"), "lora", "hf") is None
