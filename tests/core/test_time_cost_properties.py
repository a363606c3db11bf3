"""Invariants of the training and inference blocks over random scenarios (hypothesis)."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.catalog.accelerators import load_accelerators
from core.catalog.presets import preset_ids
from core.estimate import estimate
from core.model.formats import FORMATS
from core.scenario import Scenario
from core.units import SECONDS_PER_HOUR

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scenarios = st.fixed_dictionaries(
    {
        "model": st.one_of(st.sampled_from(sorted(preset_ids())), st.builds(lambda p: {"params": p}, st.floats(1e8, 2e12))),
        "accelerator": st.sampled_from([a.id for a in load_accelerators()]),
        "weights_format": st.sampled_from(sorted(FORMATS)),
        "batch_size": st.integers(1, 256),
        "seq_len": st.integers(1, 65536),
        "tensor_parallel": st.sampled_from([1, 2, 8]),
        "pipeline_parallel": st.sampled_from([1, 4]),
        "kv_cache_format": st.sampled_from(["bf16", "fp8"]),
    }
)


def finite(model) -> bool:
    return all(math.isfinite(v) for v in model.model_dump().values() if isinstance(v, float))


@FAST
@given(scenarios)
def test_inference_block_is_finite_and_consistent(d):
    res = estimate(Scenario(**d))
    inf = res.inference
    assert inf is not None and finite(inf)
    assert inf.time_to_first_token_s > 0 and inf.decode_tokens_per_s > 0
    assert math.isclose(inf.aggregate_tokens_per_s, inf.decode_tokens_per_s * inf.batch_size)
    assert inf.output_tokens_per_s <= inf.aggregate_tokens_per_s  # prefill time is amortised on top
    assert inf.max_concurrent_sequences >= 0
    # priced exactly when a row prices the replica, and then a million tokens cost the hours they take at its price
    assert (inf.usd_per_million_tokens is None) == (inf.price_instance is None) == (inf.usd_per_replica_hour is None)
    if inf.usd_per_million_tokens is not None:  # test_a_catalog_scenario_is_priced: this branch is reached
        hours_per_million = 1e6 / (inf.output_tokens_per_s * SECONDS_PER_HOUR)
        assert math.isclose(inf.usd_per_million_tokens, inf.usd_per_replica_hour * hours_per_million, rel_tol=1e-9)


@FAST
@given(scenarios, st.sampled_from(["full", "lora", "qlora"]), st.booleans(), st.floats(1e6, 1e13))
def test_training_block_is_finite_and_consistent(d, method, recompute, tokens):
    d = {
        **d,
        "weights_format": "bf16",
        "mode": "training",
        "method": method,
        "gradient_checkpointing": recompute,
        "train_tokens": tokens,
        "zero_stage": 3 if d["tensor_parallel"] == 1 else 0,
        "data_parallel": 4,
    }
    tr = estimate(Scenario(**d)).training
    assert tr is not None and finite(tr)
    assert math.isclose(tr.gpu_hours, tr.devices * tr.wall_hours)
    assert tr.wall_hours_with_comm >= tr.wall_hours
    assert (tr.cost_usd is None) == (tr.price_instance is None)
    assert (tr.spot_cost_usd is None) == (tr.spot_price_instance is None)
    assert tr.cost_usd is None or tr.cost_usd > 0
    assert tr.spot_cost_usd is None or tr.spot_cost_usd > 0


def test_a_catalog_scenario_is_priced():
    """The priced branches of the properties above are reached: an 8B model on an H100 has a serving price and a
    training price, on demand and spot."""
    inf = estimate(Scenario(model="llama-3.1-8b", accelerator="h100-sxm")).inference
    assert inf is not None and inf.usd_per_million_tokens is not None and inf.usd_per_million_tokens > 0
    tr = estimate(Scenario(model="llama-3.1-8b", accelerator="h100-sxm", mode="training", train_tokens=1e9)).training
    assert tr is not None and tr.cost_usd is not None and tr.spot_cost_usd is not None
    assert tr.cost_usd > 0 and tr.spot_cost_usd > 0  # (the cheapest spot row may be dearer than another provider's on-demand)
