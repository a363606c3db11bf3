"""Nothing a link, an upload or a config.json carries reaches Markdown or HTML
unescaped (issue #8): a config whose every text field is a phishing payload is
rendered through every page and the downloaded report, and every piece of text
the app hands to Streamlit's Markdown is rendered the way a browser would
(GitHub-flavoured Markdown with autolinks, raw HTML allowed): no link, no
image, no HTML element comes out. The same for a config with each field
hostile in turn (error messages quote fields), and for chart text."""

from __future__ import annotations

import base64
import json
import re
import zlib

import pytest
from markdown_it import MarkdownIt

from app_pages.shared.report import report_markdown
from app_pages.shared.style import Units
from core.catalog.presets import preset
from core.estimate import estimate
from core.scenario import Scenario

from .conftest import PAGES, charts, no_exception, open_link

PHISH = (
    "![x](http://evil.example/pixel.png) [Claim your free H100 hours](http://evil.example/phish) "
    "<img src=x onerror=alert(1)> www.evil-phish.example/claim https://evil.example/a <b>bold</b> "
    ":red[alarm] $x^2$ `code` **strong** # heading"
)
RENDER = MarkdownIt("gfm-like", {"html": True, "linkify": True})
ALLOWED_TAGS = {
    "p",
    "em",
    "strong",
    "code",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "br",
    "hr",
    "pre",
    "s",
    "blockquote",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}


# GitHub-flavoured "extended autolinks" (what Streamlit's renderer, remark-gfm, links in plain text, escapes and all):
# www.host.tld..., scheme://..., user@host.tld.
GFM_AUTOLINK = re.compile(r"(?i)\bwww\.[\w-]+\.[\w.-]+|\b(?:https?|ftp)://\S|[\w.+-]+@[\w-]+\.[\w.-]+")


def injected(text: str) -> list[str]:
    """The links, images and HTML elements that Markdown would make of `text`."""
    html = RENDER.render(text)
    tags = {t.lower() for t in re.findall(r"</?\s*([a-zA-Z][a-zA-Z0-9-]*)", html)}
    bad = [f"<{t}>" for t in tags - ALLOWED_TAGS]
    if re.search(r"href=|src=", html):
        bad.append("url attribute")
    visible = re.sub(r"<[^>]+>", "", html).replace("&amp;", "&")
    if GFM_AUTOLINK.search(visible):
        bad.append(f"autolink: {GFM_AUTOLINK.search(visible).group(0)}")
    return bad


def token(text: str) -> str:
    return base64.urlsafe_b64encode(zlib.compress(text.encode(), 9)).decode()


def hostile_config() -> dict:
    """Llama 3.1 8B's config with every text field (and a few added ones) set to the payload: still sizeable."""
    cfg = dict(preset("llama-3.1-8b").config or {})
    for key, value in list(cfg.items()):
        if isinstance(value, str):
            cfg[key] = PHISH
    cfg.update(
        _name_or_path=PHISH,
        architectures=[PHISH],
        model_type=PHISH,
        transformers_version=PHISH,
        torch_dtype=PHISH,
        rope_scaling={"rope_type": PHISH, "factor": 8.0},
        extra_field=PHISH,
    )
    return cfg


def markdown_texts(at) -> list[str]:
    """Every string of this run that Streamlit renders as Markdown."""
    out = []
    for kind in ("markdown", "caption", "warning", "error", "info", "success", "title", "header", "subheader"):
        out += [e.value for e in getattr(at, kind)]
    for m in at.metric:
        out += [m.label, m.value or "", m.proto.help or ""]
    for t in at.table:
        out += [str(v) for v in t.value.to_numpy().ravel()] + [str(c) for c in t.value.columns] + [str(i) for i in t.value.index]
    return out


def chart_texts(at) -> list[str]:
    return [json.dumps(c) for c in charts(at)]


def assert_clean(at) -> None:
    no_exception(at)
    for text in markdown_texts(at):
        assert not injected(text), (injected(text), text[:300])
    for spec in chart_texts(at):
        assert "evil.example" not in spec or ("<a" not in spec and "<img" not in spec), spec[:300]


def test_the_checker_sees_an_injection():
    assert injected(PHISH)
    assert not injected("plain text, 8.03B parameters (Llama 3.1 8B), 16.3 GiB")


@pytest.mark.parametrize("page", PAGES)
def test_a_hostile_config_link_through_every_page(page):
    cfg = hostile_config()
    saved = [{"name": PHISH, "scenario": {"model": {"hf_config": cfg, "name": "x"}}}]
    at = open_link(page, {"src": "config", "cfg": token(json.dumps(cfg)), "cmp": token(json.dumps(saved)), "mode": "inference"})
    assert not any("Fix the input" in i.value for i in at.info), "the hostile config still sizes (the payload sits in text fields only)"
    assert_clean(at)


@pytest.mark.parametrize("page", ["memory", "training", "inference"])
def test_a_hostile_config_in_training_mode(page):
    cfg = hostile_config()
    at = open_link(page, {"src": "config", "cfg": token(json.dumps(cfg)), "mode": "training", "tokens": "1"})
    assert_clean(at)


def test_each_field_hostile_in_turn_gives_clean_messages():
    base = preset("deepseek-v3").config or {}
    for field in sorted(base):
        at = open_link("memory", {"src": "config", "cfg": token(json.dumps({**base, field: PHISH}))})
        assert_clean(at)


def test_the_report_carries_no_markup():
    sc = Scenario.model_validate({"model": {"hf_config": hostile_config(), "name": PHISH[:110]}, "mode": "training", "train_tokens": 1e6})
    md = report_markdown(sc, estimate(sc), Units("GiB"), extra_sections=None)
    body = md.split("## Scenario", 1)[0]  # the scenario JSON sits in a code block, shown as text
    assert not injected(body), injected(body)
    code = md.split("```json", 1)[1]
    assert "```" not in code.split("```", 1)[0][1:], "the JSON cannot close its code block early"
