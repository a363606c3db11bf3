"""TPUs are rented in slices of fixed sizes (data/tpu_slices.csv, from Google's TPU pages): the layout search, the
serving fleets and the training planner count whole slices, never 14 v5e chips or a single v5p chip."""

from __future__ import annotations

import pytest

from core.catalog.accelerators import load_accelerators
from core.catalog.prices import load_prices
from core.catalog.tpu_slices import load_tpu_slices, rentable_chips, slice_sizes
from core.estimate import estimate
from core.money.serving import fleet
from core.plan import Goal, plan
from core.scenario import Scenario

TPUS = sorted(a.id for a in load_accelerators() if a.kind == "tpu")


def test_every_tpu_has_its_slices_sourced():
    rows = load_tpu_slices()
    assert set(rows) == set(TPUS)
    assert all(r.source.startswith("https://docs.cloud.google.com/tpu/docs/") and r.as_of.year >= 2026 for r in rows.values())
    # the v5e page's 2D shapes 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16; v5p's smallest is 2x2x1, the largest 16x16x24
    assert slice_sizes("tpu-v5e") == (1, 4, 8, 16, 32, 64, 128, 256)
    assert slice_sizes("tpu-v5p")[0] == 4 and slice_sizes("tpu-v5p")[-1] == 16 * 16 * 24
    assert slice_sizes("h100-sxm") is None


@pytest.mark.parametrize(
    ("part", "chips", "rented"),
    [("tpu-v5e", 14, 16), ("tpu-v5e", 2, 4), ("tpu-v5e", 8, 8), ("tpu-v5p", 1, 4), ("tpu-v5e", 300, 512), ("h100-sxm", 14, 14)],
)
def test_the_fewest_chips_a_part_is_rented_in(part, chips, rented):
    """The smallest slice that holds the chips; past the largest (256 v5e chips), whole largest slices (Multislice)."""
    assert rentable_chips(part, chips) == rented


def test_the_smallest_layout_on_a_tpu_is_a_slice():
    """Llama 3.1 70B in bf16 (141 GB) on 16 GB v5e chips: the search found tensor parallel 2 x 7 pipeline stages, 14
    chips, which Google does not rent; it is now the fewest devices of a slice, 16, with fewer stages on the tie."""
    sc = Scenario(model="llama-3.1-70b", mode="inference", accelerator="tpu-v5e", tensor_parallel=8, weights_format="bf16", batch_size=16)
    need = estimate(sc).layout_needed
    assert need is not None and need.devices == 16 and (need.tensor_parallel, need.pipeline_parallel) == (8, 2)
    for part in TPUS:
        for model, mode in (("llama-3.1-70b", "inference"), ("llama-3.1-8b", "training"), ("llama-3.1-405b", "inference"), ("qwen3-32b", "training")):
            r = estimate(Scenario(model=model, mode=mode, accelerator=part, seq_len=4096))
            if r.layout_needed is not None:  # whole copies of the layout fill the slice that holds it
                assert rentable_chips(part, r.layout_needed.devices) % r.layout_needed.devices == 0, (part, model, mode, r.layout_needed)


def test_a_fleet_on_a_tpu_priced_by_the_chip_rents_whole_slices():
    """Three replicas of tensor parallel 2 on v5e rent two 4-chip slices (four replicas, every slot serving); one
    replica of one v5p chip rents a 4-chip slice holding four; GPU rows are unchanged."""
    v5e = next(r for r in load_prices() if r.accelerator_id == "tpu-v5e" and r.accelerators_per_instance == 1)
    v5p = next(r for r in load_prices() if r.accelerator_id == "tpu-v5p" and r.accelerators_per_instance == 1)
    assert fleet(v5e, 2, 3, "tpu") == (4, 8)
    assert fleet(v5e, 8, 3, "tpu") == (3, 24)
    assert fleet(v5p, 1, 1, "tpu") == (4, 4)


def test_tpu_plans_rent_whole_slices():
    for part in ("tpu-v5p", "tpu-v4", "tpu-v5e"):
        for spec in ({"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 2e7}, {"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 2e4}):
            r = plan(Goal.model_validate({**spec, "accelerators": [part]}))
            assert r.plans, (part, spec)
            for p in r.plans:
                if p.instance.endswith("(per chip)"):
                    replica = p.tensor_parallel * p.pipeline_parallel
                    whole = rentable_chips(part, p.devices) == p.devices if spec["goal"] != "serve" else p.devices % rentable_chips(part, replica) == 0
                    assert whole, (part, spec["goal"], p.devices, replica)
