"""Where each serving engine has kernels for a weight format, per part (data/format_kernels.csv, one sourced row each),
and the one rule that says whether an engine can serve a scenario's weights and KV cache on a part.

A (format, engine) pair the table lists runs only where a row says so: the first row whose format and engine match
and whose `accelerator_pattern` matches the part's id decides. `kernel`: the engine keeps the weights in the format
and multiplies them there (or dequantizes them tile by tile inside its kernels: vLLM's FP8 Marlin runs FP8 weights
against 16-bit activations on Turing and Ampere); `dequantized`: it converts them to BF16 as it loads (Transformers
without its MXFP4 kernels), so the weights take 16 bits; `unsupported`: the engine refuses the checkpoint there. A
part no row of a listed pair matches is not documented to run it.

Which formats an engine loads at all is data/engine_formats.csv's (core/catalog/engine_formats.py); where it stores
its KV cache in a format, data/kv_cache_kernels.csv's (core/catalog/kv_cache_kernels.py). Pairs the table does not
list are not restricted by it. Hardware of one's own and Groq's and Cerebras' chips are not checked
(core/catalog/engine_hardware.py)."""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.catalog import KEYED_CACHE_ENTRIES
from core.catalog.accelerators import DATA_DIR, Accelerator, read_catalog_rows
from core.catalog.engine_formats import format_name, load_problem
from core.catalog.engine_hardware import UNCHECKED_VENDORS
from core.catalog.kv_cache_kernels import kv_cache_problem
from core.catalog.row_types import AcceleratorPattern, EngineIds
from core.model.architecture import Architecture

FORMAT_KERNELS_CSV = DATA_DIR / "format_kernels.csv"

Runs = Literal["kernel", "dequantized", "unsupported"]


class FormatKernels(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    weights_format: str = Field(min_length=1)  # an id of core/model/formats.FORMATS (a test checks)
    engines: EngineIds
    accelerator_pattern: AcceleratorPattern
    runs: Runs
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


@functools.lru_cache(maxsize=KEYED_CACHE_ENTRIES)  # keyed on what a link can set (a custom part's id): bounded
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
    label, name = format_name(weights_format), engine_name or engine
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


def kernels_problem(
    weights_format: str, kv_cache_format: str, engine: str, acc: Accelerator, engine_name: str | None = None, arch: Architecture | None = None
) -> str | None:
    """Why `engine` cannot run these weights (it does not load the format, or has no kernels for it on `acc`), or
    their KV cache in its format (it stores none, or none there for this model's attention), on `acc` (one line), or
    None: the estimate's warning, the serving table's and the planner's rule. `arch`, the model, where its attention
    decides the cache's kernels (data/kv_cache_kernels.csv)."""
    if (problem := weights_problem(weights_format, engine, acc, engine_name)) is not None:
        return problem
    return kv_cache_problem(kv_cache_format, engine, acc, engine_name, arch)
