"""What each serving engine loads and caches (data/engine_formats.csv, one sourced row per engine): the weight formats
it reads, those the planner tries for it, and the formats it stores the KV cache in.

An engine loads only the weight formats its row lists (llama.cpp reads GGUF files, mlx-lm MLX's packing, TensorRT-LLM
no bitsandbytes or GGUF) and caches K and V only in the formats its row lists (llama.cpp's Q8_0 / Q4_0 blocks, no
FP8; vLLM's FP8, no GGUF blocks). Where each format runs, part by part, is data/format_kernels.csv's (weights) and
data/kv_cache_kernels.csv's (KV cache)."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Container
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from core.catalog.accelerators import DATA_DIR, read_catalog_rows
from core.memory.engines import ENGINES
from core.model.formats import FORMATS, KV_CACHE_BYTES
from core.text import listed

ENGINE_FORMATS_CSV = DATA_DIR / "engine_formats.csv"


def _ids_of(known: Container[str], what: str) -> Callable[[object], object]:
    """A before-validator of a list of ids of `known` written with spaces between them."""

    def split(value: object) -> object:
        """A space-separated list of ids of `known`, as a tuple (each checked to be one)."""
        if not isinstance(value, str):
            return value
        ids = tuple(value.split())
        if not ids or (unknown := [i for i in ids if i not in known]):
            raise ValueError(f"write {what} separated by spaces (unknown: {', '.join(unknown) or 'none given'})")
        return ids

    return split


FormatIds = Annotated[tuple[str, ...], BeforeValidator(_ids_of(FORMATS, "weight-format ids of core/model/formats.py"))]
KvFormatIds = Annotated[tuple[str, ...], BeforeValidator(_ids_of(KV_CACHE_BYTES, "KV-cache formats of core/model/formats.KV_CACHE_BYTES"))]


class EngineFormats(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    engine: str
    weights_formats: FormatIds  # every format the engine loads
    searched_formats: FormatIds  # those the planner tries for it (a subset: one 16-bit, FP8, 4-bit)
    kv_cache_formats: KvFormatIds  # every format it stores K and V in (its flag's values, as this project names them)
    source: str = Field(min_length=10)
    as_of: dt.date
    note: str = ""  # what the engine does with the formats it does not load, where that helps a reader
    kv_cache_source: str = Field(min_length=10)  # where kv_cache_formats is read
    kv_cache_note: str = ""  # "<format>: <text>", said when that format is asked for (a cache it has that is not modelled)

    @model_validator(mode="after")
    def _searched_are_loaded(self) -> EngineFormats:
        if extra := [f for f in self.searched_formats if f not in self.weights_formats]:
            raise ValueError(f"searched_formats {', '.join(extra)} are not among weights_formats")
        return self


@functools.cache
def load_engine_formats() -> dict[str, EngineFormats]:
    return {r.engine: r for r in read_catalog_rows(ENGINE_FORMATS_CSV, EngineFormats)}


def loads(engine: str, weights_format: str) -> bool:
    """Whether `engine` loads weights in `weights_format` (an engine without a row loads any)."""
    row = load_engine_formats().get(engine)
    return row is None or weights_format in row.weights_formats


def caches(engine: str, kv_cache_format: str) -> bool:
    """Whether `engine` stores its KV cache in `kv_cache_format` (an engine without a row stores any)."""
    row = load_engine_formats().get(engine)
    return row is None or kv_cache_format in row.kv_cache_formats


def planned_formats(engine: str) -> tuple[str, ...]:
    """The weight formats the planner tries for `engine`, in its row's order."""
    return load_engine_formats()[engine].searched_formats


def format_name(weights_format: str) -> str:
    fmt = FORMATS.get(weights_format)
    return fmt.name if fmt is not None else weights_format


def kv_format_name(kv_cache_format: str) -> str:
    return kv_cache_format.upper()


def load_problem(weights_format: str, engine: str, engine_name: str | None = None) -> str | None:
    """Why `engine` does not load `weights_format` at all, in one line naming what it loads, or None."""
    if loads(engine, weights_format):
        return None
    row = load_engine_formats()[engine]
    note = f" ({row.note})" if row.note else ""
    others = [ENGINES[e].label for e, r in load_engine_formats().items() if weights_format in r.weights_formats and e in ENGINES]
    where = f"; {format_name(weights_format)} loads in {listed(others, 'engines', 3)}" if others else ""
    return f"{engine_name or engine} does not load {format_name(weights_format)} weights{note}: it loads {', '.join(format_names(row.weights_formats))}{where}"


def cache_problem(kv_cache_format: str, engine: str, engine_name: str | None = None) -> str | None:
    """Why `engine` does not store a KV cache in `kv_cache_format` anywhere, in one line naming the formats it stores
    and the engines that store that one, or None."""
    if caches(engine, kv_cache_format):
        return None
    row = load_engine_formats()[engine]
    others = [ENGINES[e].label for e, r in load_engine_formats().items() if kv_cache_format in r.kv_cache_formats and e in ENGINES]
    name = kv_format_name(kv_cache_format)
    where = f"; {name} KV caches: {listed(others, 'engines', 3)}" if others else ""
    stores = ", ".join(kv_format_name(k) for k in row.kv_cache_formats)
    said, _, about = row.kv_cache_note.partition(": ")  # a note names the format it is about ("int8: ...")
    note = f" ({about})" if about and said == kv_cache_format else ""
    return f"{engine_name or engine} has no {name} KV cache{note}: it caches K and V in {stores}{where}"


def _family(weights_format: str) -> str:
    """A format's name in a list of what an engine loads: GGUF's and MLX's types each once."""
    for prefix, family in (("gguf-", "GGUF"), ("mlx-", "MLX-quantized")):
        if weights_format.startswith(prefix):
            return family
    return format_name(weights_format)


def format_names(formats: tuple[str, ...]) -> list[str]:
    """Formats as a reader names them in a list: GGUF's and MLX's types each once."""
    return list(dict.fromkeys(_family(f) for f in formats))
