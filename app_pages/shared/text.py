"""The one way text that did not come from this code reaches the screen: a
model name from a config.json, a value quoted from a link, a provider from an
uploaded price list, a core sentence (core/text.py) with its quantities in the
reader's units. Everything dynamic passes through `plain()` before Markdown
sees it, so nothing a link carries can become a link, an image or HTML — on a
page or in the downloaded report."""

from __future__ import annotations

import math
import re
from typing import Any

from core.memory.fit import MAX_BATCH
from core.text import Text

# The marks that make links, images, HTML, code, emphasis, headings, tables, math or autolinks in Streamlit's
# Markdown (GitHub-flavoured, with bare-URL and www. autolinks: escaping ':' and '.' breaks those).
# Underscores are escaped too: "_limit_" in `sudo sysctl iogpu.wired_limit_mb=N` rendered as emphasis and lost its
# underscores on the Memory page (a command a reader copies). "=" stays readable: it makes nothing.
MD_SPECIAL = frozenset("\\`*[]()<>#+-.!|~$&:\"'_")


# GitHub-flavoured autolinks (www.x.y, scheme://x, user@host) are found in the text after escapes are removed, so
# escaping does not stop them: a zero-width space after "www", inside "://" and after "@" does.
_AUTOLINK = re.compile(r"(?i)(?<=www)(?=\.)|(?<=:)(?=//)|(?<=@)")
ZWSP = "\u200b"
# a space a line never breaks at (between a number and its unit)
NBSP = "\u00a0"


def plain(text: Any) -> str:
    """Untrusted text made safe to show in Markdown: printable characters only, every Markdown mark escaped, and
    nothing left that an autolink would pick up."""
    out = []
    for c in _AUTOLINK.sub(ZWSP, str(text)):
        if c in (ZWSP, NBSP):  # characters isprintable() refuses that this code itself writes
            out.append(c)
            continue
        if not c.isprintable():
            out.append("?")
        elif c in MD_SPECIAL:
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def say(item: Text | str, units: str = "GiB") -> str:
    """A core sentence (or any string) rendered in the reader's units and escaped for Markdown."""
    return plain(item.render(units) if isinstance(item, Text) else item)


def chart_text(text: Any) -> str:
    """Text for a Plotly title, label or hover: Plotly renders a few HTML tags (<b>, <a href>, <br>), so the
    characters that make a tag or an entity are dropped."""
    return "".join(c for c in str(text) if c not in "<>&" and c.isprintable())


FORMULA_STARTS = frozenset("=+-@\t\r")  # what a spreadsheet reads as the start of a formula (spreadsheet_safe)


def spreadsheet_safe(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run: text starting with = + - @ (a formula), a tab or a carriage return gets a
    leading apostrophe (OWASP, "CSV Injection": the characters a spreadsheet reads as the start of a formula)."""
    return "'" + value if isinstance(value, str) and value[:1] in FORMULA_STARTS else value


def md(template: str, **values: Any) -> str:
    """A trusted Markdown template (this code's own text, bold and all) with every value escaped:
    md("No price for **{acc}**: {why}", acc=name, why=reason)."""
    return template.format(**{k: plain(v) for k, v in values.items()})


def flops_text(flops: float) -> str:
    """A FLOP count short enough for a metric: 48 EFLOP, 1.2 ZFLOP (SI prefixes, 3 significant figures)."""
    for prefix, scale in (("Y", 1e24), ("Z", 1e21), ("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9)):
        if flops >= scale:
            return f"{flops / scale:,.3g} {prefix}FLOP"
    return f"{flops:,.0f} FLOP"


def usd_text(usd: float) -> str:
    """A price as the pages say it: whole dollars from $100, cents from $1, and two significant digits below (a
    million tokens at $0.021 is not $0.02)."""
    if not math.isfinite(usd):
        return "—"
    if abs(usd) >= 100:
        return f"${usd:,.0f}"
    if abs(usd) >= 1 or usd == 0:
        return f"${usd:,.2f}"
    return f"${usd:,.{max(2, 1 - math.floor(math.log10(abs(usd))))}f}"


def hours_text(h: float) -> str:
    """A duration for a person: 40 s, 12 min, 5.3 h, 4.2 days (a run of a few minutes is not "0.0 h", nor one of
    seconds "0 min")."""
    if h < 1 / 60:
        return f"{h * 3600:.0f} s"
    if h < 1:
        return f"{h * 60:.0f} min"
    if h < 72:
        return f"{h:,.1f} h"
    return f"{h / 24:,.1f} days"


# inf or nan as Python formats them ("$inf", "nan h"): a number that must never reach the screen as such
NOT_A_NUMBER = re.compile(r"(?<![\w.])-?(inf|nan)(?![\w])", re.I)


def metric(where: Any, label: str, value: str, help: str | None = None, **kwargs: Any) -> None:
    """st.metric (on `where`: st or a column) with its help escaped: a tooltip renders Markdown, links and images
    included, and help text quotes providers, instances and model names from a user's price list or config.json. A
    value that came out as inf or nan is refused in words, not shown. Every page draws its metrics through this
    (tests/app/test_hostile_families.py checks that no page calls .metric itself)."""
    if NOT_A_NUMBER.search(value):
        value, help, kwargs = "not computable", "these inputs are beyond what the model covers: this number came out as no finite number", {}
    where.metric(label, value, help=None if help is None else plain(help), **kwargs)


def sequences_text(n: int) -> str:
    """A count of concurrent sequences (or the largest batch): the memory's search stops at MAX_BATCH
    (core/memory/fit.py), so a count there is a floor: "4,096+" (a 0.5B model on an H200 holds more than 20,000
    sequences of 512 tokens). Every page writes the floor this one way."""
    return f"{n:,}+" if n >= MAX_BATCH else f"{n:,}"


def device_hours_text(hours: float) -> str:
    """Device-hours as the Training page counts them: one decimal under 10 (a LoRA run of 0.6 device-hours read "1"),
    whole hours above."""
    return f"{hours:,.1f}" if hours < 10 else f"{hours:,.0f}"


# How the big clouds write their own names; the other providers read as their catalog id, capitalised
PROVIDER_NAMES = {"aws": "AWS", "gcp": "Google Cloud", "azure": "Microsoft Azure", "oci": "Oracle Cloud", "ovhcloud": "OVHcloud", "coreweave": "CoreWeave"}


def provider_name(provider: str) -> str:
    """A price row's provider as people write it ("aws" -> "AWS", "lambda" -> "Lambda")."""
    return PROVIDER_NAMES.get(provider, provider.capitalize())
