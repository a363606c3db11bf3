"""A hostile link in a real browser (issue #8): a config.json whose text fields are phishing payloads and a bad
parameter. The page renders, says what it ignored, and the DOM holds no link or image pointing at the payload's
host, and no element the payload tried to inject."""

from __future__ import annotations

import base64
import json
import zlib

import pytest

from core.catalog.presets import preset

from .conftest import charts_drawn, metrics

pytestmark = pytest.mark.browser

PHISH = "![x](http://evil.example/pixel.png) [Claim your free H100 hours](http://evil.example/phish) <img src=x onerror=alert(1)> www.evil-phish.example/claim"


def test_a_phishing_config_link_renders_as_text(open_page):
    cfg = {**(preset("llama-3.1-8b").config or {}), "_name_or_path": PHISH, "model_type": PHISH, "torch_dtype": PHISH}
    token = base64.urlsafe_b64encode(zlib.compress(json.dumps(cfg).encode(), 9)).decode()
    requests: list[str] = []
    page = open_page(f"/memory?src=config&cfg={token}&seq=banana")
    page.on("request", lambda r: requests.append(r.url))
    metrics(page)
    page.get_by_text("Parameters, assumptions and the model's shape").click()
    html = page.content()
    assert page.locator('a[href*="evil"]').count() == 0
    assert page.locator('img[src*="evil"], img[src="x"]').count() == 0
    assert "onerror" not in html or page.locator("[onerror]").count() == 0
    assert "was ignored" in page.inner_text("body")
    assert not [u for u in requests if "evil" in u]


FIRST_CHART_TOP = """() => {
  const slot = document.querySelector('[data-testid=stMain] [data-testid=stElementContainer][class*="st-key-chart_"]');
  return slot ? slot.getBoundingClientRect().top : null;
}"""


def test_a_link_with_many_bad_values_leaves_the_inference_chart_above_the_fold(open_page):
    """Six bad values: one warning and a collapsed "5 more warnings" (app_pages/shared/context.show_messages). Six
    warnings, one under the other, put the first metric at 654 px and the charts below the fold of a 1280x720
    window; now the first chart starts within it (480 px when measured), and every message is one click away."""
    page = open_page("/inference?tp=abc&acc=no-such-gpu&model=zzz&rambw=nan&batch=%3Cb%3Ebig%3C%2Fb%3E&seq=-7", width=1280, height=720)
    metrics(page)
    charts_drawn(page)
    assert page.locator('[data-testid="stMain"] [data-testid="stAlert"]:visible').count() == 2  # the warning, the fit
    top = page.evaluate(FIRST_CHART_TOP)
    assert top is not None and top < 720 - 100, top  # the chart's top 100 px at least are in view
    page.get_by_text("5 more warnings").click()
    page.wait_for_function("() => document.body.innerText.includes('URL parameter seq=-7 was ignored')")
    assert "<b>big</b>" in page.inner_text("body") and page.locator("[data-testid=stMain] b").count() == 0
