"""Decode steps over a long KV cache, measured on our H200 (data/measurements/speed/h200-longctx-2026-11-26.jsonl,
`python3 bench/gpu/harness.py --grid longctx`, 2026-11-26): Llama 3.1 8B with transformers' static cache under
torch.compile, batch 1 at 32,768 tokens and batch 8 at 8,192. The grid's third case (eager, batch 1 at 32,768) was
left out by the run's time budget.

CHECK rows (nothing fitted on them) of the engine's grouped-query K/V traffic: with a static cache transformers
passes an attention mask, so SDPA's `enable_gqa` path is not taken and `repeat_kv` copies K and V out to every query
head each step (transformers 5.17 integrations/sdpa_attention.py, use_gqa_in_sdpa). The roofline reads the cache
1 + 2 x 4 = 9 times over (core/memory/engines.py `kv_expanded`); at these contexts that is most of the step."""

from __future__ import annotations

import pytest

from core.catalog.presets import DATA_DIR
from core.measured import Measured, load_measured
from core.memory.engines import ENGINES
from tests.core.test_measured_h100 import _harness

ROWS = load_measured(DATA_DIR / "measurements" / "speed" / "h200-longctx-2026-11-26.jsonl")
TOLERANCE = 0.25
MEASURED_TOKENS_PER_S = {"decode llama-3.1-8b b1 ctx 32,768 compiled": 60.99, "decode llama-3.1-8b b8 ctx 8,192 compiled": 38.31}


def test_rows_are_the_long_context_run() -> None:
    assert {m.row["versions"]["gpu"] for m in ROWS} == {"NVIDIA H200"} and all(m.ok for m in ROWS)
    assert {m.label for m in ROWS} == set(MEASURED_TOKENS_PER_S)
    harness = _harness()
    grid = harness.grid("longctx")
    assert all(any(harness._same_case(m.row, c) for c in grid) for m in ROWS)


@pytest.mark.parametrize("m", ROWS, ids=lambda m: m.label)
def test_long_context_decode_within_25_percent(m: Measured) -> None:
    assert m.measured_tokens_per_s == pytest.approx(MEASURED_TOKENS_PER_S[m.label], abs=0.01)
    ours = m.estimated_tokens_per_s()
    assert ours is not None and abs(ours / m.measured_tokens_per_s - 1) <= TOLERANCE


@pytest.mark.parametrize("m", ROWS, ids=lambda m: m.label)
def test_the_expanded_kv_reads_are_what_makes_it_right(m: Measured, monkeypatch) -> None:
    """Read once instead (as SDPA's enable_gqa would), the step would be about twice as fast as measured."""
    engine = m.scenario().serving_engine
    monkeypatch.setitem(ENGINES, engine, ENGINES[engine]._replace(kv_expanded=False))
    ours = m.estimated_tokens_per_s()
    assert ours is not None and ours / m.measured_tokens_per_s - 1 > 0.5
