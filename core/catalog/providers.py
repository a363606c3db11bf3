"""Which providers rent several nodes on one cluster network (data/providers.csv): a training job spans several
instances only there. A marketplace of single hosts (vast.ai), an aggregator of other clouds' single machines or a
sandbox service rents machines with ordinary networking between them, and a catalog row of one is one host: the
planner runs it one instance at a time. Each row dated and sourced."""

from __future__ import annotations

import functools

from pydantic import BaseModel, ConfigDict, Field

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
