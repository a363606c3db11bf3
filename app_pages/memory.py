"""Memory: the per-device breakdown, where it fits, how it grows, and why."""

import math

import pandas as pd
import streamlit as st

from app_pages.shared.charts import capacity_text, component_label, context_is_the_window, layout_changes, layout_text, peak_words
from app_pages.shared.context import kv_instead, page_header, priced, shipped_format_note, stack_problem_warning, weight_only_caption
from app_pages.shared.memory_views import breakdown_chart, fits_on_chart, help_basis, help_rows, scenario_line, sweep_chart
from app_pages.shared.plot import show
from app_pages.shared.presenter import chart_with_controls, presenting
from app_pages.shared.report import report_downloads
from app_pages.shared.results import cached_estimate, cached_explain, cached_help_options
from app_pages.shared.style import COMPONENT_LABELS
from app_pages.shared.tables import show_table
from app_pages.shared.text import metric, plain, say, sequences_text
from app_pages.shared.what_changed import what_changed
from app_pages.shared.widgets import page_widget
from core.catalog.accelerators import get_accelerator
from core.catalog.wired_limit import is_apple_gpu, wired_limit_text
from core.memory.components import expert_parallel_ranks
from core.memory.engines import ENGINES
from core.memory.evaluator import own_layout
from core.memory.fit import BORDERLINE_BASIS, BORDERLINE_FRACTION, MAX_BATCH, MAX_DEVICES
from core.memory.objective import preference_note
from core.memory.stacks import STACKS
from core.model.formats import FORMATS
from core.units import BYTES_PER_GIB

sc, values, units = page_header("Memory", "How much accelerator memory the scenario needs per device, and where it fits.")
KEY = sc.model_dump_json()
# the estimate with what would help, priced from the price list in use (the page and its report show the same)
result = cached_estimate(KEY)
if not result.fits:
    result = result.model_copy(update={"help_options": cached_help_options(KEY, *priced())})
acc = get_accelerator(sc.accelerator)
m = result.memory_per_device_bytes
own = f"{result.devices_in_layout} devices" if result.devices_in_layout > 1 else "one device"

# llama.cpp with layers in system RAM: the verdict can be the RAM's, not the device's (every answer below says which)
ram_short = result.host_memory_fits is False
ram_bytes = sc.host_memory_gib * BYTES_PER_GIB
if result.fits:
    fit_delta = f"{units(result.fit_capacity_bytes - m.total)} headroom"
elif ram_short and m.total <= result.fit_capacity_bytes:
    fit_delta = f"system RAM {units(result.cpu_memory_per_device_bytes - ram_bytes)} short"
else:
    fit_delta = f"{units(m.total - result.fit_capacity_bytes)} short"
# One count of the sequences that fit, in whole sequences, for the headline and the engine's pool: the largest batch
# (core/memory/fit.max_batch, its prefill working set counted); expert-parallel, ceil(B/n) of them on each rank.
largest_batch = sequences_text(result.max_batch_size) if result.max_batch_size else "not even 1"  # "none" read as "no limit"
ep_ranks = expert_parallel_ranks(sc, own_layout(sc))
per_rank = f" ({-(-result.max_batch_size // ep_ranks):,} on each, expert-parallel)" if ep_ranks > 1 and result.max_batch_size else ""


def pool_sequences_help() -> str:
    """The pool's count (the largest batch) and vLLM's start-up figure beside it: a fraction at this batch's prefill
    working set, logged per engine (an expert-parallel rank is one)."""
    held = f"whole sequences of {sc.seq_len:,} tokens at once, on {own}{per_rank}: the largest batch that fits, its prefill working set counted"
    if result.max_batch_size >= MAX_BATCH:
        held = f"{sequences_text(MAX_BATCH)} " + held + f" (the search stops at {MAX_BATCH:,})"
    if not result.kv_pool_sequences:
        return held
    engine = f", {result.kv_pool_sequences / ep_ranks:,.2f} on each of the {ep_ranks} engines" if ep_ranks > 1 else ""
    return held + f". vLLM's start-up 'Maximum concurrency' at this batch's working set: {result.kv_pool_sequences:,.2f}{engine}"


ram_note = f"; system RAM: {units(result.cpu_memory_per_device_bytes)} needed for the layers off the GPU, {units(ram_bytes)} set" if ram_short else ""

# the fewest-devices search with expert parallel on (core/memory/layouts.py, _expert_parallel_option)
EP_BASIS = (
    "; expert-parallel, as set in the sidebar: each device holds every non-expert weight and 1/n of the routed experts, "
    "so only the experts shrink as devices are added (tensor x pipeline layouts only where no expert-parallel one fits)"
)


def headline() -> None:
    """The answer: how much, whether it fits, the fewest devices, the largest batch and context."""
    cols = st.columns(5)
    metric(cols[0], "Memory per device", units(m.total), help="Sum of the components below")
    near = f"; borderline: {BORDERLINE_BASIS}, so it may go either way (leave room)" if result.borderline else ""
    metric(
        cols[1],
        f"Fits {own}?",
        ("Yes" if result.fits else "No") + (", barely" if result.borderline and result.fits else ", nearly" if result.borderline else ""),
        help=capacity_text(result, acc.name, units) + ram_note + near,
        delta=fit_delta,
        # headroom up in green, a shortfall down in red ("↑ 63.3 GiB short" pointed up)
        delta_color="green" if result.fits else "red",
        delta_arrow="up" if result.fits else "down",
    )
    if result.layout_needed is None and ram_short:
        metric(cols[2], "Fewest devices that fit", "none", help="more devices do not help: the layers kept off them stay in system RAM" + ram_note)
    elif result.layout_needed is None:  # the sentence below the number: as the value it ran to four lines in a column
        metric(
            cols[2],
            "Fewest devices that fit",
            "none",
            help=layout_text(None).capitalize() + ': "Why it does not fit, and what would help" below says which change does',
            delta=f"up to {MAX_DEVICES:,} devices",
            delta_color="gray",
            delta_arrow="off",
        )
    else:
        changed = layout_changes(sc, result.layout_needed)
        metric(
            cols[2],
            "Fewest devices that fit",
            layout_text(result.layout_needed).split(" (")[0],
            help="Smallest layout that fits: " + layout_text(result.layout_needed) + (EP_BASIS if sc.expert_parallel else ""),
            # what the fewest-devices layout changes from the sidebar's, in sight: "Fits 8 devices? No" beside "4 devices"
            # read as a contradiction where the 4 add ZeRO-3 (stop 49's consistency review, MEDIUM 7)
            **({"delta": "with " + changed, "delta_color": "gray", "delta_arrow": "off"} if changed else {}),
        )
    pairs = " (DPO pairs: a chosen and a rejected sequence each)" if sc.mode == "training" and sc.objective == "dpo" else ""
    metric(cols[3], "Largest batch that fits", largest_batch, help=f"at {sc.seq_len:,} tokens, on {own}" + per_rank + pairs)
    longest = f"{result.max_seq_len:,}" if result.max_seq_len else "none at this batch"
    if context_is_the_window(sc, result):  # the model's limit, not the memory's: said under the number
        window = {"delta": "the model's whole window", "delta_color": "gray", "delta_arrow": "off"}
        help_text = f"tokens, at batch {sc.batch_size}, on {own}: the model's context window (its config's max_position_embeddings); memory would hold more"
    else:
        window, help_text = {}, f"tokens, at batch {sc.batch_size}, on {own}"
    metric(cols[4], "Longest context that fits", longest, help=help_text, **window)
    with st.container():  # always there, so a note that comes and goes does not shift (and redraw) the charts below
        if result.layout_note is not None:
            st.caption(say(result.layout_note, units.name))
        if result.borderline:  # the band and the measurements that set it, in view (not only in the tooltip)
            band = f"{BORDERLINE_FRACTION:.0%} of the capacity, inside its measured error ({BORDERLINE_BASIS})"
            st.caption(plain(f"Borderline: the estimate is within {band}; leave room."))


# What decides the fit: PyTorch's live tensors, the pool its allocator keeps, and what nvidia-smi shows (or the
# engine's start-up reservation), with the software that shapes them.
def fit_details() -> str:
    """What decides the fit: the allocator's numbers or the engine's, and the software; returns the software's label."""
    with st.container(border=True):
        fit_cols = st.columns(4)
        if sc.mode == "inference" and acc.weights_in_sram:  # Groq LPU, Cerebras WSE: the model in on-chip SRAM
            metric(fit_cols[0], "Weights, all chips", units(result.weights_bytes_total), help=f"{FORMATS[sc.weights_format].label}")
            sram_per_chip = units(result.device_memory_bytes) if result.device_memory_bytes >= 2**30 else f"{result.device_memory_bytes / 1e6:,.0f} MB"
            metric(fit_cols[1], "SRAM per chip", sram_per_chip, help=f"{acc.name}: on-chip SRAM, all of it usable")
            metric(
                fit_cols[2],
                "Chips for the weights alone",
                f"{math.ceil(result.weights_bytes_total / result.device_memory_bytes):,}",
                help="weights / SRAM per chip; the fewest that fit above add the KV cache and a whole number of layers per chip",
            )
            metric(
                fit_cols[3],
                "Needed per chip, this layout",
                units(m.total),
                help=f"weights + KV cache + one token per sequence in flight, over the sidebar's {result.devices_in_layout} chip(s); the fewest that fit is above",
            )
        elif sc.mode == "training" or result.engine_reserved_bytes is None:
            metric(fit_cols[0], "Live tensors at the peak", units(result.allocated_peak_bytes), help="torch.cuda.max_memory_allocated()")
            if is_apple_gpu(acc):  # Metal, not CUDA: no nvidia-smi; the fit is decided against macOS's wired-memory limit
                metric(fit_cols[1], "Allocator's pool", units(result.reserved_peak_bytes), help="live arrays + freed buffers the framework keeps for reuse")
                metric(fit_cols[2], "GPU memory in use", units(m.total), help="the pool + the runtime: the number a fit is decided on, against the wired limit")
            else:
                metric(
                    fit_cols[1], "PyTorch's reserved pool", units(result.reserved_peak_bytes), help="torch.cuda.max_memory_reserved(): live tensors + freed blocks kept"
                )
                metric(fit_cols[2], "What nvidia-smi shows", units(m.total), help="the reserved pool + CUDA context and libraries: the number a fit is decided on")
            metric(fit_cols[3], "Peak happens at", peak_words(result) if sc.mode == "training" else "the prefill")
        else:
            metric(
                fit_cols[0], "Engine reserves at start", units(result.engine_reserved_bytes or 0), help="gpu_memory_utilization x device memory: taken whatever the load"
            )
            metric(
                fit_cols[1], "Of it, KV-cache pool", units(result.kv_pool_bytes or 0), help="what is left for KV blocks after weights, runtime and the profiled prefill"
            )
            metric(fit_cols[2], "Sequences the pool holds", largest_batch, help=pool_sequences_help())
            metric(fit_cols[3], "Needed for this batch", units(m.total), help="weights + KV cache + working memory + runtime")
        if result.max_gpu_layers is not None:  # llama.cpp: partial offload to system RAM
            layers = sc.architecture.num_layers
            off = st.columns(3)
            metric(off[0], "Layers on the GPU", f"{result.gpu_layers} of {layers}", help="llama.cpp -ngl; the rest stay in system RAM")
            metric(off[1], "Most layers that fit", f"{result.max_gpu_layers} of {layers}", help=f"{acc.name}: {units(result.fit_capacity_bytes)} usable, at this context")
            metric(
                off[2],
                "System RAM for the rest",
                units(result.cpu_memory_per_device_bytes),
                delta=None if result.host_memory_fits else f"more than the {sc.host_memory_gib:g} GiB set",
                delta_color="inverse",
                help="weights and KV cache of the layers not on the GPU",
            )
        label = "Training stack" if sc.mode == "training" else "Serving engine"
        if sc.mode == "inference" and acc.weights_in_sram:
            st.markdown(
                f"**Software: {plain(acc.vendor.capitalize())}'s own compiler** lays the model out over the chips ahead of time; "
                "the sidebar's serving engine does not run on it."
            )
        else:
            st.markdown(f"**{label}: {plain(software.label)}** (change it in the sidebar). " + " · ".join(plain(n) for n in software.notes[:3]))
            st.caption("Source: " + plain(software.source))
            if (note := preference_note(sc)) is not None:  # the objective changes what the bars hold
                st.markdown(plain(note))
            if (wired := wired_limit_text(acc)) is not None:  # Apple silicon: macOS's GPU wired-memory limit, in words
                st.caption(say(wired, units.name))
    return label


# The answer first, then the bars (above the fold at 1280 x 720 and 1024 x 768); the presenter view draws the bars
# first, at large type, with the inputs that move them beside them (app_pages/shared/presenter.py).
presenter = presenting(values)
stack_problem_warning(result.stack_problem, kv_instead(sc, (), lambda r: units(r.memory_per_device_bytes.total), "per device"))
shipped_format_note(sc, units)
weight_only_caption(sc)
if not presenter:
    headline()
with chart_with_controls("memory"):
    if presenter:  # the model and the method are not among the inputs beside the chart: said above it
        st.markdown("**" + plain(scenario_line(sc, acc.name)) + "**")
    show(breakdown_chart(KEY, units.name, acc.name, presenter), key="chart_breakdown")
    st.caption(plain(what_changed(values, result, units)))  # always there: a line that came and went would shift the page
if presenter:
    headline()


def what_would_help() -> None:
    """Why it does not fit, then every change that makes it fit with its time and cost, cheapest first
    (core/money/help_options.py, priced from the price list in use); the sentences alone when nothing does."""
    with st.container(border=True):
        st.markdown("**Why it does not fit, and what would help**")
        options = result.help_options
        for line in result.why_texts if options else result.advice_texts:
            st.markdown("- " + say(line, units.name))
        if options:
            show_table(help_rows(options[:HELP_ROWS], sc, units), static=True)
            more = f" {len(options) - HELP_ROWS} more in the report and in python -m core estimate (help_options)." if len(options) > HELP_ROWS else ""
            st.caption(plain(help_basis(sc, options) + more))
            # the table has the runnable layouts; these say why none as set, and which one change fits with more devices
            for line in result.advice_texts:
                if line.template.startswith(("No layout", "With one change", "More devices alone")):
                    st.markdown("- " + say(line, units.name))


HELP_ROWS = 6  # options shown on the page, cheapest first

with st.container():  # the same slot whether the advice is shown or not (the charts below keep their place)
    if result.advice_texts:
        what_would_help()

software = STACKS[sc.training_stack] if sc.mode == "training" else ENGINES[sc.serving_engine]
label = fit_details()

left, right = st.columns([1, 1])
with left:
    show(fits_on_chart(KEY, units.name), key="chart_fits_on")

with right:
    axis = page_widget("sweep")
    show(sweep_chart(KEY, units.name, axis), key="chart_sweep")

st.subheader("Explain: each number, its formula and its source")
parts = cached_explain(KEY)
show_table(
    static=True,
    data=pd.DataFrame(
        [
            {
                "Component": component_label(p.component, [sc.accelerator]) if p.component in COMPONENT_LABELS else p.component.capitalize(),
                units.name: f"{units.value(p.bytes):,.2f}",
                "Formula": p.formula,
                "With your numbers": p.numbers.render(units.name, digits=2),
                "Source": p.source,
            }
            for p in parts
        ]
    ).set_index("Component"),
)
with st.expander(f"What the {label.lower()} changes, and where each effect comes from", expanded=False):
    st.markdown(f"**{plain(software.label)}**")
    for note in software.notes:
        st.markdown("- " + plain(note))
    st.caption("Source: " + plain(software.source))
with st.expander("Parameters, assumptions and the model's shape"):
    arch = sc.architecture
    st.markdown(
        f"**{plain(arch.name)}**: {result.params.total:,} parameters ({result.params.active:,} active per token"
        + (f", {result.params.trainable:,} trainable" if result.params.trainable else "")
        + "); "
        f"{arch.num_layers} layers, hidden {arch.hidden_size}, {arch.num_heads} heads / {arch.num_kv_heads} KV heads, "
        f"vocabulary {arch.vocab_size:,}; KV cache {result.kv_cache_bytes_per_token:,} bytes per token; "
        f"checkpoint {plain(units(result.weights_bytes_total))}."
    )
    for a in result.assumption_texts:
        st.markdown("- " + say(a, units.name))

report_downloads(sc, result, units)
