"""Which model architectures each serving engine has an implementation for (data/engine_models.csv, one sourced row per
engine), by the checkpoint's config.json `model_type`: DeepSpeed-MII builds an engine for a dozen model types and
refuses any other; TensorRT-LLM's PyTorch backend has no Gemma 2, OLMo or Falcon; mlx-lm no Falcon. A row either lists
the model types the engine runs (an allow-list: DeepSpeed-MII dispatches on the exact string) or those it refuses
among the catalog's (the others are not checked: vLLM, SGLang and Transformers fall back on Transformers' own code).
A model without a config.json (a parameter count) is not checked."""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.catalog.accelerators import DATA_DIR, read_catalog_rows
from core.model.hf_config import safe_label
from core.text import listed

ENGINE_MODELS_CSV = DATA_DIR / "engine_models.csv"


class EngineModels(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    engine: str
    model_types: frozenset[str] = frozenset()  # the only model types it runs; empty: any not refused
    refused_model_types: frozenset[str] = frozenset()
    source: str = Field(min_length=10)
    as_of: dt.date
    note: str = ""  # why it refuses one, in a few words

    @field_validator("model_types", "refused_model_types", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return frozenset(value.split()) if isinstance(value, str) else value

    def runs(self, model_type: str) -> bool:
        return (not self.model_types or model_type in self.model_types) and model_type not in self.refused_model_types


@functools.cache
def load_engine_models() -> dict[str, EngineModels]:
    return {r.engine: r for r in read_catalog_rows(ENGINE_MODELS_CSV, EngineModels)}


def checkpoint_model_type(model: Any) -> str | None:
    """The `model_type` of the checkpoint's config.json the engines dispatch on (a preset's stored config or a pasted
    one; a multimodal model's outer type, gemma3 rather than its text model's gemma3_text), or None without one."""
    from core.catalog.presets import preset

    config = (preset(model).config if isinstance(model, str) else getattr(model, "hf_config", None)) or {}
    if not isinstance(config, dict):
        return None
    # a pasted config's value is untrusted: plain characters only, as the config reader keeps it (safe_label)
    return safe_label(config.get("model_type")) or None


def model_problem(engine: str, model: Any, model_name: str, engine_name: str | None = None) -> str | None:
    """Why `engine` (written `engine_name`) has no implementation of `model`'s architecture, in one line, or None."""
    model_type = checkpoint_model_type(model)
    row = load_engine_models().get(engine)
    if model_type is None or row is None or row.runs(model_type):
        return None
    from core.memory.engines import ENGINES

    others = [ENGINES[e].label for e in ENGINES if e in load_engine_models() and load_engine_models()[e].runs(model_type)]
    why = f": {row.note}" if row.note else ""
    return f"{engine_name or engine} does not run {model_name} (model_type {model_type}){why}; it runs in {listed(others, 'engines')}"
