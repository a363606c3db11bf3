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
    page.add_init_script(f"({RECEIVED})()")  # counts what the app sends from the first message on
    page.reload()
    wait_ready(page)
    sidebar_before = page.locator('[data-testid="stSidebar"] [data-testid="stElementContainer"]').count()
    whole = page.evaluate("window.__frames")  # the first run: the sidebar and the page
    shown = metrics(page)
    page.evaluate("window.__frames = 0")
    move_seq(page, 1)
    frames = page.evaluate("window.__frames")
    assert metrics(page) != shown
    assert page.locator('[data-testid="stSidebar"] [data-testid="stElementContainer"]').count() == sidebar_before
    assert frames + sidebar_before <= whole, f"{frames} messages for a move, {whole} for the whole app: the sidebar's {sidebar_before} elements were sent"
    assert page.locator(SEQ).filter(has_text="Sequence length").locator("[data-testid=stSliderThumbValue]").inner_text() == "8,192"
    # a change that reshapes the sidebar redraws it, with the value moved above kept
    page.locator('[data-testid="stSidebar"] button').filter(has_text="Train / fine-tune").click()
    time.sleep(0.5)
    wait_ready(page)
    assert page.locator('[data-testid="stSidebar"]').get_by_text("Optimizer", exact=True).count() == 1
    assert "seq=8192" in page.url and "mode=training" in page.url
    assert page.query_selector('[data-testid="stException"]') is None


PRESET = "/inference?batch=32&seq=8192&fmt=fp8&kv=fp8&tp=2&model=llama-3.1-70b"  # the serve-70B workshop preset
METRICS = "() => [...document.querySelectorAll('[data-testid=stMetric]')].map(e => e.innerText)"
MARK_BILL = "() => { const m = [...document.querySelectorAll('[data-testid=stMetric]')]; m[m.length - 1].__kept = 1; }"
BILL_KEPT = "() => { const m = [...document.querySelectorAll('[data-testid=stMetric]')]; return m[m.length - 1].__kept === 1; }"


def move(page, label: str, key: str) -> None:
    page.locator(SEQ).filter(has_text=label).get_by_role("slider").focus()
    page.keyboard.press(key)
    time.sleep(0.5)
    wait_ready(page)


def as_a_fresh_link_shows(open_page, page) -> list[str]:
    fresh = open_page("/" + page.url.split("/", 3)[3])
    metrics(fresh, 9)
    return fresh.evaluate(METRICS)


def test_a_context_move_leaves_the_serving_bill_as_drawn_and_what_it_reads_redraws_it(open_page):
    """Inference's serving bill is its lower section (app_pages/shared/lower.py). A context move reruns the page
    alone: the bill's elements are the same DOM nodes and every number equals a fresh page at the new link; so does a
    batch move (the bill's batch comes from the traffic); a traffic input reruns the bill alone; each time the page
    equals a fresh one at its link."""
    page = open_page(PRESET)
    page.add_init_script(f"({RECEIVED})()")  # counts what the app sends from the first message on
    page.reload()
    wait_ready(page)
    metrics(page, 9)
    shown = page.evaluate(METRICS)
    page.evaluate(MARK_BILL)
    page.evaluate("window.__frames = 0")
    move(page, "Sequence length", "ArrowRight")
    assert "seq=16384" in page.url
    now = page.evaluate(METRICS)
    assert now[:5] != shown[:5] and now[5:] == shown[5:]
    assert page.evaluate(BILL_KEPT), "the bill was left as drawn"
    assert now == as_a_fresh_link_shows(open_page, page)

    page.evaluate("window.__frames = 0")
    move(page, "Sequence length", "ArrowLeft")  # back to 8,192 (the batch below must fit in both layouts' tables)
    page.evaluate("window.__frames = 0")
    move(page, "Batch", "ArrowLeft")
    assert "batch=16" in page.url
    now = page.evaluate(METRICS)
    # the bill's batch comes from the traffic and its latency targets (core/money/serving.py), not the sidebar's: a
    # batch move reruns the page alone too
    assert now[:5] != shown[:5] and now[5:] == shown[5:] and page.evaluate(BILL_KEPT), "the bill was left as drawn"
    assert now == as_a_fresh_link_shows(open_page, page)

    top = now[:5]
    box = page.get_by_label("Requests per day", exact=True)
    box.fill("50000")
    box.press("Enter")
    time.sleep(0.5)
    wait_ready(page)
    assert "rpd=50000" in page.url
    now = page.evaluate(METRICS)
    assert now[:5] == top and now == as_a_fresh_link_shows(open_page, page)
    assert page.query_selector('[data-testid="stException"]') is None
