"""Which weight formats each serving engine loads (data/engine_formats.csv, one sourced row per engine), and where it has
kernels for them, per part (data/format_kernels.csv, one sourced row each).

An engine loads only the formats its row lists (llama.cpp reads GGUF files, mlx-lm MLX's packing, TensorRT-LLM no
bitsandbytes or GGUF), and its row's `searched_formats` are the ones the planner tries (core/plan/serve.py).

A (format, engine) pair the table lists runs only where a row says so: the first row whose format and engine match
and whose `accelerator_pattern` matches the part's id decides. `kernel`: the engine keeps the weights in the format
and multiplies them there (or dequantizes them tile by tile inside its kernels); `dequantized`: it converts them to
BF16 as it loads (Transformers without its MXFP4 kernels), so the weights take 16 bits; `unsupported`: the engine
refuses the checkpoint there. A part no row of a listed pair matches is not documented to run it. Each row also says
whether the engine caches K and V in FP8 with that format there (gpt-oss's attention sinks: an FP8 KV cache on
Blackwell, but not in TensorRT-LLM's or SGLang's Hopper kernels).

Pairs the table does not list are not restricted by it. Hardware of one's own and Groq's and Cerebras' chips are not checked (core/catalog/engine_hardware.py)."""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from core.catalog.accelerators import DATA_DIR, Accelerator, read_catalog_rows
from core.catalog.engine_hardware import UNCHECKED_VENDORS
from core.catalog.row_types import AcceleratorPattern, EngineIds
from core.memory.engines import ENGINES
from core.model.formats import FORMATS
from core.text import listed

FORMAT_KERNELS_CSV = DATA_DIR / "format_kernels.csv"
ENGINE_FORMATS_CSV = DATA_DIR / "engine_formats.csv"

Runs = Literal["kernel", "dequantized", "unsupported"]


def _format_ids(value: object) -> object:
    """A space-separated list of core/model/formats.FORMATS ids, as a tuple (each checked to be one)."""
    if not isinstance(value, str):
        return value
    ids = tuple(value.split())
    if not ids or (unknown := [i for i in ids if i not in FORMATS]):
        raise ValueError(f"write weight-format ids of core/model/formats.py separated by spaces (unknown: {', '.join(unknown) or 'none given'})")
    return ids


FormatIds = Annotated[tuple[str, ...], BeforeValidator(_format_ids)]


class EngineFormats(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    engine: str
    weights_formats: FormatIds  # every format the engine loads
    searched_formats: FormatIds  # those the planner tries for it (a subset: one 16-bit, FP8, 4-bit)
    source: str = Field(min_length=10)
    as_of: dt.date
    note: str = ""  # what the engine does with the formats it does not load, where that helps a reader

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


def planned_formats(engine: str) -> tuple[str, ...]:
    """The weight formats the planner tries for `engine`, in its row's order."""
    return load_engine_formats()[engine].searched_formats


def load_problem(weights_format: str, engine: str, engine_name: str | None = None) -> str | None:
    """Why `engine` does not load `weights_format` at all, in one line naming what it loads, or None."""
    if loads(engine, weights_format):
        return None
    row = load_engine_formats()[engine]
    names = format_names(row.weights_formats)
    note = f" ({row.note})" if row.note else ""
    others = [ENGINES[e].label for e, r in load_engine_formats().items() if weights_format in r.weights_formats and e in ENGINES]
    where = f"; {_format_name(weights_format)} loads in {listed(others, 'engines', 3)}" if others else ""
    return f"{engine_name or engine} does not load {_format_name(weights_format)} weights{note}: it loads {', '.join(names)}{where}"


def format_names(formats: tuple[str, ...]) -> list[str]:
    """Formats as a reader names them in a list: GGUF's and MLX's types each once."""
    return list(dict.fromkeys(_family(f) for f in formats))


def _family(weights_format: str) -> str:
    """A format's name in a list of what an engine loads: GGUF's and MLX's types each once."""
    for prefix, family in (("gguf-", "GGUF"), ("mlx-", "MLX-quantized")):
        if weights_format.startswith(prefix):
            return family
    return _format_name(weights_format)


class FormatKernels(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    weights_format: str = Field(min_length=1)  # an id of core/model/formats.FORMATS (a test checks)
    engines: EngineIds
    accelerator_pattern: AcceleratorPattern
    runs: Runs
    fp8_kv_cache: bool
    source: str = Field(min_length=10)
    as_of: dt.date
    note: str = ""


@functools.cache
def load_format_kernels() -> tuple[FormatKernels, ...]:
    return read_catalog_rows(FORMAT_KERNELS_CSV, FormatKernels)


@functools.cache
def _listed_pairs() -> frozenset[tuple[str, str]]:
    return frozenset((r.weights_format, e) for r in load_format_kernels() for e in r.engines.split())


def _restricted(weights_format: str, engine: str, acc: Accelerator) -> bool:
    return (weights_format, engine) in _listed_pairs() and acc.vendor not in UNCHECKED_VENDORS


@functools.cache
def _row(weights_format: str, engine: str, accelerator_id: str) -> FormatKernels | None:
    for r in load_format_kernels():
        if r.weights_format == weights_format and engine in r.engines.split() and re.search(r.accelerator_pattern, accelerator_id):
            return r
    return None


def format_problem(weights_format: str, engine: str, acc: Accelerator, engine_name: str | None = None) -> str | None:
    """Why `engine` (written `engine_name`, else its id) does not run `weights_format` in that format on `acc`, in one
    line, or None where it does (or the table does not restrict it)."""
    if not _restricted(weights_format, engine, acc):
        return None
    label, name = _format_name(weights_format), engine_name or engine
    row = _row(weights_format, engine, acc.id)
    if row is None:
        return f"{name} has no documented {label} kernels on {acc.name} (data/format_kernels.csv)"
    if row.runs == "kernel":
        return None
    why = f": {row.note}" if row.note else ""
    if row.runs == "dequantized":
        return f"{name} dequantizes {label} to BF16 on {acc.name}{why}"
    return f"{name} does not run {label} on {acc.name}{why}"


def weights_problem(weights_format: str, engine: str, acc: Accelerator, engine_name: str | None = None) -> str | None:
    """Why `engine` cannot serve weights in `weights_format` on `acc`: it does not load the format, or has no kernels
    for it there (one line), or None."""
    return load_problem(weights_format, engine, engine_name) or format_problem(weights_format, engine, acc, engine_name)


# AWQ and GPTQ checkpoints store the same bytes (core/model/formats.py): a part serves the first of them its engine
# has kernels for there (vLLM's GPTQ on Volta, which has no AWQ kernels), not both
FOUR_BIT = ("awq-4bit", "gptq-4bit")


def four_bit_format(engine: str, acc: Accelerator) -> str | None:
    """The 4-bit checkpoint `engine` serves on `acc`: AWQ where it runs, else GPTQ, else None."""
    return next((f for f in FOUR_BIT if weights_problem(f, engine, acc) is None), None)


def kernels_problem(weights_format: str, kv_cache_format: str, engine: str, acc: Accelerator, engine_name: str | None = None) -> str | None:
    """Why `engine` cannot run these weights (it does not load the format, or has no kernels for it on `acc`), or
    their KV cache in FP8, on `acc` (one line), or None: the estimate's warning, the serving table's and the planner's
    rule."""
    if (problem := weights_problem(weights_format, engine, acc, engine_name)) is not None:
        return problem
    if kv_cache_format == "fp8" and not fp8_kv_with(weights_format, engine, acc):
        name = engine_name or engine
        return f"{name} has no FP8 KV cache with {_format_name(weights_format)} weights on {acc.name} (data/format_kernels.csv): it caches K and V in 16 bits"
    return None


def _format_name(weights_format: str) -> str:
    fmt = FORMATS.get(weights_format)
    return fmt.name if fmt is not None else weights_format


def fp8_kv_with(weights_format: str, engine: str, acc: Accelerator) -> bool:
    """Whether `engine` caches K and V in FP8 with `weights_format` on `acc`: the row's word where the table restricts
    the pair (False where no row runs it, or the engine does not load the format), True where it does not (the
    engine's own FP8 KV rule applies)."""
    if not loads(engine, weights_format):
        return False
    if not _restricted(weights_format, engine, acc):
        return True
    row = _row(weights_format, engine, acc.id)
    return row is not None and row.fp8_kv_cache
