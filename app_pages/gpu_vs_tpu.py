"""GPU vs TPU vs inference chips: price-performance for the chosen workload, side by side, the chips whose model
lives in on-chip SRAM (Groq's LPU, Cerebras' wafer) beside them, and the qualitative trade-offs."""

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app_pages.shared.cache import shared_cache
from app_pages.shared.context import page_header, priced, training_tokens
from app_pages.shared.plot import show
from app_pages.shared.presenter import chart_with_controls
from app_pages.shared.results import cached_comparison, scenario_of
from app_pages.shared.style import frozen, layout
from app_pages.shared.tables import TRAINING_RUN_HELP, show_table
from app_pages.shared.text import md, plain
from app_pages.shared.ticks import SPEED_TICKS, log_ticks, number_ticks
from core.catalog.accelerators import SRAM_KINDS, get_accelerator
from core.catalog.api_prices import load_api_prices
from core.catalog.ecosystem import load_ecosystem
from core.catalog.gpu_cores import load_gpu_cores

PLATFORM_COLORS = {
    "nvidia-gpu": "#54A24B",
    "amd-gpu": "#E45756",
    "google-tpu": "#4C78A8",
    "aws-trainium": "#F58518",
    "apple-silicon": "#B279A2",
    "intel-gaudi": "#9D755D",
    "groq-lpu": "#FF9DA6",
    "cerebras-wse": "#72B7B2",
}
PLATFORM_LABELS = {
    "nvidia-gpu": "NVIDIA GPU",
    "amd-gpu": "AMD GPU",
    "google-tpu": "Google TPU",
    "aws-trainium": "AWS Trainium / Inferentia",
    "apple-silicon": "Apple silicon",
    "intel-gaudi": "Intel Gaudi",
    "groq-lpu": "Groq LPU",
    "cerebras-wse": "Cerebras WSE",
}

sc, values, units = page_header(
    "GPU vs TPU vs inference chips",
    "For this model and workload: memory, throughput and price-performance per chip, the chips that hold the model in on-chip SRAM, and the ecosystem trade-offs.",
)
if sc.mode == "training" and not sc.train_tokens:  # the run billed as on the Training page: the Plan page's dataset
    tokens, tokens_note = training_tokens(sc, values)
    sc = sc.replace(train_tokens=tokens)
    st.caption(tokens_note or "")
KEY = sc.model_dump_json()
PRICES = priced()  # the price list in use: (cache key, rows)
cached_comparison(KEY, *PRICES)  # the expensive part, here between turns (results.cached_comparison); then cache hits


def perf(r, training: bool):
    return r.training_tokens_per_s_per_device if training else r.output_tokens_per_s_per_device


def _short(name: str) -> str:
    return name.split(" (")[0].removeprefix("NVIDIA ").removeprefix("AMD ")


def _spaced(frontier: list, training: bool, across: float, up: float) -> set[str]:
    """Accelerator ids to name: frontier points (cheapest first) at least `across` decades from every named one in
    price or `up` decades in throughput."""
    named: set[str] = set()
    kept: list[tuple[float, float]] = []
    for r in frontier:
        at = (math.log10(r.usd_per_device_hour), math.log10(perf(r, training)))
        if all(abs(at[0] - k[0]) > across or abs(at[1] - k[1]) > up for k in kept):
            named.add(r.accelerator_id)
            kept.append(at)
    return named


def _bubble(usable_memory_gib: float, narrow: bool = False) -> float:
    """A chip's marker size in px: a quarter of its usable GiB, 8 to 40 px (4 to 20 on a phone)."""
    size = max(8.0, min(40.0, usable_memory_gib / 4))
    return size / 2 if narrow else size


def _beats(o, r, training: bool) -> bool:
    """Whether chip row `o` dominates `r`: no dearer, no slower, and better on one of the two."""
    cheaper, faster = o.usd_per_device_hour - r.usd_per_device_hour, perf(o, training) - perf(r, training)
    return cheaper <= 0 and faster >= 0 and (cheaper < 0 or faster > 0)


@shared_cache(max_entries=64)
def price_performance(key: str, price_key: str = "", _rows=None):
    """The price-vs-throughput chart of a scenario and price list (shared by every session that looks at it)."""
    sc = scenario_of(key)
    rows = cached_comparison(key, price_key, _rows)
    training = sc.mode == "training"
    metric_name = "Training tokens/s per device" if training else "Output tokens/s per device"
    priced = [r for r in rows if r.usd_per_device_hour and perf(r, training)]
    # Only the points nothing beats (no other chip at most as dear and at least as fast, better on one) carry a name:
    # the rest on hover, so the labels never pile up. (A strict "cheaper and faster" named the GB200 at 304 tokens/s
    # beside an MI355X as fast for less.)
    frontier = sorted((r for r in priced if not any(_beats(o, r, training) for o in priced)), key=lambda r: r.usd_per_device_hour)
    # and of those, one name per neighbourhood: 0.3 of a decade apart across or 0.1 up on a wide chart; on a phone
    # (app_pages/shared/chart.js swaps in the narrow labels below 600 px) a whole decade across or 0.15 up
    wide, narrow = _spaced(frontier, training, 0.3, 0.1), _spaced(frontier, training, 1.0, 0.15)
    fig = go.Figure()
    for platform, color in PLATFORM_COLORS.items():
        pts = [r for r in priced if r.platform == platform]
        if not pts:
            continue
        fig.add_scatter(
            x=[r.usd_per_device_hour for r in pts],
            y=[perf(r, training) for r in pts],
            mode="markers",
            name=PLATFORM_LABELS[platform],
            marker={"color": color, "size": [_bubble(r.usable_memory_gib) for r in pts], "opacity": 0.8},
            # on a phone (app_pages/shared/chart.js, below 600 px) half the size: 40 px bubbles buried the names
            meta={"narrow_size": [_bubble(r.usable_memory_gib, narrow=True) for r in pts]},
            customdata=[[r.name, r.usable_memory_gib, r.devices] for r in pts],
            hovertemplate="%{customdata[0]}<br>$%{x:,.2f} per device-hour<br>%{y:,.0f} tokens/s per device<br>"
            "%{customdata[1]:,.0f} GiB usable; %{customdata[2]} device(s) needed<extra></extra>",
        )
    # the names last, over every bubble, with a halo of the page's colour; a name near an end of the axis leans inwards
    named = [r for r in frontier if r.accelerator_id in wide]
    if named:
        ends = [math.log10(r.usd_per_device_hour) for r in priced]
        low, span = min(ends), (max(ends) - min(ends)) or 1.0

        def lean(r) -> str:
            at = (math.log10(r.usd_per_device_hour) - low) / span
            return "top right" if at < 0.15 else "top left" if at > 0.85 else "top center"

        fig.add_scatter(
            x=[r.usd_per_device_hour for r in named],
            y=[perf(r, training) for r in named],
            mode="text",
            text=[_short(r.name) for r in named],
            meta={"narrow_text": [_short(r.name) if r.accelerator_id in narrow else "" for r in named]},
            textposition=[lean(r) for r in named],
            textfont={"shadow": "auto"},
            showlegend=False,
            hoverinfo="skip",
            cliponaxis=False,
        )
    ys = [perf(r, training) for r in priced] or [1.0]
    # within two decades, marks at 1, 2, 5 x 10^k (decades alone left one mark, "100", on a 30-700 axis)
    marks = log_ticks(ys, SPEED_TICKS) if math.log10(max(ys) / min(ys)) < 2 else {}
    fig.update_layout(
        # 1-2-5 marks in dollars ($0.2 ... $20): decades alone marked $0.13-$30 at $1 and $10 only
        xaxis={"type": "log", "title": "Cheapest on-demand price (USD per device-hour, log)", **number_ticks([r.usd_per_device_hour for r in priced] or [1.0], "$")},
        yaxis={"type": "log", "title": f"{metric_name} (log)", **(marks or number_ticks(ys))},  # written out: "1,000", "10,000" (Plotly's own read "1000" beside "10k")
    )
    title = f"Price vs throughput for {sc.architecture.name} ({'training' if training else 'serving'})"
    return frozen(layout(fig, title, height=520))


@shared_cache(max_entries=64)
def comparison_table(key: str, price_key: str = "", _rows=None) -> pd.DataFrame:
    rows = cached_comparison(key, price_key, _rows)
    training = scenario_of(key).mode == "training"
    table = pd.DataFrame(
        [
            {
                "Accelerator": r.name,
                "Platform": PLATFORM_LABELS.get(r.platform, r.platform),
                "Usable memory (GiB)": round(r.usable_memory_gib, 1),
                "Bandwidth (GB/s)": r.memory_bandwidth_gbps,
                "Peak TFLOP/s": r.peak_tflops,
                "Devices needed": r.devices,
                "USD per device-hour (cheapest instance for the layout)": None if r.usd_per_device_hour is None else round(r.usd_per_device_hour, 2),
                **(
                    {
                        "Training tokens/s per device": None if r.training_tokens_per_s_per_device is None else round(r.training_tokens_per_s_per_device),
                        "Training run (USD)": None if r.training_run_usd is None else round(r.training_run_usd, 2),
                        "Training run on spot (USD)": None if r.training_run_spot_usd is None else round(r.training_run_spot_usd, 2),
                        "Hours": None if r.training_wall_hours is None else round(r.training_wall_hours, 1),
                    }
                    if training
                    else {
                        "Time to first token (ms)": None if r.time_to_first_token_s is None else round(r.time_to_first_token_s * 1e3),
                        "Tokens/s per user": None if r.decode_tokens_per_s is None else round(r.decode_tokens_per_s, 1),
                        "USD per M output tokens": None if r.usd_per_million_tokens is None else round(r.usd_per_million_tokens, 3),
                    }
                ),
                "Notes": "; ".join(r.notes),
            }
            for r in rows
        ]
    )
    return table


with chart_with_controls("gpu-vs-tpu"):
    show(price_performance(KEY, *PRICES), key="chart_pp")
st.caption(
    "Up and to the left is better; marker size is memory per chip; named chips are those nothing beats on both price and "
    "throughput (hover for the others). Accelerators without a price in the price list are in the table only."
)
show_table(comparison_table(KEY, *PRICES), hide_index=True, width="stretch", height=420, column_config=TRAINING_RUN_HELP)
# the parts that cannot train this scenario at all (a stack without the objective's trainer, an inference-only part,
# no 4-bit kernels) are in the table without figures: said once per reason, not left for the reader to notice
if sc.mode == "training":
    untrained: dict[str, list[str]] = {}
    for r in cached_comparison(KEY, *PRICES):
        if r.training_problem:
            untrained.setdefault(r.training_problem, []).append(r.name)
    if untrained:
        st.caption(plain("Not on the chart, no figures in the table: " + "; ".join(f"{', '.join(names)} ({why})" for why, names in untrained.items()) + "."))

# GPUs and TPUs beside the SRAM chips: the cheapest-to-rent data-center parts of each kind that the catalog prices
REFERENCE_IDS = ("h100-sxm", "tpu-v6e")
SRAM_PROVIDERS = {"groq-lpu": "groq", "cerebras-wse": "cerebras"}


def _api_price(model: object, platform: str) -> str:
    """The provider's published per-token price for this preset (data/api_prices.csv), if it lists one."""
    provider = SRAM_PROVIDERS.get(platform)
    if provider is None or not isinstance(model, str):
        return ""
    hit = next((p for p in load_api_prices() if p.provider == provider and p.preset == model and p.available), None)
    return "" if hit is None else f"${hit.output_usd_per_million:g} per M output tokens ({hit.model}, as of {hit.as_of})"


@shared_cache(max_entries=64)
def sram_chips(key: str, price_key: str = "", _rows=None) -> tuple[go.Figure | None, pd.DataFrame]:
    """Tokens/s each user sees on the SRAM chips and two reference parts, and how many chips hold the model."""
    model = scenario_of(key).model
    rows = [r for r in cached_comparison(key, price_key, _rows) if r.kind in SRAM_KINDS or r.accelerator_id in REFERENCE_IDS]
    table = pd.DataFrame(
        [
            {
                "Chip": r.name,
                "Memory per chip (GiB)": round(r.usable_memory_gib, 3),
                "Memory bandwidth (TB/s)": r.memory_bandwidth_gbps / 1000,
                "Chips to hold the model": r.devices,
                "Tokens/s per user": None if r.decode_tokens_per_s is None else round(r.decode_tokens_per_s),
                "Priced": (f"${r.usd_per_device_hour:,.2f} per chip-hour" if r.usd_per_device_hour else "")
                or _api_price(model, r.platform)
                or "no public hourly price (sold per token)",
            }
            for r in rows
        ]
    )
    served = [r for r in rows if r.decode_tokens_per_s]
    if not served:
        return None, table
    fig = go.Figure(
        go.Bar(
            y=[_short(r.name) for r in served],
            x=[r.decode_tokens_per_s for r in served],
            orientation="h",
            marker={"color": [PLATFORM_COLORS.get(r.platform, "#888") for r in served]},
            text=[f"{r.decode_tokens_per_s:,.0f} tokens/s on {r.devices} chip{'s' if r.devices != 1 else ''}" for r in served],
            textposition="auto",
            hovertemplate="%{y}: %{x:,.0f} tokens/s per user<extra></extra>",
        )
    )
    fig.update_layout(xaxis={"title": "Tokens/s per user (decode)"}, yaxis={"autorange": "reversed"}, showlegend=False)
    return frozen(layout(fig, f"Decode speed per user for {scenario_of(key).architecture.name}", height=300)), table


if sc.mode == "inference":
    st.subheader("Inference chips: the model in on-chip SRAM")
    st.caption(
        "Groq's LPU (230 MB of SRAM per chip at 80 TB/s) and Cerebras' WSE-3 (44 GB per wafer at 21 PB/s) keep the "
        "weights on chip: the count below is the chips that hold the weights and KV cache; the speed is the weights "
        "read at SRAM bandwidth plus the per-layer communication. Both are sold per token or per system, with no "
        "public hourly price, so they are not on the chart above."
    )
    fig, table = sram_chips(KEY, *PRICES)
    if fig is not None:
        show(fig, key="chart_sram")
    show_table(table, hide_index=True, width="stretch")


@shared_cache(max_entries=1)
def cores_table() -> pd.DataFrame:
    """NVIDIA GPUs' CUDA cores and Tensor Cores (data/gpu_cores.csv) beside the two rates they set."""
    rows = []
    for aid, c in load_gpu_cores().items():
        acc = get_accelerator(aid)
        tensor = acc.bf16_tflops
        rows.append(
            {
                "GPU": acc.name,  # the answer first (in sight at 1280 px), then how the FP32 rate is made
                "CUDA cores": c.cuda_cores,
                "Tensor Cores": c.tensor_cores,
                "FP32 TFLOP/s (2 x cores x clock)": round(c.fp32_tflops, 1),
                "16-bit tensor TFLOP/s (dense)": tensor if tensor is not None else None,
                "Tensor / FP32": None if tensor is None else round(tensor / c.fp32_tflops, 1),
                "Boost clock (MHz)": round(c.boost_clock_mhz),
                "Architecture": c.architecture,
            }
        )
    return pd.DataFrame(rows).sort_values("16-bit tensor TFLOP/s (dense)", na_position="first")


with st.expander("CUDA cores and Tensor Cores: why a core count does not rank GPUs for LLMs"):
    st.caption(
        "A CUDA core does one fused multiply-add (2 FLOPs) a clock in FP32, so FP32 TFLOP/s = 2 x cores x boost clock (each "
        "row matches its datasheet's FP32 figure). LLMs spend their time in matrix multiplies, which Tensor Cores run in 16-bit "
        "(and FP8) at many times the FP32 rate: the speeds on these pages use the tensor figure. The K80 and M60 have no "
        "Tensor Cores. Sources: NVIDIA datasheets and architecture whitepapers (data/gpu_cores.csv)."
    )
    counts: dict = {c: st.column_config.NumberColumn(c, format="localized") for c in ("CUDA cores", "Tensor Cores", "Boost clock (MHz)")}
    counts["GPU"] = st.column_config.TextColumn("GPU", pinned=True)  # on a phone the name stays while the table scrolls
    show_table(cores_table(), hide_index=True, width="stretch", column_config=counts)  # "10,496", not "10496"

st.subheader("Ecosystem trade-offs (with sources)")
eco = load_ecosystem()
aspects = sorted({e.aspect for e in eco})
platforms = [p for p in PLATFORM_LABELS if any(e.platform == p for e in eco)]
grid = pd.DataFrame(
    {PLATFORM_LABELS[p]: [next((e.summary for e in eco if e.platform == p and e.aspect == a), "") for a in aspects] for p in platforms},
    index=[a.replace("-", " ").capitalize() for a in aspects],
)
st.caption(f"{len(platforms)} platforms side by side, one column each: on a narrow screen the table scrolls sideways.")  # review L9
show_table(grid, static=True)
with st.expander("Sources"):
    for e in eco:
        st.markdown(
            md("- {platform} · {aspect}: {source} (as of {date})", platform=PLATFORM_LABELS.get(e.platform, e.platform), aspect=e.aspect, source=e.source, date=e.as_of)
        )
