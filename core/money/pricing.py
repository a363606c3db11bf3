"""Turning price rows into the cost of devices for a time.

A training run rents whole instances: n devices on instances of k devices
cost ceil(n / k) instance-hours per hour, idle devices included. Serving
replicas of d devices pack floor(k / d) to an instance when they fit in one.
A tensor-parallel group must sit inside one instance (it all-reduces every
layer, Shoeybi et al. 2019), so rows with fewer devices than the tensor-parallel
size are not offered for that layout; data and pipeline parallelism may span
instances, but only instances that are whole nodes of a provider that rents
them on a cluster network (forms_cluster, which the planner uses too,
core/plan/train.py). TPU rows price one chip of a slice whose chips share the
ICI interconnect, so they are offered for any group.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from core.catalog.accelerators import get_accelerator
from core.catalog.price_trust import billable_prices
from core.catalog.prices import PriceRow, region_text
from core.catalog.providers import Reservation, can_serve, max_devices, on_demand_cluster, reservation_for, within_on_demand
from core.speed.comm import DEVICES_PER_NODE
from core.units import SECONDS_PER_HOUR

# 8,760 hours a year / 12: the month cloud price pages quote (AWS and Google
# Cloud pricing calculators use 730 hours per month).
HOURS_PER_MONTH = 730.0
DAYS_PER_MONTH = HOURS_PER_MONTH / 24.0


def instance_usd_per_hour(row: PriceRow, spot: bool = False) -> float | None:
    return row.spot_usd_per_hour if spot else row.on_demand_usd_per_hour


def instances_for(row: PriceRow, devices: int) -> int:
    return math.ceil(devices / row.accelerators_per_instance)


def whole_node(row: PriceRow, kind: str) -> bool:
    """Whether an instance of this row is a whole node (8 GPUs, 16 Trainium chips, a TPU pod's 256 chips)."""
    return row.accelerators_per_instance >= DEVICES_PER_NODE[kind]


def forms_cluster(row: PriceRow, kind: str) -> bool:
    """Whether several on-demand instances of this row can run one training job: whole nodes of a provider that rents
    them on a cluster network on demand (data/providers.csv). The data-parallel ranks exchange gradients every step,
    which smaller instances, a marketplace's single hosts and a provider's on-demand VMs without its cluster fabric
    (Lambda's: the fabric comes with a reserved 1-Click Cluster, reserved_cluster) have no network for."""
    return whole_node(row, kind) and on_demand_cluster(row.provider, row.instance_type)


def reserved_cluster(row: PriceRow, kind: str) -> Reservation | None:
    """The provider's reserved cluster product that rents this row's accelerator on whole nodes of its instance type
    (data/reservations.csv), None where there is none."""
    if not whole_node(row, kind):
        return None
    return reservation_for(row.provider, row.accelerator_id, row.instance_type)


def reservation_holds(res: Reservation, row: PriceRow, instances: int) -> bool:
    """Whether `instances` instances of this row are a cluster the reservation rents (its size range)."""
    return res.min_devices <= instances * row.accelerators_per_instance <= res.max_devices


def on_demand_ok(row: PriceRow, instances: int) -> bool:
    """Whether `instances` instances of this row fit in one on-demand order of its provider (data/providers.csv's
    max_devices: beyond it a reservation or a quota increase, which no on-demand row prices)."""
    return within_on_demand(row.provider, instances * row.accelerators_per_instance)


def wider_orders(priced: Iterable[tuple[float, PriceRow]]) -> list[tuple[float, PriceRow, float]]:
    """Cheapest first, the rows whose provider's on-demand order (data/providers.csv max_devices; a provider the
    catalog does not list: no bound) holds more devices than every cheaper row's, each with the bound of the step
    before it (0 for the first): a run or a fleet past one provider's order is priced on the next. The training
    planner and the serving planner both rent this way (core/plan/train.py, core/money/serving.py)."""
    out: list[tuple[float, PriceRow, float]] = []
    bound = 0.0
    for price, r in sorted(priced, key=lambda t: (t[0], t[1].provider, t[1].instance_type)):
        own = float(max_devices(r.provider) or math.inf)
        if own > bound:
            out.append((price, r, bound))
            bound = own
    return out


def training_rows_for(accelerator_id: str, rows: tuple[PriceRow, ...] | None, tensor_parallel: int, devices: int) -> tuple[PriceRow, ...]:
    """rows_for, less the rows a training run of `devices` devices cannot rent on demand: one instance, or several that
    form a cluster (forms_cluster), within the provider's on-demand size (on_demand_ok)."""
    kind = get_accelerator(accelerator_id).kind
    return tuple(
        r
        for r in rows_for(accelerator_id, rows, tensor_parallel)
        if (devices <= r.accelerators_per_instance or forms_cluster(r, kind)) and on_demand_ok(r, instances_for(r, devices))
    )


def reserved_rows_for(accelerator_id: str, rows: tuple[PriceRow, ...] | None, tensor_parallel: int, devices: int) -> tuple[tuple[PriceRow, Reservation], ...]:
    """The rows a training run of `devices` devices can rent as a provider's reserved cluster (data/reservations.csv),
    each with its reservation."""
    kind = get_accelerator(accelerator_id).kind
    out = []
    for r in rows_for(accelerator_id, rows, tensor_parallel):
        res = reserved_cluster(r, kind)
        if res is not None and reservation_holds(res, r, instances_for(r, devices)):
            out.append((r, res))
    return tuple(out)


def run_usd_per_hour(row: PriceRow, devices: int, spot: bool = False) -> float | None:
    """Hourly price of renting `devices` devices as whole instances of this row."""
    price = instance_usd_per_hour(row, spot)
    return None if price is None else instances_for(row, devices) * price


def replica_usd_per_hour(row: PriceRow, devices_per_replica: int, spot: bool = False) -> float | None:
    """Hourly price of one serving replica when replicas pack onto instances."""
    price = instance_usd_per_hour(row, spot)
    if price is None:
        return None
    k = row.accelerators_per_instance
    if devices_per_replica <= k:
        return price / (k // devices_per_replica)
    return instances_for(row, devices_per_replica) * price


def fleet_instances(row: PriceRow, replicas: int, devices_per_replica: int) -> int:
    k = row.accelerators_per_instance
    if devices_per_replica <= k:
        return math.ceil(replicas / (k // devices_per_replica))
    return replicas * instances_for(row, devices_per_replica)


def rows_for(accelerator_id: str, rows: tuple[PriceRow, ...] | None = None, tensor_parallel: int = 1) -> tuple[PriceRow, ...]:
    """Rows of one accelerator (in the built-in catalog, or in `rows`) whose instances can hold a tensor-parallel group."""
    pool = by_accelerator(rows).get(accelerator_id, ())
    if tensor_parallel > 1 and get_accelerator(accelerator_id).kind == "tpu":
        tensor_parallel = 1
    return tuple(r for r in pool if r.accelerators_per_instance >= tensor_parallel)


def serving_rows_for(accelerator_id: str, rows: tuple[PriceRow, ...] | None = None, tensor_parallel: int = 1) -> tuple[PriceRow, ...]:
    """rows_for, less the rows of providers that may not host a serving endpoint (Colab: data/providers.csv)."""
    return tuple(r for r in rows_for(accelerator_id, rows, tensor_parallel) if can_serve(r.provider))


def _index(rows: tuple[PriceRow, ...]) -> dict[str, tuple[PriceRow, ...]]:
    out: dict[str, list[PriceRow]] = {}
    for r in rows:
        out.setdefault(r.accelerator_id, []).append(r)
    return {k: tuple(v) for k, v in out.items()}


# The last few price lists indexed, by identity (an uploaded list is one tuple kept for the session; hashing its
# rows on each of the thousands of look-ups a page makes would cost more than the look-ups).
_INDEXES: dict[int, tuple[tuple[PriceRow, ...], dict[str, tuple[PriceRow, ...]]]] = {}
# Each keeps its list's rows alive (a list at the app's cap, 64,000 characters, is ~1.7 MB of rows) outside the app's
# byte-bounded caches (app_pages/shared/cache.py), so only as many as runs in progress can use: 16 kept 28 MB.
_MAX_INDEXES = 4


def by_accelerator(rows: tuple[PriceRow, ...] | None = None) -> dict[str, tuple[PriceRow, ...]]:
    """The rows of a price list (the catalog's billable rows when None: the same tuple all day) by accelerator."""
    rows = billable_prices(rows)
    hit = _INDEXES.get(id(rows))
    if hit is not None and hit[0] is rows:
        return hit[1]
    index = _index(rows)
    if len(_INDEXES) >= _MAX_INDEXES:
        _INDEXES.pop(next(iter(_INDEXES)), None)
    _INDEXES[id(rows)] = (rows, index)
    return index


def _cheapest(accelerator_id: str, rows: tuple[PriceRow, ...] | None, tensor_parallel: int, price: Callable[[PriceRow], float | None]) -> PriceRow | None:
    """The row with the lowest `price` (ties broken by provider and instance name)."""
    priced = [(p, r.provider, r.instance_type, r) for r in rows_for(accelerator_id, rows, tensor_parallel) if (p := price(r)) is not None]
    return min(priced, key=lambda t: t[:3])[3] if priced else None


def cheapest_run_row(accelerator_id: str, devices: int, rows: tuple[PriceRow, ...] | None = None, spot: bool = False, tensor_parallel: int = 1) -> PriceRow | None:
    """The row with the lowest hourly price for `devices` devices (whole instances)."""
    return _cheapest(accelerator_id, rows, tensor_parallel, lambda r: run_usd_per_hour(r, devices, spot))


def cheapest_replica_row(
    accelerator_id: str, devices_per_replica: int, rows: tuple[PriceRow, ...] | None = None, spot: bool = False, tensor_parallel: int = 1
) -> PriceRow | None:
    """The row with the lowest hourly price per serving replica (replicas packed)."""
    return _cheapest(accelerator_id, rows, tensor_parallel, lambda r: replica_usd_per_hour(r, devices_per_replica, spot))


def usd_per_million_tokens(tokens_per_s: float, usd_per_hour: float, utilisation: float = 1.0) -> float:
    """Price of a million tokens from a replica producing `tokens_per_s` while
    busy and busy a fraction `utilisation` of the hours paid for."""
    if not 0 < utilisation <= 1:
        raise ValueError("utilisation must be in (0, 1]")
    if tokens_per_s <= 0:
        raise ValueError("tokens_per_s must be > 0")
    return usd_per_hour / (tokens_per_s * SECONDS_PER_HOUR * utilisation) * 1e6


def label(row: PriceRow) -> str:
    return f"{row.provider} {row.instance_type} ({region_text(row.region)})"
