"""Every formula on the Method page renders: no KaTeX error element, no control character in the TeX KaTeX was
given (a tab where `\\text` was meant renders as "ext" without an error), and `\\text{...}` reaches the page as text."""

import re

import pytest

from app_pages.shared.method_text import FORMULAS

from .conftest import wait_ready

pytestmark = pytest.mark.browser

CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def test_every_method_formula_renders(open_page):
    page = open_page("/method")
    for title, _ in FORMULAS:  # open every formula section, so that what is read has been drawn
        page.get_by_text(title, exact=True).first.click()
    wait_ready(page, settle=0.5)
    expected = sum(len(re.findall(r"\$[^$]+\$", body)) for _, body in FORMULAS)
    page.wait_for_function(f"document.querySelectorAll('.katex').length >= {expected}", timeout=60_000)
    assert page.locator(".katex-error").count() == 0
    tex = page.locator('.katex annotation[encoding="application/x-tex"]').all_text_contents()
    assert len(tex) >= expected
    assert not [t for t in tex if CONTROL.search(t)]
    # The offload formula's words are typeset as text (a space kept in "RAM bandwidth") and its product as a times sign.
    offload = [t for t in tex if "RAM bandwidth" in t]
    assert offload and all("\\text{RAM bandwidth}" in t and "\\times" in t for t in offload)
    # What is read is waited for: on a busy machine an expander's formula may still be laid out when it is read.
    # KaTeX keeps text spaces as no-break spaces.
    drawn = """() => [...document.querySelectorAll('.katex-html')].some(e => e.innerText.replace(/\\u00a0/g, ' ').includes('RAM bandwidth×0.85'))"""
    try:
        page.wait_for_function(drawn, timeout=60_000)
    except Exception:
        rendered = [r.replace("\xa0", " ") for r in page.locator(".katex-html").all_inner_texts()]
        pytest.fail(f"the offload formula never rendered as 'RAM bandwidth×0.85': {[r for r in rendered if 'RAM' in r]}")
