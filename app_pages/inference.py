"""Inference: latency, throughput vs batch, KV cache vs context; what serving your traffic costs is the page's lower
section (app_pages/shared/serving_section.py)."""

import streamlit as st

from app_pages.shared.box import box_section
from app_pages.shared.context import as_mode, kv_instead, page_header, priced, shipped_format_note, stack_problem_warning, stop_page, weight_only_caption
from app_pages.shared.fold import folded
from app_pages.shared.inference_views import decode_figure, kv_figure, kv_on_sidebars_layout, load_at_batch, load_section
from app_pages.shared.launch_section import launch_section_for_setup
from app_pages.shared.plot import show
from app_pages.shared.presenter import chart_with_controls, presenting
from app_pages.shared.results import cached_estimate
from app_pages.shared.text import md, metric, plain, say, sequences_text, usd_text
from core.catalog.accelerators import get_accelerator
from core.catalog.quality import caveats
from core.catalog.wired_limit import wired_limit_text
from core.memory.fit import MAX_BATCH
from core.plan.serve import shipped_format
from core.speed.storage import load_sentence

# where the page shows the time to first token under load (app_pages/shared/inference_views.load_figures)
TTFT_ALONE = "prefill of {n:,} prompt tokens, one request alone; with other users' requests arriving, see Time to first token by number of users below"

sc, values, units = page_header("Inference", "Time to first token, tokens per second, how many users fit, and what serving costs.")
if sc.mode != "inference":
    sc, err, served_note = as_mode(sc, "inference")
    st.info("The sidebar is set to training; this page shows the same model **served** (weights in the sidebar's format).", icon=":material/info:")
    if sc is None:
        st.error(plain(err))
        stop_page()
    if served_note:  # the sidebar's engine does not run on the part: served with one that does
        st.warning(plain(served_note), icon=":material/warning:")
acc = get_accelerator(sc.accelerator)
PRICES = priced()  # the price list in use: (cache key, rows)
KEY = sc.model_dump_json()
result = cached_estimate(KEY, *PRICES)
inf = result.inference


# the engine has no kernels here for the weights' format (gpt-oss's MXFP4) or keeps no such KV cache (and which it keeps)
instead = kv_instead(sc, PRICES, lambda r: sequences_text(r.inference.max_concurrent_sequences), f"concurrent sequences of {sc.seq_len:,} tokens")
stack_problem_warning(result.stack_problem, instead)
shipped_format_note(sc, units)
weight_only_caption(sc)


def headline() -> None:
    """The answer: first-token time, speed per user and in all, how many sequences fit, the price per token."""
    c = st.columns(5)
    metric(c[0], "Time to first token", f"{inf.time_to_first_token_s * 1e3:,.0f} ms", help=TTFT_ALONE.format(n=inf.prompt_tokens))
    metric(c[1], "Tokens/s per user", f"{inf.decode_tokens_per_s:,.1f}", help=f"decode at batch {inf.batch_size} ({inf.decode_bound}-bound)")
    metric(c[2], "Tokens/s, all users", f"{inf.aggregate_tokens_per_s:,.0f}", help="decode tokens per second summed over the batch")
    metric(
        c[3],
        "Most concurrent sequences",
        sequences_text(inf.max_concurrent_sequences),
        help=f"at {sc.seq_len:,} tokens each, on {inf.devices_per_replica} device(s)"
        + (f"; the search stops at {MAX_BATCH:,}" if inf.max_concurrent_sequences >= MAX_BATCH else ""),
    )
    metric(
        c[4],
        f"\\$ / M tokens, batch {inf.batch_size}",
        "—" if inf.usd_per_million_tokens is None else usd_text(inf.usd_per_million_tokens),
        help=(inf.price_instance or "no price for this accelerator in the price list")
        + f": USD per million output tokens with the replica kept 100% busy at batch {inf.batch_size}, every hour of the month (a floor; the traffic bill is below)",
    )


# The answer first, then the charts (above the fold at 1280 x 720 and 1024 x 768); the presenter view draws the
# decode chart first, at large type, with the inputs that move it beside it (app_pages/shared/presenter.py).
presenter = presenting(values)
NO_LAYOUT = md("{model} does not fit on any layout of {acc} at these settings: no speeds to show.", model=sc.architecture.name, acc=acc.name)
if presenter:
    with chart_with_controls("inference"):  # the inputs stay beside it when nothing fits, to move out of it
        if result.layout_needed is None:
            st.error(NO_LAYOUT)
        else:
            show(decode_figure(KEY), key="chart_decode")
headline()
if (loaded := load_at_batch(KEY)) is not None:  # the same figures under load, read off the curves below
    who = (
        f"Under load, {loaded.users:,} users sharing the replica, new prompts prefilled between their decode steps (the curves below): the median user waits "
        if loaded.users > 1
        # one user alone, timed as the curves time it: the first token reaches the user a decode step after its
        # prefill, which the metric above leaves out (stop 50's projector review, M7: 87 ms beside 95 ms)
        else "One user at a time, as the curves below time it (the first token reaches the user a decode step after its prefill): it waits "
    )
    st.caption(
        who + f"{loaded.time_to_first_token_p50_s * 1e3:,.0f} ms for the first token (slowest 10%: {loaded.time_to_first_token_p90_s * 1e3:,.0f} ms) "
        f"and sees {loaded.tokens_per_s_per_user_p50:,.1f} tokens/s (slowest 10%: {loaded.tokens_per_s_per_user_p90:,.1f})."
    )
if inf.expert_parallel_ranks > 1 and inf.decode_tokens_per_s_overlapped is not None:
    # the two bounds of an expert-parallel step (core/speed/expert_parallel.py): all-to-alls after the compute, or hidden
    st.caption(
        plain(
            f"Expert parallel over {inf.expert_parallel_ranks} GPUs: {inf.decode_tokens_per_s:,.1f} tokens/s per user, "
            f"{inf.aggregate_tokens_per_s:,.0f} for all users, when the GPUs' token exchanges wait for the compute (the slower case, shown above); "
            f"up to {inf.decode_tokens_per_s_overlapped:,.1f} and {inf.aggregate_tokens_per_s_overlapped or 0:,.0f} if two-batch overlap hides them entirely. "
            f"The exchanges take {inf.all_to_all_share or 0:.0%} of a step."
        )
    )
elif sc.expert_parallel and not result.fits and result.layout_needed is not None and not result.layout_needed.expert_parallel:
    st.caption("No expert-parallel layout fits (one expert a GPU at most): speeds for the smallest tensor-parallel layout that does, served without it.")
elif sc.expert_parallel:
    st.caption("Expert parallel needs two or more tensor-parallel GPUs and no pipeline parallelism (Parallelism in the sidebar): served without it.")
if (wired := wired_limit_text(acc)) is not None:  # Apple silicon: what the GPU may use of the unified memory
    st.caption(say(wired, units.name))
if result.layout_needed is None:
    if not presenter:
        st.error(NO_LAYOUT)
    stop_page()
# One alert always in this place (what holds the model), so a move across the fit only restyles it; one that came
# and went was mounted and removed and shifted the charts below (README, bench/ab_latency.py).
own = sc.tensor_parallel * sc.pipeline_parallel  # the sidebar's devices per replica
held_by = md("one {acc}", acc=acc.name) if own == 1 else md("the sidebar's {k} x {acc}", k=own, acc=acc.name)
if sc.serving_engine == "llama.cpp" and sc.gpu_layers == 0:  # -ngl 0: the CPU runs it from system RAM, not the card
    held_by = md("system RAM (llama.cpp with -ngl 0: the CPU runs every layer; {ram} GiB set)", ram=f"{sc.host_memory_gib:g}")
load = f"{sc.batch_size:,} sequence(s) of {sc.seq_len:,} tokens"
if result.fits:
    st.info(
        f"At these settings {held_by} {'holds' if own == 1 else 'hold'} the model and {load} (room for {sequences_text(inf.max_concurrent_sequences)}).",
        icon=":material/check_circle:",
    )
else:
    st.warning(
        f"At these settings {held_by} {'does' if own == 1 else 'do'} not hold the model and {load}"
        + (" (the KV chart shows where memory runs out)" if kv_on_sidebars_layout(result) else "")
        + f"; speeds are for the smallest layout that fits ({inf.devices_per_replica} devices{', expert-parallel' if inf.expert_parallel_ranks > 1 else ''}).",
        icon=":material/warning:",
    )

if presenter:
    show(kv_figure(KEY, units.name), key="chart_kv")
else:
    left, right = st.columns(2)
    with left:
        show(decode_figure(KEY), key="chart_decode")
    with right:
        show(kv_figure(KEY, units.name), key="chart_kv")
cold = load_sentence(result.weights_bytes_total)  # a cold start's floor (core/speed/storage.py), below the charts
st.caption(plain(cold[0].upper() + cold[1:] + "."))
# what the weights' and the cache's formats trade in quality (data/quality_notes.csv, as the Plan page says it for a
# plan), but for a model served in the format its makers ship
if quality := ([] if sc.weights_format == shipped_format(sc.model) else caveats(sc.weights_format, None, sc.kv_cache_format)):
    with st.expander("What these formats trade in quality"):
        for n in quality:
            st.markdown("- " + plain(n.caveat) + " *(" + plain(n.source) + ")*")
load_section(KEY)  # time to first token and tokens/s per user under load, p50 and p90 (core/speed/load.py)
if (fold := folded("Run this setup: the serving command", "fold_inference_launch")) is not None:
    with fold:
        launch_section_for_setup(sc, result.layout_needed if not result.fits else None)
if (fold := folded("How this is computed", "fold_inference_how")) is not None:
    with fold:
        st.markdown("\n".join("- " + plain(line) for line in inf.assumptions))  # one element, not one per line
box_section(sc, units)
# "What serving your traffic costs" is the page's lower section (app_pages/shared/serving_section.py): a fragment of
# its own below this one, which a context move leaves as drawn.
