"""Engine times the roofline does not derive, per engine and part (data/engine_timing.csv, one sourced row each).

- `layer_overhead_s`: time per layer and step on top of the engine's own per-layer time (core/memory/engines.py,
  calibrated on an H100), on the parts whose id matches the row's `accelerator_pattern`. With CUDA graphs a step's
  kernels launch without the CPU, but each kernel still has a fixed start and drain on the GPU, and small decode
  kernels reach less of the bandwidth; two independent A100 runs (a dense and a MoE model under vLLM, a 70B model
  under SGLang over 8 GPUs) spend 50-65 us a layer more than the H100-fitted time. The value is measured, not derived
  (Hopper's programmatic dependent launch, which overlaps a kernel's start with the previous one's drain, is one
  plausible part of the difference; no per-kernel A100 profile is checked here).
- `prefill_layer_overhead_s`: time per layer of every step that carries prompt tokens, in engines that run those
  steps without CUDA graphs, so the CPU launches every kernel (SGLang 0.5.6: CUDA graphs for decode only; its
  piecewise graphs for prefill, "eliminating kernel launch overhead for prefill/extend", were opt-in then,
  docs.sglang.io "Piecewise CUDA Graph"). It lengthens the first token and, under load, the decoding users' steps
  that a prompt interrupts.
- `decode_sequence_head_layer_s`: time per decoding sequence, query head the device runs for it, layer and step,
  beyond the sequence's bytes and FLOPs (its attention blocks on a short context, one per head): the step grows with
  the batch faster than the roofline (TensorRT-LLM on Hopper: NIM's per-user speed at 50-100 users and TensorRT-LLM's
  published peak throughput). Per head, because a tensor-parallel device runs num_heads / tp heads of every sequence
  and an expert-parallel rank all heads of its own sequences: the published MoE and gpt-oss peaks (TP 1-8, EP 4-8)
  check that against a time per sequence alone.

Each row names the published row it was calibrated on; the other rows of its table check it."""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.catalog import KEYED_CACHE_ENTRIES
from core.catalog.accelerators import DATA_DIR, read_catalog_rows
from core.catalog.row_types import AcceleratorPattern, EngineIds

ENGINE_TIMING_CSV = DATA_DIR / "engine_timing.csv"


class EngineTiming(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    engines: EngineIds
    accelerator_pattern: AcceleratorPattern
    quantity: Literal["layer_overhead_s", "prefill_layer_overhead_s", "decode_sequence_head_layer_s"]
    value_s: float = Field(ge=0, le=1.0, allow_inf_nan=False)
    engine_version: str = Field(min_length=1)
    calibrated_on: str = Field(min_length=3)  # the published row (tests/data/...) the value reproduces
    source: str = Field(min_length=10)
    as_of: dt.date
    note: str = ""


@functools.cache
def load_engine_timing() -> tuple[EngineTiming, ...]:
    return read_catalog_rows(ENGINE_TIMING_CSV, EngineTiming)


@functools.lru_cache(maxsize=KEYED_CACHE_ENTRIES)  # keyed on what a link can set (a custom part's id): bounded
def engine_time_s(quantity: str, engine: str, accelerator_id: str) -> float:
    """The sum of the rows of `quantity` for `engine` on `accelerator_id` (0 where none applies)."""
    return sum(r.value_s for r in load_engine_timing() if r.quantity == quantity and engine in r.engines.split() and re.search(r.accelerator_pattern, accelerator_id))
