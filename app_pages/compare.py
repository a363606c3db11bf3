"""Compare: up to four saved scenarios side by side."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_pages.shared.charts import layout_text
from app_pages.shared.compare_state import MAX_SAVED, load_saved, save_saved
from app_pages.shared.context import page_header
from app_pages.shared.style import COMPONENT_COLORS, COMPONENT_LABELS, PLOTLY_CONFIG, layout
from core.estimate import estimate
from core.memory.sweep import COMPONENTS
from core.model.hf_config import safe_label

sc, values, units = page_header("Compare", f"Save up to {MAX_SAVED} scenarios and compare them side by side. The saved set travels in the link.")
saved = load_saved()

c1, c2, c3 = st.columns([2, 1, 1])
label = c1.text_input("Name for the current scenario", value=f"{sc.architecture.name} - {sc.mode} - {sc.accelerator}", max_chars=60)
if c2.button("Save current scenario", icon=":material/add:", disabled=len(saved) >= MAX_SAVED, width="stretch"):
    saved.append((safe_label(label) or f"Scenario {len(saved) + 1}", sc))
    save_saved(saved)
    st.rerun()
if c3.button("Clear all", icon=":material/delete:", disabled=not saved, width="stretch"):
    save_saved([])
    st.rerun()
if len(saved) >= MAX_SAVED:
    st.caption(f"{MAX_SAVED} scenarios saved: remove one to save another.")

if not saved:
    st.info("Nothing saved yet: set up a scenario in the sidebar and press **Save current scenario**.")
    st.stop()

results = [(name, s, estimate(s)) for name, s in saved]
fig = go.Figure()
names = [f"{i + 1}. {name}" for i, (name, _, _) in enumerate(results)]
for comp in COMPONENTS:
    ys = [units.value(getattr(r.memory_per_device_bytes, comp)) for _, _, r in results]
    if any(ys):
        fig.add_bar(
            x=names,
            y=ys,
            name=COMPONENT_LABELS[comp],
            marker_color=COMPONENT_COLORS[comp],
            hovertemplate=f"{COMPONENT_LABELS[comp]}: %{{y:,.2f}} {units.name}<extra></extra>",
        )
fig.add_scatter(
    x=names,
    y=[units.value(r.device_memory_bytes) for _, _, r in results],
    mode="markers",
    name="Device capacity",
    marker={"symbol": "line-ew-open", "size": 40, "color": "#8C8C8C", "line": {"width": 3}},
    hovertemplate=f"capacity %{{y:,.1f}} {units.name}<extra></extra>",
)
fig.update_layout(barmode="stack", yaxis_title=f"Memory per device ({units.name})")
st.plotly_chart(layout(fig, "Memory per device, by scenario (line = the device's usable memory)", height=460), config=PLOTLY_CONFIG)

table = pd.DataFrame(
    [
        {
            "#": i + 1,
            "Scenario": name,
            "Model": s.architecture.name,
            "Workload": s.mode,
            "Accelerator": r.accelerator,
            "Format / method": s.weights_format if s.mode == "inference" else s.method,
            "Batch x tokens": f"{s.batch_size} x {s.seq_len:,}",
            f"Per device ({units.name})": round(units.value(r.memory_per_device_bytes.total), 2),
            "Fits one device": "yes" if r.fits else "no",
            "Smallest layout": layout_text(r.layout_needed),
            "Max batch": r.max_batch_size,
            "Max context": r.max_seq_len,
        }
        for i, (name, s, r) in enumerate(results)
    ]
)
st.dataframe(table, hide_index=True, width="stretch")

remove = st.selectbox("Remove a saved scenario", ["—", *names], key="cmp_remove")
if remove != "—" and st.button("Remove", icon=":material/remove:"):
    del saved[names.index(remove)]
    save_saved(saved)
    st.rerun()
