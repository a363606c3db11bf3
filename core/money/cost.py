"""Training run cost: every price row x accelerator x device count, the
cheapest and the fastest option, and the time/cost curve as devices grow.

Cost = whole instances x instance price per hour x wall-clock hours (ideal,
MFU-based time, core/speed/timing.py). More devices never lengthen the ideal time;
the time "with communication" (core/speed/comm.py) shows where adding devices stops
paying off.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from core.catalog.accelerators import Accelerator, get_accelerator
from core.catalog.price_trust import billable_prices
from core.catalog.prices import PriceRow
from core.layout import Layout
from core.memory.estimate import Evaluator, devices_needed, fit_capacity
from core.memory.fit import MAX_DEVICES
from core.money.pricing import instances_for, label, rows_for, run_usd_per_hour, training_rows_for
from core.scenario import Scenario
from core.speed.comm import training_comm
from core.speed.timing import TrainingTime, training_time

_OUT = ConfigDict(frozen=True)
DEFAULT_DOUBLINGS = 6  # device counts n_min, 2 n_min, ..., 64 n_min


class TrainingOption(BaseModel):
    model_config = _OUT
    accelerator_id: str
    provider: str
    instance_type: str
    region: str
    devices: int
    instances: int
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    zero_stage: int
    wall_hours: float
    wall_hours_with_comm: float
    gpu_hours: float
    usd_per_hour: float
    on_demand_usd: float
    on_demand_usd_with_comm: float
    spot_usd: float | None
    price_is_estimate: bool
    price_source: str


class TrainingOptions(BaseModel):
    model_config = _OUT
    options: tuple[TrainingOption, ...]  # cheapest on-demand first (ties: cheaper with communication)
    cheapest: TrainingOption | None
    cheapest_spot: TrainingOption | None
    fastest: TrainingOption | None  # shortest time with communication
    skipped: tuple[str, ...]  # accelerators left out, with the reason


class _Timed(NamedTuple):
    layout: Layout
    zero_stage: int
    time: TrainingTime
    comm_overhead: float  # fraction added by communication (core/speed/comm.py)


def _counts(base: Layout, wanted: Iterable[int] | None, own_devices: int) -> list[Layout]:
    group = base.tensor_parallel * base.pipeline_parallel
    if wanted is None:
        dps = {base.data_parallel * 2**k for k in range(DEFAULT_DOUBLINGS + 1)}
        if own_devices >= base.devices:
            dps.add(own_devices // group)
    else:
        dps = {n // group for n in wanted if n >= base.devices}
    return [Layout(dp, base.tensor_parallel, base.pipeline_parallel) for dp in sorted(dps) if dp * group <= MAX_DEVICES]


def _timings(sc: Scenario, acc: Accelerator, device_counts: Iterable[int] | None, ev: Evaluator | None = None) -> tuple[list[_Timed], str | None]:
    """Per-device memory does not depend on the device: one Evaluator (`ev`) serves every accelerator."""
    ev = ev or Evaluator(sc, sc.architecture)
    needed = devices_needed(sc, ev, fit_capacity(sc, float(acc.usable_memory_bytes)))
    base = None if needed is None else (Layout(needed.data_parallel, needed.tensor_parallel, needed.pipeline_parallel), needed.zero_stage)
    if base is None:
        return [], f"{acc.id}: no layout of up to {MAX_DEVICES:,} devices fits in memory"
    layout0, zero = base
    comm_sc = sc if zero == sc.zero_stage else sc.model_copy(update={"zero_stage": zero})
    arch = sc.architecture
    out = []
    for layout in _counts(layout0, device_counts, sc.devices):
        t = training_time(sc, acc, layout.devices)
        comm = training_comm(comm_sc, arch, acc, layout, t.flops_per_token, t.peak_tflops_per_device * t.mfu)
        out.append(_Timed(layout, zero, t, comm.overhead_fraction))
    return out, None if out else f"{acc.id}: none of the requested device counts fits"


def _option(row: PriceRow, timed: _Timed) -> TrainingOption:
    layout, zero, t, overhead = timed
    hourly = run_usd_per_hour(row, layout.devices) or 0.0
    spot_hourly = run_usd_per_hour(row, layout.devices, spot=True)
    return TrainingOption.model_construct(
        accelerator_id=row.accelerator_id,
        provider=row.provider,
        instance_type=row.instance_type,
        region=row.region,
        devices=layout.devices,
        instances=instances_for(row, layout.devices),
        data_parallel=layout.data_parallel,
        tensor_parallel=layout.tensor_parallel,
        pipeline_parallel=layout.pipeline_parallel,
        zero_stage=zero,
        wall_hours=t.wall_hours,
        wall_hours_with_comm=t.wall_hours * (1 + overhead),
        gpu_hours=t.gpu_hours,
        usd_per_hour=hourly,
        on_demand_usd=hourly * t.wall_hours,
        on_demand_usd_with_comm=hourly * t.wall_hours * (1 + overhead),
        spot_usd=None if spot_hourly is None else spot_hourly * t.wall_hours,
        price_is_estimate=row.estimate,
        price_source=row.source,
    )


def training_options(
    sc: Scenario, rows: tuple[PriceRow, ...] | None = None, *, accelerator_ids: Iterable[str] | None = None, device_counts: Iterable[int] | None = None
) -> TrainingOptions:
    """The run's cost for every price row of every priced accelerator (or the
    ones named) at each device count that fits (default: the smallest fitting
    count and its doublings, up to 64x)."""
    if sc.train_tokens is None:
        raise ValueError("train_tokens must be set to cost a training run")
    pool = billable_prices(rows)
    ids = list(dict.fromkeys(r.accelerator_id for r in pool)) if accelerator_ids is None else list(accelerator_ids)
    counts = None if device_counts is None else tuple(device_counts)
    options: list[TrainingOption] = []
    skipped: list[str] = []
    ev = Evaluator(sc, sc.architecture)
    for aid in ids:
        if not rows_for(aid, pool):
            skipped.append(f"{aid}: no price row")
            continue
        timed, why = _timings(sc, get_accelerator(aid), counts, ev)
        if why:
            skipped.append(why)
        before = len(options)
        for t in timed:
            # The cheapest way each provider rents this many devices (its dearer instance shapes never win).
            best: dict[str, tuple[float, PriceRow]] = {}
            for r in training_rows_for(aid, pool, t.layout.tensor_parallel, t.layout.devices):
                hourly = run_usd_per_hour(r, t.layout.devices) or 0.0
                if r.provider not in best or (hourly, r.instance_type) < (best[r.provider][0], best[r.provider][1].instance_type):
                    best[r.provider] = (hourly, r)
            options += [_option(r, t) for _, r in best.values()]
        if timed and len(options) == before:
            skipped.append(f"{aid}: no instance holds the tensor-parallel group of {timed[0].layout.tensor_parallel}, or rents several on a cluster network")
    options.sort(key=lambda o: (round(o.on_demand_usd, 6), o.on_demand_usd_with_comm, o.wall_hours, o.provider, o.instance_type))
    spot = [o for o in options if o.spot_usd is not None]
    return TrainingOptions.model_construct(
        options=tuple(options),
        cheapest=options[0] if options else None,
        cheapest_spot=min(spot, key=lambda o: (o.spot_usd, o.wall_hours)) if spot else None,
        fastest=min(options, key=lambda o: (o.wall_hours_with_comm, o.on_demand_usd)) if options else None,
        skipped=tuple(skipped),
    )


class CurvePoint(BaseModel):
    model_config = _OUT
    devices: int
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    wall_hours: float
    wall_hours_with_comm: float
    gpu_hours: float
    on_demand_usd: float | None  # cheapest row at this count, ideal time
    on_demand_usd_with_comm: float | None
    spot_usd: float | None
    price_instance: str | None


def training_curve(sc: Scenario, rows: tuple[PriceRow, ...] | None = None, device_counts: Iterable[int] | None = None) -> tuple[CurvePoint, ...]:
    """Time and cost on the scenario's accelerator as the device count grows."""
    if sc.train_tokens is None:
        raise ValueError("train_tokens must be set to cost a training run")
    acc = get_accelerator(sc.accelerator)
    timed, _ = _timings(sc, acc, None if device_counts is None else tuple(device_counts))
    points = []
    for item in timed:
        layout, _, t, overhead = item
        acc_rows = training_rows_for(acc.id, rows, layout.tensor_parallel, layout.devices)
        costs = [(run_usd_per_hour(r, layout.devices) or 0.0, r) for r in acc_rows]
        hourly, row = min(costs, key=lambda c: (c[0], c[1].provider, c[1].instance_type)) if costs else (None, None)
        spots = [p for r in acc_rows if (p := run_usd_per_hour(r, layout.devices, spot=True)) is not None]
        with_comm = t.wall_hours * (1 + overhead)
        points.append(
            CurvePoint.model_construct(
                devices=layout.devices,
                data_parallel=layout.data_parallel,
                tensor_parallel=layout.tensor_parallel,
                pipeline_parallel=layout.pipeline_parallel,
                wall_hours=t.wall_hours,
                wall_hours_with_comm=with_comm,
                gpu_hours=t.gpu_hours,
                on_demand_usd=None if hourly is None else hourly * t.wall_hours,
                on_demand_usd_with_comm=None if hourly is None else hourly * with_comm,
                spot_usd=min(spots) * t.wall_hours if spots else None,
                price_instance=None if row is None else label(row),
            )
        )
    return tuple(points)
