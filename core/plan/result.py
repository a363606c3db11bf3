"""A plan and the planner's answer. A contract (`python -m core plan`): fields are added, never renamed or dropped."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

from core.catalog.price_trust import market_note
from core.text import listed

_OUT = ConfigDict(frozen=True)


class Plan(BaseModel):
    model_config = _OUT
    accelerator: str
    accelerator_name: str
    provider: str
    instance: str
    region: str
    instances: int
    devices: int  # devices the plan uses
    idle_devices: int  # rented with the instances and left unused
    method: str  # full | lora | qlora (training); "serve" for serving plans
    precision: str
    weights_format: str
    gradient_checkpointing: bool
    zero_stage: int
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int  # training: data-parallel ranks; serving: replicas
    micro_batch: int  # training: sequences per device per micro-batch; serving: concurrent sequences per replica
    gradient_accumulation_steps: int
    scaling_efficiency: float  # ideal time / time with communication (1.0 on one device)
    usd_per_hour: float  # what the rented instances cost per hour
    price_is_estimate: bool
    price_source: str
    price_as_of: str
    usd_per_device_hour: float | None = None  # the row's price per rented device-hour (spot or on-demand, as planned)
    price_note: str | None = None  # where the price sits against its accelerator's market (price_trust.market_note)
    # training goals
    hours: float | None = None
    usd: float | None = None
    # serving goals
    usd_per_month: float | None = None
    usd_per_million_tokens: float | None = None  # basis: input + output tokens, at the goal's traffic (= ..._in_and_out_at_traffic)
    usd_per_million_output_tokens: float | None = None  # basis: output tokens at the goal's traffic (= ..._output_tokens_at_traffic)
    utilisation: float | None = None  # average load of the serving fleet
    time_to_first_token_s: float | None = None
    tokens_per_s_per_user: float | None = None
    output_tokens_per_s_capacity: float | None = None  # what the whole fleet can generate
    pareto: bool = False  # on the time-vs-cost frontier
    within_bounds: bool = True  # meets the goal's deadline and budget
    notes: tuple[str, ...] = ()
    scenario: dict[str, Any]  # reproduces the plan through `python -m core estimate`
    # serving goals (added beside the fields above, whose names and meaning stay)
    usd_per_million_output_tokens_at_traffic: float | None = None  # the monthly bill / the month's output tokens
    usd_per_million_tokens_in_and_out_at_traffic: float | None = None  # the monthly bill / the month's input + output tokens
    kv_cache_format: str | None = None
    max_batch_that_fits: int | None = None  # concurrent sequences per replica memory allows
    max_batch_meeting_targets: int | None = None  # the most that keep time to first token and tokens/s per user in the targets
    # serving goals, under load at micro_batch concurrent users per replica (core/speed/load.py); time_to_first_token_s
    # and tokens_per_s_per_user above are the median user's (p50); the targets are checked on these p90 figures
    time_to_first_token_p90_s: float | None = None
    tokens_per_s_per_user_p90: float | None = None  # 90% of users get at least this
    expert_parallel: bool = False  # serving: each replica expert-parallel over its tensor_parallel devices, attention data-parallel
    # training goals on a provider's reserved cluster (data/reservations.csv); None on demand
    reservation: str | None = None  # the reserved product ("1-Click Cluster", "EC2 Capacity Block")
    reservation_min_term_hours: float | None = None  # its minimum term, billed even when the run is shorter
    paid_hours: float | None = None  # training: hours paid for (the reservation's whole terms; on demand = hours)
    goal: str | None = None  # the goal planned for: fine-tune | pretrain | serve (None: a plan made before it was added)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def launch(self) -> str | None:
        """The shell command (and a trainer's config file) that runs this plan (core/plan/launch/); built when read,
        so the search pays nothing for it."""
        from core.plan.launch import launch_command

        return launch_command(self)

    @property
    def cost(self) -> float:
        """What the planner minimises: the run's cost, or the monthly bill."""
        return self.usd if self.usd is not None else (self.usd_per_month or 0.0)

    @property
    def duration(self) -> float:
        """What 'fastest' minimises: the run's hours, or the seconds per generated token a user sees."""
        if self.hours is not None:
            return self.hours
        return 1.0 / (self.tokens_per_s_per_user or 1e-9)


def spot_priced(pricing: str, option: Any) -> bool:
    """Whether a priced option pays its row's spot price: a spot goal, and not a reserved cluster (never spot)."""
    return pricing == "spot" and getattr(option, "reservation", None) is None


def price_note(row: Any, price: float, spot: bool) -> str | None:
    """Where `price` (per instance-hour of `row`, spot when `spot`) sits against its part's market
    (price_trust.market_note): the Plan's `price_note`, and the planner's test for a listing far below the market."""
    return market_note(row, price / row.accelerators_per_instance, spot)


def rental_fields(accelerator_id: str, accelerator_name: str, row: Any, instances: int, price: float, spot: bool) -> dict[str, Any]:
    """The Plan fields that say what is rented (a price row of core/catalog/prices.py) and what it costs per hour
    (`price` per instance-hour, a spot price when `spot`)."""
    return {
        "accelerator": accelerator_id,
        "accelerator_name": accelerator_name,
        "provider": row.provider,
        "instance": row.instance_type,
        "region": row.region,
        "instances": instances,
        "usd_per_hour": instances * price,
        "price_is_estimate": row.estimate,
        "price_source": row.source,
        "price_as_of": row.as_of.isoformat(),
        "usd_per_device_hour": price / row.accelerators_per_instance,
        "price_note": price_note(row, price, spot),
    }


class ApiQuote(BaseModel):
    model_config = _OUT
    provider: str
    model: str
    usd_per_month: float
    input_usd_per_million: float
    output_usd_per_million: float
    same_model: bool  # the same open weights; otherwise a comparable model
    as_of: str
    source: str


class PlanResult(BaseModel):
    model_config = _OUT
    goal: str
    plans: tuple[Plan, ...]  # the frontier first, then the best plan per accelerator; cheapest first
    cheapest: Plan | None
    fastest: Plan | None
    api_quotes: tuple[ApiQuote, ...] = ()
    considered: int = 0  # plans priced before filtering
    assumptions: tuple[str, ...]
    skipped: tuple[str, ...] = ()  # accelerators left out, with why
    # training: the cheapest plan that runs past the deadline (or, without one, the 30-day horizon) when it is cheaper
    # than `cheapest`: what accepting a longer run would save
    cheaper_if_longer: Plan | None = None
    # when `cheapest` is priced far below its accelerator's market (Plan.price_note: one marketplace listing or a
    # promotion), the cheapest plan priced within the market: what the run costs if that listing is gone
    cheapest_at_market: Plan | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> str | None:
        """One line where the answer is not a plan that meets the goal (None where it is): why no plan fits, from
        the skipped lines, or that the cheapest plan misses the deadline or budget. The Plan page's red line, and
        the CLI's (stderr); it had 42 skipped lines and `plans: []` to read (stop 48's planner review, M1)."""
        if self.cheapest is None:
            return "No plan fits: " + no_plan_reason(self.skipped)
        if not self.cheapest.within_bounds:
            return "No plan meets the deadline and budget: `cheapest` is the cheapest plan regardless."
        return None


def no_plan_reason(skipped: tuple[str, ...] | list[str], reasons: int = 4) -> str:
    """Why no plan fits, from the planner's skipped lines ('part: why'): each reason once, with the parts it applies to
    (DeepSpeed-MII without an implementation of the model skips every part for the same reason: one sentence, not one
    a part), the first `reasons` of them."""
    parts: dict[str, list[str]] = {}
    for line in skipped:
        part, sep, why = line.partition(": ")
        if not sep or " " in part:  # a part id has no spaces: a goal-wide sentence with a colon of its own
            part, why = "", line
        parts.setdefault(why, []).append(part)
    out = []
    for why, ids in list(parts.items())[:reasons]:
        ids = [i for i in ids if i]
        out.append(f"{why} (on {listed(ids, 'parts', 3)})" if ids else why)
    return "; ".join(out) or "no accelerator in the catalog has a price row for it"
