"""Where each serving engine stores its KV cache in a format, per part (data/kv_cache_kernels.csv, one sourced row each).

An engine stores only the KV formats its data/engine_formats.csv row lists. A (format, engine) pair this table lists
is stored only where a row says so: the first row whose format and engine match and whose `accelerator_pattern`
matches the part's id decides, `kernel` (its attention kernels read and write that cache there) or `unsupported`
(the engine refuses the flag there, in a line the row's note gives the reason for). A part no row of a listed pair
matches is not documented to run it. A row may also hold for some models only: `attention` (without attention sinks,
without multi-head latent attention, or "plain", without either) and `head_dims` (the head sizes its kernels take),
since the kernel an engine picks depends on them: vLLM stores an FP8 cache on an A100 through FlashInfer, whose kernels
take head sizes 64, 128, 256 and 512 without MLA or sinks, and for DeepSeek-V3's MLA or gpt-oss's sinks none of its
kernels writes FP8 there; gpt-oss's sinks have an FP8 cache in SGLang and TensorRT-LLM on Blackwell, not on Hopper.
The cache is the model's attention's, whatever the weights' format. Without a model (a part's own question) such
rows are read as holding. Pairs the table does not list are not
restricted by it; nor are hardware of one's own and Groq's and Cerebras' chips (core/catalog/engine_hardware.py)."""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.catalog import KEYED_CACHE_ENTRIES
from core.catalog.accelerators import DATA_DIR, Accelerator, read_catalog_rows
from core.catalog.engine_formats import cache_problem, kv_format_name, load_engine_formats
from core.catalog.engine_hardware import UNCHECKED_VENDORS
from core.catalog.row_types import AcceleratorPattern, EngineIds
from core.model.architecture import Architecture
from core.model.formats import KV_CACHE_BYTES

KV_CACHE_KERNELS_CSV = DATA_DIR / "kv_cache_kernels.csv"


class KvCacheKernels(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    kv_cache_format: str
    engines: EngineIds
    accelerator_pattern: AcceleratorPattern
    runs: Literal["kernel", "unsupported"]
    # the models the row holds for: any; without attention sinks (gpt-oss); without multi-head latent attention
    # (DeepSeek); plain: without either
    attention: Literal["any", "no-sinks", "no-mla", "plain"] = "any"
    head_dims: tuple[int, ...] = ()  # the head sizes the row holds for (none: any)
    source: str = Field(min_length=10)
    as_of: dt.date
    note: str = ""

    @field_validator("kv_cache_format")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in KV_CACHE_BYTES:
            raise ValueError(f"write a KV-cache format of core/model/formats.KV_CACHE_BYTES ({', '.join(KV_CACHE_BYTES)})")
        return value

    @field_validator("head_dims", mode="before")
    @classmethod
    def _sizes(cls, value: object) -> object:
        return tuple(value.split()) if isinstance(value, str) else value

    def holds_for(self, arch: Architecture | None) -> bool:
        """Whether the row speaks of `arch` (any model where None)."""
        if arch is None:
            return True
        if self.attention in ("no-sinks", "plain") and arch.attention_sinks:
            return False
        if self.attention in ("no-mla", "plain") and arch.is_mla:
            return False
        return not self.head_dims or arch.head_dim in self.head_dims


@functools.cache
def load_kv_cache_kernels() -> tuple[KvCacheKernels, ...]:
    return read_catalog_rows(KV_CACHE_KERNELS_CSV, KvCacheKernels)


@functools.cache
def _listed_pairs() -> frozenset[tuple[str, str]]:
    return frozenset((r.kv_cache_format, e) for r in load_kv_cache_kernels() for e in r.engines.split())


@functools.lru_cache(maxsize=KEYED_CACHE_ENTRIES)  # keyed on what a link can set (a custom part's id): bounded
def _rows(kv_cache_format: str, engine: str, accelerator_id: str) -> tuple[KvCacheKernels, ...]:
    return tuple(
        r for r in load_kv_cache_kernels() if r.kv_cache_format == kv_cache_format and engine in r.engines.split() and re.search(r.accelerator_pattern, accelerator_id)
    )


def kv_cache_problem(kv_cache_format: str, engine: str, acc: Accelerator, engine_name: str | None = None, arch: Architecture | None = None) -> str | None:
    """Why `engine` (written `engine_name`, else its id) cannot keep its KV cache in `kv_cache_format` on `acc` for the
    model `arch` (any where None), in one line: it stores no such cache (data/engine_formats.csv), or not on that
    part, or not for that model's attention there (data/kv_cache_kernels.csv); or None."""
    if (problem := cache_problem(kv_cache_format, engine, engine_name)) is not None:
        return problem
    if (kv_cache_format, engine) not in _listed_pairs() or acc.vendor in UNCHECKED_VENDORS:
        return None
    rows = _rows(kv_cache_format, engine, acc.id)
    row = next((r for r in rows if r.holds_for(arch)), None)
    name, label = engine_name or engine, kv_format_name(kv_cache_format)
    # where the part has kernels for other models, the model's own reason: "for Phi-3 Mini (its head size 96)"
    model = next((_model_reason(r, arch) for r in rows if r.runs == "kernel" and arch is not None and not r.holds_for(arch)), None)
    for_model = f" for {arch.name} ({model})" if model and arch is not None else ""
    if row is None:
        return f"{name} has no documented {label} KV cache on {acc.name}{for_model}: no row of data/kv_cache_kernels.csv"
    if row.runs == "kernel":
        return None
    why = f": {row.note}" if row.note else ""
    return f"{name} has no {label} KV cache on {acc.name}{for_model}{why}"


def _model_reason(row: KvCacheKernels, arch: Architecture) -> str:
    """What of `arch` keeps `row` from holding for it, in a few words."""
    if arch.attention_sinks and row.attention in ("no-sinks", "plain"):
        return "its attention sinks"
    if arch.is_mla and row.attention in ("no-mla", "plain"):
        return "its multi-head latent attention"
    return f"its head size {arch.head_dim}"


def nearest_kv_cache(kv_cache_format: str, engine: str, acc: Accelerator, arch: Architecture | None = None) -> str | None:
    """The KV-cache format `engine` keeps on `acc` for `arch` nearest in bytes to `kv_cache_format`, which it does not
    keep there (the larger of two equally near: it holds no fewer bits), or None where it keeps that one or no other:
    what the pages offer in place of a cache the engine cannot run (llama.cpp asked for FP8: Q8_0)."""
    if stores_kv(kv_cache_format, engine, acc, arch):
        return None
    row = load_engine_formats().get(engine)
    asked = KV_CACHE_BYTES[kv_cache_format]
    kept = [k for k in (row.kv_cache_formats if row is not None else ()) if stores_kv(k, engine, acc, arch)]
    return min(kept, key=lambda k: (abs(math.log(KV_CACHE_BYTES[k] / asked)), -KV_CACHE_BYTES[k]), default=None)


def stores_kv(kv_cache_format: str, engine: str, acc: Accelerator, arch: Architecture | None = None) -> bool:
    """Whether `engine` keeps a KV cache in `kv_cache_format` on `acc` (for `arch`, where given)."""
    return kv_cache_problem(kv_cache_format, engine, acc, arch=arch) is None
