"""One bill for one training run (issue 26, "one pricing core"). The planner (core/plan/train.py), the Training page's
options and curve (core/money/cost.py) and the estimate's training block (core/money/blocks.py: `python -m core
estimate`, Training vs inference, Compare) all time and price a run here, so the same run costs the same everywhere.

Billed time = setup (start-up, loading the model and data, the last checkpoint) + the computation with its
communication: core/speed/timing.py's ideal time x (1 + core/speed/comm.py's overhead). Cost = whole instances x the
instance's price per hour x billed time (a rented instance is paid for by the hour whether its devices work or not).

A run on a provider's reserved cluster (data/reservations.csv: Lambda's 1-Click Clusters, AWS EC2 Capacity Blocks)
pays the reservation's terms: at least its minimum term, in whole term increments (Lambda bills a 1CC by the week; an AWS Capacity Block is
1-14 days by the day, then whole weeks up to 182 days), at the reservation's published price per device-hour (AWS's
Capacity Block rate), or the row's on-demand price where that is not published (Lambda's 1CC)."""

from __future__ import annotations

from typing import NamedTuple

from core.catalog.accelerators import Accelerator
from core.catalog.prices import PriceRow
from core.catalog.providers import Reservation
from core.layout import Layout
from core.money.pricing import instance_usd_per_hour, instances_for, on_demand_ok, reservation_holds, reserved_rows_for, training_rows_for
from core.scenario import Scenario
from core.speed.comm import comm_step, training_comm
from core.speed.timing import TokenCosts, TrainingTime, training_seconds, training_time
from core.units import SECONDS_PER_HOUR

# Billed beyond the computation on each rented instance: booting, pulling the container and the weights, the last
# checkpoint. A policy default (a goal may set its own, Goal.setup_hours): 15 minutes is what a cold start of a
# multi-GB image plus a 140 GB checkpoint takes at ~1 GB/s, not a sourced figure.
SETUP_HOURS = 0.25
# Without a deadline, a run longer than 30 days is not called cheapest (issue #26: "say 30 days"). It is a policy, not
# a sourced figure: a month of on-demand renting is about as long as a team plans a run for, and a plan of years on
# one host is a wrong answer to "how do we train". A goal's deadline overrides it either way.
HORIZON_HOURS = 30 * 24.0


class RunTime(NamedTuple):
    """A run's computation on one layout: the ideal time and what communication adds to it."""

    time: TrainingTime
    comm_overhead: float  # fraction of the ideal time added by communication (core/speed/comm.py)

    @property
    def compute_hours(self) -> float:
        """Wall-clock hours of the computation with its communication (no setup)."""
        return self.time.wall_hours * (1.0 + self.comm_overhead)

    @property
    def scaling_efficiency(self) -> float:
        return 1.0 / (1.0 + self.comm_overhead)


def run_time(
    sc: Scenario,
    acc: Accelerator,
    layout: Layout,
    *,
    batch: int | None = None,
    accumulation: int | None = None,
    tokens: float | None = None,
    costs: TokenCosts | None = None,
) -> RunTime:
    """The scenario's run on `layout` (its ZeRO stage is the scenario's): ideal time and communication overhead, each
    step `accumulation` micro-batches of `batch` sequences per rank (default: the scenario's). `costs`:
    token_costs(sc, acc), when the caller times the scenario on many layouts of the part."""
    t = training_time(sc, acc, layout.devices, tokens, layout=layout, costs=costs)  # the layout: the offload's steps (core/speed/offload.py)
    comm = training_comm(sc, sc.architecture, acc, layout, t.flops_per_token, t.peak_tflops_per_device * t.mfu, batch=batch, accumulation=accumulation)
    return RunTime(t, comm.overhead_fraction)


def run_hours(sc: Scenario, acc: Accelerator, layout: Layout, costs: TokenCosts, *, batch: int, accumulation: int) -> tuple[float, float]:
    """run_time's (compute_hours, scaling_efficiency) over the scenario's tokens, from the same formulas without the
    models written out: the planner's search times thousands of layouts (core/plan/train.py)."""
    if sc.train_tokens is None or sc.train_tokens <= 0 or layout.devices < 1:
        rt = run_time(sc, acc, layout, batch=batch, accumulation=accumulation, costs=costs)  # its own message
        return rt.compute_hours, rt.scaling_efficiency
    s = training_seconds(sc, acc, layout.devices, sc.train_tokens, layout, costs)
    overhead = comm_step(sc, sc.architecture, acc, layout, costs.flops_per_token, costs.peak.tflops * s.mfu, batch=batch, accumulation=accumulation).overhead_fraction
    return s.seconds / SECONDS_PER_HOUR * (1.0 + overhead), 1.0 / (1.0 + overhead)


def billed_hours(compute_hours: float, setup_hours: float = SETUP_HOURS) -> float:
    """Hours each rented instance is paid for: setup + the computation with communication."""
    return setup_hours + compute_hours


def run_usd(instances: int, usd_per_instance_hour: float, hours: float) -> float:
    """Whole instances x price per instance-hour x billed hours."""
    return instances * usd_per_instance_hour * hours


def reserved_hours(hours: float, res: Reservation) -> float | None:
    """Hours a reservation bills for a run of `hours`: whole term increments (the longer step past its
    long_term_from_hours: an AWS Capacity Block runs 1-14 days by the day, then whole weeks), at least the minimum
    term; None past its longest term (Reservation.term_hours)."""
    return res.term_hours(hours)


def reserved_usd_per_instance_hour(row: PriceRow, res: Reservation) -> float | None:
    """The reservation's price of one instance of this row per hour: its published rate per device-hour, else the
    row's on-demand price (data/reservations.csv says which)."""
    if res.usd_per_device_hour is not None:
        return res.usd_per_device_hour * row.accelerators_per_instance
    return row.on_demand_usd_per_hour


class RunBill(NamedTuple):
    row: PriceRow
    instances: int
    usd_per_hour: float  # all the instances together
    hours: float  # the run: setup + computation with communication
    usd: float
    reservation: Reservation | None = None  # rented as this reserved cluster (None: on demand)
    paid_hours: float | None = None  # hours paid for: the run's, or the reservation's term (reserved_hours)

    @property
    def idle_reserved_hours(self) -> float:
        """Reserved hours paid for past the run's end (0 on demand)."""
        return 0.0 if self.paid_hours is None else max(0.0, self.paid_hours - self.hours)


def bill(
    row: PriceRow, devices: int, compute_hours: float, *, spot: bool = False, setup_hours: float = SETUP_HOURS, reservation: Reservation | None = None
) -> RunBill | None:
    """`devices` devices of this row for a run of `compute_hours` (with communication), as whole instances; None
    when the row has no price of that kind, or the instances are more than one on-demand order of its provider holds
    (data/providers.csv's max_devices). With a `reservation`: the reserved cluster's bill (its size range, its term:
    reserved_hours), None for spot (a reservation is not a spot price) or a size it does not rent."""
    instances = instances_for(row, devices)
    hours = billed_hours(compute_hours, setup_hours)
    if reservation is not None:
        price = None if spot else reserved_usd_per_instance_hour(row, reservation)
        if price is None or not reservation_holds(reservation, row, instances):
            return None
        paid = reserved_hours(hours, reservation)
        if paid is None:
            return None  # longer than the product reserves (an AWS Capacity Block: 182 days)
        return RunBill(row, instances, instances * price, hours, run_usd(instances, price, paid), reservation, paid)
    price = instance_usd_per_hour(row, spot)
    if price is None or not on_demand_ok(row, instances):
        return None
    return RunBill(row, instances, instances * price, hours, run_usd(instances, price, hours), None, hours)


def cheapest_bill(
    accelerator_id: str,
    devices: int,
    tensor_parallel: int,
    compute_hours: float,
    rows: tuple[PriceRow, ...] | None = None,
    *,
    spot: bool = False,
    setup_hours: float = SETUP_HOURS,
) -> RunBill | None:
    """The cheapest bill for `devices` devices among the rows a training run can rent (one instance holding the
    tensor-parallel group, or several whole nodes on a cluster network: pricing.training_rows_for; or a provider's
    reserved cluster, its term billed: pricing.reserved_rows_for); ties broken by provider and instance name, as the
    planner breaks them."""
    bills = [b for r in training_rows_for(accelerator_id, rows, tensor_parallel, devices) if (b := bill(r, devices, compute_hours, spot=spot, setup_hours=setup_hours))]
    bills += [
        b
        for r, res in reserved_rows_for(accelerator_id, rows, tensor_parallel, devices)
        if (b := bill(r, devices, compute_hours, spot=spot, setup_hours=setup_hours, reservation=res))
    ]
    return min(bills, key=lambda b: (b.usd, b.row.provider, b.row.instance_type)) if bills else None
