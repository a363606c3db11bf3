"""Which providers rent several nodes on one cluster network (data/providers.csv): a training job spans several
instances only there. A marketplace of single hosts (vast.ai), an aggregator of other clouds' single machines or a
sandbox service rents machines with ordinary networking between them, and a catalog row of one is one host: the
planner runs it one instance at a time. Each row dated and sourced.

How many devices one on-demand order may hold (`max_devices`, issue 26 "rentable and sane"): a provider's published
self-serve on-demand size where it has one (Modal's multi-node clusters, up to 64 GPUs), else DEFAULT_MAX_DEVICES.
Beyond it a run or a fleet needs a reservation or a quota increase: where the provider publishes a reserved cluster
product (data/reservations.csv: Lambda's 1-Click Clusters, 16-512 GPUs reserved by the week; AWS EC2 Capacity Blocks,
1-64 instances of one type by the day, then by the week up to 182 days, at their published rate) a training run is
priced as that reservation, its whole terms billed (core/money/run_bill.py); elsewhere it is left out (the bill and
core/money/serving.py's fleet). A provider whose cluster network comes only with its reservation (Lambda: its
on-demand instances are single VMs) rents a training job one on-demand instance at a time (`on_demand_cluster`)."""

from __future__ import annotations

import functools
import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.catalog.accelerators import DATA_DIR, PartialDate, read_catalog_rows

PROVIDERS_CSV = DATA_DIR / "providers.csv"
RESERVATIONS_CSV = DATA_DIR / "reservations.csv"


class Provider(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    provider: str = Field(min_length=1, max_length=64)
    multi_node: bool  # rents several nodes on a cluster network (InfiniBand, RoCE, EFA, ICI...) for the rows we list
    evidence: str = Field(min_length=3)
    as_of: PartialDate
    source: str = Field(min_length=3)
    single_host: str = ""  # instance types holding this text are single hosts even here (RunPod's Community Cloud)
    serves: bool = True  # may host a serving endpoint (Colab's terms allow interactive notebooks only)
    max_devices: int | None = Field(default=None, ge=1, le=100_000)  # one on-demand order's devices at most (None: the default)
    max_devices_source: str = ""  # where max_devices comes from (required with it)
    # whether a training job may span its on-demand instances (False: the cluster network comes only with a reserved
    # product of data/reservations.csv, as Lambda's InfiniBand comes with a 1-Click Cluster)
    on_demand_cluster: bool = True

    @model_validator(mode="after")
    def _sourced(self) -> Provider:
        if self.max_devices is not None and len(self.max_devices_source) < 3:
            raise ValueError(f"{self.provider}: max_devices needs a max_devices_source")
        return self


# A stated default, not a published figure: most clouds grant GPU and TPU capacity beyond a small default quota only
# on request (Google Cloud's on-demand TPU quota is 0 for every type but v2-8 and v3-8,
# https://cloud.google.com/tpu/docs/quota, read 2026-11), and the self-serve cluster products we found publish 64 GPUs
# (Modal) to 512 (Lambda). 64 devices is eight 8-GPU nodes: what a team can expect to rent on demand without a sales
# call. A run or fleet beyond it is left out rather than priced at an on-demand rate it would not get.
DEFAULT_MAX_DEVICES = 64


@functools.lru_cache(maxsize=1)
def load_providers() -> dict[str, Provider]:
    return {p.provider: p for p in read_catalog_rows(PROVIDERS_CSV, Provider)}


def spans_nodes(provider: str, instance_type: str = "") -> bool:
    """Whether a job may span several of this provider's instances (of this type). A provider the catalog does not
    list (a row of the person's own price CSV: their own cluster, which they know) may; names are matched without
    regard to case, so a row of one's own for "Vast" is Vast's."""
    known = load_providers().get(provider.lower())
    if known is None:
        return True
    return known.multi_node and not (known.single_host and known.single_host.lower() in instance_type.lower())


def can_serve(provider: str) -> bool:
    """Whether a provider's rows may host a model that serves traffic (False for Colab, whose FAQ disallows web
    services); a provider the catalog does not list may."""
    known = load_providers().get(provider.lower())
    return True if known is None else known.serves


def on_demand_cluster(provider: str, instance_type: str = "") -> bool:
    """Whether a training job may span several on-demand instances of this provider (of this type): spans_nodes, less
    a provider whose cluster network comes only with a reservation (data/providers.csv on_demand_cluster)."""
    known = load_providers().get(provider.lower())
    return spans_nodes(provider, instance_type) and (known is None or known.on_demand_cluster)


@functools.lru_cache(maxsize=1024)  # the catalog is read once (load_providers); the planner asks per price row
def max_devices(provider: str) -> int | None:
    """The most devices one on-demand order of this provider may hold (None: no bound, for a provider the catalog
    does not list: a row of the person's own price CSV, whose capacity they know)."""
    known = load_providers().get(provider.lower())
    if known is None:
        return None
    return known.max_devices or DEFAULT_MAX_DEVICES


def within_on_demand(provider: str, devices: int) -> bool:
    bound = max_devices(provider)
    return bound is None or devices <= bound


class Reservation(BaseModel):
    """A provider's reserved cluster product (data/reservations.csv): a cluster of min_devices-max_devices devices of
    the listed accelerators (on the listed instance types, where the product names them) on one network, rented for
    at least min_term_hours and billed in whole term increments; past long_term_from_hours, in whole
    long_term_increment_hours (AWS Capacity Blocks: 1-14 days by the day, then whole weeks), up to max_term_hours.
    usd_per_device_hour is the product's published rate; empty, the row's on-demand rate prices it (and the plan says
    so)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    provider: str = Field(min_length=1, max_length=64)
    product: str = Field(min_length=1, max_length=64)
    accelerator_ids: str = Field(min_length=1)  # ";"-separated accelerator ids the product rents
    min_devices: int = Field(ge=1, le=100_000)
    max_devices: int = Field(ge=1, le=100_000)
    min_term_hours: float = Field(gt=0, le=100_000)
    term_increment_hours: float = Field(gt=0, le=100_000)
    usd_per_device_hour: float | None = Field(default=None, gt=0, le=1_000)  # None: not published in our sources
    as_of: PartialDate
    source: str = Field(min_length=3)
    notes: str = ""
    # Added fields (never renamed): the instance types the product rents (";"-separated; empty: any whole-node row of
    # its accelerators at the provider), the longer step past a term and the longest term (empty: none).
    instance_types: str = ""
    long_term_from_hours: float | None = Field(default=None, gt=0, le=100_000)
    long_term_increment_hours: float | None = Field(default=None, gt=0, le=100_000)
    max_term_hours: float | None = Field(default=None, gt=0, le=100_000)

    @model_validator(mode="after")
    def _range(self) -> Reservation:
        if self.min_devices > self.max_devices:
            raise ValueError(f"{self.provider} {self.product}: min_devices above max_devices")
        if self.term_increment_hours > self.min_term_hours:
            raise ValueError(f"{self.provider} {self.product}: a term increment longer than the minimum term")
        if (self.long_term_from_hours is None) != (self.long_term_increment_hours is None):
            raise ValueError(f"{self.provider} {self.product}: long_term_from_hours and long_term_increment_hours go together")
        if self.long_term_from_hours is not None and self.long_term_increment_hours is not None:
            if self.long_term_from_hours % self.long_term_increment_hours or self.long_term_from_hours % self.term_increment_hours:
                raise ValueError(f"{self.provider} {self.product}: the longer step must start on a whole number of both steps")
        if self.max_term_hours is not None and self.max_term_hours < self.min_term_hours:
            raise ValueError(f"{self.provider} {self.product}: max_term_hours below the minimum term")
        return self

    @property
    def instances(self) -> frozenset[str]:
        """The instance types the product rents (empty: any whole-node row of its accelerators)."""
        return frozenset(t.strip() for t in self.instance_types.split(";") if t.strip())

    def rents(self, accelerator_id: str, instance_type: str | None = None) -> bool:
        """Whether the product rents this accelerator (on this instance type; None: on any of its instances)."""
        if accelerator_id not in self.accelerators:
            return False
        return instance_type is None or not self.instances or instance_type in self.instances

    def term_hours(self, hours: float) -> float | None:
        """Hours the product bills for a run of `hours`: whole term increments, at least the minimum term (the longer
        step past long_term_from_hours); None past its longest term (max_term_hours)."""
        step = self.term_increment_hours
        if self.long_term_from_hours is not None and self.long_term_increment_hours is not None and hours > self.long_term_from_hours + 1e-9:
            step = self.long_term_increment_hours
        paid = max(self.min_term_hours, math.ceil(hours / step - 1e-9) * step)
        return None if self.max_term_hours is not None and paid > self.max_term_hours + 1e-9 else paid

    @property
    def accelerators(self) -> frozenset[str]:
        return frozenset(a.strip() for a in self.accelerator_ids.split(";") if a.strip())

    @property
    def min_term_days(self) -> float:
        return self.min_term_hours / 24.0


@functools.lru_cache(maxsize=1)
def load_reservations() -> tuple[Reservation, ...]:
    return read_catalog_rows(RESERVATIONS_CSV, Reservation)


def reservation_for(provider: str, accelerator_id: str, instance_type: str | None = None) -> Reservation | None:
    """The reserved cluster product of this provider that rents this accelerator, on this instance type where one is
    given (AWS prices a Capacity Block per instance type); None: none published."""
    return next((r for r in load_reservations() if r.provider == provider.lower() and r.rents(accelerator_id, instance_type)), None)
