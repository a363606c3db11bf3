"""Your own price list in a real browser (issue #12): upload a CSV in the sidebar, the Training page's cheapest run
changes, the link carries the list, and a colleague opening the link sees the same number."""

from __future__ import annotations

import time

import pytest

from tests.core.test_user_prices import MINE

from .conftest import metrics, wait_ready
from .test_sharing import query

pytestmark = pytest.mark.browser

PATH = "/training?model=llama-3.1-8b&acc=h100-sxm&mode=training&tokens=1"  # a billion tokens: a bill in dollars the list moves


def cheapest(page) -> str:
    values = metrics(page, 4)
    labels = [e.inner_text() for e in page.query_selector_all('[data-testid="stMetricLabel"]')]
    return values[labels.index("Cheapest run")]


def test_an_uploaded_price_list_prices_the_page_and_travels_in_the_link(open_page, tmp_path):
    page = open_page(PATH)
    before = cheapest(page)
    page.get_by_text("Your own prices (CSV)").click()
    csv = tmp_path / "my-prices.csv"
    csv.write_text(MINE)
    box = page.locator('[data-testid="stFileUploader"]').filter(has_text="Upload a price list")
    box.locator('input[type="file"]').set_input_files(str(csv))
    time.sleep(1.0)
    wait_ready(page)
    page.wait_for_function("document.body.innerText.includes('Priced from your own list')", timeout=60_000)
    page.locator("[data-testid=stSidebar]").get_by_text("Only mine", exact=True).click()
    time.sleep(0.5)
    wait_ready(page)
    after = cheapest(page)
    assert after != before, (before, after)
    assert "prc" in query(page) and query(page).get("pmode") == "only"
    other = open_page("/" + page.url.split("/", 3)[3])
    assert cheapest(other) == after
    assert "Priced from your own list" in other.inner_text("body")
