"""The workshop room in a real browser (issue #29 parts 1 and 2): Memory, Plan, GPU vs TPU, Inference, Compare and
Method at a projector's 1280 x 720 and 1024 x 768, in the default and the presenter view (link key `present`), and on a
390 px phone, measured by bounding boxes: no metric label, value or delta cut (text wider than its box, or an
ellipsis), the main chart's top above the fold, no chart toolbar over a chart's title, no table wider than its box, no
two chart labels on top of each other, the sidebar's segmented controls on one line each and a selectbox's long choice
written out beside it. On a phone the opened sidebar is a sheet over the lower part of the screen, so a slider moved in
it redraws a chart the person can see. A screenshot of each lands in artifacts/screenshots/room-*.png."""

from __future__ import annotations

import json

import pytest

from app_pages.shared.state import encode_blob

from .conftest import SHOTS, charts_drawn, wait_ready

pytestmark = pytest.mark.browser

MEASURE = """() => {
  const main = document.querySelector('[data-testid=stMain]');
  const cut = [];
  for (const el of main.querySelectorAll('[data-testid=stMetric] p, [data-testid=stMetricValue], [data-testid=stMetricLabel] [data-testid=stMarkdownContainer]')) {
    const style = getComputedStyle(el);
    const ellipsis = style.textOverflow === 'ellipsis' && style.whiteSpace === 'nowrap' && el.scrollWidth > el.clientWidth;
    if (el.scrollWidth > el.clientWidth + 1 || ellipsis) cut.push(el.innerText);
  }
  const box = (e) => e.getBoundingClientRect();
  const meet = (a, b) => a.left < b.right && a.right > b.left && a.top < b.bottom && a.bottom > b.top;
  for (const m of main.querySelectorAll('[data-testid=stMetric]')) {  // a metric inside its column
    const col = m.closest('[data-testid=stColumn]');
    if (col && box(m).right > box(col).right + 1) cut.push('metric past its column: ' + m.innerText);
  }
  const charts = [...main.querySelectorAll('.llmgp-chart')];
  const drawn = charts.filter(c => c.querySelector('.main-svg'));
  const covered = [];
  for (const c of drawn) {
    const bar = c.querySelector('.modebar'), title = c.querySelector('.gtitle');
    if (bar && title && meet(box(bar), box(title))) covered.push(title.textContent);
  }
  const inner = box(document.querySelector('[data-testid=stMainBlockContainer]'));
  const wide = [...main.querySelectorAll('[data-testid=stTable], [data-testid=stDataFrame]')]
    .filter(t => box(t).right > Math.min(inner.right, window.innerWidth) + 1).map(t => t.innerText.slice(0, 40));
  const labels = [...main.querySelectorAll('.textpoint text')].filter(t => t.textContent.trim() && getComputedStyle(t).display !== 'none').map(box);
  const collide = [];
  labels.forEach((a, i) => labels.slice(i + 1).forEach(b => { if (meet(a, b)) collide.push([a.left, a.top, b.left, b.top]); }));
  return {cut, covered, wide, collide, drawn: drawn.length, chartTop: charts.length ? box(charts[0]).top : null,
          pageWide: document.documentElement.scrollWidth > window.innerWidth + 1};
}"""

SIDEBAR = """() => {
  const side = document.querySelector('[data-testid=stSidebar]');
  const broken = [];
  for (const g of side.querySelectorAll('[data-testid=stButtonGroup] [role=radiogroup]')) {
    const tops = new Set([...g.querySelectorAll('button')].map(b => Math.round(b.getBoundingClientRect().top)));
    const out = [...g.querySelectorAll('button')].some(b => b.getBoundingClientRect().right > g.getBoundingClientRect().right + 1);
    const split = [...g.querySelectorAll('button p')].some(p => {  // text past its button, or a word broken in two
      const range = document.createRange();
      range.selectNodeContents(p);
      const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
      return p.scrollWidth > p.clientWidth + 1 || lines > p.textContent.trim().split(/\\s+/).length;
    });
    if (tops.size > 1 || out || split) broken.push(g.getAttribute('aria-label'));
  }
  const text = side.innerText;
  for (const input of side.querySelectorAll('[data-testid=stSelectbox] input')) {
    if (input.scrollWidth > input.clientWidth + 1 && !text.includes(input.value)) broken.push('cut: ' + input.value);
  }
  return broken;
}"""

PAGES = ["memory", "plan", "gpu-vs-tpu"]
MORE = ["inference", "compare", "method"]  # their own chart first too; Compare with three saved scenarios
ROOMS = [(1280, 720), (1024, 768)]
SAVED = [
    {"name": "Llama 8B on H100", "scenario": {"model": "llama-3.1-8b"}},
    {"name": "Llama 70B QLoRA on A100", "scenario": {"model": "llama-3.1-70b", "mode": "training", "method": "qlora", "accelerator": "a100-sxm-80gb"}},
    {"name": "Qwen 7B served on L4", "scenario": {"model": "qwen2.5-7b", "accelerator": "l4"}},
]
LINKS = {"compare": "cmp=" + encode_blob(json.dumps(SAVED))}


def _link(name: str, *params: str) -> str:
    query = [p for p in (*params, LINKS.get(name)) if p]
    return f"/{name}" + ("?" + "&".join(query) if query else "")


def _open(open_page, path: str, width: int, height: int):
    page = open_page(path, width=width, height=height)
    first = page.locator(".llmgp-chart").first
    first.wait_for(timeout=60_000)
    first.scroll_into_view_if_needed()  # a chart is drawn when it comes into view (app_pages/shared/chart.js)
    page.wait_for_selector(".llmgp-chart .main-svg", timeout=60_000)
    page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTo(0, 0) || window.scrollTo(0, 0)")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=stMetric]').length > 0 || !location.pathname.includes('memory')")
    wait_ready(page, settle=0.5)
    charts_drawn(page)  # every chart in view shows its latest figure: what the checks read
    return page


def _check(page, name: str, fold: bool) -> dict:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"room-{name}.png"))
    got = page.evaluate(MEASURE)
    assert got["drawn"] >= 1, name
    assert not got["cut"], (name, got["cut"])
    assert not got["covered"], (name, "a toolbar over", got["covered"])
    assert not got["wide"] and not got["pageWide"], (name, "wider than its box", got["wide"])
    assert not got["collide"], (name, "labels on top of each other", got["collide"])
    if fold:
        height = page.viewport_size["height"]
        assert got["chartTop"] is not None and got["chartTop"] < height - 200, (name, "the main chart starts at", got["chartTop"], "of", height)
    return got


@pytest.mark.parametrize("present", [False, True], ids=["default", "presenter"])
@pytest.mark.parametrize(("width", "height"), ROOMS, ids=[f"{w}x{h}" for w, h in ROOMS])
@pytest.mark.parametrize("name", PAGES)
def test_a_room_reads_every_page(open_page, name, width, height, present):
    query = "?mode=training&present=true" if present else "?mode=training"
    page = _open(open_page, f"/{name}{query}", width, height)
    _check(page, f"{name}-{'p-' if present else ''}{width}x{height}", fold=True)
    if not present:
        assert not page.evaluate(SIDEBAR), page.evaluate(SIDEBAR)
    else:  # the sidebar starts folded away: the chart has the width; opened, it reads at the larger type too
        assert page.locator('[data-testid=stSidebar][data-collapsed="true"]').count() == 1
        page.locator("[data-testid=stExpandSidebarButton]").click()
        page.wait_for_selector('[data-testid=stSidebar][data-collapsed="false"]')
        page.wait_for_function("() => document.querySelector('[data-testid=stSidebar]').getBoundingClientRect().right > 200")
        assert not page.evaluate(SIDEBAR), page.evaluate(SIDEBAR)


@pytest.mark.parametrize("present", [False, True], ids=["default", "presenter"])
@pytest.mark.parametrize(("width", "height"), ROOMS, ids=[f"{w}x{h}" for w, h in ROOMS])
@pytest.mark.parametrize("name", MORE)
def test_inference_compare_and_method_read_chart_first(open_page, name, width, height, present):
    """Inference draws its decode chart first in the presenter view, its inputs beside it; Compare and Method draw
    their chart first in both views, with what fills it (Compare's save and remove) or sums it up (Method's three
    numbers) beside it."""
    page = _open(open_page, _link(name, "present=true" if present else ""), width, height)
    got = _check(page, f"{name}-{'p-' if present else ''}{width}x{height}", fold=True)
    if present and name == "inference":  # the inputs that move the chart are beside it, not in the sidebar
        assert got["chartTop"] < page.locator("[data-testid=stMetric]").first.bounding_box()["y"]
        model = page.locator("[data-testid=stMain] [data-testid=stSelectbox]").filter(has_text="Model").first
        assert model.bounding_box()["x"] > page.locator(".llmgp-chart").first.bounding_box()["x"] + 300
    if present:  # opened, the sidebar reads at the larger type too
        page.locator("[data-testid=stExpandSidebarButton]").click()
        page.wait_for_function("() => document.querySelector('[data-testid=stSidebar]').getBoundingClientRect().right > 200")
        assert not page.evaluate(SIDEBAR), page.evaluate(SIDEBAR)


def test_training_vs_inference_reads_in_the_presenter_view(open_page):
    """Large type and the sidebar folded away; its charts keep their places (no inputs beside them)."""
    page = _open(open_page, "/train-vs-serve?present=true", 1024, 768)
    _check(page, "train-vs-serve-p-1024x768", fold=False)


@pytest.mark.parametrize("name", PAGES + MORE)
def test_a_phone_reads_every_page(open_page, name):
    page = _open(open_page, _link(name), 390, 844)
    _check(page, f"{name}-390", fold=False)
    if name == "compare":  # bars across the screen, names written level beside them: not squashed columns under slanted names
        plot = page.evaluate("""() => {
          const chart = document.querySelector('.llmgp-chart');
          const area = chart.querySelector('.nsewdrag').getBoundingClientRect();
          const slanted = [...chart.querySelectorAll('.xtick text, .ytick text')].filter(t => /rotate\\(-?[1-9]/.test(t.getAttribute('transform') || ''));
          return {share: area.width / chart.getBoundingClientRect().width, slanted: slanted.length};
        }""")
        assert plot["share"] > 0.5 and plot["slanted"] == 0, plot
    if name == "memory":  # the first screen gives the answer: fits or not, and by how much
        answer = page.locator("[data-testid=stMetric]").filter(has_text="Fits").first
        box = answer.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 844, box
        assert "headroom" in answer.inner_text() or "short" in answer.inner_text()


def test_the_sidebar_controls_are_whole_serving_too(open_page):
    page = _open(open_page, "/memory?engine=hf-transformers-compiled", 1024, 768)
    assert not page.evaluate(SIDEBAR), page.evaluate(SIDEBAR)


SHEET = """() => {
  const side = document.querySelector('[data-testid=stSidebar]').getBoundingClientRect();
  const chart = document.querySelector('.llmgp-chart').getBoundingClientRect();
  const hit = document.elementFromPoint(chart.left + chart.width / 2, chart.top + chart.height / 2);
  return {sheetTop: side.top, sheetWidth: side.width, chartTop: chart.top, chartBottom: chart.bottom,
          seen: !!(hit && hit.closest('.llmgp-chart')), open: document.querySelector('[data-testid=stSidebar]').dataset.collapsed === 'false',
          digest: document.querySelector('.llmgp-chart').dataset.digest};
}"""


def test_on_a_phone_the_sidebar_leaves_the_chart_in_view_while_a_slider_moves(open_page):
    """Streamlit's sidebar covers a phone's page when opened (its public API can neither place it elsewhere nor fold it
    after a change); the page's CSS makes it a sheet over the lower 55% of the screen. The page scrolls above it: with
    the memory bars scrolled to the top, moving the context slider in the sheet redraws bars the person can see."""
    page = _open(open_page, "/memory", 390, 844)
    page.locator("[data-testid=stExpandSidebarButton]").click()
    page.wait_for_selector('[data-testid=stSidebar][data-collapsed="false"]')
    page.wait_for_function("() => document.querySelector('[data-testid=stSidebar]').getBoundingClientRect().width > 380")
    page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollBy(0, document.querySelector('.llmgp-chart').getBoundingClientRect().top - 60)")
    seq = page.locator('[data-testid="stSidebar"] [data-testid="stSlider"]').filter(has_text="Sequence length").get_by_role("slider")
    seq.scroll_into_view_if_needed()
    before = page.evaluate(SHEET)
    assert before["open"] and before["sheetTop"] >= 0.4 * 844 and before["sheetWidth"] >= 389, before
    assert before["chartBottom"] <= before["sheetTop"] + 1 and before["seen"], before
    seq.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"() => document.querySelector('.llmgp-chart').dataset.digest !== {json.dumps(before['digest'])}", timeout=60_000)
    wait_ready(page, settle=0.3)
    charts_drawn(page)
    after = page.evaluate(SHEET)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "room-memory-390-sheet.png"))
    assert after["open"], "the sheet stays open while the slider moves"
    assert after["chartBottom"] <= after["sheetTop"] + 1 and after["seen"], after


def test_the_sheet_is_only_for_phones(open_page):
    page = _open(open_page, "/memory", 1024, 768)
    box = page.locator("[data-testid=stSidebar]").bounding_box()
    assert box is not None and box["y"] == 0 and box["width"] < 400, box
