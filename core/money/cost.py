"""Training run cost: every price row x accelerator x device count, the
cheapest and the fastest option, and the time/cost curve as devices grow.

Each run is billed by the one training bill (core/money/run_bill.py), as the
planner bills it: whole instances x instance price per hour x (setup + the
computation with its communication); a run on a provider's reserved cluster
(data/reservations.csv) pays the reservation's whole terms, and is listed beside
the on-demand runs, as the curve, `estimate` and the planner price it. The ideal, MFU-only time and its cost stay
beside it (`wall_hours`, `on_demand_usd`) for the curve's shape; the cheapest and
fastest picks are core/money/picks.py's, within the 30-day horizon.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from core.catalog.accelerators import Accelerator, get_accelerator
from core.catalog.price_trust import billable_prices
from core.catalog.prices import PriceRow
from core.catalog.providers import Reservation
from core.catalog.stack_layouts import training_part_problem
from core.layout import Layout
from core.memory.components import fp32_attention
from core.memory.evaluator import Evaluator, fit_capacity, own_layout
from core.memory.fit import MAX_DEVICES
from core.memory.layouts import devices_needed
from core.money import picks
from core.money.pricing import instances_for, label, reserved_rows_for, rows_for, run_usd_per_hour, training_rows_for
from core.money.run_bill import HORIZON_HOURS, SETUP_HOURS, RunTime, bill, cheapest_bill, run_time
from core.scenario import Scenario

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
    # The bill (core/money/run_bill.py), as the planner and `estimate` bill the same run:
    setup_hours: float = SETUP_HOURS
    run_hours: float = 0.0  # billed wall-clock hours: setup + computation with communication
    run_usd: float = 0.0  # on-demand: whole instances x price x run_hours
    run_spot_usd: float | None = None  # the same on spot (None: no spot price)
    scaling_efficiency: float = 1.0  # ideal time / time with communication
    within_bounds: bool = True  # run_hours within the 30-day horizon (run_bill.HORIZON_HOURS)
    # Added (issue 26, one answer with the curve, `estimate` and Plan): a run billed as a provider's reserved cluster
    # (data/reservations.csv), its whole terms paid (run_usd); None: rented on demand
    reservation: str | None = None  # the reserved product ("1-Click Cluster", "EC2 Capacity Block")
    reservation_min_term_hours: float | None = None  # its minimum term, billed even when the run is shorter
    paid_hours: float | None = None  # hours paid for: run_hours on demand, the reservation's whole terms

    @property
    def pays_idle_term(self) -> bool:
        """A reservation whose minimum term outlasts the run (core/money/picks.py calls it neither cheapest nor fastest
        while another run exists, as the planner does)."""
        return self.reservation_min_term_hours is not None and self.run_hours < self.reservation_min_term_hours

    @property
    def cost(self) -> float:
        return self.run_usd

    @property
    def duration(self) -> float:
        return self.run_hours


class _SpotView:
    """An option seen at its spot price, for the picks (core/money/picks.py reads cost and duration)."""

    def __init__(self, o: TrainingOption) -> None:
        self.option, self.cost, self.duration = o, o.run_spot_usd, o.run_hours
        self.within_bounds, self.scaling_efficiency = o.within_bounds, o.scaling_efficiency


def pick(options: Iterable[TrainingOption], spot: bool = False) -> tuple[TrainingOption | None, TrainingOption | None]:
    """The cheapest and the fastest run at the price kind (core/money/picks.py: the planner's definitions)."""
    options = list(options)
    if not spot:
        return picks.cheapest(options), picks.fastest(options)
    views = [_SpotView(o) for o in options if o.run_spot_usd is not None]
    c, f = picks.cheapest(views), picks.fastest(views)
    return (None if c is None else c.option), (None if f is None else f.option)


class TrainingOptions(BaseModel):
    model_config = _OUT
    options: tuple[TrainingOption, ...]  # cheapest billed run first (on demand, or reserved: TrainingOption.reservation)
    cheapest: TrainingOption | None  # core/money/picks.py on the billed runs (within the horizon when any is)
    cheapest_spot: TrainingOption | None
    fastest: TrainingOption | None  # shortest billed time (within 5%: the cheapest of those)
    skipped: tuple[str, ...]  # accelerators left out, with the reason
    fastest_spot: TrainingOption | None = None


class _Timed(NamedTuple):
    layout: Layout
    zero_stage: int
    run: RunTime  # ideal time and communication overhead (core/money/run_bill.py)


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
    """Per-device memory depends on the device only through QLoRA's attention path (components.fp32_attention): one
    Evaluator (`ev`) serves every accelerator of the same path."""
    ev = ev or Evaluator(sc, sc.architecture)
    needed = devices_needed(sc, ev, fit_capacity(sc, float(acc.usable_memory_bytes)))
    base = None if needed is None else (Layout(needed.data_parallel, needed.tensor_parallel, needed.pipeline_parallel), needed.zero_stage)
    if base is None:
        return [], f"{acc.id}: no layout of up to {MAX_DEVICES:,} devices fits in memory"
    layout0, zero = base
    comm_sc = sc if zero == sc.zero_stage else sc.model_copy(update={"zero_stage": zero})
    own = own_layout(sc)
    # At the scenario's own device count its own layout is the run (a plan loaded from the Plan page bills exactly what
    # the planner billed), where it fits; other counts scale the fewest-devices layout's data parallelism.
    own_fits = ev.total(own, sc.batch_size, sc.seq_len) <= fit_capacity(sc, float(acc.usable_memory_bytes))
    out = []
    for layout in _counts(layout0, device_counts, sc.devices):
        if own_fits and layout.devices == own.devices:
            out.append(_Timed(own, sc.zero_stage, run_time(sc, acc, own)))
        else:
            out.append(_Timed(layout, zero, run_time(comm_sc, acc, layout)))
    return out, None if out else f"{acc.id}: none of the requested device counts fits"


def _option(row: PriceRow, timed: _Timed, reservation: Reservation | None = None) -> TrainingOption:
    """The run on `row`, on demand; with a `reservation`, as that reserved cluster (its whole terms billed, no spot)."""
    layout, zero, rt = timed
    t, overhead = rt
    on_demand = bill(row, layout.devices, rt.compute_hours, reservation=reservation)
    if reservation is None:
        hourly = run_usd_per_hour(row, layout.devices) or 0.0
        spot_hourly = run_usd_per_hour(row, layout.devices, spot=True)
        spot = bill(row, layout.devices, rt.compute_hours, spot=True)
    else:
        hourly, spot_hourly, spot = (0.0 if on_demand is None else on_demand.usd_per_hour), None, None
    hours = rt.compute_hours + SETUP_HOURS if on_demand is None else on_demand.hours
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
        setup_hours=SETUP_HOURS,
        run_hours=hours,
        run_usd=0.0 if on_demand is None else on_demand.usd,
        run_spot_usd=None if spot is None else spot.usd,
        scaling_efficiency=rt.scaling_efficiency,
        within_bounds=hours <= HORIZON_HOURS,
        reservation=None if reservation is None else reservation.product,
        reservation_min_term_hours=None if reservation is None else reservation.min_term_hours,
        paid_hours=None if on_demand is None else on_demand.paid_hours,
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
    evs: dict[bool, Evaluator] = {}  # by QLoRA's attention path on the part (fp32 on SDPA, or FlashAttention-2)
    for aid in ids:
        if not rows_for(aid, pool):
            skipped.append(f"{aid}: no price row")
            continue
        acc = get_accelerator(aid)
        if (why := training_part_problem(acc, sc.method, sc.training_stack, sc.optimizer, sc.objective)) is not None and aid != sc.accelerator:
            skipped.append(why)  # the planner leaves it out too (Inferentia; QLoRA off CUDA and ROCm GPUs); the sidebar's own part is the user's call, warned on the page
            continue
        path = fp32_attention(sc, acc)
        if path not in evs:  # the scenario itself where its own part takes the same path (every non-QLoRA scenario)
            sized = sc if path == fp32_attention(sc) else sc.model_copy(update={"accelerator": aid})
            evs[path] = Evaluator(sized, sc.architecture)
        timed, why = _timings(sc, acc, counts, evs[path])
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
            # and each provider's reserved cluster of this size (data/reservations.csv), as the planner, the curve and
            # `estimate` bill a run past the on-demand orders or cheaper reserved: its whole terms paid
            reserved: dict[str, tuple[float, PriceRow, Reservation]] = {}
            for r, res in reserved_rows_for(aid, pool, t.layout.tensor_parallel, t.layout.devices):
                b = bill(r, t.layout.devices, t.run.compute_hours, reservation=res)
                if b is not None and (r.provider not in reserved or (b.usd, r.instance_type) < (reserved[r.provider][0], reserved[r.provider][1].instance_type)):
                    reserved[r.provider] = (b.usd, r, res)
            options += [_option(r, t, res) for _, r, res in reserved.values()]
        if timed and len(options) == before:
            skipped.append(f"{aid}: no instance holds the tensor-parallel group of {timed[0].layout.tensor_parallel}, or rents several on a cluster network")
    options.sort(key=lambda o: (round(o.run_usd, 6), o.run_hours, o.provider, o.instance_type))
    cheapest, fastest = pick(options)
    cheapest_spot, fastest_spot = pick(options, spot=True)
    return TrainingOptions.model_construct(
        options=tuple(options),
        cheapest=cheapest,
        cheapest_spot=cheapest_spot,
        fastest=fastest,
        skipped=tuple(skipped),
        fastest_spot=fastest_spot,
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
    # The bill (core/money/run_bill.py) of the cheapest row at this count:
    run_hours: float = 0.0  # setup + computation with communication
    run_usd: float | None = None
    run_spot_usd: float | None = None


def training_curve(sc: Scenario, rows: tuple[PriceRow, ...] | None = None, device_counts: Iterable[int] | None = None) -> tuple[CurvePoint, ...]:
    """Time and cost on the scenario's accelerator as the device count grows."""
    if sc.train_tokens is None:
        raise ValueError("train_tokens must be set to cost a training run")
    acc = get_accelerator(sc.accelerator)
    timed, _ = _timings(sc, acc, None if device_counts is None else tuple(device_counts))
    points = []
    for layout, _, rt in timed:
        t = rt.time
        acc_rows = training_rows_for(acc.id, rows, layout.tensor_parallel, layout.devices)
        costs = [(run_usd_per_hour(r, layout.devices) or 0.0, r) for r in acc_rows]
        hourly, row = min(costs, key=lambda c: (c[0], c[1].provider, c[1].instance_type)) if costs else (None, None)
        spots = [p for r in acc_rows if (p := run_usd_per_hour(r, layout.devices, spot=True)) is not None]
        with_comm = rt.compute_hours
        on_demand = cheapest_bill(acc.id, layout.devices, layout.tensor_parallel, with_comm, rows)
        spot = cheapest_bill(acc.id, layout.devices, layout.tensor_parallel, with_comm, rows, spot=True)
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
                run_hours=SETUP_HOURS + with_comm,
                run_usd=None if on_demand is None else on_demand.usd,
                run_spot_usd=None if spot is None else spot.usd,
            )
        )
    return tuple(points)
