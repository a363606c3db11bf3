"""A link with many bad values: its messages fold into one warning and a collapsed expander under it (they pushed the
Inference page's charts below the fold at 1280x720: six warnings took ~450 px), every message still there, whole and
escaped (each quotes the link, which can hold Markdown or HTML)."""

from __future__ import annotations

from app_pages.shared.fields import url_problems
from app_pages.shared.text import plain

from .conftest import no_exception, open_link

BAD = {"tp": "abc", "acc": "no-such-gpu", "model": "zzz", "rambw": "nan", "batch": "<b>big</b>", "seq": "-7"}


def test_many_bad_values_give_one_warning_and_the_rest_folded_away():
    want = [plain(m) for m in url_problems(BAD)]
    assert len(want) == 6  # each of the six values is refused (labels: Tensor parallel, Accelerator, Model, ...)
    at = open_link("inference", BAD)
    no_exception(at)
    (folded,) = [e for e in at.main.expander if "more warning" in e.label]
    assert folded.label == "5 more warnings" and not folded.proto.expanded  # collapsed: one line on the page
    inside = [w.value for w in folded.warning]
    on_top = [w.value for w in at.main.warning if w.value not in inside]
    assert on_top == want[:1] and inside == want[1:]  # each message once, in the link's order, escaped as before
    assert any("&lt;b&gt;" in v or "\\<b\\>" in v for v in inside)  # the link's HTML is text, not markup
    assert at.metric  # the page went on to its results


def test_one_bad_value_is_one_warning_and_no_expander():
    at = open_link("inference", {"tp": "abc"})
    no_exception(at)
    assert [w.value for w in at.main.warning] == [plain(m) for m in url_problems({"tp": "abc"})]
    assert not [e for e in at.main.expander if "more warning" in e.label]
