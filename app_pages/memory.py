"""Memory: the per-device breakdown, where it fits, how it grows, and why."""

import pandas as pd
import streamlit as st

from app_pages.shared.charts import breakdown_bar, fits_on_figure, layout_text, sweep_figure
from app_pages.shared.context import page_header
from app_pages.shared.memo import memo
from app_pages.shared.report import report_downloads
from app_pages.shared.sidebar import page_widget
from app_pages.shared.style import COMPONENT_LABELS, PLOTLY_CONFIG
from core.catalog.accelerators import get_accelerator
from core.estimate import estimate
from core.memory.explain import explain

sc, values, units = page_header("Memory", "How much accelerator memory the scenario needs per device, and where it fits.")
KEY = (sc.model_dump_json(), units.name)
result = memo(("estimate", KEY[0]), lambda: estimate(sc))
acc = get_accelerator(sc.accelerator)
m = result.memory_per_device_bytes

cols = st.columns(5)
cols[0].metric("Memory per device", units(m.total), help="Sum of the components below")
cols[1].metric(
    "Fits one device?",
    "Yes" if result.fits else "No",
    help=f"{acc.name}: {units(result.device_memory_bytes)} usable",
    delta=f"{units(result.device_memory_bytes - m.total)} headroom" if result.fits else f"{units(m.total - result.device_memory_bytes)} short",
    delta_color="normal" if result.fits else "inverse",
)
cols[2].metric("Devices needed", layout_text(result.layout_needed).split(" (")[0], help="Smallest layout that fits: " + layout_text(result.layout_needed))
cols[3].metric("Largest batch that fits", f"{result.max_batch_size:,}")
cols[4].metric("Longest context that fits", f"{result.max_seq_len:,}", help="tokens, at the chosen batch size")

st.plotly_chart(memo(("breakdown", *KEY), lambda: breakdown_bar(result, units, acc.name)), config=PLOTLY_CONFIG, key="chart_breakdown")

if result.advice:
    with st.container(border=True):
        st.markdown("**Why it does not fit, and what would help**")
        for line in result.advice:
            st.markdown(f"- {line}")

left, right = st.columns([1, 1])
with left:
    st.plotly_chart(memo(("fits_on", *KEY), lambda: fits_on_figure(sc, units)), config=PLOTLY_CONFIG, key="chart_fits_on")
with right:
    axis = page_widget("sweep")
    fig = memo(("sweep", axis, *KEY), lambda: sweep_figure(sc, result, units, axis))
    st.plotly_chart(fig, config=PLOTLY_CONFIG, key="chart_sweep")

st.subheader("Explain: each number, its formula and its source")
parts = memo(("explain", KEY[0]), lambda: explain(sc, result))
st.table(
    pd.DataFrame(
        [
            {
                "Component": COMPONENT_LABELS.get(p.component, p.component),
                units.name: f"{units.value(p.bytes):,.2f}",
                "Formula": p.formula,
                "With your numbers": p.numbers,
                "Source": p.source,
            }
            for p in parts
        ]
    ).set_index("Component")
)
with st.expander("Parameters, assumptions and the model's shape"):
    arch = sc.architecture
    st.markdown(
        f"**{arch.name}**: {result.params.total:,} parameters ({result.params.active:,} active per token"
        + (f", {result.params.trainable:,} trainable" if result.params.trainable else "")
        + "); "
        f"{arch.num_layers} layers, hidden {arch.hidden_size}, {arch.num_heads} heads / {arch.num_kv_heads} KV heads, "
        f"vocabulary {arch.vocab_size:,}; KV cache {result.kv_cache_bytes_per_token:,} bytes per token; "
        f"checkpoint {units(result.weights_bytes_total)}."
    )
    for a in result.assumptions:
        st.markdown(f"- {a}")

report_downloads(sc, result, units)
