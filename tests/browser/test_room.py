"""The workshop room in a real browser (issue #29 parts 1 and 2): Memory, Plan and GPU vs TPU at a projector's
1280 x 720 and 1024 x 768, in the default and the presenter view (link key `present`), and on a 390 px phone, measured
by bounding boxes: no metric label, value or delta cut (text wider than its box, or an ellipsis), the main chart's top
above the fold, no chart toolbar over a chart's title, no table wider than its box, no two chart labels on top of each
other, the sidebar's segmented controls on one line each and a selectbox's long choice written out beside it. A
screenshot of each lands in artifacts/screenshots/room-*.png."""

from __future__ import annotations

import pytest

from .conftest import SHOTS, wait_ready

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
ROOMS = [(1280, 720), (1024, 768)]


def _open(open_page, path: str, width: int, height: int):
    page = open_page(path, width=width, height=height)
    first = page.locator(".llmgp-chart").first
    first.wait_for(timeout=60_000)
    first.scroll_into_view_if_needed()  # a chart is drawn when it comes into view (app_pages/shared/chart.js)
    page.wait_for_selector(".llmgp-chart .main-svg", timeout=60_000)
    page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTo(0, 0) || window.scrollTo(0, 0)")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=stMetric]').length > 0 || !location.pathname.includes('memory')")
    wait_ready(page, settle=0.5)
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
    """Plan's default view keeps its goal inputs and answer above its chart: its fold is checked in the presenter view."""
    query = "?mode=training&present=true" if present else "?mode=training"
    page = _open(open_page, f"/{name}{query}", width, height)
    _check(page, f"{name}-{'p-' if present else ''}{width}x{height}", fold=present or name != "plan")
    if not present:
        assert not page.evaluate(SIDEBAR), page.evaluate(SIDEBAR)
    else:  # the sidebar starts folded away: the chart has the width; opened, it reads at the larger type too
        assert page.locator('[data-testid=stSidebar][data-collapsed="true"]').count() == 1
        page.locator("[data-testid=stExpandSidebarButton]").click()
        page.wait_for_selector('[data-testid=stSidebar][data-collapsed="false"]')
        page.wait_for_function("() => document.querySelector('[data-testid=stSidebar]').getBoundingClientRect().right > 200")
        assert not page.evaluate(SIDEBAR), page.evaluate(SIDEBAR)


@pytest.mark.parametrize("name", ["inference", "train-vs-serve"])
def test_the_other_pages_read_in_the_presenter_view(open_page, name):
    """Large type and the sidebar folded away; their charts keep their places (no inputs beside them)."""
    page = _open(open_page, f"/{name}?present=true", 1024, 768)
    _check(page, f"{name}-p-1024x768", fold=False)


@pytest.mark.parametrize("name", PAGES)
def test_a_phone_reads_every_page(open_page, name):
    page = _open(open_page, f"/{name}", 390, 844)
    _check(page, f"{name}-390", fold=False)
    if name == "memory":  # the first screen gives the answer: fits or not, and by how much
        answer = page.locator("[data-testid=stMetric]").filter(has_text="Fits").first
        box = answer.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 844, box
        assert "headroom" in answer.inner_text() or "short" in answer.inner_text()


def test_the_sidebar_controls_are_whole_serving_too(open_page):
    page = _open(open_page, "/memory?engine=hf-transformers-compiled", 1024, 768)
    assert not page.evaluate(SIDEBAR), page.evaluate(SIDEBAR)
