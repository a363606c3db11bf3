"""Plotly figures built from core results (no Streamlit here)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import plotly.graph_objects as go

from app_pages.shared.style import CAPACITY_COLOR, COMPONENT_COLORS, COMPONENT_LABELS, FIT_COLORS, Units, capacity_axis, capacity_line, layout, vmarker
from core.catalog.accelerators import load_accelerators
from core.estimate import Result
from core.memory.components import runtime_of
from core.memory.estimate import MemoryResult
from core.memory.evaluator import LayoutResult
from core.memory.fit import MAX_DEVICES
from core.memory.layouts import devices_needed_by_accelerator
from core.memory.sweep import COMPONENTS, sweep
from core.scenario import Scenario


def component_label(comp: str, accelerators: Iterable[str] = ()) -> str:
    """A memory component's name in a legend or a table. The runtime is named for the parts' own runtimes (core's
    runtime_of): "Runtime (Metal)" on Apple silicon, "Runtime (CUDA context, NCCL)" on NVIDIA; both when mixed."""
    names = list(dict.fromkeys(runtime_of(a).name for a in accelerators)) if comp == "overhead" else []
    return f"Runtime ({'; '.join(names)})" if names else COMPONENT_LABELS.get(comp, comp)


def capacity_phrase(result: MemoryResult, units: Units) -> str:
    """'21.6 GiB, the engine's share of 24.0 GiB' or '24.0 GiB usable': the capacity the verdict, the advice and the
    largest batch and context are decided on (result.fit_capacity_bytes: usable memory, or the share a serving
    engine reserves of it), so every capacity shown beside them is this one."""
    cap = result.fit_capacity_bytes
    if cap != result.device_memory_bytes:
        return f"{units(cap)}, the engine's share of {units(result.device_memory_bytes)}"
    return f"{units(cap)} usable"


def capacity_text(result: MemoryResult, device_name: str, units: Units) -> str:
    return f"{device_name}: {capacity_phrase(result, units)}"


# When a training step's memory peaks (core's peak_phase), in words: the bar shows the components at that moment, so
# checkpointing, which frees the activations before the optimizer step, moves the peak there and the gradients grow
# on the bar while the activations vanish (a room read it as checkpointing creating gradients)
PEAK_WORDS = {"loss": "the loss step", "recomputation of a checkpointed block": "a recomputed block", "optimizer step": "the optimizer step"}


def peak_words(result: Result) -> str:
    """The moment a training step's memory peaks, in words ("the forward pass" where core names none)."""
    return PEAK_WORDS.get(result.peak_phase, "the forward pass")


def breakdown_bar(result: Result, units: Units, device_name: str, tall: bool = False) -> go.Figure:
    """The per-device bar by component against the device's usable memory. `tall`: the presenter view's, whose side
    column of inputs is taller than the chart (a 58 px bar under a white gap at 1024 x 768: stop 50's projector
    review, M1)."""
    m = result.memory_per_device_bytes
    fig = go.Figure()
    for comp in COMPONENTS:
        value = getattr(m, comp)
        if value <= 0:
            continue
        name = component_label(comp, [result.accelerator])
        fig.add_bar(
            y=["per device"],
            x=[units.value(value)],  # hop: int bytes -> the reader's units (GiB or GB), a bar
            orientation="h",
            name=name,
            marker_color=COMPONENT_COLORS[comp],
            hovertemplate=f"{name}: %{{x:,.2f}} {units.name}<extra></extra>",
        )
    cap = units.value(result.fit_capacity_bytes)
    capacity_line(fig, cap, capacity_text(result, device_name, units), units.value(m.total), f"{units(result.fit_capacity_bytes)} usable")
    # the total at the bar's end, and past the line how many cards' worth: when a move takes the bar across one of the
    # axis's steps (400 -> 600 GiB) the bar is drawn shorter while memory grew, and the room watches the bar (stop 50's
    # projector review, H5); the number it reads there grows with the memory
    times = f" = {m.total / result.fit_capacity_bytes:,.1f} × the card" if cap > 0 and m.total > result.fit_capacity_bytes else ""
    end = units.value(m.total)
    inside = end > 0.7 * capacity_axis(end, cap)  # near the axis's end: written inside the bar, on a white box
    fig.add_annotation(
        x=end,
        y="per device",
        text=f"{units(m.total)}{times}",
        showarrow=False,
        xanchor="right" if inside else "left",
        xshift=-4 if inside else 4,
        bgcolor="rgba(255,255,255,0.85)",
        font={"size": 13},
    )
    at = f" at its peak, {peak_words(result)}" if result.mode == "training" else ""
    fig.update_layout(barmode="stack", xaxis_title=f"Memory per device{at} ({units.name})", yaxis={"visible": False})
    verdict = "fits" if result.fits else "does NOT fit"
    title = f"Memory per device: {units(m.total)} of {units(result.fit_capacity_bytes)} — {verdict}"
    # a training bar's axis title says the moment and wraps onto a second line on a phone: 30 px more, or Plotly's
    # automargin leaves the plot no height under a 390 px chart's legend ("Something went wrong with axis scaling")
    fig = layout(fig, title, height=(320 if at else 290) + (130 if tall else 0))
    fig.update_layout(legend={"y": -0.6})
    return fig


def fits_on_chart(rows: list[dict], units: Units, chosen: str | None = None) -> go.Figure:
    """Devices needed against usable memory per device, one point per accelerator (name, usable memory and count on
    hover; the chosen accelerator labelled). rows: name, devices (int|None), capacity_bytes. A point per accelerator
    keeps the chart one screen tall and quick to redraw whatever the catalog's size (a labelled bar per accelerator
    was 2,100 px tall at 92 accelerators and the slowest element of the page to redraw)."""

    def status(r: dict) -> str:
        return "does not fit" if r["devices"] is None else "fits on 1" if r["devices"] == 1 else "needs several"

    fig = go.Figure()
    for label, color in FIT_COLORS.items():
        group = [r for r in rows if status(r) == label]
        if not group or label == "does not fit":  # no point to draw: counted in the title
            continue
        fig.add_scatter(
            x=[units.value(r["capacity_bytes"]) for r in group],
            y=[r["devices"] for r in group],
            mode="markers",
            name=f"{label.capitalize()} ({len(group)})",
            marker={"color": color, "size": 9, "line": {"width": 0.5, "color": "#444"}},
            customdata=[[r["name"], units(r["capacity_bytes"])] for r in group],
            hovertemplate="%{customdata[0]}<br>%{customdata[1]} usable each: %{y} device(s)<extra></extra>",
        )
    mine = next((r for r in rows if r["name"] == chosen), None)
    if mine is not None and mine["devices"]:
        fig.add_scatter(
            x=[units.value(mine["capacity_bytes"])],
            y=[mine["devices"]],
            mode="markers+text",
            text=[f"your pick: {mine['devices']:,}"],
            textposition="top center",
            marker={"size": 18, "symbol": "circle-open", "color": "#333", "line": {"width": 2}},
            showlegend=False,
            hoverinfo="skip",
        )
    missing = sum(r["devices"] is None for r in rows)
    title = "Devices needed, by memory per device"
    if missing:
        title += f"; {missing} cannot hold it at all"
    counts = [r["devices"] for r in rows if r["devices"]]
    sizes = [units.value(r["capacity_bytes"]) for r in rows]
    memory_ticks = [t for t in (4, 8, 12, 16, 24, 32, 48, 64, 80, 96, 128, 192, 256, 512) if min(sizes) / 1.2 <= t <= max(sizes) * 1.2]
    if counts and max(counts) <= 16:  # whole devices on a linear axis
        yaxis = {"title": "Devices needed", "dtick": 1, "range": [0.5, max(counts) + 0.7]}
    else:
        yaxis = {"type": "log", "dtick": 1, "title": "Devices needed (log scale)"}
    fig.update_layout(xaxis={"type": "log", "title": f"Usable memory per device ({units.name}, log scale)", "tickvals": memory_ticks}, yaxis=yaxis)
    return layout(fig, title, height=420)


def sweep_chart(
    x: np.ndarray,
    grid: dict[str, np.ndarray],
    capacity: float,
    units: Units,
    x_title: str,
    current: float,
    limit: float | None,
    accelerator: str = "",
    window: bool = False,
) -> go.Figure:
    """Memory against batch or context, stacked by component, the device's capacity and `limit` marked: the largest
    that fits, or (`window`) the model's context window where memory would hold more (in grey: memory is not it)."""
    fig = go.Figure()
    for comp in COMPONENTS:
        y = grid[comp]
        if not np.any(y > 0):
            continue
        name = component_label(comp, [accelerator] if accelerator else [])
        fig.add_scatter(
            x=x,
            y=units.value(y),
            stackgroup="mem",
            name=name,
            mode="lines",
            line={"color": COMPONENT_COLORS[comp], "width": 0.5},
            hovertemplate=f"{name}: %{{y:,.2f}} {units.name}<extra></extra>",
        )
    fig.add_hline(
        y=units.value(capacity),
        line={"color": CAPACITY_COLOR, "dash": "dash", "width": 3},
        annotation_text=f"device capacity {units(capacity)}",
        annotation_position="bottom left",  # under the line: "your setting" sits above the plot
    )
    top = float(np.max(grid["total"])) if len(grid["total"]) else capacity
    top = units.value(max(top, capacity) * 1.05)
    vmarker(fig, current, "your setting", log_x=True)
    if limit and window:
        vmarker(fig, limit, f"the model's context window: {limit:,.0f}", log_x=True, color=CAPACITY_COLOR, dash="solid", side="left", at_top=False)
    elif limit:
        vmarker(fig, limit, f"largest that fits: {limit:,.0f}", log_x=True, color="#E45756", dash="solid", side="left", at_top=False)
    ticks = [t for t in 2.0 ** np.arange(0, 22, 2) if x.min() <= t <= x.max()]  # 1, 4, 16, ... 1M: one label per factor of 4
    fig.update_layout(
        xaxis={"type": "log", "title": x_title, "tickvals": ticks, "ticktext": [f"{t / 1024:g}k" if t >= 1024 else f"{t:g}" for t in ticks]},
        yaxis={"title": f"Memory per device ({units.name})", "range": [0, top]},  # room above the capacity line
        hovermode="x unified",
    )
    return layout(fig, f"Memory as the {'batch' if x_title.startswith('Batch') else 'context'} grows", height=420)


def layout_text(lay: LayoutResult | None) -> str:
    if lay is None:
        return f"does not fit on any layout up to {MAX_DEVICES:,} devices"
    parts = []
    if lay.data_parallel > 1:
        parts.append(f"DP {lay.data_parallel}")
    if lay.tensor_parallel > 1:
        parts.append(f"{'EP' if lay.expert_parallel else 'TP'} {lay.tensor_parallel}")
    if lay.pipeline_parallel > 1:
        parts.append(f"PP {lay.pipeline_parallel}")
    if lay.zero_stage:
        parts.append(f"ZeRO-{lay.zero_stage}")
    return f"{lay.devices} device{'s' * (lay.devices > 1)}" + (f" ({', '.join(parts)})" if parts else "")


def layout_changes(sc: Scenario, lay: LayoutResult | None) -> str:
    """What a layout sets that the sidebar's scenario does not, in words ("ZeRO-3", "TP 8, PP 2"); "" where it
    changes only the device count (more data-parallel ranks or replicas) or there is none."""
    if lay is None:
        return ""
    parts = []
    if lay.tensor_parallel != sc.tensor_parallel:
        parts.append(f"{'EP' if lay.expert_parallel else 'TP'} {lay.tensor_parallel}")
    if lay.pipeline_parallel != sc.pipeline_parallel:
        parts.append(f"PP {lay.pipeline_parallel}")
    if sc.mode == "training" and lay.zero_stage != sc.zero_stage:
        parts.append(f"ZeRO-{lay.zero_stage}")
    return ", ".join(parts)


def fits_on_figure(sc: Scenario, units: Units) -> go.Figure:
    accs = list(load_accelerators())
    needed = devices_needed_by_accelerator(sc, [a.id for a in accs])
    rows = [{"name": a.name, "devices": needed[a.id].devices if needed[a.id] else None, "capacity_bytes": a.usable_memory_bytes} for a in accs]
    chosen = next((a.name for a in accs if a.id == sc.accelerator), None)
    return fits_on_chart(rows, units, chosen)


def sweep_figure(sc: Scenario, result: Result, units: Units, axis: str) -> go.Figure:
    """Memory vs batch size or context length for this scenario, limit marked."""
    if axis == "batch":
        x = np.unique(np.geomspace(1, 1024, 60).astype(int))
        grid = sweep(sc, x, sc.seq_len)
        return sweep_chart(x, grid, result.fit_capacity_bytes, units, "Batch size (sequences per device)", sc.batch_size, result.max_batch_size or None, sc.accelerator)
    top = max(sc.architecture.max_context, sc.seq_len)
    x = np.unique(np.geomspace(128, top, 80).astype(int))
    grid = sweep(sc, sc.batch_size, x)
    window = context_is_the_window(sc, result)
    return sweep_chart(x, grid, result.fit_capacity_bytes, units, "Context / sequence length (tokens)", sc.seq_len, result.max_seq_len or None, sc.accelerator, window)


def context_is_the_window(sc: Scenario, result: Result) -> bool:
    """The longest context that fits is the model's whole context window: the search stops there (core/memory/
    estimate.py), so memory would hold more. A room read "Longest context that fits: 8,192" on a card a third full
    as the card's limit (stop 50's projector review, H2)."""
    return bool(result.max_seq_len) and result.max_seq_len >= max(sc.architecture.max_context, sc.seq_len)
