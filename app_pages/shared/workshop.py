"""One-click workshop scenarios (data/workshop_presets.json)."""

from __future__ import annotations

import json
from functools import cache

from pydantic import BaseModel, ConfigDict

from core.catalog.presets import DATA_DIR
from core.scenario import Scenario


class WorkshopPreset(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    label: str
    page: str
    scenario: Scenario


@cache
def load_workshop_presets() -> tuple[WorkshopPreset, ...]:
    return tuple(WorkshopPreset(**row) for row in json.loads((DATA_DIR / "workshop_presets.json").read_text()))
