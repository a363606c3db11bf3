"""The one serving core: a scenario served to a stated traffic with latency targets, on a price row, as a monthly
bill. The Plan page's serve goal (core/plan/serve.py), the Inference page's bill, Training vs inference and the CLI's
`plan` all price a fleet through `replica_capacity` and `price_fleet`, so the same scenario and traffic cost the same
everywhere.

- A replica's batch (concurrent sequences) is the largest that meets the traffic's time to first token and each
  user's tokens/s, at most what fits in memory (every batch from 1 to MAX_BATCH is tried, not powers of two). The
  latencies are those a continuous-batching engine delivers at that many concurrent users, with the prefill of
  arriving requests interleaved with the decodes and queueing (core/speed/load.py): 90% of requests must see their
  first token within the target (p90 TTFT) and 90% of users must get at least the target's tokens/s (the p90
  inter-token latency). The replica's output tokens/s (the cost basis) stays the roofline's batch cycle.
- Replicas are sized for the busiest hour (peak_to_average x the day's average output tokens/s); every slot of a
  rented instance serves (a replica of d devices on an instance of k: floor(k / d) of them), whole instances billed,
  730 hours a month.
- A marketplace listing or a reseller's machine is one host (data/providers.csv: a provider that does not rent
  several machines on its own network, core/catalog/providers.spans_nodes): a fleet on such a row is one instance
  at most. Independent replicas need no cluster network, but the listing cannot be rented twice.
- USD per million tokens states its basis: output tokens, or input + output tokens, at this traffic (idle capacity
  included).

Also: dedicated instances against a per-token API, and a one-off training cost against monthly serving (the
break-even month)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.catalog.accelerators import Accelerator, get_accelerator
from core.catalog.price_trust import billable_prices
from core.catalog.prices import PriceRow
from core.catalog.providers import spans_nodes
from core.catalog.tpu_slices import rentable_chips
from core.layout import Layout
from core.memory.components import expert_parallel_ranks
from core.memory.evaluator import Evaluator, fit_capacity
from core.memory.problems import serving_problem
from core.money.blocks import estimate_blocks
from core.money.pricing import DAYS_PER_MONTH, HOURS_PER_MONTH, on_demand_ok, serving_rows_for, wider_orders
from core.scenario import Scenario
from core.speed.expert_parallel import MAX_TOKENS_PER_RANK
from core.speed.load import PartLoad, load_curves
from core.speed.roofline import replica_output_tokens_per_s, roofline, roofs_of
from core.units import SECONDS_PER_DAY

_OUT = ConfigDict(frozen=True)
# Concurrent sequences per replica the search tries: every integer up to 2,048 (vLLM's --max-num-seqs, 256 by
# default in V0 and 1,024 on large GPUs in V1, is a flag: docs.vllm.ai, "Engine Arguments"). Memory caps it first
# for any model and context the planner is asked about.
MAX_BATCH = 2048
BATCHES = np.arange(1, MAX_BATCH + 1, dtype=np.float64)
# The figures under load a replica's curve carries (core/speed/load.py); the targets are checked on the p90 ones.
LOAD_KEYS = ("time_to_first_token_p50_s", "time_to_first_token_p90_s", "tokens_per_s_per_user_p50", "tokens_per_s_per_user_p90")


class Traffic(BaseModel):
    """A day's requests and what a user must see. The latency targets and the busiest hour are the Plan goal's
    (core/plan/goal.py), with the same defaults, so a page and the planner size the same fleet."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    requests_per_day: float = Field(gt=0, le=1e12)
    input_tokens_per_request: int = Field(ge=1, le=2_097_151)
    output_tokens_per_request: int = Field(ge=1, le=2_097_151)
    peak_to_average: float = Field(default=2.0, ge=1.0, le=100.0, description="busiest hour's traffic over the day's average")
    ttft_s: float = Field(default=2.0, gt=0, le=600, description="time to first token a user waits at most (seconds)")
    tokens_per_s_per_user: float = Field(default=20.0, gt=0, le=10_000, description="generation speed each user sees at least")

    @model_validator(mode="after")
    def _context(self) -> Traffic:
        if self.input_tokens_per_request + self.output_tokens_per_request > 2_097_152:
            raise ValueError("input + output tokens per request must be <= 2,097,152")
        return self

    @property
    def output_tokens_per_s(self) -> float:
        """Average output tokens per second over the day."""
        return self.requests_per_day * self.output_tokens_per_request / SECONDS_PER_DAY

    @property
    def peak_output_tokens_per_s(self) -> float:
        """Output tokens per second in the busiest hour: what the fleet is sized for."""
        return self.output_tokens_per_s * self.peak_to_average

    @property
    def output_tokens_per_month(self) -> float:
        return self.requests_per_day * DAYS_PER_MONTH * self.output_tokens_per_request

    @property
    def tokens_in_and_out_per_month(self) -> float:
        return self.requests_per_day * DAYS_PER_MONTH * (self.input_tokens_per_request + self.output_tokens_per_request)


class ServingPlan(BaseModel):
    """A fleet's bill. Fields before `weights_format` are the original contract and keep their meaning."""

    model_config = _OUT
    accelerator_id: str
    provider: str
    instance_type: str
    region: str
    price_source: str
    batch_size: int  # concurrent sequences per replica in the busiest hour (at most max_batch_meeting_targets)
    tensor_parallel: int
    pipeline_parallel: int
    devices_per_replica: int
    time_to_first_token_s: float  # at batch_size, under load: the median request's (= time_to_first_token_p50_s)
    decode_tokens_per_s: float  # each user's generation speed at batch_size, under load: the median user's
    output_tokens_per_s_per_replica: float  # one replica's capacity at max_batch_meeting_targets (the sizing basis)
    output_tokens_per_s_needed: float  # the day's average
    replicas: int
    instances: int
    utilisation: float  # average load of the fleet
    usd_per_hour: float
    usd_per_month: float  # on demand
    spot_usd_per_month: float | None
    usd_per_million_output_tokens: float  # basis: output tokens at this traffic, idle capacity included (= ..._at_traffic)
    weights_format: str = ""
    kv_cache_format: str = ""
    peak_output_tokens_per_s_needed: float = 0.0  # the busiest hour: what the fleet is sized for
    max_batch_that_fits: int = 0
    max_batch_meeting_targets: int = 0
    idle_devices: int = 0  # rented with the instances, left unused (the next replica needs more)
    usd_per_million_output_tokens_at_traffic: float = 0.0  # the monthly bill / the month's output tokens
    usd_per_million_tokens_in_and_out_at_traffic: float = 0.0  # the monthly bill / the month's input + output tokens
    spot_usd_per_million_output_tokens_at_traffic: float | None = None
    # under load at batch_size concurrent users (core/speed/load.py): p50 / p90 over requests
    time_to_first_token_p50_s: float = 0.0
    time_to_first_token_p90_s: float = 0.0
    tokens_per_s_per_user_p50: float = 0.0
    tokens_per_s_per_user_p90: float = 0.0  # 90% of users get at least this
    inter_token_latency_p50_s: float = 0.0
    inter_token_latency_p90_s: float = 0.0


class ReplicaCapacity(NamedTuple):
    """What one replica of a scenario on one part carries for a traffic: `curve` holds time to first token, each
    user's decode tokens/s (both under load, the median's) and the replica's output tokens/s at batches 1 ...
    max_batch_meeting_targets, with the LOAD_KEYS figures (p50 and p90) under load."""

    tensor_parallel: int
    pipeline_parallel: int
    max_batch_that_fits: int
    max_batch_meeting_targets: int
    curve: dict[str, np.ndarray]

    @property
    def output_tokens_per_s(self) -> float:
        return float(self.curve["output_tokens_per_s"][-1])


def request_scenario(sc: Scenario, traffic: Traffic, **update: object) -> Scenario:
    """The scenario as one request of the traffic: a context of its input + output tokens, served."""
    seq = traffic.input_tokens_per_request + traffic.output_tokens_per_request
    return sc.replace(seq_len=seq, mode="inference", output_tokens=traffic.output_tokens_per_request, **update)


def memory_by_batch(sc: Scenario, layout: Layout) -> np.ndarray:
    """Bytes per device at batches 1 ... MAX_BATCH (memory per device does not depend on the part: the planner sizes
    a format and layout once for every accelerator)."""
    comps = Evaluator(sc, sc.architecture).components(layout, BATCHES, sc.seq_len)[0]
    return np.broadcast_to(np.asarray(comps.total, dtype=np.float64), BATCHES.shape)


def replica_capacity(sc: Scenario, acc: Accelerator, layout: Layout, traffic: Traffic, memory: np.ndarray | None = None) -> ReplicaCapacity | str:
    """The largest batch that fits on `acc` and meets the traffic's latency targets, with the speeds up to it; or why
    there is none. `sc` is a request of the traffic (request_scenario); `memory` is memory_by_batch(sc, layout)."""
    return replica_capacities(sc, [acc], layout, traffic, memory)[0]


def replica_capacities(sc: Scenario, accs: list[Accelerator], layout: Layout, traffic: Traffic, memory: np.ndarray | None = None) -> list[ReplicaCapacity | str]:
    """replica_capacity of one request scenario and layout on each part of `accs`, their load curves solved together
    (core/speed/load.load_curves): the planner's search sizes a candidate on every part at once."""
    total = memory_by_batch(sc, layout) if memory is None else memory
    out: list[ReplicaCapacity | str] = [f"a {sc.seq_len:,}-token request does not fit"] * len(accs)
    where: list[int] = []  # the index in `out` of each part that holds a request
    parts: list[PartLoad] = []
    for i, acc in enumerate(accs):
        fits = total <= fit_capacity(sc, float(acc.usable_memory_bytes))
        if not fits.any():
            continue
        n_fit = int(np.flatnonzero(fits).max()) + 1
        if (ranks := expert_parallel_ranks(sc, layout)) > 1:
            n_fit = min(n_fit, MAX_TOKENS_PER_RANK * ranks)  # DeepEP's low-latency buffers: at most 256 decodes a rank
        where.append(i)
        parts.append(PartLoad(acc, roofline(sc, acc, layout), BATCHES[:n_fit], n_fit))
    prompt, output = traffic.input_tokens_per_request, traffic.output_tokens_per_request
    targets = (traffic.ttft_s, traffic.tokens_per_s_per_user)
    loads = load_curves(sc, layout, parts, prompt, output, keys=LOAD_KEYS, within=targets)
    tops = [len(load["time_to_first_token_p90_s"]) for load in loads]  # the batches up to the last meeting both targets at p90
    # one replica's output tokens/s up to each part's top batch: the parts with a plain step in one pass (_Roofs)
    plain = [j for j, (p, top) in enumerate(zip(parts, tops, strict=True)) if top and p.roof.ep_ranks == 1]
    speeds: dict[int, np.ndarray] = {}
    if plain:
        rows = replica_output_tokens_per_s(roofs_of([parts[j].roof for j in plain]), BATCHES[: max(tops[j] for j in plain)], prompt, output)
        speeds = {j: rows[r, : tops[j]] for r, j in enumerate(plain)}
    for j, (i, part, load, top) in enumerate(zip(where, parts, loads, tops, strict=True)):
        if top == 0:
            out[i] = f"no batch meets {traffic.tokens_per_s_per_user:g} tokens/s per user within {traffic.ttft_s:g} s to the first token (for 90% of requests)"
            continue
        curve = {
            "time_to_first_token_s": load["time_to_first_token_p50_s"],
            "decode_tokens_per_s": load["tokens_per_s_per_user_p50"],
            "output_tokens_per_s": speeds[j] if j in speeds else replica_output_tokens_per_s(part.roof, BATCHES[:top], prompt, output),
            **load,
        }
        out[i] = ReplicaCapacity(layout.tensor_parallel, layout.pipeline_parallel, len(part.concurrency), top, curve)
    return out


def rents_many(row: PriceRow) -> bool:
    """Whether a fleet may rent several instances of this row: not a marketplace listing or a reseller's machine,
    which is one host (data/providers.csv through spans_nodes; a provider the catalog does not list may)."""
    return spans_nodes(row.provider, row.instance_type)


def fleet(row: PriceRow, devices_per_replica: int, replicas_needed: int, kind: str) -> tuple[int, int] | None:
    """(replicas, instances) of a fleet of `replicas_needed` replicas on whole instances of `row`, every slot of a
    rented instance serving; None where the row cannot be rented that many times (one host, or more devices than one
    on-demand order of its provider holds: core/money/pricing.on_demand_ok). A TPU row priced by the chip
    (accelerators_per_instance 1) rents slices (data/tpu_slices.csv): each the smallest that holds a replica's chips,
    shared by as many replicas as it holds (tensor parallel 2 on a v5e rents 4-chip slices, two replicas each; a
    v5p's smallest slice is 4 chips), so a fleet's chips are whole slices."""
    k = row.accelerators_per_instance
    d = devices_per_replica
    if kind == "tpu" and k == 1 and (chips := rentable_chips(row.accelerator_id, d)) % d == 0:
        slices = math.ceil(replicas_needed / (chips // d))
        replicas, instances = slices * (chips // d), slices * chips
    elif d <= k:
        per_instance = k // d
        instances = math.ceil(replicas_needed / per_instance)
        replicas = instances * per_instance
    else:
        replicas, instances = replicas_needed, replicas_needed * math.ceil(d / k)
    if instances > 1 and kind != "tpu" and not rents_many(row):
        return None
    if not on_demand_ok(row, instances):
        return None  # more devices than one on-demand order of the provider holds (data/providers.csv's max_devices)
    return replicas, instances


class Fleet(NamedTuple):
    """A fleet's size on a row: replicas, whole instances, and the concurrent sequences each replica runs in the
    busiest hour (index batch - 1 of the capacity's curve)."""

    replicas: int
    instances: int
    batch: int


def size_fleet(row: PriceRow, cap: ReplicaCapacity, traffic: Traffic, max_utilisation: float = 1.0, kind: str | None = None) -> Fleet | None:
    """Replicas for the traffic's busiest hour at each replica's largest batch within the targets (at most
    `max_utilisation` loaded then), on whole instances of `row` (None where the row cannot be rented that many times).
    In the busiest hour each replica runs the smallest batch that still carries its share (faster for each user).
    `kind` is the part's (looked up when not given)."""
    return size_fleets([row], cap, traffic, max_utilisation, kind or get_accelerator(row.accelerator_id).kind)[0]


def size_fleets(rows: list[PriceRow], cap: ReplicaCapacity, traffic: Traffic, max_utilisation: float, kind: str) -> list[Fleet | None]:
    """size_fleet on each of `rows` (of one part, of kind `kind`): the replicas needed are the capacity's, and rows
    that rent as many replicas run them at the same batch, which is read off the curve once (the planner's search)."""
    peak = traffic.peak_output_tokens_per_s
    needed = max(1, math.ceil(peak / (cap.output_tokens_per_s * max_utilisation) - 1e-9))
    out = cap.curve["output_tokens_per_s"]
    batches: dict[int, int] = {}  # replicas -> the smallest batch that carries the peak with them
    fleets: list[Fleet | None] = []
    for row in rows:
        sized = fleet(row, cap.tensor_parallel * cap.pipeline_parallel, needed, kind)
        if sized is None:
            fleets.append(None)
            continue
        replicas, instances = sized
        if replicas not in batches:
            batches[replicas] = int(np.argmax(out * replicas >= peak)) + 1 if out[-1] * replicas >= peak else len(out)
        fleets.append(Fleet(replicas, instances, batches[replicas]))
    return fleets


def fleet_usd_per_month(row: PriceRow, instances: int, spot: bool = False) -> float | None:
    """Whole instances, always on: instances x the row's hourly price x 730 hours (None: no spot price)."""
    price = row.spot_usd_per_hour if spot else row.on_demand_usd_per_hour
    return None if price is None else instances * price * HOURS_PER_MONTH


def bill(sc: Scenario, row: PriceRow, cap: ReplicaCapacity, traffic: Traffic, f: Fleet) -> ServingPlan:
    """The bill of a fleet sized by size_fleet, with the speeds each user sees in the busiest hour."""
    d = cap.tensor_parallel * cap.pipeline_parallel
    per_replica = cap.output_tokens_per_s
    i = f.batch - 1
    monthly = fleet_usd_per_month(row, f.instances) or 0.0
    spot = fleet_usd_per_month(row, f.instances, spot=True)
    out_month, all_month = traffic.output_tokens_per_month / 1e6, traffic.tokens_in_and_out_per_month / 1e6
    average = traffic.output_tokens_per_s
    c = cap.curve  # a curve without the percentiles (written by hand) reads its one figure for both
    ttft = [float(c.get(f"time_to_first_token_p{q}_s", c["time_to_first_token_s"])[i]) for q in (50, 90)]
    speed = [float(c.get(f"tokens_per_s_per_user_p{q}", c["decode_tokens_per_s"])[i]) for q in (50, 90)]
    return ServingPlan.model_construct(
        accelerator_id=row.accelerator_id,
        provider=row.provider,
        instance_type=row.instance_type,
        region=row.region,
        price_source=row.source,
        batch_size=f.batch,
        tensor_parallel=cap.tensor_parallel,
        pipeline_parallel=cap.pipeline_parallel,
        devices_per_replica=d,
        time_to_first_token_s=float(cap.curve["time_to_first_token_s"][i]),
        decode_tokens_per_s=float(cap.curve["decode_tokens_per_s"][i]),
        output_tokens_per_s_per_replica=per_replica,
        output_tokens_per_s_needed=average,
        replicas=f.replicas,
        instances=f.instances,
        utilisation=average / (f.replicas * per_replica),
        usd_per_hour=f.instances * row.on_demand_usd_per_hour,
        usd_per_month=monthly,
        spot_usd_per_month=spot,
        usd_per_million_output_tokens=monthly / out_month,
        weights_format=sc.weights_format,
        kv_cache_format=sc.kv_cache_format,
        peak_output_tokens_per_s_needed=traffic.peak_output_tokens_per_s,
        max_batch_that_fits=cap.max_batch_that_fits,
        max_batch_meeting_targets=cap.max_batch_meeting_targets,
        idle_devices=f.instances * row.accelerators_per_instance - f.replicas * d if d <= row.accelerators_per_instance else 0,
        usd_per_million_output_tokens_at_traffic=monthly / out_month,
        usd_per_million_tokens_in_and_out_at_traffic=monthly / all_month,
        spot_usd_per_million_output_tokens_at_traffic=None if spot is None else spot / out_month,
        time_to_first_token_p50_s=ttft[0],
        time_to_first_token_p90_s=ttft[1],
        tokens_per_s_per_user_p50=speed[0],
        tokens_per_s_per_user_p90=speed[1],
        inter_token_latency_p50_s=1.0 / speed[0],
        inter_token_latency_p90_s=1.0 / speed[1],
    )


def price_fleet(sc: Scenario, row: PriceRow, cap: ReplicaCapacity, traffic: Traffic, max_utilisation: float = 1.0, kind: str | None = None) -> ServingPlan | None:
    """size_fleet, then its bill (None where the row cannot be rented as many times as the fleet needs)."""
    f = size_fleet(row, cap, traffic, max_utilisation, kind)
    return None if f is None else bill(sc, row, cap, traffic, f)


def serving_rows(rows: tuple[PriceRow, ...] | None, accelerator_id: str, tensor_parallel: int, spot: bool = False) -> list[PriceRow]:
    """The rows a fleet of one accelerator might be priced on: per instance size, the cheapest row, and the rows that
    can be rented many times, cheapest first, each kept where its provider's on-demand order holds more devices than
    every cheaper one's (data/providers.csv max_devices: a fleet past one provider's order is priced on the next). A
    dearer row of the same size never wins otherwise."""
    cheapest: dict[int, tuple[float, str, str, PriceRow]] = {}
    many: dict[int, list[tuple[float, str, str, PriceRow]]] = {}
    for r in serving_rows_for(accelerator_id, rows, tensor_parallel):
        price = r.spot_usd_per_hour if spot else r.on_demand_usd_per_hour
        if price is None:
            continue
        key, k = (price, r.provider, r.instance_type, r), r.accelerators_per_instance
        if k not in cheapest or key[:3] < cheapest[k][:3]:
            cheapest[k] = key
        if rents_many(r):
            many.setdefault(k, []).append(key)
    out = {id(v[3]): v[3] for v in cheapest.values()}
    for priced in many.values():
        for _, r, _ in wider_orders((price, r) for price, _, _, r in priced):
            out[id(r)] = r
    return sorted(out.values(), key=lambda r: (r.accelerators_per_instance, r.provider, r.instance_type))


def _replica(sc: Scenario, traffic: Traffic) -> tuple[Scenario, ReplicaCapacity]:
    """The sidebar's scenario as a replica: its layout where that fits one request, else the smallest that does (the
    scenario's batch is not read: the replica's batch comes from the traffic)."""
    req = request_scenario(sc, traffic, batch_size=1)
    inf = estimate_blocks(req)[2]
    if inf is None or inf.max_concurrent_sequences < 1:
        raise ValueError(f"{sc.accelerator}: a {req.seq_len:,}-token request does not fit in any layout")
    cap = replica_capacity(req, get_accelerator(sc.accelerator), Layout(1, inf.tensor_parallel, inf.pipeline_parallel), traffic)
    if isinstance(cap, str):
        raise ValueError(f"{sc.accelerator}: {cap}")
    return req, cap


def _check_utilisation(max_utilisation: float) -> None:
    if not 0 < max_utilisation <= 1:
        raise ValueError("max_utilisation must be in (0, 1]")


def _order(p: ServingPlan) -> tuple[float, str, str]:
    return (p.usd_per_month, p.provider, p.instance_type)


def serving_plan(sc: Scenario, traffic: Traffic, *, row: PriceRow | None = None, rows: tuple[PriceRow, ...] | None = None, max_utilisation: float = 1.0) -> ServingPlan:
    """Replicas of the scenario's model, weights and KV cache on its accelerator that carry `traffic` in its busiest
    hour within its latency targets (each replica loaded at most `max_utilisation` then), always on, billed 730 h a
    month. The batch comes from the traffic and the targets, never from the scenario's batch_size. `row` defaults
    to the catalog row with the lowest monthly bill for the fleet."""
    _check_utilisation(max_utilisation)
    req, cap = _replica(sc, traffic)
    if row is not None:
        if row.accelerator_id != sc.accelerator:
            raise ValueError(f"price row is for {row.accelerator_id}, the scenario uses {sc.accelerator}")
        plan = price_fleet(req, row, cap, traffic, max_utilisation)
        if plan is None:
            raise ValueError(f"{row.provider} {row.instance_type} cannot be rented as many times as this traffic needs (one host, or beyond one on-demand order)")
        return plan
    plans = [p for r in serving_rows_for(sc.accelerator, rows, cap.tensor_parallel) if (p := price_fleet(req, r, cap, traffic, max_utilisation)) is not None]
    if not plans:
        raise ValueError(f"no price row for {sc.accelerator} with {cap.tensor_parallel}+ devices per instance that rents the instances this traffic needs")
    return min(plans, key=_order)


def serving_options(
    sc: Scenario, traffic: Traffic, rows: tuple[PriceRow, ...] | None = None, *, accelerator_ids: Iterable[str] | None = None, max_utilisation: float = 1.0
) -> tuple[ServingPlan, ...]:
    """A plan per price row of each priced accelerator (or the ones named), cheapest per month first; accelerators
    the engine does not serve the scenario on (core/memory/problems.serving_problem: the model's architecture, the
    weights' format and kernels, data/engine_models.csv, data/format_kernels.csv), that the request does not fit,
    or whose rows cannot be rented as many times as the fleet needs, are left out."""
    _check_utilisation(max_utilisation)
    pool = billable_prices(rows)
    ids = list(dict.fromkeys(r.accelerator_id for r in pool)) if accelerator_ids is None else list(accelerator_ids)
    plans: list[ServingPlan] = []
    for aid in ids:
        sc_a = sc if sc.accelerator == aid else sc.model_copy(update={"accelerator": aid})
        if serving_problem(sc_a) is not None:
            continue  # the engine does not run the model, or has no kernels there for these weights or their FP8 cache
        try:
            req, cap = _replica(sc_a, traffic)
        except ValueError:
            continue
        plans += [p for r in serving_rows_for(aid, pool, cap.tensor_parallel) if (p := price_fleet(req, r, cap, traffic, max_utilisation)) is not None]
    return tuple(sorted(plans, key=_order))


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
