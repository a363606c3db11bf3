"""The Inference page's "Several cards in one box" section: the sidebar's card times `box1` plus `box2n` cards of
another type (fields box1, box2, box2n), split by layers as llama.cpp does (core/speed/mixed.py)."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app_pages.shared.cache import shared_cache
from app_pages.shared.fold import folded
from app_pages.shared.plot import show
from app_pages.shared.style import CAPACITY_COLOR, COMPONENT_COLORS, Units, frozen, layout
from app_pages.shared.text import chart_text, md, metric, plain
from app_pages.shared.widgets import page_widget
from core.memory.engines import ENGINES
from core.scenario import Scenario
from core.speed.mixed import MAX_CARDS, MixedBox, mixed_box


@shared_cache(max_entries=64)
def _box(key: str, ids: tuple[str, ...]) -> tuple[MixedBox | None, str | None]:
    try:
        return mixed_box(Scenario.model_validate_json(key), ids), None
    except ValueError as exc:
        return None, str(exc)


@shared_cache(max_entries=64)
def _figure(key: str, ids: tuple[str, ...], unit: str):
    box, units = _box(key, ids)[0], Units(unit)
    assert box is not None
    names = [f"{i + 1}. {chart_text(c.name.removeprefix('NVIDIA ').removeprefix('GeForce '))} ({c.layers} layers)" for i, c in enumerate(box.cards)]
    fig = go.Figure()
    parts = (
        ("weights_bytes", "Weights (its layers)", "weights"),
        ("kv_cache_bytes", "KV cache (its layers)", "kv_cache"),
        ("other_bytes", "Buffers and context", "overhead"),
    )
    for attr, label, color in parts:
        fig.add_bar(
            x=names,
            y=[units.value(getattr(c, attr)) for c in box.cards],
            name=label,
            marker_color=COMPONENT_COLORS[color],
            hovertemplate=f"{label}: %{{y:,.2f}} {units.name}<extra></extra>",
        )
    fig.add_scatter(
        x=names,
        y=[units.value(c.capacity_bytes) for c in box.cards],
        mode="markers",
        name="Card capacity",
        marker={"symbol": "line-ew-open", "size": 40, "color": CAPACITY_COLOR, "line": {"width": 3}},
        hovertemplate=f"capacity %{{y:,.1f}} {units.name}<extra></extra>",
    )
    fig.update_layout(barmode="stack", yaxis_title=f"Memory per card ({units.name})")
    return frozen(layout(fig, "Memory on each card in the box", height=400))


def box_section(sc: Scenario, units: Units) -> None:
    st.subheader("Several cards in one box")
    st.caption(
        "llama.cpp's default split: each card holds a run of layers in proportion to its memory, and every token passes through "
        "the cards in turn over PCIe (no NVLink needed). Mix card types, e.g. a 3090 next to a 4090."
        + (
            ""
            if sc.serving_engine == "llama.cpp"
            else f" The sidebar's engine is {ENGINES[sc.serving_engine].label}, which splits a model over identical cards"
            " (tensor or pipeline parallel, the layouts above); this section shows how llama.cpp would serve such a box."
        )
    )
    cols = st.columns([1, 2, 1])
    n1 = page_widget("box1", cols[0])
    other = page_widget("box2", cols[1])
    n2 = page_widget("box2n", cols[2]) if other != "none" else 0
    ids = (sc.accelerator,) * n1 + ((other,) * n2 if other != "none" else ())
    if len(ids) < 2:
        st.caption("Add a card (more of the sidebar's type, or another type) to see the split.")
        return
    if len(ids) > MAX_CARDS:
        st.info(f"A box here holds up to {MAX_CARDS} cards; {len(ids)} asked for.", icon=":material/info:")
        return
    key = sc.model_dump_json()
    box, why = _box(key, ids)
    if box is None:
        st.info(plain(f"No split for this box: {why}."), icon=":material/info:")
        return
    m = st.columns(4)
    metric(m[0], "Tokens/s per user (box)", f"{box.decode_tokens_per_s:,.1f}", help=f"batch {sc.batch_size}: the sum of each card's time for its layers")
    metric(m[1], "Time to first token (box)", f"{box.time_to_first_token_s * 1e3:,.0f} ms")
    metric(m[2], "Layers per card", " + ".join(str(c.layers) for c in box.cards), help=f"split {box.split}")
    metric(m[3], "Fits in the box?", "Yes" if box.fits else "No", help=None if box.fits else f"short by {units(box.short_by_bytes)} in all")
    if not box.fits:
        st.warning(
            md("The cards lack {short} for this model at these settings: a smaller format, a shorter context, or more cards.", short=units(box.short_by_bytes)),
            icon=":material/warning:",
        )
    if box.tensor_parallel_tokens_per_s is not None and box.tensor_parallel_allreduce_s is not None:
        st.caption(
            md(
                "The same cards as one tensor-parallel group (vLLM, or llama.cpp --split-mode row): {tps} tokens/s per user, of which "
                "{ms} ms a token are all-reduces over a {gbps} GB/s link (PCIe without NVLink on GeForce cards).",
                tps=f"{box.tensor_parallel_tokens_per_s:,.1f}",
                ms=f"{box.tensor_parallel_allreduce_s * 1e3:,.1f}",
                gbps=f"{box.link_gbps:g}",
            )
        )
    show(_figure(key, ids, units.name), key="chart_box")
    if (fold := folded("How the box is computed", "fold_box_how")) is not None:
        with fold:
            for note in box.notes:
                st.markdown("- " + plain(note))
