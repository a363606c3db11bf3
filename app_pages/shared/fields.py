"""The one table of inputs. Each Field names its widget, its URL key (a
contract: links written today keep working), the Scenario field it feeds and
how (a scale such as billions or percent, "0 means unset"), and when the
sidebar shows it. Loading a link, writing the URL, building the scenario,
reading an uploaded scenario and the Compare page's settings table are loops
over this table; adding an input is adding a row to fields_sidebar.py (the
sidebar's) or fields_page.py (a page's). The Field type is field.py's."""

from __future__ import annotations

from functools import cache
from typing import Any

from app_pages.shared.field import Field, Values
from app_pages.shared.fields_page import page_fields
from app_pages.shared.fields_sidebar import accelerator_labels, preset_labels, sidebar_fields


@cache
def fields() -> dict[str, Field]:
    """Every input, the sidebar's first (app_pages/shared/fields_sidebar.py), then the pages' (fields_page.py)."""
    accs = accelerator_labels()
    rows = [*sidebar_fields(preset_labels(), accs), *page_fields(accs)]
    return {f.key: f for f in rows}


def defaults() -> Values:
    return {k: f.default for k, f in fields().items()}


def url_problems(query: dict[str, Any], table: dict[str, Field] | None = None) -> list[str]:
    """One message per query parameter that a shared link got wrong."""
    table = table or fields()
    problems = []
    for key, raw in query.items():
        f = table.get(key)
        if f is None:
            continue
        try:
            f.parse(raw)
        except (ValueError, OverflowError) as exc:
            text = raw if isinstance(raw, str) else str(raw)
            shown = "".join(c if c.isprintable() else "?" for c in text[:40]) + ("..." if len(text) > 40 else "")
            problems.append(f"URL parameter {key}={shown} was ignored — {f.label}: {exc}; using {f.fmt(f.default)!s}.")
    return problems
