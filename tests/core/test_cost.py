"""Training run cost: price rows x accelerators x device counts (core/money/cost.py, core/money/pricing.py)."""

import itertools
import math

import pytest

from core.catalog.prices import load_prices, prices_for
from core.estimate import estimate
from core.money.cost import training_curve, training_options
from core.money.pricing import (
    cheapest_run_row,
    fleet_instances,
    instances_for,
    replica_usd_per_hour,
    rows_for,
    run_usd_per_hour,
    usd_per_million_tokens,
)
from core.scenario import Scenario

SC = Scenario(model="llama-3.1-8b", mode="training", train_tokens=1e10, gradient_checkpointing=True)


@pytest.fixture(scope="module")
def options():
    return training_options(SC)


def test_whole_instances_and_packing():
    p5 = next(r for r in prices_for("h100-sxm") if r.instance_type == "p5.48xlarge")
    assert instances_for(p5, 1) == 1 and instances_for(p5, 9) == 2
    assert run_usd_per_hour(p5, 3) == p5.on_demand_usd_per_hour  # idle devices are paid for
    assert replica_usd_per_hour(p5, 2) == pytest.approx(p5.on_demand_usd_per_hour / 4)
    assert replica_usd_per_hour(p5, 16) == 2 * p5.on_demand_usd_per_hour
    assert fleet_instances(p5, 5, 2) == 2 and fleet_instances(p5, 3, 16) == 6
    assert run_usd_per_hour(p5, 8, spot=True) == p5.spot_usd_per_hour


def test_tensor_parallel_group_stays_inside_an_instance():
    assert all(r.accelerators_per_instance >= 8 for r in rows_for("h100-sxm", tensor_parallel=8))
    assert len(rows_for("h100-sxm", tensor_parallel=2)) < len(rows_for("h100-sxm"))
    assert rows_for("tpu-v5e", tensor_parallel=8) == rows_for("tpu-v5e")  # TPU chips of a slice share ICI
    one = cheapest_run_row("h100-sxm", 1)
    assert one is not None and one.accelerators_per_instance == 1  # a 1-GPU instance beats 1/8 of a p5


def test_cost_is_hours_times_price(options):
    assert len(options.options) > 100
    rows = {(r.provider, r.instance_type, r.region, r.accelerator_id): r for r in load_prices()}
    from core.catalog.providers import reservation_for

    for o in options.options:
        row = rows[(o.provider, o.instance_type, o.region, o.accelerator_id)]
        assert o.instances == math.ceil(o.devices / row.accelerators_per_instance)
        res = None if o.reservation is None else reservation_for(o.provider, o.accelerator_id, o.instance_type)
        # on demand: the row's price; reserved: the product's published rate per device (else the row's on-demand)
        per_instance = row.on_demand_usd_per_hour if res is None or res.usd_per_device_hour is None else res.usd_per_device_hour * row.accelerators_per_instance
        assert o.usd_per_hour == pytest.approx(o.instances * per_instance)
        assert o.run_usd == pytest.approx(o.usd_per_hour * (o.paid_hours or 0.0)) and (o.paid_hours or 0.0) >= o.run_hours
        assert o.on_demand_usd == pytest.approx(o.wall_hours * o.usd_per_hour)
        assert o.gpu_hours == pytest.approx(o.devices * o.wall_hours)
        assert o.wall_hours_with_comm >= o.wall_hours
        assert o.devices == o.data_parallel * o.tensor_parallel * o.pipeline_parallel
        assert o.tensor_parallel <= row.accelerators_per_instance or row.accelerator_id.startswith("tpu")
        # a spot price exactly where the row has one, and never for a reservation (it is not a spot price)
        assert (o.spot_usd is None) == (row.spot_usd_per_hour is None or res is not None)
        assert o.spot_usd is None or o.spot_usd <= o.on_demand_usd  # spot is never dearer than on-demand
    assert sum(o.spot_usd is not None for o in options.options) >= 10  # the spot check above ran on real rows


def test_cheapest_and_fastest(options):
    assert options.cheapest == options.options[0]
    assert options.cheapest.on_demand_usd == min(o.on_demand_usd for o in options.options)
    # The one "fastest" (core/money/picks.py): within FAST_ENOUGH of the shortest run, the cheapest of those.
    from core.money.picks import FAST_ENOUGH

    # a reservation shorter than its minimum term (a 1-Click Cluster week, a Capacity Block day) pays mostly for an
    # idle cluster: never called fastest while another run exists (as in the planner)
    shortest = min(o.run_hours for o in options.options if o.within_bounds and not o.pays_idle_term)
    near = [o for o in options.options if o.within_bounds and not o.pays_idle_term and o.run_hours <= shortest * FAST_ENOUGH]
    assert options.fastest.run_hours <= shortest * FAST_ENOUGH and options.fastest.run_usd == min(o.run_usd for o in near)
    assert options.cheapest_spot.spot_usd == min(o.spot_usd for o in options.options if o.spot_usd is not None)
    assert any("tensor-parallel group" in s for s in options.skipped)  # e.g. 8B full training on one T4 needs TP 8


def test_every_option_fits_in_memory(options):
    seen = set()
    for o in options.options:
        key = (o.accelerator_id, o.data_parallel, o.tensor_parallel, o.pipeline_parallel, o.zero_stage)
        if key in seen:
            continue
        seen.add(key)
        sc = SC.model_copy(
            update={
                "accelerator": o.accelerator_id,
                "data_parallel": o.data_parallel,
                "tensor_parallel": o.tensor_parallel,
                "pipeline_parallel": o.pipeline_parallel,
                "zero_stage": o.zero_stage,
            }
        )
        assert estimate(sc).fits, key


def test_curve_on_own_accelerator():
    # Megatron: its fewest devices is a tensor x pipeline layout (20: tensor parallel 4 x 5 stages; its fp32 gradients,
    # 4 bytes a parameter under bf16, no longer leave 16 room); Hugging Face has no pipeline parallelism, so its
    # fewest is ZeRO-3 data parallelism (devices_needed keeps to what the stack runs)
    sc = Scenario(model="llama-3.1-70b", mode="training", train_tokens=1e10, zero_stage=1, data_parallel=8, accelerator="h100-sxm", training_stack="megatron")
    points = training_curve(sc)
    assert [p.devices for p in points] == sorted(p.devices for p in points)
    assert points[0].devices == estimate(sc).devices_needed
    for a, b in itertools.pairwise(points):
        assert b.wall_hours < a.wall_hours  # more devices never lengthen the ideal time
        assert b.wall_hours_with_comm / b.wall_hours >= a.wall_hours_with_comm / a.wall_hours - 1e-9  # returns diminish
        if a.price_instance is not None and a.price_instance == b.price_instance:
            # one 8-GPU row billed by whole instances: the price per instance-hour is the same at every count (the
            # cost itself is flat only where both counts fill their instances; the curve starts at devices_needed)
            per_a = a.on_demand_usd / (math.ceil(a.devices / 8) * a.wall_hours)
            assert b.on_demand_usd / (math.ceil(b.devices / 8) * b.wall_hours) == pytest.approx(per_a)
        if b.run_usd is not None:
            assert b.run_hours < a.run_hours  # the bill's time: setup + the computation with communication
    # Past 64 GPUs (the stated default on-demand order) no provider rents H100s on demand: the run is billed as the
    # cheaper of the reserved clusters that rent them (data/reservations.csv): Lambda's 1-Click Cluster, whole weeks at
    # the 8 x H100 row's $31.92 an instance-hour, or an AWS EC2 Capacity Block of p5.48xlarge, whole days (1-14) at the
    # published $41.528 an instance-hour; past 512, nothing rents them and the point has no price.
    assert all(p.price_instance is None for p in points if p.devices > 64)
    for p in points:
        if 64 < p.devices <= 512:
            n, weeks, days = math.ceil(p.devices / 8), math.ceil(p.run_hours / 168), math.ceil(p.run_hours / 24)
            assert p.run_hours <= 14 * 24  # these runs are within the daily steps of a Capacity Block
            assert p.run_usd == pytest.approx(min(n * 31.92 * 168 * weeks, n * 41.528 * 24 * days)), p.devices
    # e.g. 160 H100s for a run of under a day (18.8 h: setup, the computation and its communication, NCCL's
    # protocols by message size): 20 x $41.528 x 24 h = $19,933.44 for one Capacity Block day, against
    # 20 x $31.92 x 168 h = $107,251.20 for a 1-Click Cluster week
    p160 = next(p for p in points if p.devices == 160)
    assert 12 < p160.run_hours <= 24 and p160.run_usd == pytest.approx(19933.44)
    assert all(p.run_usd is None for p in points if p.devices > 512)
    assert sum(a.price_instance == b.price_instance for a, b in itertools.pairwise(points)) >= 2
    assert points[-1].devices == 64 * points[0].devices
    explicit = training_curve(sc, device_counts=[8, 16, 24, 48, 1000])
    assert [p.devices for p in explicit] == [20, 40, 1000]  # below the fitting minimum dropped, rounded to the group


def test_usd_per_million_tokens():
    assert usd_per_million_tokens(1000, 3.6) == pytest.approx(1.0)
    assert usd_per_million_tokens(1000, 3.6, utilisation=0.5) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        usd_per_million_tokens(1000, 3.6, utilisation=0)


def test_needs_train_tokens():
    with pytest.raises(ValueError, match="train_tokens"):
        training_options(SC.model_copy(update={"train_tokens": None}))
    with pytest.raises(ValueError, match="train_tokens"):
        training_curve(SC.model_copy(update={"train_tokens": None}))


def test_a_run_spans_instances_only_on_a_cluster_network(options):
    """The Training page's rule is the planner's: several instances of a row only when they are whole nodes of a
    provider that rents them on a cluster network (data/providers.csv). Before, 8B's runs on 64+ devices were priced
    as 8+ copies of single marketplace hosts (vast, lium, a resold machine)."""
    from core.catalog.providers import spans_nodes

    by_instance = {(r.provider, r.instance_type): r for r in load_prices()}
    several = [o for o in options.options if o.instances > 1 and o.reservation is None]
    assert several and "aws" in {o.provider for o in several}
    assert "lambda" not in {o.provider for o in several}, "Lambda's on-demand VMs have no cluster network (its 1CC does)"
    assert "lambda" in {o.provider for o in options.options if o.instances > 1 and o.reservation == "1-Click Cluster"}
    for o in several:
        row = by_instance[(o.provider, o.instance_type)]
        assert spans_nodes(o.provider, o.instance_type) and row.accelerators_per_instance >= 8, (o.provider, o.instance_type, o.instances)
    assert any(o.instances == 1 and not spans_nodes(o.provider, o.instance_type) for o in options.options), "one host still competes"
    # No provider in data/providers.csv rents RTX 4090s on a cluster network: the curve is priced while one host of
    # 8 holds the run (8B full fine-tuning needs 6 of them) and unpriced from there on, not priced on copies of vast.ai
    # listings (Hugging Face has no pipeline parallelism: tensor parallel 2 x 3 ZeRO-3 ranks). The curve itself goes on
    # (time is still shown), so an empty or cut-short curve fails here too.
    curve = training_curve(SC.model_copy(update={"accelerator": "rtx-4090"}))
    assert [p.devices for p in curve] == [6, 12, 24, 48, 96, 192, 384]
    assert curve[0].price_instance is not None and curve[0].on_demand_usd is not None and curve[0].on_demand_usd > 0
    assert all(p.price_instance is None and p.on_demand_usd is None and p.spot_usd is None for p in curve[1:])


def test_the_training_sweep_leaves_out_the_parts_the_planner_does():
    """The Training page's every-part sweep listed AWS Inferentia2 (inference only) and, for QLoRA, TPUs and Trainium
    (no bitsandbytes 4-bit kernels) where the Plan page says it leaves them out: one rule now
    (core/catalog/stack_layouts.training_part_problem), each skip said."""
    from core.catalog.accelerators import get_accelerator
    from core.catalog.stack_layouts import INFERENCE_ONLY, training_part_problem

    qlora = Scenario(model="llama-3.1-8b", mode="training", method="qlora", gradient_checkpointing=True, train_tokens=1e7)
    found = {o.accelerator_id for o in training_options(qlora).options}
    kinds = {get_accelerator(a).kind for a in found}
    assert kinds == {"gpu"} and not found & INFERENCE_ONLY, sorted(found)
    assert "inferentia2: an inference-only part" in training_options(qlora).skipped
    assert "no bitsandbytes 4-bit kernels" in (training_part_problem(get_accelerator("tpu-v6e"), "qlora", "hf") or "")
    full = {o.accelerator_id for o in training_options(qlora.replace(method="full", gradient_checkpointing=True)).options}
    assert {"tpu-v6e", "trainium"} & full and "inferentia2" not in full  # a full fine-tune trains on TPUs (PyTorch/XLA)
    assert training_part_problem(get_accelerator("h100-sxm"), "qlora", "hf") is None
