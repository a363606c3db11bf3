"""The Plan page in a real browser: the root opens it, a goal gives a headline, and clicking a plan on the frontier
loads it into the sidebar and the Memory page."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from app_pages.shared.style import Units
from core.estimate import estimate
from core.plan import Goal, plan
from core.scenario import Scenario

from .conftest import READY, SHOTS, metrics, wait_ready

pytestmark = pytest.mark.browser


def test_goal_headline_frontier_click_memory(open_page):
    page = open_page("/?")  # the bare root
    page.wait_for_selector("text=Cheapest plan that works", timeout=60_000)
    assert "/plan" in page.url
    page.get_by_text("Serve", exact=True).click()
    time.sleep(0.5)
    wait_ready(page)
    page.wait_for_selector("text=Monthly bill", timeout=60_000)
    headline = page.locator('[data-testid="stMain"] h3').first.inner_text()
    assert "a month" in headline and "per million tokens" in headline
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "plan-serve.png"), full_page=True)
    point = page.locator(".llmgp-chart .scatterlayer .trace .points path").first
    point.click(force=True)
    page.wait_for_url("**/memory**", timeout=60_000)
    wait_ready(page)
    # The first point of the first trace is the cheapest plan (plans come cheapest first, traces by accelerator in
    # that order): the Memory page now shows its scenario.
    best = plan(Goal(goal="serve", model="llama-3.1-8b", requests_per_day=10_000)).cheapest
    assert best is not None
    assert f"acc={best.accelerator}" in page.url and f"fmt={best.weights_format}" in page.url
    want = Units("GiB")(estimate(Scenario.model_validate(best.scenario)).memory_per_device_bytes.total)
    assert metrics(page)[0] == want


@pytest.mark.parametrize("goal", ["serve", "train"])
def test_the_folded_inputs_label_is_one_line_at_1280(open_page, goal):
    """The summary of the goal's folded inputs, beside the chart, stays on one line at 1280 x 720 (it wrapped to two for
    serving: "Peak, speed targets, budget, price, expert parallel", 52.8 px high against 38 for one line)."""
    page = open_page(f"/plan?goal={goal}", width=1280, height=720)
    page.wait_for_selector("text=Cheapest plan", timeout=60_000)
    page.wait_for_selector(READY, timeout=60_000)
    summary = page.locator('[data-testid="stExpander"] summary', has_text="budget").first
    one_line = page.locator('[data-testid="stExpander"] summary', has_text="Your own prices").first  # the sidebar's, one line
    # measured once the page has settled: on a busy CI machine it was read mid-layout (52.8 px) once in 2 runs
    summary.wait_for(timeout=30_000)
    try:
        page.wait_for_function(
            """() => {
              const heights = [...document.querySelectorAll('[data-testid="stExpander"] summary')].map(s => [s.innerText, s.getBoundingClientRect().height]);
              const fold = heights.find(([t]) => t.includes('budget')), ref = heights.find(([t]) => t.includes('Your own prices'));
              return fold && ref && fold[1] <= ref[1] + 1;
            }""",
            timeout=10_000,
        )
    except PlaywrightTimeout:
        pass  # the assertion below says what it measured
    assert summary.bounding_box()["height"] <= one_line.bounding_box()["height"] + 1
