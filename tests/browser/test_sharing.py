"""Links never lose a setting (issue #9): typed page inputs survive page changes,
the Compare set stays in the link, deep links open without a detour, and a
link opened in a fresh browser reproduces every input and every number."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import pytest

from .conftest import metrics, wait_ready

pytestmark = pytest.mark.browser


def query(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(page.url).query).items()}


def go(page, title: str) -> None:
    """Click a page in the sidebar navigation, as a user does."""
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True).click()
    time.sleep(0.5)
    wait_ready(page)


def type_number(page, label: str, value: str) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(value)
    box.press("Enter")
    time.sleep(0.4)
    wait_ready(page)


def number(page, label: str) -> str:
    return page.get_by_label(label, exact=True).input_value()


def test_typed_traffic_values_survive_page_changes(open_page):
    page = open_page("/inference")
    type_number(page, "Requests per day", "2000")
    type_number(page, "Per-token API price, output (USD per million)", "0.9")
    go(page, "Memory")
    go(page, "Inference")
    assert number(page, "Requests per day") == "2000"
    assert number(page, "Per-token API price, output (USD per million)") == "0.90"
    go(page, "Training vs inference")
    assert number(page, "Requests per day") == "2000"
    q = query(page)
    assert q.get("rpd") == "2000" and q.get("api_out") == "0.9", q


def test_the_compare_set_stays_in_the_link(open_page):
    page = open_page("/compare?model=qwen2.5-7b")
    page.get_by_role("button", name="Save current scenario").click()
    time.sleep(0.5)
    wait_ready(page)
    assert "cmp" in query(page)
    go(page, "Memory")
    assert "cmp" in query(page), "the saved set travels with every page's link"
    go(page, "Compare")
    assert "cmp" in query(page)
    assert "Nothing saved yet" not in page.inner_text("body")
    link = page.url
    other = open_page("/" + link.split("/", 3)[3])
    assert "Nothing saved yet" not in other.inner_text("body")


def test_a_deep_link_opens_its_page_without_page_not_found(open_page):
    page = open_page("/memory?model=llama-3.1-70b&seq=8192")
    assert "Page not found" not in page.inner_text("body")
    assert page.locator("h1").first.inner_text() == "Memory"
    assert query(page).get("model") == "llama-3.1-70b"
    metrics(page)
