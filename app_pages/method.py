"""Method: formulas, sources, catalog dates, and our estimates against
published measurements."""

import datetime as dt
import re

import pandas as pd
import streamlit as st

from app_pages.shared.cache import shared_cache
from app_pages.shared.context import context, show_messages
from app_pages.shared.method_text import FORMULAS
from app_pages.shared.plot import show
from app_pages.shared.style import frozen
from app_pages.shared.tables import show_table
from app_pages.shared.text import metric, plain
from app_pages.shared.validation_chart import MATCH_PERCENT, validation_figure
from core.catalog.accelerators import get_accelerator, load_accelerators
from core.catalog.api_prices import load_api_prices
from core.catalog.engine_formats import format_names, kv_format_name, load_engine_formats
from core.catalog.engine_models import load_engine_models
from core.catalog.format_kernels import load_format_kernels
from core.catalog.kv_cache_kernels import load_kv_cache_kernels
from core.catalog.managed import load_managed_services
from core.catalog.presets import load_presets
from core.catalog.prices import STALE_AFTER_DAYS, is_stale, load_prices
from core.catalog.purchases import load_purchases
from core.measured import measured_peaks
from core.memory.engines import ENGINES
from core.memory.fit import BORDERLINE_BASIS, BORDERLINE_FRACTION
from core.memory.validation import load_cases
from core.model.formats import FORMATS

st.title("Method")
st.caption("How every number is computed, where the constants come from, and how close we are to measured reality.")
show_messages()


WITHIN = f"Within {MATCH_PERCENT:.0f}%"


@shared_cache(data=True)
def validation_table() -> pd.DataFrame:
    """Our estimate of every published measurement (the same on every run: computed once per process)."""
    rows = []
    for case in load_cases():
        est = case.estimated_bytes()
        rows.append(
            {
                "Case": case.label,
                "Measured (GB)": round(case.measured_bytes / 1e9, 2),
                "Our estimate (GB)": round(est / 1e9, 2),
                "Error (%)": round(100 * (est / case.measured_bytes - 1), 1),
                WITHIN: "yes" if abs(est / case.measured_bytes - 1) <= MATCH_PERCENT / 100 else "no",
                "What was measured": case.metric,
                "Source": case.source,
                "Note": case.known_miss or "",
            }
        )
    return pd.DataFrame(rows)


@shared_cache()
def _validation_chart():
    table = validation_table()
    return frozen(validation_figure(list(table["Case"]), list(table["Measured (GB)"]), list(table["Our estimate (GB)"])))


# Chart first (issue #29), in the default and the presenter view alike: how close we are, as a picture, with the
# three numbers that sum it up beside it; then the cases in full.
st.subheader("Our estimates against published measurements")
cases = validation_table()
chart, side = st.columns([2, 1], gap="medium")
with chart:
    show(_validation_chart(), key="chart_validation")
errors = cases["Error (%)"].abs()
worst = cases.loc[errors.idxmax()]
metric(side, f"Cases {WITHIN.lower()}", f"{(cases[WITHIN] == 'yes').sum()} of {len(cases)}", help="published peaks our estimate comes this close to")
metric(side, "Median error", f"{errors.median():.1f}%", help="the middle case's distance from its measurement, either way")
metric(side, "Largest miss", f"{worst['Error (%)']:+.1f}%", help=worst["Case"] + (f": {worst['Note']}" if worst["Note"] else ""))
show_table(cases, hide_index=True, width="stretch")
st.caption(
    "Measured peaks are `torch.cuda.max_memory_allocated`, which excludes the CUDA context, so the estimate shown here is "
    "our total minus the 0.5 GiB context budget. GB = 10^9 bytes."
)

# Our own GPU runs (bench/gpu/, data/measurements): the peaks nvidia-smi showed, which the Memory page's "borderline"
# band is drawn from (90% of them within 7%: core/memory/fit.py)
st.subheader("Our estimates against our own H100 and H200 runs")
peaks = measured_peaks()
ours = pd.DataFrame(
    [
        {
            "Run": p.label,
            "GPU": get_accelerator(p.accelerator).name,
            "Measured (GB)": round(p.measured_bytes / 1e9, 2),
            "Our estimate (GB)": round(p.estimated_bytes / 1e9, 2),
            "Error (%)": round(100 * p.error, 1),
            "File": f"data/measurements/{p.source}",
        }
        for p in peaks
    ]
)


@shared_cache()
def _measured_chart():
    return frozen(
        validation_figure(
            list(ours["Run"]),
            list(ours["Measured (GB)"]),
            list(ours["Our estimate (GB)"]),
            title="Our estimate against each of our GPU runs (what nvidia-smi showed)",
            match_percent=100 * BORDERLINE_FRACTION,
        )
    )


chart, side = st.columns([2, 1], gap="medium")
with chart:
    show(_measured_chart(), key="chart_measured")
band = 100 * BORDERLINE_FRACTION
ours_errors = ours["Error (%)"].abs()
metric(side, f"Runs within {band:.0f}%", f"{(ours_errors <= band).sum()} of {len(ours)}", help=BORDERLINE_BASIS)
metric(side, "Median error", f"{ours_errors.median():.1f}%", help="the middle run's distance from its measurement, either way")
metric(side, "Largest miss", f"{ours.loc[ours_errors.idxmax(), 'Error (%)']:+.1f}%", help=str(ours.loc[ours_errors.idxmax(), "Run"]))
with st.expander(f"The {len(ours)} runs"):
    show_table(ours, hide_index=True, width="stretch")
st.caption(
    "Training steps and generate() calls of the Hugging Face stack on one H100 SXM and one H200, measured by bench/gpu/ "
    "(peak memory as nvidia-smi shows it: PyTorch's reserved pool and the CUDA context); the estimate is our total. "
    "The Memory page calls a fit within this band borderline. GB = 10^9 bytes."
)

st.subheader("Formulas")
for title, body in FORMULAS:
    with st.expander(title):
        st.markdown(body)

st.subheader("Catalogs and their dates")
presets = list(load_presets().values())
accs = load_accelerators()
prices = load_prices()
api = load_api_prices()
bought = load_purchases()
show_table(
    pd.DataFrame(
        [
            {"Catalog": "Model presets (data/models.json)", "Rows": len(presets), "As of": f"{min(p.as_of for p in presets)} – {max(p.as_of for p in presets)}"},
            {"Catalog": "Accelerators (data/accelerators.csv)", "Rows": len(accs), "As of": f"{min(str(a.as_of) for a in accs)} – {max(str(a.as_of) for a in accs)}"},
            {
                "Catalog": "Cloud prices (data/cloud_prices.csv)",
                "Rows": len(prices),
                "As of": f"{min(str(p.as_of) for p in prices)} – {max(str(p.as_of) for p in prices)}",
            },
            {"Catalog": "Per-token API prices (data/api_prices.csv)", "Rows": len(api), "As of": f"{min(a.as_of for a in api)} – {max(a.as_of for a in api)}"},
            {"Catalog": "Purchase prices (data/purchase_prices.csv)", "Rows": len(bought), "As of": f"{min(b.as_of for b in bought)} – {max(b.as_of for b in bought)}"},
        ]
    ),
    hide_index=True,
    width="stretch",
)
today = dt.date.today()
stale = [p for p in prices if is_stale(p, today)]
newest = max(p.as_of for p in prices)
age = (today - newest).days
st.caption(
    f"The price catalog is {age} day{'' if age == 1 else 's'} old at its newest row; {len(stale)} of its {len(prices)} rows are older than "
    f"{STALE_AFTER_DAYS // 30} months and marked stale below. Rebuild it with python -m core prices import (data/prices/)."
)
mine = context().prices
if mine.rows is not None:
    st.info(plain(mine.summary() + ": every priced page uses them (sidebar: Your own prices)."), icon=":material/payments:")


@shared_cache(max_entries=4, data=True)
def engine_table() -> pd.DataFrame:
    """One row per serving engine: the formats it loads, those the planner tries, the model types it runs or refuses."""
    formats, models = load_engine_formats(), load_engine_models()
    rows = []
    for engine, spec in ENGINES.items():
        f, m = formats[engine], models[engine]
        but = f" but {', '.join(sorted(m.refused_model_types))}" if m.refused_model_types else ""
        runs = ", ".join(sorted(m.model_types)) if m.model_types else f"any{but}"
        rows.append(
            {
                "Engine": spec.label,
                "Loads": ", ".join(format_names(f.weights_formats)),
                "The planner tries": ", ".join(format_names(f.searched_formats)),
                "KV cache in": ", ".join(kv_format_name(k) for k in f.kv_cache_formats),
                "Model types (config.json)": runs,
                "Source (formats)": f.source,
                "Source (KV cache)": f.kv_cache_source,
                "Source (models)": m.source,
            }
        )
    return pd.DataFrame(rows)


def parts_matching(pattern: str) -> str:
    """The catalog's parts whose id a table row's `accelerator_pattern` matches, by name (the pattern itself is the
    row's next column): "every part" where it matches all of them."""
    accs = load_accelerators()
    hit = [a for a in accs if re.search(pattern, a.id)]
    if len(hit) == len(accs):
        return "every part"
    return ", ".join(a.name.removeprefix("NVIDIA ").removeprefix("GeForce ").removeprefix("AMD ") for a in hit) or "none in the catalog"


def kernel_table() -> pd.DataFrame:
    """One row per (format, engines, parts) rule: where the engine has kernels for it, dequantizes it, or refuses it."""
    return pd.DataFrame(
        [
            {
                "Format": FORMATS[r.weights_format].name,
                "Engines": ", ".join(ENGINES[e].label for e in r.engines.split()),
                "Runs": r.runs,
                "Parts": parts_matching(r.accelerator_pattern),
                "Id pattern": r.accelerator_pattern,
                "Note": r.note,
                "Source": r.source,
                "As of": str(r.as_of),
            }
            for r in load_format_kernels()
        ]
    )


MODEL_WORDS = {"any": "any", "no-sinks": "no sinks", "no-mla": "no MLA", "plain": "no MLA or sinks"}


def kv_kernel_table() -> pd.DataFrame:
    """One row per (KV format, engines, parts) rule: where the engine stores that cache, or refuses it."""
    return pd.DataFrame(
        [
            {
                "KV cache": kv_format_name(r.kv_cache_format),
                "Engines": ", ".join(ENGINES[e].label for e in r.engines.split()),
                "Stored": "yes" if r.runs == "kernel" else "no",
                "Models": MODEL_WORDS[r.attention],
                "Head sizes": ", ".join(map(str, r.head_dims)) or "any",
                "Parts": parts_matching(r.accelerator_pattern),
                "Id pattern": r.accelerator_pattern,
                "Note": r.note,
                "Source": r.source,
                "As of": str(r.as_of),
            }
            for r in load_kv_cache_kernels()
        ]
    )


def price_table(day: dt.date) -> pd.DataFrame:
    """Every catalog price and its source, stale rows marked as of `day`."""
    return pd.DataFrame(
        [
            {
                "Provider": p.provider,
                "Instance": p.instance_type,
                "Accelerator": p.accelerator_id,
                "Devices": p.accelerators_per_instance,
                "On-demand USD/h": p.on_demand_usd_per_hour,
                "Spot USD/h": p.spot_usd_per_hour,
                "As of": str(p.as_of),
                "Stale": "stale" if is_stale(p, day) else "",
                "Estimate": "yes" if p.estimate else "",
                "Source": p.source,
            }
            for p in load_prices()
        ]
    )


with st.expander("Every cloud price and its source"):
    show_table(price_table(today), hide_index=True, width="stretch")
with st.expander("Managed services people start from (Colab, SageMaker, Azure ML, Snowflake)"):
    show_table(
        pd.DataFrame(
            [
                {
                    "Service": m.service,
                    "Tier or instance": m.tier_or_instance,
                    "Accelerator": m.accelerator_id,
                    "Devices": m.accelerators,
                    "USD/h": m.usd_per_hour,
                    "Basis": m.basis,
                    "As of": m.as_of,
                    "Source": m.source,
                }
                for m in load_managed_services()
            ]
        ),
        hide_index=True,
        width="stretch",
    )
with st.expander("Every accelerator and its source"):
    show_table(
        pd.DataFrame(
            [
                {
                    "Accelerator": a.name,
                    "Memory (GiB)": a.memory_gib,
                    "Usable (GiB)": a.usable_memory_gib,
                    "BF16 TFLOP/s (dense)": a.bf16_tflops,
                    "Bandwidth (GB/s)": a.memory_bandwidth_gbps,
                    "Kernel target": a.kernel_target or "",
                    "Source": a.source,
                    "As of": str(a.as_of),
                    "Notes": a.notes,
                }
                for a in accs
            ]
        ),
        hide_index=True,
        width="stretch",
    )
with st.expander("What each serving engine runs: formats, KV caches, kernels by part, model architectures"):
    st.caption(
        "Read by every page: a setup an engine cannot run is said in one line above its figures, and the planner does "
        "not plan it (data/engine_formats.csv, data/format_kernels.csv, data/kv_cache_kernels.csv, data/engine_models.csv). "
        "In the per-part tables the first row whose engine, parts (a pattern on the catalog's ids) and models match decides."
    )
    show_table(engine_table(), hide_index=True, width="stretch")
    show_table(kernel_table(), hide_index=True, width="stretch")
    show_table(kv_kernel_table(), hide_index=True, width="stretch")
with st.expander("Every model preset and its source"):
    show_table(
        pd.DataFrame(
            [
                {"Preset": p.name, "Parameters": f"{p.architecture.total_params:,}", "Published": f"{p.published_params:,.0f}", "Source": p.source, "As of": p.as_of}
                for p in presets
            ]
        ),
        hide_index=True,
        width="stretch",
    )
