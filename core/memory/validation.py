"""Our estimates next to published measured peak memory (data/validation.json):
the Method page's table and the tests' reference cases."""

from __future__ import annotations

import json
from functools import cache

from pydantic import BaseModel, ConfigDict

from core.catalog.presets import DATA_DIR
from core.memory.estimate import estimate_memory
from core.scenario import Scenario


class ValidationCase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    label: str
    scenario: dict
    measured_bytes: float
    metric: str
    source: str
    as_of: str
    known_miss: str | None = None

    def estimated_bytes(self) -> float:
        """Our estimate of what was measured: the allocated peak (torch.cuda.max_memory_allocated sees neither the
        CUDA context nor the allocator's reserve)."""
        r = estimate_memory(Scenario.model_validate(self.scenario))
        return float(r.allocated_peak_bytes)

    def error(self) -> float:
        return self.estimated_bytes() / self.measured_bytes - 1


@cache
def load_cases() -> tuple[ValidationCase, ...]:
    rows = json.loads((DATA_DIR / "validation.json").read_text())
    return tuple(ValidationCase(**r) for r in rows)
