"""A hostile link in a real browser (issue #8): a config.json whose text fields are phishing payloads and a bad
parameter. The page renders, says what it ignored, and the DOM holds no link or image pointing at the payload's
host, and no element the payload tried to inject."""

from __future__ import annotations

import base64
import json
import zlib

import pytest

from core.catalog.presets import preset

from .conftest import metrics

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
