"""Invariants of the memory model over random scenarios (hypothesis)."""

import itertools
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from core.catalog.presets import preset_ids
from core.estimate import estimate
from core.model.formats import FORMATS
from core.scenario import Scenario

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PRESETS = sorted(preset_ids())

scenarios = st.fixed_dictionaries(
    {
        "model": st.one_of(st.sampled_from(PRESETS), st.builds(lambda p: {"params": p}, st.floats(1e8, 2e12))),
        "mode": st.sampled_from(["training", "inference"]),
        "method": st.sampled_from(["full", "lora", "qlora"]),
        "optimizer": st.sampled_from(["adamw", "adamw-8bit", "sgd", "adafactor"]),
        "precision": st.sampled_from(["bf16", "fp16", "fp32"]),
        "batch_size": st.integers(1, 64),
        "seq_len": st.integers(1, 32768),
        "gradient_checkpointing": st.booleans(),
        "flash_attention": st.booleans(),
        "lora_rank": st.integers(1, 256),
        "zero_stage": st.integers(0, 3),
        "data_parallel": st.sampled_from([1, 2, 8, 64]),
        "tensor_parallel": st.sampled_from([1, 2, 8]),
        "pipeline_parallel": st.sampled_from([1, 2, 4]),
        "kv_cache_format": st.sampled_from(["bf16", "fp8"]),
    }
)


def build(d):
    if d["mode"] == "inference":
        d = {**d, "weights_format": "bf16"}
    return Scenario(**d)


def mem(d, **update):
    return estimate(build({**d, **update})).memory_per_device_bytes


@FAST
@given(scenarios)
def test_total_is_sum_and_nothing_negative_or_nan(d):
    r = estimate(build(d))
    m = r.memory_per_device_bytes
    parts = [m.weights, m.gradients, m.optimizer, m.activations, m.kv_cache, m.overhead, m.allocator]
    assert m.total == sum(parts)
    assert all(p >= 0 and not math.isnan(p) for p in parts)
    assert r.params.total >= r.params.active > 0
    assert r.max_batch_size >= (1 if r.fits else 0)


@FAST
@given(scenarios)
def test_memory_grows_with_batch_and_sequence(d):
    assert mem(d, batch_size=d["batch_size"] + 1).total >= mem(d).total
    assert mem(d, seq_len=d["seq_len"] + 512).total >= mem(d).total


@FAST
@given(scenarios, st.floats(1e8, 1e12))
def test_memory_grows_with_parameter_count(d, n):
    assert mem(d, model={"params": n * 1.5}).total >= mem(d, model={"params": n}).total


@FAST
@given(scenarios, st.sampled_from([2, 8, 64]))
def test_higher_zero_stage_never_needs_more(d, dp):
    # At one rank ZeRO shards nothing and only adds its runtime buffers, so the
    # invariant is stated for two or more data-parallel ranks.
    d = {**d, "mode": "training", "data_parallel": dp}
    totals = [mem(d, zero_stage=z).total for z in range(4)]
    assert all(a >= b for a, b in itertools.pairwise(totals))


@FAST
@given(scenarios, st.integers(1, 3))
def test_more_data_parallel_ranks_never_raise_memory_when_sharding(d, zero):
    d = {**d, "mode": "training", "zero_stage": zero}
    totals = [mem(d, data_parallel=n).total for n in (1, 2, 4, 16, 256)]
    assert all(a >= b for a, b in itertools.pairwise(totals))


@FAST
@given(scenarios)
def test_model_parallel_never_raises_weights_per_device(d):
    one = mem(d, tensor_parallel=1, pipeline_parallel=1)
    many = mem(d, tensor_parallel=8, pipeline_parallel=2)
    assert many.weights <= one.weights


@FAST
@given(scenarios)
def test_devices_needed_layout_really_fits(d):
    sc = build(d)
    r = estimate(sc)
    if r.layout_needed is None:
        return
    lay = r.layout_needed
    again = estimate(
        sc.model_copy(
            update={
                "data_parallel": lay.data_parallel,
                "tensor_parallel": lay.tensor_parallel,
                "pipeline_parallel": lay.pipeline_parallel,
                "zero_stage": lay.zero_stage if sc.mode == "training" else sc.zero_stage,
            }
        )
    )
    assert again.fits


hostile = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=50),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
FIELDS = sorted(Scenario.model_fields)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), hostile, max_size=6))
def test_invalid_scenarios_raise_validation_error_and_nothing_else(d):
    try:
        sc = Scenario.model_validate({"model": "llama-3.1-8b", **d})
    except ValidationError:
        return
    estimate(sc)  # a valid scenario always evaluates


def test_quantized_full_finetune_is_rejected():
    try:
        Scenario(model="gpt2", mode="training", weights_format="nf4")
    except ValidationError as exc:
        assert "qlora" in str(exc)
    else:
        raise AssertionError("expected a validation error")


def test_every_format_evaluates():
    for f in FORMATS:
        assert estimate(Scenario(model="gpt2", weights_format=f)).memory_per_device_bytes.weights > 0
