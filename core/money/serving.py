"""Serving cost: USD per million output tokens, a fleet sized for a stated
traffic and its monthly bill, dedicated instances against a per-token API,
and a one-off training cost against monthly serving (the break-even month)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.catalog.accelerators import get_accelerator
from core.catalog.price_trust import billable_prices
from core.catalog.prices import PriceRow
from core.layout import Layout
from core.money.blocks import estimate_blocks
from core.money.pricing import (
    DAYS_PER_MONTH,
    HOURS_PER_MONTH,
    fleet_instances,
    serving_rows_for,
)
from core.scenario import Scenario
from core.speed.roofline import InferenceSpeed, inference_speed
from core.units import SECONDS_PER_DAY, SECONDS_PER_HOUR

_OUT = ConfigDict(frozen=True)


class Traffic(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    requests_per_day: float = Field(gt=0, le=1e12)
    input_tokens_per_request: int = Field(ge=1, le=2_097_151)
    output_tokens_per_request: int = Field(ge=1, le=2_097_151)

    @model_validator(mode="after")
    def _context(self) -> Traffic:
        if self.input_tokens_per_request + self.output_tokens_per_request > 2_097_152:
            raise ValueError("input + output tokens per request must be <= 2,097,152")
        return self

    @property
    def output_tokens_per_s(self) -> float:
        """Average output tokens per second over the day."""
        return self.requests_per_day * self.output_tokens_per_request / SECONDS_PER_DAY


class ServingPlan(BaseModel):
    model_config = _OUT
    accelerator_id: str
    provider: str
    instance_type: str
    region: str
    price_source: str
    batch_size: int
    tensor_parallel: int
    pipeline_parallel: int
    devices_per_replica: int
    time_to_first_token_s: float
    decode_tokens_per_s: float
    output_tokens_per_s_per_replica: float
    output_tokens_per_s_needed: float
    replicas: int
    instances: int
    utilisation: float  # average load of the fleet
    usd_per_hour: float
    usd_per_month: float
    spot_usd_per_month: float | None
    usd_per_million_output_tokens: float  # at this traffic (idle capacity included)


class _Replica(NamedTuple):
    tensor_parallel: int
    pipeline_parallel: int
    batch: int
    speed: InferenceSpeed


def _replica(sc: Scenario, traffic: Traffic) -> _Replica:
    seq = traffic.input_tokens_per_request + traffic.output_tokens_per_request
    req = sc.replace(seq_len=seq, mode="inference", output_tokens=traffic.output_tokens_per_request)
    inf = estimate_blocks(req)[2]
    if inf is None or inf.max_concurrent_sequences < 1:
        raise ValueError(f"{sc.accelerator}: a {seq:,}-token request does not fit in any layout")
    batch = min(sc.batch_size, inf.max_concurrent_sequences)
    speed = inference_speed(
        req,
        layout=Layout(1, inf.tensor_parallel, inf.pipeline_parallel),
        batch=batch,
        prompt_tokens=traffic.input_tokens_per_request,
        output_tokens=traffic.output_tokens_per_request,
    )
    return _Replica(inf.tensor_parallel, inf.pipeline_parallel, batch, speed)


def _plan(row: PriceRow, rep: _Replica, traffic: Traffic, max_utilisation: float) -> ServingPlan:
    d = rep.tensor_parallel * rep.pipeline_parallel
    needed = traffic.output_tokens_per_s
    per_replica = rep.speed.output_tokens_per_s
    replicas = max(1, math.ceil(needed / (per_replica * max_utilisation)))
    instances = fleet_instances(row, replicas, d)
    hourly = instances * row.on_demand_usd_per_hour
    monthly = hourly * HOURS_PER_MONTH
    return ServingPlan.model_construct(
        accelerator_id=row.accelerator_id,
        provider=row.provider,
        instance_type=row.instance_type,
        region=row.region,
        price_source=row.source,
        batch_size=rep.batch,
        tensor_parallel=rep.tensor_parallel,
        pipeline_parallel=rep.pipeline_parallel,
        devices_per_replica=d,
        time_to_first_token_s=rep.speed.time_to_first_token_s,
        decode_tokens_per_s=rep.speed.decode_tokens_per_s,
        output_tokens_per_s_per_replica=per_replica,
        output_tokens_per_s_needed=needed,
        replicas=replicas,
        instances=instances,
        utilisation=needed / (replicas * per_replica),
        usd_per_hour=hourly,
        usd_per_month=monthly,
        spot_usd_per_month=None if row.spot_usd_per_hour is None else instances * row.spot_usd_per_hour * HOURS_PER_MONTH,
        usd_per_million_output_tokens=monthly / (needed * SECONDS_PER_HOUR * HOURS_PER_MONTH) * 1e6,
    )


def _check_utilisation(max_utilisation: float) -> None:
    if not 0 < max_utilisation <= 1:
        raise ValueError("max_utilisation must be in (0, 1]")


def serving_plan(sc: Scenario, traffic: Traffic, *, row: PriceRow | None = None, rows: tuple[PriceRow, ...] | None = None, max_utilisation: float = 1.0) -> ServingPlan:
    """Replicas of the scenario's model on its accelerator that carry `traffic`
    with each replica loaded at most `max_utilisation` on average (1.0 = sized
    for the daily average, no peak headroom), always on, billed 730 h a month.
    Concurrency per replica: the scenario's batch_size, capped by memory.
    `row` defaults to the catalog row with the lowest monthly bill for the fleet."""
    _check_utilisation(max_utilisation)
    rep = _replica(sc, traffic)
    if row is not None:
        if row.accelerator_id != sc.accelerator:
            raise ValueError(f"price row is for {row.accelerator_id}, the scenario uses {sc.accelerator}")
        return _plan(row, rep, traffic, max_utilisation)
    plans = [_plan(r, rep, traffic, max_utilisation) for r in serving_rows_for(sc.accelerator, rows, rep.tensor_parallel)]
    if not plans:
        raise ValueError(f"no price row for {sc.accelerator} with {rep.tensor_parallel}+ devices per instance")
    return min(plans, key=lambda p: (p.usd_per_month, p.provider, p.instance_type))


def serving_options(
    sc: Scenario, traffic: Traffic, rows: tuple[PriceRow, ...] | None = None, *, accelerator_ids: Iterable[str] | None = None, max_utilisation: float = 1.0
) -> tuple[ServingPlan, ...]:
    """A plan per price row of each priced accelerator (or the ones named),
    cheapest per month first; accelerators the request does not fit are left out."""
    _check_utilisation(max_utilisation)
    pool = billable_prices(rows)
    ids = list(dict.fromkeys(r.accelerator_id for r in pool)) if accelerator_ids is None else list(accelerator_ids)
    plans: list[ServingPlan] = []
    for aid in ids:
        get_accelerator(aid)
        try:
            rep = _replica(sc if sc.accelerator == aid else sc.model_copy(update={"accelerator": aid}), traffic)
        except ValueError:
            continue
        plans += [_plan(r, rep, traffic, max_utilisation) for r in serving_rows_for(aid, pool, rep.tensor_parallel)]
    return tuple(sorted(plans, key=lambda p: (p.usd_per_month, p.provider, p.instance_type)))


class PerTokenComparison(BaseModel):
    model_config = _OUT
    dedicated_usd_per_month: float
    per_token_usd_per_month: float
    per_request_usd: float
    cheaper: str  # "dedicated" or "per-token"
    break_even_requests_per_day: float  # per-token bill equals this fleet's bill
    fleet_capacity_requests_per_day: float


def dedicated_vs_per_token(plan: ServingPlan, traffic: Traffic, usd_per_million_input: float, usd_per_million_output: float) -> PerTokenComparison:
    """A dedicated fleet's monthly bill against an API billed per token (prices
    given by the user). Above the break-even traffic the fleet is cheaper, up
    to its capacity (more traffic needs more replicas)."""
    if usd_per_million_input < 0 or usd_per_million_output < 0:
        raise ValueError("per-token prices must be >= 0")
    per_request = (traffic.input_tokens_per_request * usd_per_million_input + traffic.output_tokens_per_request * usd_per_million_output) / 1e6
    api_monthly = per_request * traffic.requests_per_day * DAYS_PER_MONTH
    capacity = plan.replicas * plan.output_tokens_per_s_per_replica * SECONDS_PER_DAY / traffic.output_tokens_per_request
    return PerTokenComparison.model_construct(
        dedicated_usd_per_month=plan.usd_per_month,
        per_token_usd_per_month=api_monthly,
        per_request_usd=per_request,
        cheaper="dedicated" if plan.usd_per_month < api_monthly else "per-token",
        break_even_requests_per_day=plan.usd_per_month / (per_request * DAYS_PER_MONTH) if per_request > 0 else math.inf,
        fleet_capacity_requests_per_day=capacity,
    )


class BreakEven(BaseModel):
    model_config = _OUT
    one_off_usd: float
    monthly_usd: float
    monthly_alternative_usd: float | None
    monthly_saving_usd: float | None
    break_even_month: int | None  # first month the one-off has paid for itself
    months_of_serving_per_one_off: float | None
    cumulative_usd: tuple[float, ...]  # month 0, 1, ..., months
    cumulative_alternative_usd: tuple[float, ...] | None


def train_vs_serve(one_off_usd: float, monthly_usd: float, monthly_alternative_usd: float | None = None, months: int = 24) -> BreakEven:
    """A one-off training (or fine-tuning) cost plus monthly serving, against an
    alternative with no one-off cost (a larger model, an API). Break-even at
    ceil(one-off / monthly saving) months; none when there is no saving."""
    if one_off_usd < 0 or monthly_usd < 0 or (monthly_alternative_usd is not None and monthly_alternative_usd < 0):
        raise ValueError("costs must be >= 0")
    if not 1 <= months <= 600:
        raise ValueError("months must be between 1 and 600")
    own = tuple(one_off_usd + m * monthly_usd for m in range(months + 1))
    saving = None if monthly_alternative_usd is None else monthly_alternative_usd - monthly_usd
    month = None
    if saving is not None and saving > 0:
        month = math.ceil(one_off_usd / saving - 1e-12) if one_off_usd > 0 else 0
    return BreakEven.model_construct(
        one_off_usd=one_off_usd,
        monthly_usd=monthly_usd,
        monthly_alternative_usd=monthly_alternative_usd,
        monthly_saving_usd=saving,
        break_even_month=month,
        months_of_serving_per_one_off=one_off_usd / monthly_usd if monthly_usd > 0 else None,
        cumulative_usd=own,
        cumulative_alternative_usd=None if monthly_alternative_usd is None else tuple(m * monthly_alternative_usd for m in range(months + 1)),
    )
