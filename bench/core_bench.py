"""Scenario evaluations per second.

1. A 10,000-scenario sweep (100 batch sizes x 100 sequence lengths) through the
   vectorised path, for several model / mode / method setups. Target: under
   0.2 s per sweep on one core.
2. The scalar path `estimate()` (memory, fit, devices needed, limits,
   advice), which a dashboard rerun calls a few times.

Run: python bench/core_bench.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import time_it

from core.estimate import estimate
from core.memory.sweep import sweep
from core.scenario import Scenario

SETUPS = {
    "llama-3.1-8b inference": Scenario(model="llama-3.1-8b"),
    "llama-3.1-70b training full ZeRO-3 x64": Scenario(model="llama-3.1-70b", mode="training", zero_stage=3, data_parallel=64),
    "mixtral-8x7b training qlora": Scenario(model="mixtral-8x7b", mode="training", method="qlora"),
    "gemma-2-27b inference fp8 (sliding window)": Scenario(model="gemma-2-27b", weights_format="fp8"),
    "deepseek-v3 inference TP8 (MLA, MoE)": Scenario(model="deepseek-v3", tensor_parallel=8, accelerator="h200"),
}


def main() -> None:
    batches = np.arange(1, 101)[:, None]
    seqs = np.linspace(128, 131072, 100).astype(int)[None, :]
    print("10,000-scenario sweeps (100 batch sizes x 100 sequence lengths), median of 7:")
    worst = 0.0
    for name, sc in SETUPS.items():
        t = time_it(lambda sc=sc: sweep(sc, batches, seqs))
        worst = max(worst, t)
        print(f"  {name:45s} {t * 1e3:7.2f} ms  -> {10_000 / t:12,.0f} scenarios/s")
    print(f"  slowest sweep {worst * 1e3:.2f} ms (target < 200 ms): {'OK' if worst < 0.2 else 'MISSED'}")

    print("\nscalar estimate() (memory + fit + devices needed + max batch/context + advice), median of 7 x 50 calls:")
    for name, sc in SETUPS.items():
        t = time_it(lambda sc=sc: [estimate(sc) for _ in range(50)]) / 50
        print(f"  {name:45s} {t * 1e3:7.3f} ms  -> {1 / t:8,.0f} estimates/s")


if __name__ == "__main__":
    main()
