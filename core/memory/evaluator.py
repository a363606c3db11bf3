"""Memory of one scenario at other batch sizes, lengths and layouts (Evaluator), the layout a scenario sets, what it
must fit in (fit_capacity), and llama.cpp's layers on and off the accelerators: what the estimate, the layout search
and the help build on."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.layout import Layout
from core.memory.components import (
    Components,
    engine_reservation,
    host_resident_bytes,
    inference_components,
    training_peak,
    training_states,
)
from core.memory.fit import smallest_count
from core.model.architecture import Architecture
from core.model.formats import FORMATS, weight_bytes
from core.scenario import Scenario
from core.units import BYTES_PER_GIB

RESULT_MODEL = ConfigDict(frozen=True, arbitrary_types_allowed=True)


class MemoryBreakdown(BaseModel):
    model_config = RESULT_MODEL
    weights: int
    gradients: int
    optimizer: int
    activations: int
    kv_cache: int
    overhead: int
    total: int
    allocator: int = 0  # reserved by PyTorch's caching allocator beyond the live tensors (counted in total)

    @classmethod
    def of(cls, c: Components) -> MemoryBreakdown:
        parts = [round(float(x)) for x in c]
        return cls.model_construct(
            weights=parts[0],
            gradients=parts[1],
            optimizer=parts[2],
            activations=parts[3],
            kv_cache=parts[4],
            overhead=parts[5],
            allocator=parts[6],
            total=sum(parts),
        )


class LayoutResult(BaseModel):
    model_config = RESULT_MODEL
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    zero_stage: int
    devices: int
    # serving: the replica's tensor_parallel devices are expert-parallel ranks (attention data-parallel), as the
    # scenario's expert_parallel asks; a CLI result field added (False: a tensor-parallel layout, as before)
    expert_parallel: bool = False


class Evaluator:
    """Memory of one scenario at other batch sizes, lengths and layouts."""

    def __init__(self, sc: Scenario, arch: Architecture):
        self.sc = sc
        self.arch = arch
        self.states = training_states(sc, arch) if sc.mode == "training" else None
        self.weights_total = weight_bytes(arch, FORMATS[sc.weights_format]) if sc.mode == "inference" else 0.0
        # llama.cpp's layers off the accelerators live in system RAM: a layout, batch or context fits only if they do
        self.host_limit_bytes = sc.host_memory_gib * BYTES_PER_GIB if sc.mode == "inference" else math.inf
        self._zero: dict[int, Any] = {}
        self._memo: dict[tuple[Any, ...], tuple[Components, float]] = {}  # scalar look-ups (layout searches repeat them)

    def components(self, layout: Layout, batch: Any, seq: Any, zero_stage: int | None = None) -> tuple[Components, float]:
        if isinstance(batch, int | float) and isinstance(seq, int | float):
            key = (tuple(layout), batch, seq, zero_stage)
            if key not in self._memo:
                self._memo[key] = self._components(layout, batch, seq, zero_stage)
            return self._memo[key]
        return self._components(layout, batch, seq, zero_stage)

    def _components(self, layout: Layout, batch: Any, seq: Any, zero_stage: int | None) -> tuple[Components, float]:
        sc, states = self.sc, self.states
        if sc.mode == "inference":
            comps = inference_components(sc, self.arch, layout, batch, seq, self.weights_total)
            return comps, host_resident_bytes(sc, self.arch, batch, seq, self.weights_total)
        if zero_stage is not None and zero_stage != sc.zero_stage:
            if zero_stage not in self._zero:
                other = sc.model_copy(update={"zero_stage": zero_stage})
                self._zero[zero_stage] = (other, training_states(other, self.arch))
            sc, states = self._zero[zero_stage]
        peak = training_peak(sc, self.arch, layout, batch, seq, states)
        return peak.components, peak.cpu_bytes

    def total(self, layout: Layout, batch: int, seq: int) -> float:
        """Device memory per device, or infinity where system RAM cannot hold what stays off the devices: every search
        for what fits (devices, batch, context, advice) asks this, so none offers what the host cannot hold."""
        comps, host = self.components(layout, batch, seq)
        return float(comps.total) if float(host) <= self.host_limit_bytes else math.inf

    def host_fits(self, layout: Layout, batch: int, seq: int) -> bool:
        return float(self.components(layout, batch, seq)[1]) <= self.host_limit_bytes


def own_layout(sc: Scenario) -> Layout:
    return Layout(sc.data_parallel, sc.tensor_parallel, sc.pipeline_parallel)


def fit_capacity(sc: Scenario, usable_bytes: float) -> float:
    """What a scenario must fit in on a device: its usable memory, or in serving with an engine that reserves a
    fraction of it at start (vLLM gpu_memory_utilization), that fraction."""
    if sc.mode == "inference":
        reserved = engine_reservation(sc, usable_bytes)
        if reserved is not None:
            return reserved
    return usable_bytes


def most_gpu_layers(sc: Scenario, arch: Architecture, layout: Layout, capacity: float) -> int:
    """llama.cpp: the most layers the accelerators hold (device memory grows by one layer's weights and KV cache per
    layer; what stays is the runtime and the compute buffers)."""
    none_on = inference_components(sc.model_copy(update={"gpu_layers": 0}), arch, layout, sc.batch_size, sc.seq_len).total
    all_on = inference_components(sc.model_copy(update={"gpu_layers": None}), arch, layout, sc.batch_size, sc.seq_len).total
    per_layer = (float(all_on) - float(none_on)) / arch.num_layers
    room = capacity - float(none_on)
    return 0 if room < 0 else arch.num_layers if per_layer <= 0 else min(arch.num_layers, int(room // per_layer))


def fewest_gpu_layers_for_host(sc: Scenario, arch: Architecture) -> int | None:
    """llama.cpp: the fewest layers on the accelerators (-ngl) that leave system RAM enough for the rest (the RAM they
    need falls as layers move over, so a bisection finds it); None when that is not even all of them."""
    limit = sc.host_memory_gib * BYTES_PER_GIB
    weights = weight_bytes(arch, FORMATS[sc.weights_format])

    def host_fits(n: int) -> bool:
        return bool(host_resident_bytes(sc.model_copy(update={"gpu_layers": n}), arch, sc.batch_size, sc.seq_len, weights) <= limit)

    k = smallest_count(lambda k: host_fits(k - 1), arch.num_layers + 1)  # k = n + 1: the count starts at 1
    return k - 1 if k else None
