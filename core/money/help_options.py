"""What would help, priced (issue 26, item 6): when a scenario does not fit, every change the memory layer finds that
makes it fit (core/memory/fixes.py: same_device_fixes, more_device_fixes), each with the time and the cost it comes
to on the same accelerator, computed by the core every page and the planner use: a training run's bill from
core/money/run_bill.py, a serving replica's speed and price from core/money/blocks.py's serving block, on the
cheapest billable row (core/catalog/price_trust.billable_prices, through core/money/pricing.py). Cheapest first.

The scenario as it is does not fit, so each option's time and cost are absolute, not relative to it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.catalog.accelerators import Accelerator, get_accelerator
from core.catalog.prices import PriceRow
from core.memory.evaluator import Evaluator, fit_capacity, own_layout
from core.memory.fit import borderline, max_batch
from core.memory.fixes import Fix, more_device_fixes, same_device_fixes
from core.money.blocks import FitInfo, inference_estimate
from core.money.pricing import label, usd_per_million_tokens
from core.money.run_bill import RunBill, bill, billed_hours, cheapest_bill, run_time
from core.scenario import Scenario
from core.text import Text
from core.units import BYTES_PER_GIB, SECONDS_PER_HOUR

_OUT = ConfigDict(frozen=True)
# Without a dataset (train_tokens unset) a training option is timed on a million tokens: its throughput and its price
# per million trained tokens do not depend on the count (setup is left out of that rate).
RATE_TOKENS = 1e6
# An offload option's time includes ZeRO-Offload's gradient and parameter copies over PCIe and its CPU Adam step, and
# ZeRO-Infinity's parameter streaming (core/speed/offload.py through core/speed/timing.py): it is modelled.
OFFLOAD_TIMED = "the time includes the PCIe copies and the CPU optimizer step, at the scenario's system RAM bandwidth (core/speed/offload.py)"


class HelpOption(BaseModel):
    """One way to make the scenario fit, with what it needs and what it does to time and cost."""

    model_config = _OUT
    change: str  # the changes, in words (a memory size in them in GiB, as the CLI's sentences)
    change_text: Text | None = Field(default=None, exclude=True)  # the same words, sizes left for the reader's units
    update: dict[str, Any]  # the scenario fields they set (python -m core estimate takes the scenario with them)
    devices: int
    memory_per_device_bytes: int
    memory_per_device_gib: float
    host_memory_gib: float  # system RAM per device it needs (offloaded states, llama.cpp's layers off the GPU)
    host_memory_bytes: int = 0  # the same in bytes (pages show it in the reader's units)
    borderline: bool  # within the estimate's measured error of the capacity (core/memory/fit.py)
    hours: float | None = None  # training with train_tokens: billed hours, setup included (run_bill)
    usd: float | None = None  # training with train_tokens: the run's on-demand bill (run_bill)
    tokens_per_s: float | None = None  # training: tokens trained per second; serving: one replica's output tokens/s
    usd_per_hour: float | None = None  # training: the instances rented; serving: one replica
    usd_per_million_train_tokens: float | None = None  # training: basis trained tokens, setup left out
    usd_per_million_output_tokens_full_load: float | None = None  # serving: one replica busy all the time
    price_instance: str | None = None
    instances: int | None = None  # training: whole instances rented
    time_modelled: bool = True  # False: the speed core leaves part of this option's time out (notes say what)
    notes: list[str] = Field(default_factory=list)

    @property
    def cost(self) -> float | None:
        """What the options are ordered by: the run's bill, or without a dataset the price of a million tokens."""
        if self.usd is not None:
            return self.usd
        return self.usd_per_million_train_tokens if self.usd_per_million_train_tokens is not None else self.usd_per_million_output_tokens_full_load


def _bill(
    accelerator_id: str, devices: int, tp: int, compute_hours: float, rows: tuple[PriceRow, ...] | None, cheapest_rows: dict[tuple[int, int], PriceRow | None]
) -> RunBill | None:
    """run_bill.cheapest_bill, its row looked up once per device count: a bill is whole instances x price x the same
    hours on every row, so the cheapest row for a count does not depend on the hours (nor do its ties)."""
    key = (devices, tp)
    if key not in cheapest_rows:
        first = cheapest_bill(accelerator_id, devices, tp, compute_hours, rows)
        cheapest_rows[key] = None if first is None else first.row
        return first
    row = cheapest_rows[key]
    return None if row is None else bill(row, devices, compute_hours)


def _training(sc: Scenario, alt: Scenario, acc: Accelerator, rows: tuple[PriceRow, ...] | None, cheapest_rows: dict[tuple[int, int], PriceRow | None]) -> dict[str, Any]:
    layout = own_layout(alt)
    tokens = sc.train_tokens or RATE_TOKENS
    rt = run_time(alt, acc, layout, tokens=tokens)  # hop: Scenario -> ideal time x (1 + communication)
    tokens_per_s = tokens / (rt.compute_hours * SECONDS_PER_HOUR)
    out: dict[str, Any] = {"tokens_per_s": tokens_per_s}
    if sc.train_tokens:
        out["hours"] = billed_hours(rt.compute_hours)
    run = _bill(acc.id, layout.devices, layout.tensor_parallel, rt.compute_hours, rows, cheapest_rows)  # hop: -> the one bill
    if run is not None:
        out |= {
            "usd_per_hour": run.usd_per_hour,
            "usd_per_million_train_tokens": usd_per_million_tokens(tokens_per_s, run.usd_per_hour),
            "price_instance": label(run.row),
            "instances": run.instances,
        }
        if sc.train_tokens:
            out["usd"] = run.usd
    return out


def _serving(alt: Scenario, acc: Accelerator, rows: tuple[PriceRow, ...] | None) -> dict[str, Any]:
    layout = own_layout(alt)
    ev = Evaluator(alt, alt.architecture)
    capacity = fit_capacity(alt, float(acc.usable_memory_bytes))
    concurrency = max_batch(ev.total, layout, alt.seq_len, capacity)
    info = FitInfo((layout.data_parallel, layout.tensor_parallel, layout.pipeline_parallel), True, None)
    inf = inference_estimate(alt, acc, info, ev.total, concurrency, rows)  # hop: -> the estimate's serving block
    full_load = inf.usd_per_million_output_tokens_full_load
    return {
        "tokens_per_s": float(inf.output_tokens_per_s),
        "usd_per_hour": None if inf.usd_per_replica_hour is None else float(inf.usd_per_replica_hour),
        "usd_per_million_output_tokens_full_load": None if full_load is None else float(full_load),
        "price_instance": inf.price_instance,
    }


def _option(
    sc: Scenario, fix: Fix, acc: Accelerator, capacity: float, rows: tuple[PriceRow, ...] | None, cheapest_rows: dict[tuple[int, int], PriceRow | None]
) -> HelpOption:
    alt = sc.replace(**fix.update)
    priced = _training(sc, alt, acc, rows, cheapest_rows) if sc.mode == "training" else _serving(alt, acc, rows)
    offload = sc.mode == "training" and alt.offload != "none"
    notes = []
    if offload:
        notes.append(OFFLOAD_TIMED)
    if fix.host_memory_bytes > 0 and (offload or sc.mode == "inference"):
        notes.append(f"needs {fix.host_memory_bytes / BYTES_PER_GIB:,.0f} GiB of system RAM per device")
    if priced.get("price_instance") is None:
        notes.append(f"no billable price for {fix.devices} x {acc.name} in the price list")
    return HelpOption(
        change=fix.label,
        change_text=fix.label_text,
        update=fix.update,
        devices=fix.devices,
        memory_per_device_bytes=fix.memory_per_device_bytes,
        memory_per_device_gib=fix.memory_per_device_bytes / BYTES_PER_GIB,
        host_memory_gib=fix.host_memory_bytes / BYTES_PER_GIB,
        host_memory_bytes=fix.host_memory_bytes,
        borderline=borderline(fix.memory_per_device_bytes, capacity),
        time_modelled=True,  # offload included: core/speed/offload.py
        notes=notes,
        **priced,
    )


def _order(o: HelpOption) -> tuple[bool, bool, float, float, int, str]:
    """Cheapest first among the options whose time the core models; then those it times in part (offload); an option
    with no price last. Ties: the shorter time, fewer devices, the name."""
    time = o.hours if o.hours is not None else 1.0 / o.tokens_per_s if o.tokens_per_s else float("inf")
    return (not o.time_modelled, o.cost is None, o.cost if o.cost is not None else 0.0, time, o.devices, o.change)


def help_options(sc: Scenario, rows: tuple[PriceRow, ...] | None = None, ev: Evaluator | None = None) -> list[HelpOption]:
    """Every change that makes a scenario that does not fit fit, with its time and cost, cheapest first; [] when it
    fits as it is (or nothing does)."""
    acc = get_accelerator(sc.accelerator)
    capacity = fit_capacity(sc, float(acc.usable_memory_bytes))
    ev = ev or Evaluator(sc, sc.architecture)
    layout = own_layout(sc)
    if ev.total(layout, sc.batch_size, sc.seq_len) <= capacity:
        return []
    fixes = same_device_fixes(sc, ev, capacity) + more_device_fixes(sc, ev, capacity)
    options = []
    cheapest_rows: dict[tuple[int, int], PriceRow | None] = {}
    for fix in fixes:
        try:
            options.append(_option(sc, fix, acc, capacity, rows, cheapest_rows))
        except ValueError:
            continue  # the speed core cannot time it (e.g. no throughput figure for this part): not offered
    best: dict[tuple[str, ...], HelpOption] = {}  # one layout per set of changes: the cheapest
    for o in sorted(options, key=_order):
        best.setdefault(_changes_but_layout(o), o)
    return list(best.values())


def _changes_but_layout(o: HelpOption) -> tuple[str, ...]:
    return tuple(sorted(f"{k}={v}" for k, v in o.update.items() if k not in LAYOUT_FIELDS))


LAYOUT_FIELDS = frozenset({"data_parallel", "tensor_parallel", "pipeline_parallel"})
