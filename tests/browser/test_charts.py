"""Charts in a real browser (app_pages/shared/plot.py, chart.js): a slider move updates a chart in place (the same
element, redrawn by Plotly.react, with the new numbers), a chart that did not change is not redrawn, the chart's
tools are there, and its text follows a dark page."""

from __future__ import annotations

import math
import time

import pytest

from .conftest import charts_drawn, metrics, wait_ready

pytestmark = pytest.mark.browser

TAG = "() => document.querySelectorAll('.llmgp-chart').forEach((d, i) => { d.dataset.testTag = 'kept' + i; })"
TAGS = "() => [...document.querySelectorAll('.llmgp-chart')].map(d => d.dataset.testTag || 'new')"
# how many times Plotly rebuilt each chart's drawing layer: a chart redrawn by Plotly.react keeps its layer
LAYERS = "() => [...document.querySelectorAll('.llmgp-chart')].map(d => d.querySelector('.main-svg').dataset.testLayer || 'fresh')"
MARK_LAYERS = "() => document.querySelectorAll('.llmgp-chart .main-svg').forEach(s => { s.dataset.testLayer = 'old'; })"
TITLE = "() => document.querySelector('.llmgp-chart .gtitle').textContent"


def _move_context_slider(page, presses: int = 1) -> None:
    seq = page.locator('[data-testid="stSidebar"] [data-testid="stSlider"]').filter(has_text="Sequence length").get_by_role("slider")
    seq.focus()
    for _ in range(presses):
        page.keyboard.press("ArrowRight")
    time.sleep(0.5)
    wait_ready(page)
    charts_drawn(page)  # what the tests read next is the charts


def test_a_slider_move_updates_the_charts_in_place(open_page):
    page = open_page("/memory?model=llama-3.1-8b")
    metrics(page)
    charts_drawn(page)
    assert page.locator(".llmgp-chart").count() == 3
    page.evaluate(TAG)
    page.evaluate(MARK_LAYERS)
    before = page.evaluate(TITLE)
    _move_context_slider(page)
    total = metrics(page)[0]  # "Memory per device" after the move
    after = page.evaluate(TITLE)
    assert after != before and total in after, (before, after, total)
    assert page.evaluate(TAGS) == ["kept0", "kept1", "kept2"], "each chart stays the same element"
    assert page.evaluate(LAYERS) == ["old", "old", "old"], "Plotly updated each chart without rebuilding it"
    assert page.locator('.llmgp-chart .modebar-btn[data-title="Download plot as a PNG"]').count() == 3
    titles = page.evaluate("() => [...document.querySelectorAll('.llmgp-chart .modebar-btn')].map(a => a.dataset.title)")
    assert not {"Share chart...", "Lasso Select", "Box Select"} & set(titles), "no tools that do nothing here"
    assert page.locator('.llmgp-chart[role="figure"][aria-label^="Memory per device"]').count() == 1


def test_a_chart_that_did_not_change_is_not_redrawn(open_page):
    page = open_page("/memory?model=llama-3.1-8b")
    metrics(page)
    charts_drawn(page)  # every chart drawn (Plotly's .on is there) before counting draws
    page.evaluate("() => { window.testDraws = 0; document.querySelectorAll('.llmgp-chart').forEach(d => d.on('plotly_afterplot', () => window.testDraws++)); }")
    # the sweep axis changes only the sweep chart
    page.get_by_text("Batch size", exact=True).click()
    time.sleep(0.5)
    wait_ready(page)
    charts_drawn(page)
    assert page.evaluate("window.testDraws") == 1


def test_chart_text_follows_the_pages_colours(open_page):
    """The app's theme sets no base, so the dark case is made by the page's own colours: the next draw takes the
    title and legend colour from the page, and the chart's background stays transparent."""
    page = open_page("/memory?model=llama-3.1-8b")
    metrics(page)
    page.add_style_tag(content='[data-testid="stMain"] { color: rgb(250, 250, 250) !important; background: rgb(14, 17, 23) !important; }')
    _move_context_slider(page)
    fill = page.evaluate("() => getComputedStyle(document.querySelector('.llmgp-chart .gtitle')).fill")
    assert fill == "rgb(250, 250, 250)", fill
    legend = page.evaluate("() => getComputedStyle(document.querySelector('.llmgp-chart .legendtext')).fill")
    assert legend == "rgb(250, 250, 250)", legend
    background = page.evaluate("() => getComputedStyle(document.querySelector('.llmgp-chart .main-svg')).backgroundColor")
    assert background == "rgba(0, 0, 0, 0)", background


def _label_count(page) -> int:
    charts_drawn(page, every=True)
    return page.evaluate("() => [...document.querySelectorAll('.llmgp-chart .textpoint text')].filter(t => t.textContent.trim()).length")


BIGGEST_BUBBLE = "() => Math.max(...[...document.querySelectorAll('.llmgp-chart')][0].data.filter(t => t.mode === 'markers').flatMap(t => t.marker.size))"


def test_a_phone_gets_fewer_chip_names(open_page):
    """GPU vs TPU names its best chips; below 600 px the chart swaps in its shorter list (trace meta.narrow_text) and
    half-size bubbles (meta.narrow_size: 40 px ones buried the names on a 390 px phone)."""
    page = open_page("/gpu-vs-tpu?model=llama-3.1-8b", width=1440, height=1800)
    wide = _label_count(page)
    wide_bubble = page.evaluate(BIGGEST_BUBBLE)
    page = open_page("/gpu-vs-tpu?model=llama-3.1-8b", width=390, height=1800)
    narrow = _label_count(page)
    assert 2 <= narrow < wide, (narrow, wide)
    assert page.evaluate(BIGGEST_BUBBLE) == wide_bubble / 2 and wide_bubble > 20


def test_a_warning_that_appears_does_not_redraw_the_charts_below(open_page):
    """70B in FP8 on the sidebar's two H100s at batch 32 fits at 8,192 tokens and not at 16,384: one alert is always
    there (what holds the model, then the warning), so a move across the fit restyles it in place; the charts after
    it keep their elements and are updated in place, and the KV chart, on the sidebar's two devices at both contexts,
    keeps its data arrays (only its marker moved)."""
    page = open_page("/inference?batch=32&seq=8192&fmt=fp8&kv=fp8&tp=2&model=llama-3.1-70b")
    metrics(page)
    charts_drawn(page)
    alert = '[data-testid="stMain"] [data-testid="stAlert"]'
    assert page.locator(alert).count() == 1 and "hold the model" in page.locator(alert).inner_text()
    page.evaluate(TAG)
    page.evaluate(f"() => {{ document.querySelector('{alert}').dataset.testTag = 'kept'; }}")
    kv = "[...document.querySelectorAll('.llmgp-chart')].find(d => d.getAttribute('aria-label').startsWith('KV'))"
    page.evaluate(f"() => {{ const d = {kv}; window.testKept = [d.data[0].x, d.data[0].y, d.data[1].y]; }}")
    _move_context_slider(page)
    assert "seq=16384" in page.url
    assert page.locator(alert).count() == 1 and "not hold the model" in page.locator(alert).inner_text()
    assert page.evaluate(f"() => document.querySelector('{alert}').dataset.testTag") == "kept"
    assert page.evaluate(TAGS) == ["kept0", "kept1", "kept2", "kept3"]  # decode, KV, and the two under-load charts
    assert page.evaluate(f"() => {{ const d = {kv}; return [d.data[0].x, d.data[0].y, d.data[1].y].map((a, i) => a === window.testKept[i]); }}") == [True] * 3


@pytest.mark.parametrize("served", ["nothing", "not plotly"])
def test_a_chart_library_that_does_not_load_gives_one_line(browser, server, served):
    """If plotly.js cannot be fetched (a flaky network) or what comes back is not Plotly, each chart says so in one
    line; the rest of the page (metrics, tables) is there and no error box appears."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 2400})
    try:
        if served == "nothing":
            ctx.route("**/component/*/plotly.min.js", lambda route: route.abort())
        else:
            ctx.route("**/component/*/plotly.min.js", lambda route: route.fulfill(body="window.notPlotly = 1;", content_type="text/javascript"))
        page = ctx.new_page()
        page.goto(server + "/memory?model=llama-3.1-8b")
        wait_ready(page)
        assert len(metrics(page)) >= 5
        page.wait_for_function("[...document.querySelectorAll('.llmgp-chart')].every(d => d.textContent.includes('could not be drawn'))", timeout=30_000)
        assert page.locator(".llmgp-chart").count() == 3
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        ctx.close()


CLIPPED = """() => [...document.querySelectorAll('.llmgp-chart')].flatMap(d => {
  const box = d.getBoundingClientRect();
  return [...d.querySelectorAll('.gtitle, .g-xtitle text, .annotation-text')].filter(t => {
    const r = t.getBoundingClientRect();
    return r.width > 0 && (r.right > box.right + 1 || r.left < box.left - 1);
  }).map(t => t.textContent);
})"""


@pytest.mark.parametrize("path", ["/training?model=llama-3.1-8b", "/train-vs-serve?model=llama-3.1-8b", "/plan?model=llama-3.1-8b"])
def test_titles_fit_a_phone(open_page, path):
    """Plotly does not wrap titles: at 390 px a long chart title or x-axis title is broken into lines, not cut off; a
    capacity label runs left of its line when the line sits far right (style.capacity_line)."""
    page = open_page(path, width=390, height=3600)
    charts_drawn(page, every=True)
    assert page.evaluate(CLIPPED) == []
    assert page.locator(".llmgp-chart .gtitle tspan.line").count() >= 2, "a long title went onto a second line"


NEGATIVE_TICKS = """() => [...document.querySelectorAll('.llmgp-chart')].filter(d => (d.getAttribute('aria-label') || '').startsWith('Memory per device'))
  .flatMap(d => [...d.querySelectorAll('.xtick text')].map(t => t.textContent)).filter(t => /^[\u2212-]/.test(t))"""


@pytest.mark.parametrize("width", [1440, 390])
@pytest.mark.parametrize("path", ["/plan?model=llama-3.1-70b&mode=training", "/memory?model=llama-3.1-70b&mode=training"])
def test_memory_bars_far_over_capacity_keep_their_axis_and_label(open_page, path, width):
    """A 70B full fine-tune needs over 1,000 GiB against an H100's 79.2: the memory axes start at 0 (they ran to
    -200 GiB, Plotly widening them for the capacity label run left from a line near 0) and the label, now to the
    right of its line, is not cut off (issue #9)."""
    page = open_page(path, width=width, height=3600)
    charts_drawn(page, every=True)
    charts = page.evaluate("() => [...document.querySelectorAll('.llmgp-chart')].map(d => d.getAttribute('aria-label'))")
    assert any(c.startswith("Memory per device") for c in charts), charts
    assert page.evaluate(NEGATIVE_TICKS) == []
    assert page.evaluate(CLIPPED) == []


# each chart's drawn figure: its title and every trace's y values (Plotly keeps the data it drew on the element)
DRAWN = """() => [...document.querySelectorAll('.llmgp-chart')].map(d => d._fullLayout
  ? (d.querySelector('.gtitle') || {}).textContent + ' ' + JSON.stringify((d.data || []).map(t => t.y)) : null)"""
COUNT_DRAWS = """() => { window.testDraws = []; const react = window.Plotly.react;
  window.Plotly.react = function (div, ...rest) { window.testDraws.push(div.getAttribute('aria-label')); return react.call(this, div, ...rest); }; }"""


def test_a_chart_out_of_view_is_drawn_when_scrolled_to(open_page):
    """At 1440 x 720 only the first of Memory's three charts is in view (at 900 px the second now starts in view too:
    the bars come right after the answers, issue #29): a slider move redraws that one (the wait a person sees is for
    what they can see), and the two below are drawn with the new numbers once scrolled to, exactly as a page opened
    fresh at the new link draws them."""
    page = open_page("/memory?model=llama-3.1-8b", width=1440, height=720)
    metrics(page)
    page.wait_for_function("window.Plotly && document.querySelector('.llmgp-chart')._fullLayout", timeout=30_000)
    assert page.evaluate(DRAWN)[1:] == [None, None], "charts below the fold are not drawn before they are seen"
    page.evaluate(COUNT_DRAWS)
    _move_context_slider(page)
    assert "seq=8192" in page.url
    drawn = page.evaluate("window.testDraws")
    assert len(drawn) == 1 and drawn[0].startswith("Memory per device"), drawn
    page.locator(".llmgp-chart").nth(1).scroll_into_view_if_needed()
    page.locator(".llmgp-chart").nth(2).scroll_into_view_if_needed()
    page.wait_for_function("[...document.querySelectorAll('.llmgp-chart')].every(d => d._fullLayout)", timeout=10_000)
    fresh = open_page("/" + page.url.split("/", 3)[3], width=1440, height=2400)
    charts_drawn(fresh)  # its three charts are on the page (each in view at 2400 px)
    fresh.wait_for_function("[...document.querySelectorAll('.llmgp-chart')].every(d => d._fullLayout)", timeout=30_000)
    assert page.evaluate(DRAWN) == fresh.evaluate(DRAWN)


def test_printing_draws_the_charts_not_yet_seen(open_page):
    """A printout has every chart: the ones never scrolled to are drawn before the page is printed."""
    page = open_page("/memory?model=llama-3.1-8b", width=1440, height=900)
    metrics(page)
    page.wait_for_function("window.Plotly && document.querySelector('.llmgp-chart')._fullLayout", timeout=30_000)
    assert None in page.evaluate(DRAWN), "a chart below the fold waits to be seen"
    page.evaluate("() => window.dispatchEvent(new Event('beforeprint'))")
    assert None not in page.evaluate(DRAWN)


def test_a_moved_marker_redraws_without_recomputing_the_data(open_page):
    """On Inference, a context move changes only the KV chart's "your context" marker (a layout shape): the chart keeps
    its data arrays (chart.js swaps an array equal to the one drawn, and a base64 one decoded once, for the drawn one,
    so Plotly does not recompute them) and its template, draws the line at the new context, and shows what a fresh
    page at the new link draws."""
    page = open_page("/inference?model=llama-3.1-8b")
    metrics(page)
    charts_drawn(page)
    kv = "[...document.querySelectorAll('.llmgp-chart')].find(d => d.getAttribute('aria-label').startsWith('KV'))"
    page.evaluate(f"() => {{ const d = {kv}; window.testKept = [d.data[0].x, d.data[0].y, d.data[1].y, d.layout.template]; }}")
    _move_context_slider(page)
    kept = page.evaluate(f"() => {{ const d = {kv}; return [d.data[0].x, d.data[0].y, d.data[1].y, d.layout.template].map((a, i) => a === window.testKept[i]); }}")
    assert kept == [True, True, True, True]
    drawn = page.evaluate(f"() => {{ const d = {kv}; return [d._fullLayout.shapes[0].x0, Array.from(d.data[1].y)]; }}")
    seq = int(page.evaluate("() => new URLSearchParams(location.search).get('seq')"))
    assert seq == 8192 and drawn[0] == pytest.approx(seq)
    # the label over the line: annotations on a log axis take log10 coordinates, shapes data values
    label = page.evaluate(f"() => {{ const d = {kv}; return [d._fullLayout.annotations[0].x, d._fullLayout.annotations[0].text]; }}")
    assert label == [pytest.approx(math.log10(seq)), "your context"]
    fresh = open_page(f"/inference?model=llama-3.1-8b&seq={seq}")
    metrics(fresh)
    charts_drawn(fresh)
    again = fresh.evaluate(f"() => {{ const d = {kv}; return [d._fullLayout.shapes[0].x0, Array.from(d.data[1].y)]; }}")
    assert again[0] == pytest.approx(drawn[0]) and again[1] == drawn[1]
