"""Which providers rent several nodes on one cluster network (data/providers.csv): a training job spans several
instances only there. A marketplace of single hosts (vast.ai), an aggregator of other clouds' single machines or a
sandbox service rents machines with ordinary networking between them, and a catalog row of one is one host: the
planner runs it one instance at a time. Each row dated and sourced.

How many devices one on-demand order may hold (`max_devices`, issue 26 "rentable and sane"): a provider's published
self-serve cluster size where it has one (Lambda's 1-Click Clusters, 16-512 GPUs; Modal's multi-node clusters, up to
64 GPUs), else DEFAULT_MAX_DEVICES. Beyond it a run or a fleet needs a reservation or a quota increase, which no
on-demand price row prices: the bill leaves it out (core/money/run_bill.py, core/money/serving.py's fleet)."""

from __future__ import annotations

import functools

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.catalog.accelerators import DATA_DIR, PartialDate, read_catalog_rows

PROVIDERS_CSV = DATA_DIR / "providers.csv"


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
