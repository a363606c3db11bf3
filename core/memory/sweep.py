"""Vectorised evaluation of one scenario over many batch sizes and sequence
lengths at once (the sweep chart, the benchmark)."""

from __future__ import annotations

import numpy as np

from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.memory.components import COMPONENT_NAMES, components, kv_headroom
from core.memory.evaluator import fit_capacity
from core.scenario import Scenario

COMPONENTS = COMPONENT_NAMES


def sweep(sc: Scenario, batch: np.ndarray | int, seq: np.ndarray | int) -> dict[str, np.ndarray]:
    """Per-device bytes of each component, their total, whether it fits, and the memory left for the KV cache
    (components.kv_headroom), for every (batch, seq) pair (NumPy broadcasting)."""
    arch = sc.architecture
    layout = Layout(sc.data_parallel, sc.tensor_parallel, sc.pipeline_parallel)
    b = np.asarray(batch, dtype=np.float64)
    s = np.asarray(seq, dtype=np.float64)
    b, s = np.broadcast_arrays(b, s)
    comps, _ = components(sc, arch, layout, b, s)
    out = {name: np.broadcast_to(np.asarray(value, dtype=np.float64), b.shape) for name, value in zip(COMPONENTS, comps, strict=True)}
    total = np.zeros(b.shape)
    for name in COMPONENTS:
        total = total + out[name]
    out["total"] = total
    capacity = fit_capacity(sc, float(get_accelerator(sc.accelerator).usable_memory_bytes))
    out["fits"] = np.asarray(total <= capacity, dtype=np.float64)
    out["kv_headroom"] = np.broadcast_to(np.asarray(kv_headroom(comps, capacity), dtype=np.float64), b.shape)
    return out
