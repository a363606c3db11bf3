"""The model preset catalog (data/models.json) and id look-ups."""

from __future__ import annotations

import difflib
import json
from functools import cache, cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.model.architecture import Architecture
from core.model.hf_config import parse_hf_config
from core.model.shape import representative_architecture
from core.text import described_pattern

DATA_DIR = Path(__file__).resolve().parent.parent.parent / "data"


class Preset(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=described_pattern(r"^[a-z0-9][a-z0-9.\-]*$", "lower-case letters, digits, '.' and '-' only, starting with a letter or digit"))
    name: str
    family: str
    hf_repo: str | None = None
    published_params: float = Field(gt=0)
    published_params_source: str = Field(min_length=3)
    source: str = Field(min_length=3)
    as_of: str = Field(pattern=described_pattern(r"^\d{4}-\d{2}-\d{2}$", "a date written YYYY-MM-DD"))
    # What the published count counts: "main-model" (what loads: total_params), "checkpoint" (every stored
    # weight: total_params + multi-token-prediction layers), "checkpoint+stored-head" (a tied model whose checkpoint
    # also stores lm_head), or "rounded" (a model-card figure such as "7B", good to its last digit).
    published_params_basis: Literal["main-model", "checkpoint", "checkpoint+stored-head", "rounded"] = "checkpoint"
    # Mixture of experts: the model card's active count, and whether it leaves out the embedding table (gpt-oss)
    # or the embedding and the output head (GLM-4.5).
    active_params_published: float | None = Field(default=None, gt=0)
    active_params_basis: Literal["all", "without-embedding", "without-embedding-and-head"] = "all"
    published_format: Literal["bf16", "fp16", "fp32", "fp8", "mxfp4"] | None = None
    context_length: int | None = Field(default=None, ge=1)
    config: dict[str, Any] | None = None
    params: float | None = Field(default=None, gt=0)
    notes: str = ""

    @model_validator(mode="after")
    def _one_description(self) -> Preset:
        if (self.config is None) == (self.params is None):
            raise ValueError("a preset has either a config or a bare params count")
        return self

    @cached_property
    def architecture(self) -> Architecture:
        if self.config is not None:
            return parse_hf_config(self.config, self.name)
        return representative_architecture(self.params or 0, self.name)


@cache
def load_presets(path: Path | None = None) -> dict[str, Preset]:
    path = path or DATA_DIR / "models.json"
    rows = json.loads(path.read_text())
    presets: dict[str, Preset] = {}
    for i, row in enumerate(rows):
        try:
            p = Preset(**row)
        except Exception as exc:
            raise ValueError(f"{path.name} item {i} ({row.get('id', '?')}): {exc}") from None
        if p.id in presets:
            raise ValueError(f"{path.name}: duplicate id {p.id!r}")
        presets[p.id] = p
    return presets


def preset_ids() -> frozenset[str]:
    return _preset_ids()


@cache
def _preset_ids() -> frozenset[str]:
    return frozenset(load_presets())


def preset(preset_id: str) -> Preset:
    return load_presets()[preset_id]


@cache
def accelerator_ids() -> frozenset[str]:
    from core.catalog.accelerators import load_accelerators

    return frozenset(a.id for a in load_accelerators())


def suggest(value: str, options: frozenset[str]) -> str:
    close = difflib.get_close_matches(str(value).lower(), sorted(options), n=3, cutoff=0.5)
    return f" (did you mean: {', '.join(close)}?)" if close else ""
