"""Compare: up to four saved scenarios side by side."""

import textwrap

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_pages.shared.charts import component_label, layout_text
from app_pages.shared.context import page_header, priced, stop_page
from app_pages.shared.fields import fields
from app_pages.shared.plot import show
from app_pages.shared.results import cached_estimate
from app_pages.shared.scenario_io import saved_scenario, scenario_values
from app_pages.shared.serving_section import monthly_serving_usd, traffic_of_values
from app_pages.shared.state import MAX_SAVED, saved_rows, set_saved_rows
from app_pages.shared.style import COMPONENT_COLORS, layout
from app_pages.shared.tables import TRAINING_RUN_HELP, show_table
from app_pages.shared.text import chart_text, plain
from core.catalog.accelerators import get_accelerator
from core.memory.sweep import COMPONENTS
from core.model.hf_config import safe_label

sc, values, units = page_header("Compare", f"Save up to {MAX_SAVED} scenarios and compare them side by side. The saved set travels in the link.")
rows = saved_rows()

# Chart first (issue #29), in the default and the presenter view alike: the memory chart with the inputs that fill it
# beside it (name, save, clear, remove); on a phone the columns stack, the chart on top.
chart_slot, side = st.columns([2, 1], gap="medium")
with side:
    label = st.text_input("Name for the current scenario", value=f"{sc.architecture.name} - {sc.mode} - {get_accelerator(sc.accelerator).name}"[:60], max_chars=60)
    if st.button("Save current scenario", icon=":material/add:", disabled=len(rows) >= MAX_SAVED, width="stretch"):
        set_saved_rows([*rows, (safe_label(label) or f"Scenario {len(rows) + 1}", sc.model_dump_json(exclude_defaults=True))])
        st.rerun()
    if st.button("Clear all", icon=":material/delete:", disabled=not rows, width="stretch"):
        set_saved_rows([])
        st.rerun()
    if len(rows) >= MAX_SAVED:
        st.caption(f"{MAX_SAVED} scenarios saved: remove one to save another.")

saved = [(name, s) for name, text in rows if (s := saved_scenario(text)) is not None]
if len(saved) < len(rows):
    chart_slot.warning(f"{len(rows) - len(saved)} saved scenario(s) in the link could not be read (not a valid scenario) and are not shown.", icon=":material/warning:")
if not saved:
    chart_slot.info("Nothing saved yet: set up a scenario in the sidebar and press **Save current scenario**.")
    stop_page()

PRICES = priced()  # the price list in use: (cache key, rows)
results = [(name, s, cached_estimate(s.model_dump_json(), *PRICES)) for name, s in saved]
TRAFFIC = traffic_of_values(values)  # the Inference page's traffic and targets: the same bill as there and on Plan
names = [f"{i + 1}. {chart_text(name)}" for i, (name, _, _) in enumerate(results)]
# Horizontal bars, a scenario's name on the y axis in lines of about 24 characters: columns with slanted names were
# squashed into a third of a phone's width (390 px) under names that ran down the chart. Scenario 1 on top.
rows_y = ["<br>".join(textwrap.wrap(n, 24, break_long_words=True)) for n in names]
fig = go.Figure()
for comp in COMPONENTS:
    xs = [units.value(getattr(r.memory_per_device_bytes, comp)) for _, _, r in results]
    if any(xs):
        # the runtime is named for the parts that hold one (Metal holds nothing: core's runtime_of)
        label = component_label(comp, [r.accelerator for _, _, r in results if getattr(r.memory_per_device_bytes, comp) > 0])
        fig.add_bar(
            y=rows_y,
            x=xs,
            orientation="h",
            name=label,
            marker_color=COMPONENT_COLORS[comp],
            hovertemplate=f"{label}: %{{x:,.2f}} {units.name}<extra></extra>",
        )
capacities = [units.value(r.fit_capacity_bytes) for _, _, r in results]
fig.add_scatter(
    y=rows_y,
    x=capacities,
    mode="markers",
    name="Device capacity",
    marker={"symbol": "line-ns-open", "size": 34, "color": "#8C8C8C", "line": {"width": 3}},
    hovertemplate=f"capacity %{{x:,.1f}} {units.name}<extra></extra>",
)
longest = max([units.value(r.memory_per_device_bytes.total) for _, _, r in results] + capacities)
fig.update_layout(
    barmode="stack",
    bargap=0.35,
    xaxis={"title": f"Memory per device ({units.name})", "range": [0, longest * 1.06]},
    yaxis={"title": None, "autorange": "reversed"},
)
with chart_slot:
    show(layout(fig, "Memory per device, by scenario (grey tick = the device's usable memory)", height=230 + 75 * len(results)), key="chart_compare")
with side:
    remove = st.selectbox("Remove a saved scenario", ["—", *names], key="cmp_remove")
    if remove != "—" and st.button("Remove", icon=":material/remove:"):
        kept = [row for i, row in enumerate(rows) if f"{i + 1}. {chart_text(row[0])}" != remove]
        set_saved_rows(kept)
        st.rerun()

table = pd.DataFrame(
    [
        {  # the answer first (fits, time and cost, speed and monthly bill: in sight at 1280 px), then the memory
            "#": i + 1,
            "Scenario": name,
            "Accelerator": get_accelerator(r.accelerator).name,  # the part's name, as every other page writes it
            "Fits its layout": "yes" if r.fits else "no",
            "Training hours": None if r.training is None or r.training.run_hours is None else round(r.training.run_hours, 2),
            "Training run (USD)": None if r.training is None or r.training.run_usd is None else round(r.training.run_usd, 2),
            "Training run on spot (USD)": None if r.training is None or r.training.run_spot_usd is None else round(r.training.run_spot_usd, 2),
            "Tokens/s per user": None if r.inference is None else round(r.inference.decode_tokens_per_s, 1),
            "Serving USD / month at the traffic": None if (usd := monthly_serving_usd(s, TRAFFIC, PRICES)) is None else round(usd),
            "Model": s.architecture.name,
            f"Per device ({units.name})": round(units.value(r.memory_per_device_bytes.total), 2),
            "Fewest devices": layout_text(r.layout_needed),
            "Max batch": r.max_batch_size or None,
            "Max context": r.max_seq_len or None,
            "Tokens/s, all users": None if r.inference is None else round(r.inference.aggregate_tokens_per_s),
            "Serving USD / M output tokens (full load)": None
            if r.inference is None or r.inference.usd_per_million_tokens is None
            else round(r.inference.usd_per_million_tokens, 3),
        }
        for i, (name, s, r) in enumerate(results)
    ]
)
# a column with no figure for any saved scenario is left out (three all-dash training columns pushed the speed and the
# memory off a 1280 px screen for a serving set: stop 50's projector review, M9), and the caption says which
empty = [c for c in table.columns if table[c].isna().all()]
show_table(
    table.drop(columns=empty),
    hide_index=True,
    width="stretch",
    column_config={"Scenario": st.column_config.TextColumn(pinned=True)} | TRAINING_RUN_HELP,  # a phone scrolls sideways: the name stays
)

if empty:
    st.caption(plain("Left out, no figure for any of these scenarios: " + ", ".join(empty) + "."))
st.markdown("**Every setting of the saved scenarios**")
settings = {}
for f in fields().values():
    if f.scenario:
        # exact: not a slider's stop; "—" where the input does not shape that scenario (a serving scenario's method and
        # optimizer, a training one's engine; the QLoRA base off QLoRA)
        settings[f.label] = ["—" if not f.applies(scenario_values(s)) else f.scenario_text(getattr(s, f.scenario)) for _, s, _ in results]
show_table(pd.DataFrame(settings, index=names).T, width="stretch")

st.caption(plain("Saved scenarios are kept in this page's link (parameter cmp): copy the address bar to share the comparison."))
