"""Figures that must stay readable: the Plan frontier (a few colours by method, the cheapest and fastest named, time
marks in minutes/hours/days) and the GPU vs TPU chart (names drawn over the bubbles, fewer of them on a phone)."""

from __future__ import annotations

import pytest

from app_pages.shared.planning import METHOD_WORDS, TIME_TICKS, frontier_figure, log_ticks
from core.plan import Goal, plan

from .conftest import charts, no_exception, open_link


@pytest.fixture(scope="module")
def fine_tune_plans():
    result = plan(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=20e6))
    assert result.cheapest is not None
    return result


def test_frontier_is_coloured_by_method_and_names_the_cheapest_and_fastest(fine_tune_plans):
    plans = fine_tune_plans.plans
    fig = frontier_figure(plans, serving=False, deadline=None, budget=None)
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert set(legend) - {"Frontier (nothing is both cheaper and faster)"} <= set(METHOD_WORDS.values())
    assert len(legend) <= len(METHOD_WORDS) + 1, "one entry per method, not per accelerator"
    first = fig.data[0]
    assert first.customdata[0][0] == 0 and plans[0] is fine_tune_plans.cheapest, "a click on the first point loads the cheapest plan"
    shown = sum(len(t.x) for t in fig.data if t.mode == "markers")
    assert shown == len(plans)
    marks = next(t for t in fig.data if t.mode == "markers+text")
    named = dict(zip(marks.text, zip(marks.x, marks.y, strict=True), strict=True))
    assert named["cheapest"][1] == min(p.usd for p in plans if p.usd)
    assert named["fastest"][0] == min(p.hours for p in plans if p.hours)


def test_time_axis_marks_cover_the_range_in_words():
    axis = log_ticks([0.2, 3.0], TIME_TICKS)
    assert axis["ticktext"] == ["15 min", "30 min", "1 h", "2 h"]
    assert all(0.2 / 1.3 <= h <= 3.0 * 1.3 for h in axis["tickvals"])
    assert log_ticks([30.0, 40.0], TIME_TICKS) == {}, "fewer than two marks: Plotly's own"


def test_gpu_vs_tpu_names_sit_over_the_bubbles_and_thin_out_on_a_phone():
    at = open_link("gpu_vs_tpu", {"model": "llama-3.1-8b"})
    no_exception(at)
    fig = charts(at)[0]
    labels = [t for t in fig["data"] if t.get("mode") == "text"]
    assert len(labels) == 1 and fig["data"][-1] is labels[0], "the names are drawn last, over every bubble"
    wide = [t for t in labels[0]["text"] if t]
    narrow = [t for t in labels[0]["meta"]["narrow_text"] if t]
    assert 2 <= len(narrow) < len(wide) and set(narrow) <= set(wide)
    assert labels[0]["textfont"]["shadow"] == "auto"


def test_serving_frontier_marks_speeds_in_full_numbers():
    result = plan(Goal(goal="serve", model="llama-3.1-8b", requests_per_day=10_000))
    fig = frontier_figure(result.plans, serving=True, deadline=None, budget=None)
    speeds = [p.tokens_per_s_per_user for p in result.plans if p.tokens_per_s_per_user]
    ticks = fig.layout.xaxis.tickvals
    assert len(ticks) >= 2 and min(speeds) / 1.3 <= ticks[0] and ticks[-1] <= max(speeds) * 1.3
    assert list(fig.layout.xaxis.ticktext) == [f"{t:,g}" for t in ticks]
    legend = {t.name for t in fig.data if t.showlegend is not False} - {"Frontier (nothing is both cheaper and faster)"}
    assert legend and all(name.endswith(" weights") for name in legend), "coloured by weights format"
