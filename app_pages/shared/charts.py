"""Plotly figures built from core results (no Streamlit here)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app_pages.shared.style import CAPACITY_COLOR, COMPONENT_COLORS, COMPONENT_LABELS, FIT_COLORS, Units, layout, vmarker
from core.catalog.accelerators import load_accelerators
from core.estimate import Result
from core.memory.estimate import LayoutResult, devices_needed_by_accelerator
from core.memory.sweep import COMPONENTS, sweep
from core.scenario import Scenario


def breakdown_bar(result: Result, units: Units, device_name: str) -> go.Figure:
    m = result.memory_per_device_bytes
    fig = go.Figure()
    for comp in COMPONENTS:
        value = getattr(m, comp)
        if value <= 0:
            continue
        fig.add_bar(
            y=["per device"],
            x=[units.value(value)],
            orientation="h",
            name=COMPONENT_LABELS[comp],
            marker_color=COMPONENT_COLORS[comp],
            hovertemplate=f"{COMPONENT_LABELS[comp]}: %{{x:,.2f}} {units.name}<extra></extra>",
        )
    cap = units.value(result.device_memory_bytes)
    fig.add_vline(x=cap, line={"color": CAPACITY_COLOR, "dash": "dash", "width": 3})
    fig.add_annotation(
        x=cap,
        y=1.02,
        yref="paper",
        text=f"{device_name}: {cap:,.1f} {units.name} usable",
        showarrow=False,
        xanchor="right" if m.total > result.device_memory_bytes * 0.6 else "left",
    )
    fig.update_layout(barmode="stack", xaxis_title=f"Memory per device ({units.name})", yaxis={"visible": False})
    verdict = "fits" if result.fits else "does NOT fit"
    title = f"Memory per device: {units(m.total)} of {units(result.device_memory_bytes)} — {verdict}"
    fig = layout(fig, title, height=290)
    fig.update_layout(legend={"y": -0.6})
    return fig


def fits_on_chart(rows: list[dict], units: Units) -> go.Figure:
    """rows: name, devices (int|None), per_device_bytes, capacity_bytes."""
    rows = sorted(rows, key=lambda r: (r["devices"] is None, r["devices"] or 0, -r["capacity_bytes"]))
    names = [r["name"] for r in rows]
    devices = [r["devices"] or 0 for r in rows]
    status = ["fits on 1" if d == 1 else "needs several" if d else "does not fit" for d in devices]
    fig = go.Figure()
    for label, color in FIT_COLORS.items():
        idx = [i for i, s in enumerate(status) if s == label]
        if not idx:
            continue
        fig.add_bar(
            y=[names[i] for i in idx],
            x=[max(devices[i], 0.6) if devices[i] else 0.6 for i in idx],
            orientation="h",
            name=label.capitalize(),
            marker_color=color,
            text=[str(devices[i]) if devices[i] else "no fit" for i in idx],
            textposition="outside",
            customdata=[[units(rows[i]["capacity_bytes"])] for i in idx],
            hovertemplate="%{y}: %{text} device(s), %{customdata[0]} usable each<extra></extra>",
        )
    fig.update_layout(xaxis={"type": "log", "title": "Devices needed (log scale)"}, yaxis={"autorange": "reversed", "title": None})
    return layout(fig, "Which accelerators it fits on, and how many of each it needs", height=max(360, 22 * len(rows) + 120))


def sweep_chart(x: np.ndarray, grid: dict[str, np.ndarray], capacity: float, units: Units, x_title: str, current: float, limit: float | None) -> go.Figure:
    fig = go.Figure()
    for comp in COMPONENTS:
        y = grid[comp]
        if not np.any(y > 0):
            continue
        fig.add_scatter(
            x=x,
            y=units.value(y),
            stackgroup="mem",
            name=COMPONENT_LABELS[comp],
            mode="lines",
            line={"color": COMPONENT_COLORS[comp], "width": 0.5},
            hovertemplate=f"{COMPONENT_LABELS[comp]}: %{{y:,.2f}} {units.name}<extra></extra>",
        )
    fig.add_hline(
        y=units.value(capacity),
        line={"color": CAPACITY_COLOR, "dash": "dash", "width": 3},
        annotation_text=f"device capacity {units(capacity)}",
        annotation_position="top left",
    )
    top = float(np.max(grid["total"])) if len(grid["total"]) else capacity
    top = units.value(max(top, capacity) * 1.05)
    vmarker(fig, current, 0, top, "your setting")
    if limit:
        vmarker(fig, limit, 0, top, f"largest that fits: {limit:,.0f}", color="#E45756", dash="solid")
    fig.update_layout(xaxis={"type": "log", "title": x_title}, yaxis_title=f"Memory per device ({units.name})", hovermode="x unified")
    return layout(fig, f"Memory per device as {x_title.split(' (')[0].lower()} grows", height=420)


def layout_text(lay: LayoutResult | None) -> str:
    if lay is None:
        return "does not fit on any layout up to 65,536 devices"
    parts = []
    if lay.data_parallel > 1:
        parts.append(f"DP {lay.data_parallel}")
    if lay.tensor_parallel > 1:
        parts.append(f"TP {lay.tensor_parallel}")
    if lay.pipeline_parallel > 1:
        parts.append(f"PP {lay.pipeline_parallel}")
    if lay.zero_stage:
        parts.append(f"ZeRO-{lay.zero_stage}")
    return f"{lay.devices} device{'s' * (lay.devices > 1)}" + (f" ({', '.join(parts)})" if parts else "")


def fits_on_figure(sc: Scenario, units: Units) -> go.Figure:
    accs = list(load_accelerators())
    needed = devices_needed_by_accelerator(sc, [a.id for a in accs])
    rows = [{"name": a.name, "devices": needed[a.id].devices if needed[a.id] else None, "capacity_bytes": a.usable_memory_bytes} for a in accs]
    return fits_on_chart(rows, units)


def sweep_figure(sc: Scenario, result: Result, units: Units, axis: str) -> go.Figure:
    """Memory vs batch size or context length for this scenario, limit marked."""
    if axis == "batch":
        x = np.unique(np.geomspace(1, 1024, 60).astype(int))
        grid = sweep(sc, x, sc.seq_len)
        return sweep_chart(x, grid, result.device_memory_bytes, units, "Batch size (sequences per device)", sc.batch_size, result.max_batch_size or None)
    top = max(sc.architecture.max_context, sc.seq_len)
    x = np.unique(np.geomspace(128, top, 80).astype(int))
    grid = sweep(sc, sc.batch_size, x)
    return sweep_chart(x, grid, result.device_memory_bytes, units, "Context / sequence length (tokens)", sc.seq_len, result.max_seq_len or None)
