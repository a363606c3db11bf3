"""What app.py hands to the page being shown: a frozen PageContext for this
run of this session (kept per thread: each session's run has its own)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NoReturn

import streamlit as st
from pydantic import ValidationError

from app_pages.shared.page_types import PageContext
from app_pages.shared.style import Units
from app_pages.shared.text import md, plain
from core.scenario import Scenario

_local = threading.local()


class PageStopped(Exception):
    """Raised by stop_page(): the page has said why it cannot go on. app.py's page fragment catches it, so the run goes
    on to the page's lower section (app_pages/shared/lower.py); st.stop() would end the whole run there."""


def stop_page() -> NoReturn:
    """End the page here (in place of st.stop(); PageStopped)."""
    raise PageStopped


def set_context(ctx: PageContext) -> None:
    _local.ctx = ctx


def context() -> PageContext:
    return getattr(_local, "ctx", PageContext(None, {}))


def page_header(title: str, caption: str) -> tuple[Scenario, dict[str, Any], Units]:
    """Title, the link's warnings, and the scenario (when there is none the page stops after saying why)."""
    ctx = context()
    st.title(title)
    st.caption(caption)
    show_messages()
    if ctx.scenario is None:
        st.info("Fix the input above (in the sidebar) to see results; everything you entered is kept.")
        stop_page()
    assert ctx.scenario is not None
    return ctx.scenario, ctx.values, ctx.units  # hop: PageContext -> the page's Scenario (and values, units)


def as_mode(sc: Scenario, mode: str, fallback: bool = True, **update: Any) -> tuple[Scenario | None, str | None, str | None]:
    """The same model and accelerator as a training or serving scenario: (scenario, error, note). A serving format
    (AWQ, GPTQ, GGUF, FP8...) cannot be fully fine-tuned, so the training view trains the model's weights in the
    sidebar's precision (BF16, FP16 or FP32) and the note says so. Served with an engine the part does not run, it is
    served with one that does (core/engine_fallback.py) and the note says so, unless `fallback` is off (an engine the
    reader picked on the page, beside the refusal)."""
    from core.cli import describe_validation_error
    from core.model.formats import FORMATS

    fields = dict(sc) | {"mode": mode} | update
    note = None
    if mode == "training" and fields.get("offload") != "none" and not fields.get("zero_stage"):
        fields["offload"] = "none"
    if mode == "training" and fields.get("method", "full") == "full" and FORMATS[fields["weights_format"]].is_quantized:
        weights = str(fields.get("precision", "bf16")).removesuffix("-true")
        note = (
            f"The sidebar's weights are {FORMATS[fields['weights_format']].label}, a format for serving: a full fine-tune "
            f"trains the model's {FORMATS[weights].label} weights, and the training numbers here are for that (for "
            "training on a 4-bit base, switch *Workload* to *Train / fine-tune* and pick QLoRA)."
        )
        fields["weights_format"] = weights
    try:
        return Scenario(**fields), None, note
    except ValidationError as exc:
        from core.engine_fallback import with_runnable_engine

        if fallback and (instead := with_runnable_engine(fields)) is not None:  # an engine the part does not run: one that does
            return instead[0], None, " ".join(n for n in (note, instead[1]) if n)
        return None, describe_validation_error(exc), None


def training_tokens(sc: Scenario, values: dict[str, Any]) -> tuple[float, str | None]:
    """The tokens a training bill is for, on every page: the sidebar's *Training tokens* when set, else the Plan page's
    dataset (tokens per epoch x epochs, the same goal the planner plans), with the caption that says which."""
    if sc.train_tokens:
        return sc.train_tokens, None
    from core.scenario import MAX_TRAIN_TOKENS

    per_epoch, epochs = float(values.get("ptok", 20.0)) * 1e6, float(values.get("epochs", 1.0))
    tokens = min(per_epoch * epochs, MAX_TRAIN_TOKENS)
    return tokens, md(
        "No training-token count in the sidebar: the Plan page's dataset, **{n} tokens** ({per} per epoch x {epochs} "
        "epochs), is billed here as on the Plan page (set *Training tokens* under *Training run* to bill another).",
        n=f"{tokens:,.0f}",
        per=f"{per_epoch:,.0f}",
        epochs=f"{epochs:g}",
    )


def show_messages() -> None:
    """The link's and the inputs' warnings, escaped: they can quote user input. The first is shown; the rest wait in
    a collapsed expander under it, so that a link with many bad values does not push the page's results below the
    fold (one warning and one line, however many; each message is still there, whole, when the expander is opened)."""
    ctx = context()
    with st.container():  # one slot, however many messages: what follows keeps its place (charts are not redrawn)
        first, rest = ctx.messages[:1], ctx.messages[1:]
        for msg in first:
            st.warning(plain(msg), icon=":material/warning:")
        if rest:
            with st.expander(f"{len(rest)} more {'warning' if len(rest) == 1 else 'warnings'}", icon=":material/warning:"):
                for msg in rest:
                    st.warning(plain(msg), icon=":material/warning:")
        for note in ctx.notes:
            st.info(plain(note), icon=":material/info:")
    st.session_state.pop("_link_messages", None)  # a link's warnings are shown once, on the first page shown


def priced() -> tuple[str, Any]:
    """The price list in use as (cache key, rows) for the cached results; says so on the page when it is the user's."""
    prices = context().prices
    if prices.rows is not None:
        mode = "" if not prices.own_rows else " (the catalog's rows for the others)" if context().values.get("pmode") != "only" else " (only these)"
        st.caption(plain(prices.summary() + mode + "; sidebar: Your own prices."))
    return prices.args


def shipped_format_note(sc: Scenario, units: Units) -> None:
    """Where the model ships quantized (gpt-oss: MXFP4 experts) and the sidebar serves it in another format, the one
    caption that says so: gpt-oss-120b in BF16 needs four times its experts' memory, a setup nobody serves. Where the
    sidebar's engine has no kernels for the shipped format on its part, the caption says that instead of offering it."""
    from core.catalog.accelerators import get_accelerator
    from core.catalog.format_kernels import weights_problem
    from core.memory.engines import ENGINES
    from core.model.formats import FORMATS, weight_bytes
    from core.plan.serve import shipped_format

    shipped = shipped_format(sc.model)
    if sc.mode != "inference" or shipped is None or sc.weights_format == shipped:
        return
    arch, fmt = sc.architecture, FORMATS[shipped]
    said = md(
        "{model} ships in {fmt} ({size} of weights); the weights here are {label} ({here}).",
        model=arch.name,
        fmt=fmt.label,
        size=units(weight_bytes(arch, fmt)),
        label=FORMATS[sc.weights_format].label,
        here=units(weight_bytes(arch, FORMATS[sc.weights_format])),
    )
    problem = weights_problem(shipped, sc.serving_engine, get_accelerator(sc.accelerator), ENGINES[sc.serving_engine].label)
    if problem is None:
        said += md(" Choose **{fmt}** under *Weight format* to see it as it ships.", fmt=fmt.label)
    else:
        said += md(" {problem}: the Plan page serves it where an engine does.", problem=problem)
    st.caption(said)


def weight_only_caption(sc: Scenario) -> None:
    """FP8 weights served on a part without FP8 matmuls (Turing, Ampere), in one caption: the engine runs them
    weight-only (core/speed/timing.weight_only_note), as the Plan page's "FP8 (weight-only)" and the launch say."""
    from core.catalog.accelerators import get_accelerator
    from core.memory.engines import ENGINES
    from core.speed.timing import weight_only_note

    if sc.mode == "inference" and (note := weight_only_note(sc.weights_format, sc.serving_engine, get_accelerator(sc.accelerator), ENGINES[sc.serving_engine].label)):
        st.caption(plain(note) + ".")


AS_SET = "The figures below are what this setup would need if it ran."


def stack_problem_warning(problem: str | None, instead: str = "") -> None:
    """The one line saying the sidebar asks for what its training stack, serving engine or part does not run (the
    estimate's `stack_problem`: data/stack_layouts.csv, data/format_kernels.csv, data/kv_cache_kernels.csv); the
    page's figures below stay the scenario's, and `instead` (kv_instead) says the page's figure for what runs."""
    if problem:
        st.warning(plain(problem) + ". " + AS_SET + (" " + plain(instead) if instead else ""), icon=":material/warning:")


def kv_instead(sc: Scenario, prices: tuple[Any, ...], value: Callable[[Any], str], words: str) -> str:
    """Where the serving engine cannot keep the sidebar's KV cache on its part but serves the setup with another
    (core/memory/problems.runnable_kv_cache: llama.cpp asked for FP8, its Q8_0), the page's own figure (`value` of an
    estimate result, followed by `words`) with that cache beside the setup's: what choosing it gives. Else ""."""
    from app_pages.shared.results import cached_estimate
    from core.catalog.engine_formats import kv_format_name
    from core.memory.engines import ENGINES
    from core.memory.problems import runnable_kv_cache

    if (kv := runnable_kv_cache(sc)) is None:
        return ""
    here = value(cached_estimate(sc.model_dump_json(), *prices))
    runs = value(cached_estimate(sc.replace(kv_cache_format=kv).model_dump_json(), *prices))
    which = f"With the KV cache in {kv_format_name(kv)}, which {ENGINES[sc.serving_engine].label} keeps here"
    if runs == here:
        return f"{which}, the same: {runs} {words}."
    return f"{which}: {runs} {words} ({here} with {kv_format_name(sc.kv_cache_format)} as set)."
