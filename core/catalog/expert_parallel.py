"""Which serving engines run a mixture-of-experts model expert-parallel, and with which flags
(data/expert_parallel.csv, one sourced row per engine). Used by core/speed/expert_parallel.py's callers to offer the
wide-EP layout only where the engine has it; an engine with no row has no expert parallelism here."""

from __future__ import annotations

import datetime as dt
import functools

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.catalog.accelerators import DATA_DIR, read_catalog_rows

EXPERT_PARALLEL_CSV = DATA_DIR / "expert_parallel.csv"


class ExpertParallelSupport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    engine: str = Field(min_length=2)
    supported: bool
    expert_parallel_flag: str = ""
    attention_data_parallel_flag: str = ""
    all_to_all: str = ""
    load_balancer_flag: str = ""
    source: str = Field(min_length=10)
    as_of: dt.date
    note: str = ""

    @model_validator(mode="after")
    def _flags(self) -> ExpertParallelSupport:
        if self.supported and not (self.expert_parallel_flag and self.attention_data_parallel_flag and self.load_balancer_flag):
            raise ValueError(f"{self.engine}: an engine with expert parallelism names its EP, attention-DP and load-balancer flags")
        if not self.supported and self.expert_parallel_flag:
            raise ValueError(f"{self.engine}: an engine without expert parallelism has no EP flag")
        return self


@functools.cache
def load_expert_parallel() -> dict[str, ExpertParallelSupport]:
    return {r.engine: r for r in read_catalog_rows(EXPERT_PARALLEL_CSV, ExpertParallelSupport)}


def supports_expert_parallel(engine: str) -> bool:
    row = load_expert_parallel().get(engine)
    return row is not None and row.supported
