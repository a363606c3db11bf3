"""The one training bill (core/money/run_bill.py, issue 26): whole instances x price x (setup + computation with
communication), worked out by hand; and the Training page's options, `estimate` and the planner bill a run alike."""

import datetime as dt

import pytest

from core.catalog.prices import PriceRow
from core.estimate import estimate
from core.money.cost import training_options
from core.money.run_bill import HORIZON_HOURS, SETUP_HOURS, bill, cheapest_bill
from core.plan import Goal, plan
from core.scenario import Scenario


def _row(provider: str, per_instance: int, usd: float, spot: float | None = None, instance: str = "8x") -> PriceRow:
    return PriceRow(
        provider=provider,
        instance_type=instance,
        accelerator_id="h100-sxm",
        accelerators_per_instance=per_instance,
        on_demand_usd_per_hour=usd,
        spot_usd_per_hour=spot,
        region="test",
        estimate=False,
        as_of=dt.date(2026, 11, 1),
        source="a test row",
    )


def test_a_run_is_billed_whole_instances_for_setup_and_computation():
    row = _row("ownlab", 8, 24.0, spot=12.0)
    b = bill(row, 12, 2.0)
    # 12 devices on 8-device instances: 2 instances; 0.25 h setup + 2.0 h = 2.25 h; 2 x $24 x 2.25 h = $108
    assert SETUP_HOURS == 0.25
    assert (b.instances, b.hours, b.usd_per_hour, b.usd) == (2, 2.25, 48.0, pytest.approx(108.0))
    # spot: 2 x $12 x 2.25 h = $54; a goal's own setup time: 2 x $24 x (1 + 2) h = $144
    assert bill(row, 12, 2.0, spot=True).usd == pytest.approx(54.0)
    assert bill(row, 12, 2.0, setup_hours=1.0).usd == pytest.approx(144.0)
    assert bill(_row("ownlab", 8, 24.0), 8, 1.0, spot=True) is None  # no spot price: no spot bill


def test_the_cheapest_bill_rents_only_what_a_training_run_can():
    """16 devices cannot run on two single hosts of a marketplace (no cluster network between them): the bill comes
    from a provider that rents nodes on one, though the marketplace's hour is cheaper."""
    rows = (_row("vast", 8, 8.0), _row("aws", 8, 20.0))
    one = cheapest_bill("h100-sxm", 8, 1, 1.0, rows)
    assert one.row.provider == "vast" and one.usd == pytest.approx(8.0 * 1.25)
    two = cheapest_bill("h100-sxm", 16, 1, 1.0, rows)
    assert two.row.provider == "aws" and two.usd == pytest.approx(2 * 20.0 * 1.25)


def test_a_run_past_lambdas_on_demand_instance_is_billed_its_reservations_minimum_term():
    """Lambda's on-demand instances are single VMs: its InfiniBand comes with a 1-Click Cluster of 16-512 H100 or B200,
    reserved and billed by the week (data/reservations.csv). 16 H100s for a 1-hour run on Lambda alone: two 8-GPU
    instances reserved for the minimum term, one week, at the on-demand $20 an instance-hour (the 1CC rate is not in
    our sources): 2 x $20 x 168 h = $6,720, for a run of 0.25 h + 1 h = 1.25 h."""
    two = cheapest_bill("h100-sxm", 16, 1, 1.0, (_row("vast", 8, 8.0), _row("lambda", 8, 20.0)))
    assert two.row.provider == "lambda" and two.reservation is not None and two.reservation.product == "1-Click Cluster"
    assert (two.instances, two.hours, two.paid_hours, two.usd) == (2, 1.25, 168.0, pytest.approx(6_720.0))
    assert two.idle_reserved_hours == pytest.approx(168.0 - 1.25)
    # With an on-demand cluster of another provider at $40 an instance-hour, 2 x $40 x 1.25 h = $100 wins.
    assert cheapest_bill("h100-sxm", 16, 1, 1.0, (_row("lambda", 8, 20.0), _row("aws", 8, 40.0))).usd == pytest.approx(100.0)


def test_a_reservation_bills_whole_weeks_within_its_sizes():
    """By hand, an 8-GPU H100 row at $24 an instance-hour on Lambda's 1-Click Cluster (16-512 GPUs, one week minimum,
    billed by the week)."""
    from core.catalog.providers import reservation_for
    from core.money.run_bill import reserved_hours

    res = reservation_for("lambda", "h100-sxm")
    assert res is not None and (res.min_devices, res.max_devices, res.min_term_hours, res.term_increment_hours) == (16, 512, 168.0, 168.0)
    assert reservation_for("lambda", "a100-sxm-80gb") is None and reservation_for("aws", "h100-sxm", "8x") is None
    row = _row("lambda", 8, 24.0)
    # 512 GPUs, 1 h of computation: 64 instances x $24 x 168 h (the minimum term) = $258,048
    assert bill(row, 512, 1.0, reservation=res).usd == pytest.approx(64 * 24.0 * 168)
    # 16 GPUs, 200 h of computation + 0.25 h setup = 200.25 h: two weeks (336 h) x 2 instances x $24 = $16,128
    b = bill(row, 16, 200.0, reservation=res)
    assert (b.hours, b.paid_hours, b.usd) == (200.25, 336.0, pytest.approx(2 * 24.0 * 336))
    assert reserved_hours(167.9, res) == 168.0 and reserved_hours(168.0, res) == 168.0 and reserved_hours(168.5, res) == 336.0
    assert bill(row, 8, 1.0, reservation=res) is None  # one instance: smaller than a 1CC (rent it on demand)
    assert bill(row, 520, 1.0, reservation=res) is None  # 65 instances: larger than a 1CC
    assert bill(row, 16, 1.0, reservation=res, spot=True) is None  # a reservation is not a spot price


def test_an_aws_capacity_block_is_billed_by_hand():
    """AWS EC2 Capacity Blocks (data/reservations.csv): 1-64 instances for 1-14 days by the day, then whole weeks up
    to 182 days, at the published effective rate: p5.48xlarge $41.528 an instance-hour in us-east-1 (aws.amazon.com
    /ec2/capacityblocks/pricing/ as transcribed 2026-07-22), against the p5.48xlarge on-demand row's $55.04."""
    from core.catalog.providers import reservation_for
    from core.money.run_bill import reserved_hours

    res = reservation_for("aws", "h100-sxm", "p5.48xlarge")
    assert res is not None and res.product == "EC2 Capacity Block" and res.usd_per_device_hour == pytest.approx(41.528 / 8)
    assert (res.min_devices, res.max_devices, res.min_term_hours, res.term_increment_hours) == (8, 512, 24.0, 24.0)
    assert reservation_for("aws", "h100-sxm", "p5.4xlarge") is None  # one GPU: not a whole node of the block's type
    row = PriceRow(
        provider="aws", instance_type="p5.48xlarge", accelerator_id="h100-sxm", accelerators_per_instance=8, on_demand_usd_per_hour=55.04,
        spot_usd_per_hour=None, region="us-east-1", estimate=False, as_of=dt.date(2026, 11, 23), source="a test row",
    )  # fmt: skip
    # 2 x p5.48xlarge (16 GPUs) for a run of 39.75 h + 0.25 h setup = 40 h: two days (48 h) paid,
    # 2 x $41.528 x 48 h = $3,986.688; on demand the same run is 2 x $55.04 x 40 h = $4,403.20
    block = bill(row, 16, 39.75, reservation=res)
    assert (block.instances, block.hours, block.paid_hours) == (2, 40.0, 48.0)
    assert block.usd == pytest.approx(3986.688) and block.usd_per_hour == pytest.approx(83.056)
    assert bill(row, 16, 39.75).usd == pytest.approx(4403.2)
    assert cheapest_bill("h100-sxm", 16, 1, 39.75, (row,)).usd == pytest.approx(3986.688)
    # a 1-hour run: the block still bills a day, 2 x $41.528 x 24 h = $1,993.344; on demand 2 x $55.04 x 1.25 h = $137.60
    assert bill(row, 16, 1.0, reservation=res).usd == pytest.approx(1993.344)
    assert cheapest_bill("h100-sxm", 16, 1, 1.0, (row,)).usd == pytest.approx(137.6)
    # 14 days is the last daily step; 14 days and an hour pays three weeks; 182 days is the longest block
    assert (reserved_hours(14 * 24.0, res), reserved_hours(14 * 24.0 + 1, res), reserved_hours(182 * 24.0, res)) == (336.0, 504.0, 4368.0)
    assert reserved_hours(182 * 24.0 + 1, res) is None and bill(row, 16, 182 * 24.0, reservation=res) is None
    # 72 instances (576 GPUs) are more than one block holds (64); one instance (8 GPUs) is a block: 30.25 h pays 2 days
    assert bill(row, 576, 1.0, reservation=res) is None and bill(row, 8, 30.0, reservation=res).usd == pytest.approx(41.528 * 48)


def test_a_reservation_with_a_longer_step_is_checked_on_load():
    from core.catalog.providers import Reservation

    row = {"provider": "x", "product": "c", "accelerator_ids": "h100-sxm", "min_devices": 8, "max_devices": 64, "min_term_hours": 24,
           "term_increment_hours": 24, "as_of": "2026-11", "source": "a test"}  # fmt: skip
    assert Reservation.model_validate(row | {"long_term_from_hours": 336, "long_term_increment_hours": 168}).term_hours(337) == 504
    with pytest.raises(ValueError, match="together"):
        Reservation.model_validate(row | {"long_term_from_hours": 336})
    with pytest.raises(ValueError, match="whole number"):
        Reservation.model_validate(row | {"long_term_from_hours": 300, "long_term_increment_hours": 168})
    with pytest.raises(ValueError, match="max_term_hours"):
        Reservation.model_validate(row | {"max_term_hours": 12})


def test_estimate_bills_the_run_the_planner_plans():
    rows = (_row("ownlab", 8, 24.0, spot=12.0),)
    result = plan(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=2e7, accelerators=("h100-sxm",)), rows)
    for p in (result.cheapest, result.fastest):
        t = estimate(Scenario.model_validate(p.scenario), rows=rows).training
        assert t.instances == p.instances and t.run_hours == pytest.approx(p.hours, rel=1e-12) and t.run_usd == pytest.approx(p.usd, rel=1e-12)
        # by hand: the instances x $24 x (0.25 h + the computation with communication)
        assert t.run_usd == pytest.approx(p.instances * 24.0 * (0.25 + t.wall_hours_with_comm), rel=1e-12)
        assert t.run_spot_usd == pytest.approx(t.run_usd / 2, rel=1e-12)


def test_training_options_bill_each_run_and_pick_within_the_horizon():
    rows = (_row("ownlab", 8, 24.0, spot=12.0), _row("ownlab", 1, 3.0, instance="1x"))
    sc = Scenario(model="llama-3.1-8b", mode="training", method="lora", accelerator="h100-sxm", train_tokens=2e7)
    opts = training_options(sc, rows)
    assert opts.options
    for o in opts.options:
        assert o.run_hours == pytest.approx(SETUP_HOURS + o.wall_hours_with_comm, rel=1e-12)
        assert o.run_usd == pytest.approx(o.instances * (24.0 if o.instance_type == "8x" else 3.0) * o.run_hours, rel=1e-12)
    assert opts.cheapest.run_usd == min(o.run_usd for o in opts.options)
    # With setup billed, the fastest run is not the one on the most devices for a short run: a minute of computation
    # saved costs 15 minutes of every extra instance.
    assert opts.fastest.run_hours <= min(o.run_hours for o in opts.options) * 1.05
    # A pretraining run of years on one device is not called cheapest while one within the horizon exists.
    long = training_options(sc.replace(method="full", train_tokens=2e11), rows)
    assert any(not o.within_bounds for o in long.options) and long.cheapest.run_hours <= HORIZON_HOURS


def test_a_provider_rents_on_demand_only_as_many_devices_as_it_publishes():
    """data/providers.csv's max_devices (issue 26: "the fastest LoRA rents 128 MI355X for 17 min"): Modal publishes
    multi-node clusters of up to 64 GPUs; AWS and Lambda publish no on-demand size, so the stated default of 64 holds
    (Lambda's 512 is its 1-Click Clusters', a reservation: data/reservations.csv, not an on-demand order)."""
    from core.catalog.providers import DEFAULT_MAX_DEVICES, max_devices, on_demand_cluster

    assert (max_devices("lambda"), max_devices("modal"), max_devices("aws"), max_devices("ownlab")) == (DEFAULT_MAX_DEVICES, 64, DEFAULT_MAX_DEVICES, None)
    assert not on_demand_cluster("lambda") and on_demand_cluster("aws") and on_demand_cluster("ownlab")
    assert bill(_row("aws", 8, 98.0), 64, 1.0).instances == 8
    assert bill(_row("aws", 8, 98.0), 72, 1.0) is None  # nine 8-GPU instances: a reservation, not an on-demand order
    assert bill(_row("lambda", 8, 24.0), 512, 1.0) is None  # on demand: past the order
    assert bill(_row("ownlab", 8, 24.0), 4096, 1.0) is not None  # one's own price list: one's own cluster


def test_a_reservation_row_is_checked_on_load():
    from core.catalog.providers import Reservation

    row = {"provider": "x", "product": "c", "accelerator_ids": "h100-sxm", "min_devices": 16, "max_devices": 64, "min_term_hours": 168,
           "term_increment_hours": 24, "as_of": "2026-11", "source": "a test"}  # fmt: skip
    assert Reservation.model_validate(row).min_term_days == 7
    with pytest.raises(ValueError, match="min_devices"):
        Reservation.model_validate(row | {"min_devices": 128})
    with pytest.raises(ValueError, match="increment"):
        Reservation.model_validate(row | {"term_increment_hours": 336})


def test_a_max_devices_needs_its_source():
    from core.catalog.providers import Provider

    row = {"provider": "x", "multi_node": True, "evidence": "a test", "as_of": "2026-11", "source": "a test"}
    assert Provider.model_validate(row | {"max_devices": 128, "max_devices_source": "https://example.org/limits"}).max_devices == 128
    with pytest.raises(ValueError, match="max_devices_source"):
        Provider.model_validate(row | {"max_devices": 128})
    with pytest.raises(ValueError):
        Provider.model_validate(row | {"max_devices": 0, "max_devices_source": "https://example.org/limits"})


@pytest.mark.parametrize(
    "goal",
    [
        {"goal": "fine-tune", "model": "llama-3.1-70b", "tokens": 5e7},
        {"goal": "pretrain", "model": "llama-3.1-8b", "tokens": 1e11},
        {"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 2e7},
        {"goal": "serve", "model": "llama-3.1-70b", "requests_per_day": 2e6},
    ],
)
def test_no_plan_rents_more_than_one_on_demand_order(goal):
    """Every plan shown, training or serving (a fleet: core/money/serving.fleet), holds no more devices than its
    provider's on-demand order: the serve planner no longer rents a 5,888-chip TPU v5p slice for small batches."""
    from core.catalog.price_trust import billable_prices
    from core.catalog.providers import max_devices, reservation_for

    per_instance = {(r.provider, r.instance_type): r.accelerators_per_instance for r in billable_prices(None)}
    result = plan(Goal.model_validate(goal))
    assert result.cheapest is not None
    for p in result.plans:
        rented = p.instances * per_instance[(p.provider, p.instance)]
        res = reservation_for(p.provider, p.accelerator, p.instance) if p.reservation else None
        assert rented <= max_devices(p.provider) or (res is not None and rented <= res.max_devices), (p.provider, p.instance, p.instances)


def test_a_goal_can_require_bf16():
    """The cheapest 70B fine-tune is LoRA on one 8 x V100 host in FP16 with loss scaling; a team that wants BF16 says
    so (Goal.require_bf16) and gets a plan on a part that has it."""
    from core.catalog.accelerators import get_accelerator

    goal = {"goal": "fine-tune", "model": "llama-3.1-70b", "tokens": 5e7}
    plain = plan(Goal.model_validate(goal))
    bf16 = plan(Goal.model_validate(goal | {"require_bf16": True}))
    assert not get_accelerator(plain.cheapest.accelerator).supports_bf16  # the V100 plan of the issue
    assert all(get_accelerator(p.accelerator).supports_bf16 for p in bf16.plans)
    assert bf16.cheapest.usd >= plain.cheapest.usd and any("no BF16" in s for s in bf16.skipped)
