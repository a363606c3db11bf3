"""The Method page prints the per-precision byte table the memory estimate sizes the states with
(core.memory.components.full_state_bytes, through training_states), never a copy of it (issue 28)."""

from __future__ import annotations

import pytest

from app_pages.shared import method_text
from app_pages.shared.method_text import FORMULAS, STATE_LAYOUTS, state_bytes_table
from core.memory import components
from core.scenario import Scenario


def scenario(**settings) -> Scenario:
    return Scenario.model_validate({"model": "llama-3.1-8b", "accelerator": "h100-sxm", "mode": "training", "method": "full", **settings})


def test_a_changed_byte_table_moves_the_method_page(monkeypatch):
    original = components.full_state_bytes
    monkeypatch.setattr(components, "full_state_bytes", lambda s: original(s)._replace(param=3.0))
    assert "| fp32 | 3 B |" in method_text.state_bytes_table()


def test_the_method_page_prints_the_byte_table_the_estimate_uses():
    assert state_bytes_table() in FORMULAS[0][1]
    for label, settings in STATE_LAYOUTS:
        sc = scenario(optimizer="sgd", **settings)
        states = components.training_states(sc, sc.architecture)
        t = components.full_state_bytes(sc)
        assert states.bytes_per_param == t
        n = sc.architecture.total_params
        assert (states.weights, states.weight_copies, states.gradients) == (t.param * n, t.copies * n, t.grad * n), label
        assert states.optimizer == pytest.approx((t.state_scale + t.master) * n), label  # SGD: K = 4 B per fp32 state
        assert f"| {label} | {t.param:g} B | {t.grad:g} B |" in state_bytes_table()


def test_the_method_page_shows_our_own_gpu_runs_beside_the_published_cases():
    """The Memory page's borderline band rests on our 48 H100 and H200 peaks; the Method page showed only the published
    cases. It charts every one of our runs against our estimate, counts those within the band by hand, and lists them."""
    from core.measured import measured_peaks
    from core.memory.fit import BORDERLINE_FRACTION

    from .conftest import charts, metric, no_exception, open_link

    at = open_link("method", {})
    no_exception(at)
    peaks = measured_peaks()
    fig = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Our estimate against each of our GPU runs"))
    points = sum(len(t["x"]) for t in fig["data"] if t.get("mode") == "markers")
    assert points == len(peaks) == 48
    within = sum(abs(round(100 * (p.estimated_bytes / p.measured_bytes - 1), 1)) <= 100 * BORDERLINE_FRACTION for p in peaks)  # the table's rounding
    assert metric(at, f"Runs within {100 * BORDERLINE_FRACTION:.0f}%") == f"{within} of 48"
    assert any(len(d.value) == 48 and "Run" in d.value.columns for d in at.dataframe)
