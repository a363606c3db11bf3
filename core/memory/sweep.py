"""Vectorised evaluation of one scenario over many batch sizes and sequence
lengths at once (the sweep chart, the benchmark)."""

from __future__ import annotations

import numpy as np

from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.memory.components import components
from core.scenario import Scenario

COMPONENTS = ("weights", "gradients", "optimizer", "activations", "kv_cache", "overhead")


def sweep(sc: Scenario, batch: np.ndarray | int, seq: np.ndarray | int) -> dict[str, np.ndarray]:
    """Per-device bytes of each component, their total, and whether it fits,
    for every (batch, seq) pair (NumPy broadcasting)."""
    arch = sc.architecture
    layout = Layout(sc.data_parallel, sc.tensor_parallel, sc.pipeline_parallel)
    b = np.asarray(batch, dtype=np.float64)
    s = np.asarray(seq, dtype=np.float64)
    b, s = np.broadcast_arrays(b, s)
    comps, _ = components(sc, arch, layout, b, s)
    out = {name: np.broadcast_to(np.asarray(value, dtype=np.float64), b.shape) for name, value in zip(COMPONENTS, comps, strict=True)}
    out["total"] = sum(out[name] for name in COMPONENTS)
    out["fits"] = out["total"] <= get_accelerator(sc.accelerator).usable_memory_bytes
    return out
