"""Training: devices, time and cost across accelerators and clouds."""

import streamlit as st

from app_pages.shared.context import as_mode, page_header, stack_problem_warning, stop_page, training_tokens
from app_pages.shared.context import priced as price_list
from app_pages.shared.fold import folded
from app_pages.shared.launch_section import code_height
from app_pages.shared.plot import show
from app_pages.shared.presenter import chart_with_controls, presenting
from app_pages.shared.results import cached_estimate
from app_pages.shared.tables import show_table
from app_pages.shared.text import device_hours_text, flops_text, hours_text, md, metric, plain, usd_text
from app_pages.shared.training_views import TOP_COLORS, curve_figure, offers_table, run_cost, time_cost_figure, training_curve_of, training_options_of
from app_pages.shared.widgets import page_widget
from core.catalog.accelerators import REFERENCE_CEILING, get_accelerator
from core.memory.engines import EAGER_LAYER_OVERHEAD_S
from core.memory.stacks import STACKS
from core.money.blocks import FitInfo, run_layout
from core.money.cost import pick
from core.money.run_bill import HORIZON_HOURS, SETUP_HOURS
from core.plan.launch import launch_command
from core.speed.timing import (
    DEQUANT_BYTES_PER_PARAM,
    FP32_GEMM_EFFICIENCY,
    GPTQ_DEQUANT_BYTES_PER_PARAM,
    LAUNCH_BOUND_NOTED_FRACTION,
    MATMUL_EFFICIENCY,
    OVERHEAD_BYTES_PER_LAYER_HIDDEN,
    dequant_words,
)

sc, values, units = page_header("Training", "How many devices, how long, and what a training or fine-tuning run costs, on real price lists.")
# the presenter view opens on the chart (issue #29): its slot comes first, the notes, the Price input, the warnings
# and the metrics after it (they came before it, and at 1280 x 720 pushed the chart's axis and legend below the fold:
# stop 50's projector review, H3); elsewhere the slot is drawn where the chart was
chart_slot = st.container() if presenting(values) else None
if sc.mode != "training":
    sc, err, note = as_mode(sc, "training")
    st.info(
        "The sidebar is set to serving; this page shows the same model **trained** (switch *Workload* to *Train / fine-tune* to set the method, sharding and batch)."
        + (" " + note if note else ""),
        icon=":material/info:",
    )
    if sc is None:
        st.error(plain(err))
        stop_page()
tokens, tokens_note = training_tokens(sc, values)
if tokens_note:
    sc = sc.replace(train_tokens=tokens)
    st.caption(tokens_note)

acc = get_accelerator(sc.accelerator)
price_kind = page_widget("price")
KEY = sc.model_dump_json()
PRICES = price_list()  # the price list in use: (cache key, rows)


def layout_words(s) -> str:
    """A training layout in words: "8 devices: data parallel 8, ZeRO-1, micro-batch 8"."""
    parts = [f"data parallel {s.data_parallel}"]
    parts += [f"tensor parallel {s.tensor_parallel}"] if s.tensor_parallel > 1 else []
    parts += [f"{s.pipeline_parallel} pipeline stages"] if s.pipeline_parallel > 1 else []
    parts += [f"ZeRO-{s.zero_stage}"] if s.zero_stage else []
    return f"{s.devices} device{'s' if s.devices > 1 else ''}: " + ", ".join(parts) + f", micro-batch {s.batch_size}"


opts = training_options_of(KEY, *PRICES)
if not opts.options:
    st.warning("No price row can run this setup (it fits on no priced accelerator). " + plain("; ".join(opts.skipped[:3])))
    stop_page()

spot = price_kind == "spot"


def cost(o):
    return run_cost(o, spot)


priced = [o for o in opts.options if cost(o) is not None]
with st.container():  # one slot whether or not the warning shows (the chart below keeps its place)
    if not priced:
        st.warning("No spot prices are published for these instances; showing on-demand.")
        spot, priced = False, list(opts.options)
cheapest, fastest = pick(priced, spot)  # the planner's definitions (core/money/picks.py)
mine = [o for o in priced if o.accelerator_id == acc.id]

full = cached_estimate(KEY, *PRICES)
est = full.training
stack_problem_warning(full.stack_problem)
# the layout the time and cost are for (core/money/blocks.run_layout): the sidebar's own where it fits, else the
# smallest that fits; the launch below writes that one (the sidebar's would run out of memory)
need = full.layout_needed
timed = sc
if not full.fits and need is not None:
    lay, zero = run_layout(sc, FitInfo.of(full, sc))  # the one rule the estimate times
    timed = sc.replace(data_parallel=lay.data_parallel, tensor_parallel=lay.tensor_parallel, pipeline_parallel=lay.pipeline_parallel, zero_stage=zero)
    st.warning(
        md(
            "Your layout ({own}) needs {mem} per device; one {acc} has {cap}. The time and cost below are for {timed}, the "
            "smallest layout that fits, and *Run this setup* writes it.",
            own=layout_words(sc),
            mem=units(full.memory_per_device_bytes.total),
            acc=acc.name,
            cap=units(full.fit_capacity_bytes),
            timed=layout_words(timed),
        ),
        icon=":material/warning:",
    )
elif not full.fits:
    st.warning(
        md(
            "This setup fits on no layout of {acc} (it needs {mem} per device of {cap}, and more devices do not bring it "
            "under): the time and cost of your setup are left out. The Memory page says what would make it fit.",
            acc=acc.name,
            mem=units(full.memory_per_device_bytes.total),
            cap=units(full.fit_capacity_bytes),
        ),
        icon=":material/warning:",
    )
FLOP_WORDS = "FLOP: one floating-point operation; P, E, Z: 10^15, 10^18, 10^21"
MFU_WORDS = "model FLOPs utilisation: the share of the devices' peak the run turns into the model's arithmetic"
c = st.columns(4)
metric(
    c[0],
    "Compute",
    flops_text(est.flops),
    help=f"{est.flops:.3g} FLOPs = {sc.train_tokens / 1e9:,.3g} B tokens x {est.flops_per_token:.3g} FLOPs per token ({FLOP_WORDS})",
)
metric(
    c[1],
    "Device-hours",
    device_hours_text(est.gpu_hours),
    help=f"on {acc.name}: {est.devices} devices x {est.wall_hours:,.1f} h at MFU {est.mfu:.0%} ({MFU_WORDS})",
)
metric(
    c[2],
    "Cheapest run",
    usd_text(cost(cheapest)),  # the pages' one way with money: "$1" beside "Your setup ... $0.53" read as cheaper
    help="of every accelerator and device count on the chart below: "
    f"{cheapest.provider} {cheapest.instance_type}, {cheapest.devices} x {get_accelerator(cheapest.accelerator_id).name}, "
    f"{hours_text(cheapest.run_hours)}" + ("" if cheapest.within_bounds else f" (no run finishes within {HORIZON_HOURS / 24:.0f} days)"),
)
metric(
    c[3],
    "Fastest run",
    hours_text(fastest.run_hours),
    help=f"{fastest.provider} {fastest.instance_type}, {fastest.devices} x {get_accelerator(fastest.accelerator_id).name}, {usd_text(cost(fastest))}",
)
if est.run_usd is not None and est.run_hours is not None and (full.fits or need is not None):
    on_spot = spot and est.run_spot_usd is not None
    own_usd = est.run_spot_usd if on_spot else est.run_usd
    st.caption(
        md(
            "Your setup ({n} x {acc}, {instance}): {hours}, {usd}. Every run here is billed as the Plan page bills it: "
            "{setup} of setup, then the computation with its communication, on whole instances; a run over {days} days "
            "is not called cheapest.",
            n=est.devices,
            acc=acc.name,
            instance=(est.spot_price_instance if on_spot else est.price_instance) or est.price_instance,
            hours=hours_text(est.run_hours),
            usd=f"${own_usd:,.2f}" + (" on spot" if on_spot else " on demand"),
            setup=hours_text(SETUP_HOURS),
            days=f"{HORIZON_HOURS / 24:.0f}",
        )
    )
if sc.method == "qlora" or est.dequant_fraction > 0:  # QLoRA, or LoRA on a GPTQ checkpoint
    adapter_method = "QLoRA" if sc.method == "qlora" else "LoRA"
    # one short line above the chart; what the upcast is and what was measured sit in its tooltip
    if est.upcast_fraction > 0:
        st.caption(
            md(
                f"{adapter_method}'s time: {dequant_words(sc)} is {{dequant}} of it; the Hugging Face recipe's fp32 upcast is {{upcast}}: "
                "stacks without it run QLoRA near LoRA's speed.",  # dequant_words: the code's own words, not escaped
                dequant=f"{est.dequant_fraction:.0%}",
                upcast=f"{est.upcast_fraction:.0%}",
            ),
            help="The upcast is `prepare_model_for_kbit_training`: norms, embeddings and output head in fp32, so the "
            "head's matmuls run in fp32, and attention too unless FlashAttention-2 takes it back to 16-bit (the "
            "sidebar's FlashAttention on a part that has it); SDPA runs grouped-query attention in fp32 on its math "
            "path, the whole square of scores. torchtune, Unsloth, Axolotl, or the Hugging Face stack without that "
            "call skip it (our H200 with SDPA, Llama 3.1 8B: 6,530 tokens/s without it, 2,925 with it).",
        )
    else:
        st.caption(md(f"{adapter_method}'s time: {dequant_words(sc)} is {{dequant}} of it.", dequant=f"{est.dequant_fraction:.0%}"))

if est.launch_bound_fraction >= LAUNCH_BOUND_NOTED_FRACTION:
    st.caption(
        md(
            "Kernel launches bound this step: {batch} x {seq} tokens a micro-batch leaves the GPU waiting for the CPU {share} of "
            "the computation's time; a larger micro-batch, packed sequences or a stack that fuses its kernels (Unsloth) remove it.",
            batch=sc.batch_size,
            seq=f"{sc.seq_len:,}",
            share=f"{est.launch_bound_fraction:.0%}",
        ),
        help=f"Eager PyTorch launches every kernel of every layer from the CPU, {EAGER_LAYER_OVERHEAD_S * 1e3:.2f} ms a layer and "
        "pass (measured on our H100); the GPU runs them as they come, so a micro-batch takes the longer of its GPU work and its launches.",
    )

with chart_slot if chart_slot is not None else st.container(), chart_with_controls("training"):
    show(time_cost_figure(KEY, spot, *PRICES), key="chart_tc")
st.caption(
    "Each dot is one accelerator at one device count, at its cheapest offer (hover for the provider and how many offers there are): "
    f"every count for the {len(TOP_COLORS)} accelerators with the cheapest runs"
    + (" and for yours (diamonds)" if mine else "")
    + "; for the others (grey rings), only the runs that nothing beats on both time and cost. The table lists every provider and instance."
)

left, right = st.columns(2)
with left:
    cf = curve_figure(KEY, spot, *PRICES)
    if cf is not None:
        show(cf, key="chart_curve")
        unpriced = [p.devices for p in training_curve_of(KEY, *PRICES) if p.on_demand_usd is None]
        reserved = [p.devices for p in training_curve_of(KEY, *PRICES) if p.on_demand_usd is None and p.run_usd is not None]
        if unpriced:
            st.caption(
                md(
                    "No on-demand price from {n} devices: no provider in the price list rents that many {acc} on demand, "
                    "as one instance or as whole nodes on one cluster network (Method page); beyond a provider's on-demand "
                    "size (64 devices unless it publishes more) a run needs a reservation.{reserved}",
                    n=f"{min(unpriced):,}",
                    acc=acc.name,
                    reserved=f" The curve prices runs of up to {max(reserved):,} devices as one (data/reservations.csv: "
                    "whole terms billed, at least the minimum term, so the cost jumps)."
                    if reserved
                    else "",
                )
            )
    else:
        why = "it fits on no layout of them (above)" if not full.fits and need is None else "no price row rents them at any device count"
        st.info(md("No curve of more {acc} devices: {why}.", acc=acc.name, why=why))
with right:
    table = offers_table(KEY, spot, *PRICES)
    st.markdown("**Per provider and instance: the cheapest way to run it**")
    show_table(table, hide_index=True, width="stretch", height=400, column_config={"Provider": st.column_config.TextColumn(pinned=True)})
    if len(table) and table["Rented"].str.startswith("reservation").any():
        st.caption(
            "*Rented*: a reservation is the provider's reserved cluster (data/reservations.csv: Lambda's 1-Click "
            "Clusters by the week, AWS EC2 Capacity Blocks by the day up to 14 days): its cost pays whole terms, at "
            "least the minimum, as the curve and the Plan page bill it."
        )

if (fold := folded("Run this setup: the command and the trainer's config", "fold_training_launch")) is not None:
    with fold:
        # the sidebar's scenario (its optimizer, offload, base) on the layout the estimate above times
        text = launch_command(timed.model_dump(mode="json", exclude_none=True))
        st.code(text, language="bash", height=code_height(text), wrap_lines=True)
        st.caption(
            md(
                "For the sidebar's setup{laid}: {devices} x {acc}, {stack}. The Plan page writes the command of a planned "
                "run. Flag names from each trainer's documentation (data/launch_flags.csv); lines starting with # say what to replace.",
                laid="" if timed is sc else " on the smallest layout that fits (" + layout_words(timed) + ")",
                devices=timed.devices,
                acc=acc.name,
                stack=STACKS[sc.training_stack].label,
            )
        )

if (fold := folded("How this is computed", "fold_training_how")) is not None:
    with fold:
        t = (mine or [cheapest])[0]
        st.markdown(
            f"FLOPs = {'8' if sc.gradient_checkpointing else '6'} x active parameters x tokens for full training "
            "(Kaplan et al. 2020; 8 with full recomputation, Narayanan et al. 2021), plus attention's own FLOPs over the "
            "context; LoRA skips the frozen weights' gradients (4 x parameters + 6 x adapter parameters). "
            + md(
                "Time per token = FLOPs / (devices x dense peak x {eff}) + work bound by memory bandwidth or the FP32 units "
                "({overhead} bytes per layer x hidden unit per token, PEFT's fp32 adapter traffic, QLoRA's dequantization as "
                "{dequant} bytes of traffic a weight and pass ({gptq} a weight and forward pass on a GPTQ base), the Hugging Face "
                "recipe's fp32 upcast: the output head's matmuls and attention in fp32 at {sgemm} of the FP32 peak, as profiled on "
                "our H200), fitted on our H100 and H200 runs; an eager stack's micro-batch takes at least its kernel "
                "launches (layers x 3 passes' worth, 4 with recomputation, x {launch} ms). On a part whose longest matmuls stay well "
                "under its datasheet's peak (a T4 held by its 70 W cap; AMD's MI300X and MI325X, about half), the peak is its measured "
                "matmul ceiling over the share of its own that an H100 reaches ({ref}). Checked on published fine-tunes on "
                "1-128 GPUs (Answer AI, torchtune, NeMo AutoModel, XTuner, torchtitan, Axolotl, LLaMA-Factory, Unsloth, Qwen's own "
                "scripts and others) and single-node pretraining runs "
                "(Method page). "
                "Setting the sidebar's *MFU* replaces this with FLOPs / (devices x peak x MFU), the way published large runs "
                "quote it (Llama 3.1 405B: 38-43% on H100s). Each run adds {setup} of setup and its communication. ",
                eff=f"{MATMUL_EFFICIENCY:.0%}",
                ref=f"{REFERENCE_CEILING['16-bit']:.0%}",
                launch=f"{EAGER_LAYER_OVERHEAD_S * 1e3:.2f}",
                dequant=f"{DEQUANT_BYTES_PER_PARAM:g}",
                gptq=f"{GPTQ_DEQUANT_BYTES_PER_PARAM:g}",
                sgemm=f"{FP32_GEMM_EFFICIENCY:.0%}",
                overhead=f"{OVERHEAD_BYTES_PER_LAYER_HIDDEN:,.0f}",
                setup=hours_text(SETUP_HOURS),
            )
            + md(
                "The cheapest option here uses {n} x {acc} on {provider} {instance}. ",
                n=t.devices,
                acc=get_accelerator(t.accelerator_id).name,
                provider=t.provider,
                instance=t.instance_type,
            )
            + "Prices are the catalog's list prices (see Method for sources and dates)."
        )
        if opts.skipped:
            st.markdown("Not shown: " + plain("; ".join(opts.skipped[:8])))
