"""The dashboard in a real headless Chromium."""

import json
import time

import pytest

from .conftest import SHOTS, charts_drawn, metrics, wait_ready

pytestmark = pytest.mark.browser

PAGES = {
    "memory": "/",
    "training": "/training",
    "inference": "/inference",
    "train-vs-serve": "/train-vs-serve",
    "gpu-vs-tpu": "/gpu-vs-tpu",
    "compare": "/compare",
    "method": "/method",
}


@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_renders_without_error(open_page, name):
    page = open_page(PAGES[name])
    assert page.query_selector('[data-testid="stException"]') is None
    assert "Page not found" not in page.inner_text("body")
    assert page.query_selector("h1") is not None
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _chart_title(page) -> str:
    charts_drawn(page)  # the title read is the latest figure's
    return page.locator(".js-plotly-plot .gtitle").first.text_content()


def test_moving_a_slider_changes_chart_and_url(open_page):
    page = open_page("/memory")
    before_title, before_metrics = _chart_title(page), metrics(page)
    seq = page.locator('[data-testid="stSidebar"] [data-testid="stSlider"]').nth(1).get_by_role("slider")
    seq.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    time.sleep(0.5)
    wait_ready(page)
    assert "seq=32768" in page.url
    assert _chart_title(page) != before_title
    assert metrics(page) != before_metrics


def test_shared_url_reproduces_numbers_in_a_fresh_browser(open_page):
    link = "/?model=qwen2.5-7b&seq=16384&batch=4&acc=a100-sxm-80gb&fmt=fp8&units=GB"
    first = open_page(link)
    shown = metrics(first)
    path = "/" + first.url.split("/", 3)[3]  # the link as the browser shows it
    second = open_page(path)
    assert metrics(second) == shown
    assert "GB" in shown[0] and "GiB" not in shown[0]


def test_download_scenario_json(open_page):
    """The file is built when the button is clicked (app.py: data is a callable), by a request the busy server answers
    in its turn: on a loaded 2-core machine that took over the default 30 s once, so the wait is longer and starts
    from an idle app. No retry: a click that gave no file was issue #28 (the click's own run let another session's
    sweep drop the callable; tests/app/test_scenario_download.py), and it must fail here if it comes back."""
    page = open_page("/?model=mistral-7b-v0.1&seq=8192", downloads=True)
    page.get_by_text("Save or load this scenario").click()
    button = page.get_by_role("button", name="Download scenario (JSON)")
    button.wait_for(state="visible", timeout=60_000)
    wait_ready(page, settle=0.5)
    with page.expect_download(timeout=120_000) as info:
        button.click()
    data = json.loads(open(info.value.path()).read())
    assert data["scenario"]["model"] == "mistral-7b-v0.1"
    assert data["scenario"]["seq_len"] == 8192
    assert page.locator('[data-testid="stDownloadButtonError"]').count() == 0


def test_bad_link_shows_a_warning(open_page):
    page = open_page("/?params=-5&src=params&seq=banana")
    text = page.inner_text("body")
    assert "was ignored" in text
    assert page.query_selector('[data-testid="stException"]') is None


CUT_OFF_BUTTONS = """() => [...document.querySelectorAll('button')].filter(b => b.offsetParent !== null && b.innerText.trim())
  .filter(b => {
    // a label shortened with an ellipsis inside the button
    if ([...b.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1)) return true;
    // or the button running past the box that scrolls or clips it (a button group wider than its column)
    for (let n = b.parentElement; n; n = n.parentElement) {
      const id = n.getAttribute('data-testid');
      if (id === 'stMain' || id === 'stSidebarContent' || id === 'stSidebar') return false;
      if (getComputedStyle(n).overflowX !== 'visible') return n.scrollWidth > n.clientWidth + 1;
    }
    return false;
  }).map(b => b.innerText.trim())"""


@pytest.mark.parametrize("path", ["/plan?model=llama-3.1-70b&mode=training&price=spot", "/memory?model=llama-3.1-8b&src=config"])
def test_no_control_is_cut_off_on_a_laptop(open_page, path):
    """At 1440 px the Plan page's price control read "Spot / preemptib" and the sidebar's Fetch button "F…" (a new
    user's pass over the pages): every visible button of a button group and of the sidebar shows its whole label."""
    page = open_page(path, width=1440, height=1200)
    assert page.evaluate(CUT_OFF_BUTTONS) == []
