"""Serving cost: $/M tokens, a fleet for a stated traffic, dedicated vs per-token,
training vs serving break-even (core/money/serving.py)."""

import math

import pytest
from pydantic import ValidationError

from core.catalog.price_trust import billable_prices
from core.catalog.prices import prices_for
from core.money.pricing import DAYS_PER_MONTH, HOURS_PER_MONTH
from core.money.serving import Traffic, dedicated_vs_per_token, serving_options, serving_plan, train_vs_serve
from core.scenario import Scenario

SC = Scenario(model="llama-3.1-8b", batch_size=32, accelerator="h100-sxm")
TRAFFIC = Traffic(requests_per_day=100_000, input_tokens_per_request=1000, output_tokens_per_request=300)


def test_plan_for_traffic():
    plan = serving_plan(SC, TRAFFIC)
    assert plan.output_tokens_per_s_needed == pytest.approx(100_000 * 300 / 86_400)
    assert plan.replicas == max(1, math.ceil(plan.output_tokens_per_s_needed / plan.output_tokens_per_s_per_replica))
    assert plan.usd_per_month == pytest.approx(plan.usd_per_hour * HOURS_PER_MONTH)
    assert 0 < plan.utilisation <= 1
    assert plan.usd_per_million_output_tokens == pytest.approx(plan.usd_per_month / (plan.output_tokens_per_s_needed * 3600 * HOURS_PER_MONTH) * 1e6)
    # the default row is the cheapest fleet, not the cheapest share of a big instance
    fleets = [serving_plan(SC, TRAFFIC, row=r).usd_per_month for r in prices_for("h100-sxm", billable_prices())]  # flagged rows aside
    assert plan.usd_per_month == pytest.approx(min(fleets))
    # the spot bill is the chosen row's spot price for the same instances, and absent exactly where the row has none
    row = next(r for r in billable_prices() if (r.provider, r.instance_type, r.accelerator_id) == (plan.provider, plan.instance_type, "h100-sxm"))
    if row.spot_usd_per_hour is None:
        assert plan.spot_usd_per_month is None
    else:
        assert plan.spot_usd_per_month == pytest.approx(plan.instances * row.spot_usd_per_hour * HOURS_PER_MONTH)


def test_more_traffic_never_costs_less_and_headroom_costs_more():
    small = serving_plan(SC, TRAFFIC)
    big = serving_plan(SC, TRAFFIC.model_copy(update={"requests_per_day": 50_000_000}))
    assert big.replicas > small.replicas and big.usd_per_month > small.usd_per_month
    assert big.usd_per_million_output_tokens < small.usd_per_million_output_tokens  # idle capacity amortised
    headroom = serving_plan(SC, TRAFFIC.model_copy(update={"requests_per_day": 50_000_000}), max_utilisation=0.5)
    assert headroom.replicas >= 2 * big.replicas - 1 and headroom.utilisation <= 0.5


def test_model_that_needs_several_devices():
    plan = serving_plan(Scenario(model="llama-3.1-70b", accelerator="h100-sxm", batch_size=16), TRAFFIC)
    assert plan.devices_per_replica >= 2 and plan.devices_per_replica == plan.tensor_parallel * plan.pipeline_parallel


def test_options_across_accelerators():
    plans = serving_options(SC, TRAFFIC, accelerator_ids=["h100-sxm", "a100-sxm-80gb", "l4", "tpu-v5e", "rtx-4080"])
    assert {p.accelerator_id for p in plans} == {"h100-sxm", "a100-sxm-80gb", "l4", "tpu-v5e"}  # no cloud rents an RTX 4080
    assert [p.usd_per_month for p in plans] == sorted(p.usd_per_month for p in plans)


def test_dedicated_vs_per_token_break_even():
    plan = serving_plan(SC, TRAFFIC)
    cmp = dedicated_vs_per_token(plan, TRAFFIC, usd_per_million_input=0.2, usd_per_million_output=0.6)
    assert cmp.per_request_usd == pytest.approx((1000 * 0.2 + 300 * 0.6) / 1e6)
    assert cmp.per_token_usd_per_month == pytest.approx(cmp.per_request_usd * 100_000 * DAYS_PER_MONTH)
    at_break_even = TRAFFIC.model_copy(update={"requests_per_day": cmp.break_even_requests_per_day})
    again = dedicated_vs_per_token(plan, at_break_even, 0.2, 0.6)
    assert again.per_token_usd_per_month == pytest.approx(plan.usd_per_month)
    assert cmp.cheaper == ("per-token" if cmp.per_token_usd_per_month < plan.usd_per_month else "dedicated")
    assert cmp.fleet_capacity_requests_per_day >= TRAFFIC.requests_per_day


def test_train_vs_serve_break_even_month():
    be = train_vs_serve(10_000, monthly_usd=2_000, monthly_alternative_usd=5_000, months=12)
    assert be.monthly_saving_usd == 3_000 and be.break_even_month == 4  # 10,000 / 3,000 = 3.3 -> month 4
    m = be.break_even_month
    assert be.cumulative_usd[m] <= be.cumulative_alternative_usd[m]
    assert be.cumulative_usd[m - 1] > be.cumulative_alternative_usd[m - 1]
    assert be.months_of_serving_per_one_off == 5.0
    assert len(be.cumulative_usd) == 13 and be.cumulative_usd[0] == 10_000
    assert train_vs_serve(10_000, 2_000, 6_000).break_even_month == 3  # exactly paid back at month 2.5 -> 3
    assert train_vs_serve(10_000, 2_000, 1_000).break_even_month is None  # no saving, never
    assert train_vs_serve(10_000, 2_000).cumulative_alternative_usd is None
    with pytest.raises(ValueError):
        train_vs_serve(-1, 1)


def test_traffic_validation():
    with pytest.raises(ValidationError):
        Traffic(requests_per_day=0, input_tokens_per_request=10, output_tokens_per_request=10)
    with pytest.raises(ValidationError):
        Traffic(requests_per_day=10, input_tokens_per_request=2_000_000, output_tokens_per_request=200_000)
    with pytest.raises(ValueError, match="max_utilisation"):
        serving_plan(SC, TRAFFIC, max_utilisation=1.5)
    with pytest.raises(ValueError, match="price row is for"):
        serving_plan(SC, TRAFFIC, row=prices_for("a100-sxm-80gb")[0])
    with pytest.raises(ValueError, match="no price row"):
        serving_plan(SC.model_copy(update={"accelerator": "rtx-4080"}), TRAFFIC)
