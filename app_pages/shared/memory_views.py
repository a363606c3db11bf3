"""The Memory page's cached figures. Defined here, not at the page's top level: a page's module runs again on every
rerun, and decorating a cached function again costs Streamlit a read and tokenization of its source to name its
cache (~1-2 ms each, three a Memory rerun: bench/profile_server.py --page memory)."""

from __future__ import annotations

from app_pages.shared.cache import shared_cache
from app_pages.shared.charts import breakdown_bar, fits_on_figure, sweep_figure
from app_pages.shared.results import cached_estimate, scenario_of
from app_pages.shared.style import Units, frozen
from app_pages.shared.text import hours_text, usd_text
from core.memory.fit import BORDERLINE_BASIS
from core.money.help_options import HelpOption
from core.scenario import Scenario


@shared_cache(max_entries=32)
def breakdown_chart(key: str, unit: str, device: str, tall: bool = False):
    return frozen(breakdown_bar(cached_estimate(key), Units(unit), device, tall))


@shared_cache(max_entries=32)
def fits_on_chart(key: str, unit: str):
    return frozen(fits_on_figure(scenario_of(key), Units(unit)))


@shared_cache(max_entries=32)
def sweep_chart(key: str, unit: str, axis: str):
    return frozen(sweep_figure(scenario_of(key), cached_estimate(key), Units(unit), axis))


def _one_line(text: str) -> str:
    """A short value ("≥ 13.9 h") kept on one line in a narrow column: its spaces made non-breaking."""
    return text.replace(" ", "\u00a0") if len(text) <= 12 else text


def help_rows(options: list[HelpOption], sc: Scenario, units: Units) -> list[dict[str, str]]:
    """What would help, one row per option as the Memory page and the report show it (core/money/help_options.py):
    the change, the devices, memory and system RAM per device, the time and the cost. Time and cost of an option whose
    time the speed core models only in part (offload) are marked as the least they can be."""
    show_ram = any(o.host_memory_bytes > 0 for o in options)
    rows = []
    for o in options:
        at_least = "" if o.time_modelled else "≥ "
        if o.hours is not None:
            time = hours_text(o.hours)
        elif o.tokens_per_s is None:
            time = "—"
        else:
            time = f"{o.tokens_per_s:,.0f} tokens/s" if sc.mode == "training" else f"{o.tokens_per_s:,.1f} output tokens/s"
        if o.usd is not None:
            cost = usd_text(o.usd)
        elif o.usd_per_million_train_tokens is not None:
            cost = f"{usd_text(o.usd_per_million_train_tokens)} per M tokens"
        elif o.usd_per_million_output_tokens_full_load is not None:
            cost = f"{usd_text(o.usd_per_million_output_tokens_full_load)} per M output tokens"
        else:
            cost = "no price"
        row = {
            "What to change": o.change if o.change_text is None else o.change_text.render(units.name),
            "Time" if sc.mode == "training" and sc.train_tokens else "Speed": _one_line((at_least if time != "—" else "") + time),
            "Cost": _one_line((at_least if cost != "no price" else "") + cost),
            "Devices": f"{o.devices:,}",
            "Memory per device": units(o.memory_per_device_bytes) + (" (borderline)" if o.borderline else ""),
        }
        if show_ram:
            row["System RAM per device"] = units(o.host_memory_bytes) if o.host_memory_bytes > 0 else "—"
        row["Rented"] = "—" if o.price_instance is None else f"{o.price_instance}, {usd_text(o.usd_per_hour or 0.0)}/h"
        rows.append(row)
    return rows


def help_basis(sc: Scenario, options: list[HelpOption]) -> str:
    """What the time and cost columns mean, in one line."""
    if sc.mode == "training":
        what = (
            f"time: the run of {sc.train_tokens:,.0f} tokens with setup; cost: its on-demand bill"
            if sc.train_tokens
            else "speed: tokens trained per second; cost: per million tokens trained (set the training tokens for a run's time and bill)"
        )
    else:
        what = f"speed: one replica's output tokens per second at batch {sc.batch_size}; cost: per million output tokens with it busy all the time"
    out = f"Cheapest first, each on the cheapest billable price for its devices on this accelerator; {what}."
    if any(o.borderline for o in options):
        out += f" Borderline: within the estimate's measured error of the capacity ({BORDERLINE_BASIS})."
    if not all(o.time_modelled for o in options):
        out += " ≥: the speed core leaves part of that option's time out (its notes say what); those options come last."
    return out


METHOD_NAMES = {"full": "full training", "lora": "LoRA", "qlora": "QLoRA"}


def scenario_line(sc: Scenario, device_name: str) -> str:
    """The scenario in one line a room reads above the bars in the presenter view, where the model and the method
    are not among the inputs beside the chart ("Llama 3.1 8B · QLoRA · 1 x 4,096 tokens · 1 x NVIDIA GeForce RTX
    4090"): stop 50's projector review, M2. Plain text: the model's name can come from a pasted config."""
    devices = sc.tensor_parallel * sc.pipeline_parallel * (sc.data_parallel if sc.mode == "training" else 1)
    what = METHOD_NAMES.get(sc.method, sc.method) + (", DPO" if sc.objective == "dpo" else "") if sc.mode == "training" else f"served ({sc.weights_format} weights)"
    return f"{sc.architecture.name} · {what} · {sc.batch_size:,} × {sc.seq_len:,} tokens · {devices:,} × {device_name}"
