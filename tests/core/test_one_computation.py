"""One way for a number to travel (issue 28): the Explain table prints the numbers the memory chart draws, from the
same computation, and "Memory left for the KV cache" is computed once.

- Every Explain row's bytes are the breakdown's component, exactly, over a grid of scenarios.
- A formula changed by hand (the activations of a block, the per-precision byte table) moves the chart's breakdown
  and Explain's printed numbers together: Explain reads what estimate_memory computed (MemoryResult.states and
  .activation_parts) and the byte table (components.full_state_bytes) instead of computing them again.
- The engine's KV pool, the KV chart's line (sweep's kv_headroom) and the fit test agree."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from core.memory import components
from core.memory.estimate import estimate_memory
from core.memory.explain import explain
from core.memory.sweep import sweep
from core.scenario import Scenario

TRAINING = [
    {"method": method, "precision": precision, "gradient_checkpointing": ckpt, "training_stack": stack, "tensor_parallel": tp}
    for method, precision, ckpt, stack, tp in itertools.product(["full", "lora", "qlora"], ["bf16", "fp32", "bf16-true"], [False, True], ["hf", "deepspeed"], [1, 2])
    if not (method == "qlora" and precision != "bf16")
]
INFERENCE = [
    {"serving_engine": engine, "seq_len": seq, "batch_size": batch, "tensor_parallel": tp}
    for engine, seq, batch, tp in itertools.product(["vllm", "hf-transformers", "sglang"], [2048, 32768], [1, 8], [1, 2])
]


def scenario(mode: str, **settings) -> Scenario:
    return Scenario.model_validate({"model": "llama-3.1-8b", "accelerator": "h100-sxm", "mode": mode, **settings})


def rows(sc: Scenario):
    result = estimate_memory(sc)
    return result, {e.component: e for e in explain(sc, result)}


@pytest.mark.parametrize("settings", TRAINING + INFERENCE, ids=str)
def test_explain_rows_are_the_breakdowns_components(settings):
    sc = scenario("inference" if "serving_engine" in settings else "training", **settings)
    result, table = rows(sc)
    m = result.memory_per_device_bytes
    names = [n for n in components.COMPONENT_NAMES if n in table]
    assert names, table.keys()
    for name in names:
        assert table[name].bytes == getattr(m, name), name
    if sc.mode == "training":
        assert set(names) == set(components.COMPONENT_NAMES) - {"kv_cache"}


def per_layer_text(sc: Scenario) -> str:
    text = rows(sc)[1]["activations"].numbers.render("GiB", digits=3)
    return text.split(" B per token per layer")[0].split(" x ")[-1]


def test_a_changed_activation_formula_moves_the_chart_and_explain_together(monkeypatch):
    sc = scenario("training", method="lora")
    before = estimate_memory(sc).memory_per_device_bytes.activations
    per_layer = float(per_layer_text(sc).replace(",", ""))
    original = components.layer_activation_bytes
    monkeypatch.setattr(components, "layer_activation_bytes", lambda *a, **k: tuple(2 * x for x in original(*a, **k)))
    after = estimate_memory(sc).memory_per_device_bytes.activations
    assert after > before, "the chart's activations moved"
    assert float(per_layer_text(sc).replace(",", "")) == pytest.approx(2 * per_layer, abs=1), "and Explain's numbers with them"


def test_a_changed_byte_table_moves_the_chart_and_explain_together(monkeypatch):
    sc = scenario("training", method="full", precision="fp32")
    n = sc.architecture.total_params
    original = components.full_state_bytes
    monkeypatch.setattr(components, "full_state_bytes", lambda s: original(s)._replace(param=3.0))
    result, table = rows(sc)
    assert result.memory_per_device_bytes.weights == pytest.approx(3 * n, rel=1e-9)
    assert f"{n:,} x 3 B (fp32)" in table["weights"].numbers.render("GiB")


@pytest.mark.parametrize("settings", INFERENCE, ids=str)
def test_memory_left_for_the_kv_cache_is_one_computation(settings):
    sc = scenario("inference", **settings)
    result = estimate_memory(sc)
    m = result.memory_per_device_bytes
    grid = sweep(sc, sc.batch_size, np.array([sc.seq_len]))
    line = float(grid["kv_headroom"][0])  # the KV chart's "Memory left for KV cache" at this context
    assert line == pytest.approx(max(0.0, result.fit_capacity_bytes - (m.total - m.kv_cache)), abs=4)
    if result.kv_pool_bytes is not None:  # an engine that pre-allocates: its pool is the same number
        assert result.kv_pool_bytes == round(line)
    assert result.fits == (m.kv_cache <= line + 4) or abs(m.kv_cache - line) <= 4, "the KV cache fits exactly when it is under the line"
