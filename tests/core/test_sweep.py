"""The vectorised sweep agrees with estimate() point by point."""

import numpy as np
import pytest

from core.estimate import estimate
from core.memory.sweep import sweep
from core.scenario import Scenario


@pytest.mark.parametrize(
    "base",
    [
        Scenario(model="llama-3.1-8b"),
        Scenario(model="gemma-2-9b", flash_attention=False),
        Scenario(model="mixtral-8x7b", mode="training", method="qlora", gradient_checkpointing=True),
        Scenario(model="llama-3.1-70b", mode="training", zero_stage=3, data_parallel=16, pipeline_parallel=2),
    ],
)
def test_sweep_matches_estimate(base):
    batches = np.array([1, 3, 8])[:, None]
    seqs = np.array([1, 700, 4096, 20000])[None, :]
    grid = sweep(base, batches, seqs)
    for i, b in enumerate(batches[:, 0]):
        for j, s in enumerate(seqs[0]):
            r = estimate(base.model_copy(update={"batch_size": int(b), "seq_len": int(s)}))
            assert grid["total"][i, j] == pytest.approx(r.memory_per_device_bytes.total, abs=8)
            assert bool(grid["fits"][i, j]) == r.fits
