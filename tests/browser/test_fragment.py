"""The page reruns on its own when a sidebar input leaves the sidebar as drawn (app_pages/shared/rerun.py): in a
real browser the sidebar stays whole and in step with the link, the download is of the scenario on screen, and a
change that reshapes the sidebar still redraws it."""

from __future__ import annotations

import json
import time

import pytest

from .conftest import metrics, wait_ready

pytestmark = pytest.mark.browser

SEQ = '[data-testid="stSidebar"] [data-testid="stSlider"]'
RECEIVED = """() => { window.__frames = 0; const S = WebSocket.prototype.send;
  WebSocket.prototype.send = function (d) { if (!this.__counted) { this.__counted = 1;
    this.addEventListener('message', () => window.__frames++); } return S.call(this, d); }; }"""


def move_seq(page, steps: int) -> None:
    slider = page.locator(SEQ).filter(has_text="Sequence length").get_by_role("slider")
    slider.focus()
    for _ in range(abs(steps)):
        page.keyboard.press("ArrowRight" if steps > 0 else "ArrowLeft")
        time.sleep(0.3)
    wait_ready(page)


def test_download_is_of_the_scenario_on_screen_after_page_alone_runs(open_page):
    page = open_page("/memory?model=mistral-7b-v0.1&seq=8192", downloads=True)
    move_seq(page, 2)  # 32,768: the sidebar (and its download button) was not drawn again
    assert "seq=32768" in page.url
    page.get_by_text("Save or load this scenario").click()
    with page.expect_download() as info:
        page.get_by_role("button", name="Download scenario (JSON)").click()
    data = json.loads(open(info.value.path()).read())
    assert data["scenario"]["seq_len"] == 32768 and data["scenario"]["model"] == "mistral-7b-v0.1"


def test_sidebar_stays_whole_and_in_step_through_page_alone_runs(open_page):
    page = open_page("/memory?model=llama-3.1-8b")
    page.evaluate(RECEIVED)
    page.reload()
    wait_ready(page)
    sidebar_before = page.locator('[data-testid="stSidebar"] [data-testid="stElementContainer"]').count()
    shown = metrics(page)
    page.evaluate("window.__frames = 0")
    move_seq(page, 1)
    frames = page.evaluate("window.__frames")
    assert metrics(page) != shown
    assert page.locator('[data-testid="stSidebar"] [data-testid="stElementContainer"]').count() == sidebar_before
    assert frames < sidebar_before, f"{frames} messages for a move: the sidebar's {sidebar_before} elements were not sent"
    assert page.locator(SEQ).filter(has_text="Sequence length").locator("[data-testid=stSliderThumbValue]").inner_text() == "8,192"
    # a change that reshapes the sidebar redraws it, with the value moved above kept
    page.locator('[data-testid="stSidebar"] button').filter(has_text="Train / fine-tune").click()
    time.sleep(0.5)
    wait_ready(page)
    assert page.locator('[data-testid="stSidebar"]').get_by_text("Optimizer", exact=True).count() == 1
    assert "seq=8192" in page.url and "mode=training" in page.url
    assert page.query_selector('[data-testid="stException"]') is None
