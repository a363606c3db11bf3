"""The presenter view (link key `present`, issue #29): for a projector. A page that has a main chart draws it first,
at large type, with the three or four inputs that move it in a column beside it; the sidebar starts folded away and
no longer shows those inputs (one widget per key). The CSS is style.PRESENTER_CSS."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app_pages.shared.context import context
from app_pages.shared.fields import fields
from app_pages.shared.rerun import after_sidebar_change, sidebar_shape
from app_pages.shared.text import plain
from app_pages.shared.widgets import long_choice, widget

MAX_BESIDE = 6  # inputs beside a chart: six fit beside a 480 px chart and the metrics under it at 1024 x 768
PAGE_KEY = "_llmgp_page"  # the url_path of the page being shown (app.py), read by the sidebar

# Per page, the sidebar inputs that matter for its main chart, in order; the first MAX_BESIDE that apply are drawn
# beside it. The Memory page's are a workshop's knobs: with four (accelerator, batch, context, method) the instructor
# opened the sidebar for precision, checkpointing or ZeRO, and at 1024 px the chart beside it squeezed.
CONTROLS: dict[str, tuple[str, ...]] = {
    "memory": ("acc", "method", "obj", "seq", "batch", "gc", "zero", "prec", "fmt"),
    "gpu-vs-tpu": ("model", "mode", "batch", "seq"),
    "training": ("model", "method", "obj", "tokens", "seq"),
    "inference": ("model", "batch", "acc", "fmt", "seq"),  # the batch the decode chart marks, in sight at 1280 x 720
}
# Inputs drawn beside the chart only when moved off their default: the objective (DPO) changes what the bars hold,
# and a room shown 110 GiB for "LoRA, batch 1" must see that it is DPO (review, stop 48); left at SFT it takes no room.
WHEN_SET = frozenset({"obj"})


def presenting(values: dict[str, Any] | None = None) -> bool:
    return bool((values if values is not None else context().values).get("present"))


def beside(values: dict[str, Any], page: str | None = None) -> tuple[str, ...]:
    """The keys the page draws beside its chart (and the sidebar leaves out) for these values; () outside the view."""
    if not presenting(values):
        return ()
    table = fields()
    keys = CONTROLS.get(page or st.session_state.get(PAGE_KEY, ""), ())
    return tuple(k for k in keys if table[k].applies(values) and (k not in WHEN_SET or values.get(k, table[k].default) != table[k].default))[:MAX_BESIDE]


def chart_with_controls(page: str) -> Any:
    """In the presenter view, a column for the main chart (returned) with the page's inputs drawn in one beside it;
    else the page itself."""
    values = context().values  # read once this run (app.py's body)
    keys = beside(values, page)
    if not keys:
        return st.container()
    chart, side = st.columns([3, 1], gap="medium")
    shape = sidebar_shape(values)
    table = fields()
    with side:
        for key in keys:
            widget(table[key], on_change=after_sidebar_change, args=(shape,), narrow=True)
            if full := long_choice(table[key], values, limit=20):  # the large type fits about 20 characters
                st.caption(plain(full))
    return chart
