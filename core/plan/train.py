"""The training planner: every method, checkpointing choice, sharding and layout, micro-batch, accelerator, instance
type and instance count that fits, timed with communication and priced by whole instances.

Memory per device does not depend on the device, so each (method, checkpointing, layout) is sized once for all
micro-batches (NumPy) and compared with every accelerator's capacity. Devices on a rented instance are used as
data-parallel ranks when that fits the global batch, else shown as idle."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from core.catalog.accelerators import Accelerator, get_accelerator
from core.catalog.prices import PriceRow
from core.catalog.providers import Reservation
from core.catalog.stack_layouts import INFERENCE_ONLY, layout_problem, no_stack_problem, objective_problem, part_problem, spans_nodes_ok, stack_for
from core.catalog.tpu_slices import rentable_chips
from core.layout import Layout
from core.memory.components import qlora_upcast
from core.memory.evaluator import Evaluator
from core.memory.fit import MAX_DEVICES
from core.memory.stacks import STACKS
from core.money.pricing import forms_cluster, on_demand_ok, reservation_holds, reserved_cluster, wider_orders
from core.money.run_bill import HORIZON_HOURS, bill, cheapest_bill, reserved_usd_per_instance_hour, run_hours, run_time
from core.plan.goal import Goal, goal_rows
from core.plan.result import Plan, rental_fields, spot_priced
from core.scenario import Scenario
from core.speed.comm import MICROBATCHES_PER_STAGE
from core.speed.timing import TokenCosts, token_costs

MICRO_BATCHES = np.array([1, 2, 4, 8, 16, 32], dtype=np.float64)
ZERO3_RANKS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# Fine-tuning recipes step on tens to a few hundred sequences (Alpaca: 128; torchtune and TRL examples: 8-64 per
# device x accumulation). We hold the global batch at 64 sequences: data parallelism beyond 64 ranks cannot help.
FINE_TUNE_GLOBAL_SEQUENCES = 64
# Pretraining batch in tokens by model size: GPT-3 (Brown et al. 2020, Table 2.1: 0.5M tokens at 125M-350M
# parameters, 1M at 760M-2.7B, 2M at 6.7B-13B, 3.2M at 175B); Llama 2 and 3 pretrained at 4M tokens. Those "M" are
# whole powers of two of sequences (GPT-3's 0.5M is 256 sequences of 2,048 tokens, Llama 2's 4M is 1,024 of 4,096), so
# the recipe is the power of two of sequences nearest the tokens: 2M tokens of 2,048 is 1,024 sequences, not 977 (a
# prime number of ranks no node count places evenly; the plan helper's review of stop 48, H3).
PRETRAIN_BATCH_TOKENS = ((0.5e9, 0.5e6), (3e9, 1e6), (15e9, 2e6), (float("inf"), 4e6))


@dataclass(frozen=True)
class _Shape:
    """A way to lay one training job out in memory, sized for every micro-batch."""

    method: str
    precision: str
    gradient_checkpointing: bool
    zero_stage: int
    tensor_parallel: int
    pipeline_parallel: int
    min_ranks: int  # data-parallel ranks this memory figure was sized at (ZeRO-3 shards over them)
    single: bool  # sized for one device alone (no communication buffers)
    bytes_per_device: np.ndarray  # over MICRO_BATCHES
    # QLoRA's fp32 upcast: attention in 16-bit on parts that run FlashAttention-2, in fp32 on SDPA elsewhere
    # (core/memory/components.fp32_attention), sized for each; None: the same on every part
    fa2_part: bool | None = None


def global_sequences(goal: Goal, total_params: float) -> int:
    """Sequences per optimizer step: the recipe's global batch, at most the sequences an epoch of the dataset has
    (a step cannot hold more examples than there are)."""
    if goal.goal == "fine-tune":
        recipe = FINE_TUNE_GLOBAL_SEQUENCES
    else:
        tokens = next(t for limit, t in PRETRAIN_BATCH_TOKENS if total_params <= limit)
        recipe = 1 << max(0, round(math.log2(tokens / goal.seq_len)))
    return max(1, min(recipe, int((goal.tokens or 0) // goal.seq_len)))


def base_scenario(goal: Goal, method: str, gc: bool, stack: str | None = None, **update: Any) -> Scenario:
    return Scenario.model_validate(
        {
            "model": goal.model,
            "mode": "training",
            "method": method,
            "precision": "bf16" if method == "full" else "bf16-true",
            "gradient_checkpointing": gc,
            "flash_attention": True,
            "seq_len": goal.seq_len,
            "train_tokens": goal.train_tokens,
            "training_stack": stack or goal.training_stack,
            "fused_cross_entropy": goal.fused_cross_entropy,
            "objective": goal.objective,
            **update,
        }
    )


def _methods(goal: Goal) -> tuple[str, ...]:
    return goal.methods or (("full", "lora", "qlora") if goal.goal == "fine-tune" else ("full",))


def _shapes(goal: Goal, stack: str) -> list[_Shape]:
    """Every layout `stack` runs (data/stack_layouts.csv), sized under that stack's memory behaviour."""
    out = []
    for method in _methods(goal):
        if objective_problem(stack, goal.objective, method) is not None:
            continue  # the stack has no DPO recipe for this method (data/stack_layouts.csv dpo_methods)
        for gc in (False, True):
            # Sized with gradient accumulation on (gradients stay allocated between micro-batches): the global batch
            # is reached by accumulating, except on the largest layouts, where this errs on the safe side.
            sc = base_scenario(goal, method, gc, stack, gradient_accumulation_steps=2)
            if not gc and qlora_upcast(sc):  # the usual QLoRA recipe turns checkpointing on itself
                continue
            arch = sc.architecture
            tps = [t for t in (1, 2, 4, 8) if arch.splits_over(t, replicate_kv=False)]
            layouts = [(0, 1, 1, 1, True), (0, 1, 1, 2, False)]
            layouts += [(0, t, 1, 1, False) for t in tps if t > 1]
            layouts += [(0, tps[-1], p, 1, False) for p in (2, 4, 8, 16) if p <= arch.num_layers]
            layouts += [(3, 1, 1, d, False) for d in ZERO3_RANKS]
            # base_scenario's part runs FlashAttention-2; under QLoRA's upcast a part without it runs fp32 SDPA
            variants = [(sc, True), (sc.model_copy(update={"flash_attention": False}), False)] if qlora_upcast(sc) else [(sc, None)]
            for variant, fa2_part in variants:
                ev = Evaluator(variant, arch)
                for zero, tp, pp, dp, single in layouts:
                    if layout_problem(stack, method, zero, tp, pp, 1 if single else max(dp, 2)) is not None:  # replicated unless single
                        continue  # the stack cannot run it (data/stack_layouts.csv)
                    comps = ev.components(Layout(dp, tp, pp), MICRO_BATCHES, goal.seq_len, zero_stage=zero)[0]
                    total = np.broadcast_to(np.asarray(comps.total, dtype=np.float64), MICRO_BATCHES.shape)
                    out.append(_Shape(method, sc.precision, gc, zero, tp, pp, dp, single, total, fa2_part))
    return out


def _fitting_shapes(shapes: list[_Shape], largest: dict[int, int]) -> list[_Shape]:
    """The shapes worth renting for on a device whose largest fitting micro-batch of each shape is `largest` (by the
    shape's id; 0: none fits): one device, data parallelism, ZeRO-3 (walked by rank count later), and of the
    tensor/pipeline-parallel shapes only the smallest group that fits (model parallelism is for memory; it never makes
    a step cheaper)."""
    out = [s for s in shapes if s.zero_stage == 3 or s.tensor_parallel * s.pipeline_parallel == 1]
    for method, gc in dict.fromkeys((s.method, s.gradient_checkpointing) for s in shapes):
        mp = [
            s
            for s in shapes
            if s.zero_stage == 0 and s.tensor_parallel * s.pipeline_parallel > 1 and (s.method, s.gradient_checkpointing) == (method, gc) and largest[id(s)]
        ]
        if mp:
            out.append(min(mp, key=lambda s: (s.tensor_parallel * s.pipeline_parallel, s.pipeline_parallel)))
    return out


@dataclass(frozen=True)
class _Candidate:
    shape: _Shape
    data_parallel: int
    micro_batch: int


class _Fitting(NamedTuple):
    """What _candidates takes from one part, the same for every rental of it: the shapes worth renting on its memory
    (_fitting_shapes), the ZeRO-3 shapes of each (method, checkpointing) as (their rank counts ascending, the first
    shape of each count), and each shape's largest micro-batch that fits (by the shape's id)."""

    fitting: list[_Shape]
    zero3: dict[tuple[str, bool], tuple[list[int], list[_Shape]]]
    largest: dict[int, int]


def _zero3_ladders(shapes: list[_Shape]) -> dict[tuple[str, bool], tuple[list[int], list[_Shape]]]:
    """The ZeRO-3 shapes of each (method, checkpointing) by rank count, ascending, the first shape of each count: the
    one _candidates sizes on dp ranks is the last whose count is at most dp."""
    firsts: dict[tuple[str, bool], dict[int, _Shape]] = {}
    for z in shapes:
        if z.zero_stage == 3:
            firsts.setdefault((z.method, z.gradient_checkpointing), {}).setdefault(z.min_ranks, z)
    return {kind: (sorted(by), [by[r] for r in sorted(by)]) for kind, by in firsts.items()}


def _part_fit(shapes: list[_Shape], acc: Accelerator) -> _Fitting:
    # every shape's largest micro-batch whose bytes fit the part, 0 where none does, in one numpy pass
    fits = np.stack([s.bytes_per_device for s in shapes]) <= float(acc.usable_memory_bytes)
    largest = {id(s): int(b) for s, b in zip(shapes, np.where(fits, MICRO_BATCHES, 0).max(axis=1), strict=True)}
    return _Fitting(_fitting_shapes(shapes, largest), _zero3_ladders(shapes), largest)


def _candidates(fit: _Fitting, acc: Accelerator, rental: Rental, global_seqs: int, stack: str = "hf") -> list[tuple[_Candidate, int]]:
    """(layout, instances) pairs for one rental (a price row): each shape on 1, 2, 4, ... instances (from `rental.first`), every
    device used as a data-parallel rank while the global batch allows. A job spans several instances only when they
    are whole nodes (8 GPUs, 16 Trainium chips; TPU chips of one pod) of a provider that rents them on a cluster
    network (InfiniBand, EFA, ICI; data/providers.csv): smaller instances, e.g. one-GPU rentals, and a marketplace's
    single hosts have ordinary networking and run one at a time."""
    row = rental.row
    k = row.accelerators_per_instance
    tpu = acc.kind == "tpu"
    out = []
    zero3 = fit.zero3
    spans = rental.spans_nodes and spans_nodes_ok(stack)
    for s in fit.fitting:
        if s.zero_stage == 3 and s.min_ranks != ZERO3_RANKS[0]:
            continue  # ZeRO-3 is walked below from its smallest fitting rank count
        group = s.tensor_parallel * s.pipeline_parallel
        if s.tensor_parallel > k and not tpu:
            continue  # a tensor-parallel group stays inside one instance
        n = rental.first
        # A pipeline keeps its bubble small only with MICROBATCHES_PER_STAGE micro-batches per stage in every step
        # (core/speed/comm.py times it so): the global batch must hold that many per data-parallel rank.
        per_rank_cap = global_seqs // (MICROBATCHES_PER_STAGE * s.pipeline_parallel) if s.pipeline_parallel > 1 else global_seqs
        if per_rank_cap < 1:
            continue
        while n * k <= MAX_DEVICES and (n == 1 or spans):
            if n > 1 and ((n // 2) * k) // group >= global_seqs:
                break  # half as many instances already had a rank for every sequence
            dp = min((n * k) // group, per_rank_cap)
            if n > 1:  # the same whole tensor x pipeline groups on every node: a launcher places ranks evenly
                dp = n * ((dp * group // n) // group)
            if s.single and (n * k != 1):
                break
            if dp < 1 or (not s.single and s.zero_stage == 0 and group == 1 and dp < 2) or (s.zero_stage == 3 and dp < 2):
                n *= 2
                continue
            sized = s
            if s.zero_stage == 3:  # the ZeRO-3 shape of this kind with the most ranks at most dp (the fewest bytes a device)
                ranks, ladder = zero3[(s.method, s.gradient_checkpointing)]
                step = bisect.bisect_right(ranks, dp) - 1
                assert step >= 0, (dp, ranks)  # dp >= 2 = ZERO3_RANKS[0] above: s itself is on the ladder
                sized = ladder[step]
            b = fit.largest[id(sized)]
            if b:
                b = min(b, 1 << int(math.log2(max(1, per_rank_cap // dp))))
                out.append((_Candidate(sized, dp, b), n))
            if dp >= per_rank_cap:
                break
            n *= 2
    return out


def cheapest_rows(rows: tuple[PriceRow, ...], accelerator_id: str, spot: bool) -> list[tuple[PriceRow, float]]:
    """The cheapest row of each instance size of one accelerator (a dearer row of the same size never wins)."""
    best: dict[int, tuple[PriceRow, float]] = {}
    for r in rows:
        price = r.spot_usd_per_hour if spot else r.on_demand_usd_per_hour
        if r.accelerator_id != accelerator_id or price is None:
            continue
        k = r.accelerators_per_instance
        if k not in best or (price, r.provider, r.instance_type) < (best[k][1], best[k][0].provider, best[k][0].instance_type):
            best[k] = (r, price)
    return sorted(best.values(), key=lambda t: t[0].accelerators_per_instance)


@dataclass(frozen=True)
class Rental:
    """A price row the training planner rents from: `first` instances at least, several only when `spans_nodes`
    (core/money/pricing.forms_cluster); on demand, or as the provider's reserved cluster (`reservation`,
    data/reservations.csv), whose size range bounds the instances."""

    row: PriceRow
    price: float
    spans_nodes: bool
    first: int = 1
    reservation: Reservation | None = None

    def holds(self, instances: int) -> bool:
        """Whether this rental rents `instances` instances: one on-demand order, or the reservation's size range."""
        if self.reservation is not None:
            return reservation_holds(self.reservation, self.row, instances)
        return on_demand_ok(self.row, instances)


def training_rows(rows: tuple[PriceRow, ...], accelerator_id: str, spot: bool) -> list[Rental]:
    """cheapest_rows, and for each instance size whose cheapest row is a single host (a marketplace listing: one
    machine, no cluster network to the next), the cheapest row of a provider that rents nodes on a cluster network,
    from two instances up (one of them would cost more than the single host)."""
    kind = get_accelerator(accelerator_id).kind
    clustered = {r.accelerators_per_instance: (r, p) for r, p in cheapest_rows(tuple(r for r in rows if forms_cluster(r, kind)), accelerator_id, spot)}
    out = []
    for row, price in cheapest_rows(rows, accelerator_id, spot):
        out.append(Rental(row, price, forms_cluster(row, kind)))
        if not out[-1].spans_nodes and row.accelerators_per_instance in clustered:
            out.append(Rental(*clustered[row.accelerators_per_instance], True, first=2))
    return out + larger_orders(rows, accelerator_id, spot) + ([] if spot else reserved_clusters(rows, accelerator_id))


def reserved_clusters(rows: tuple[PriceRow, ...], accelerator_id: str) -> list[Rental]:
    """For each instance size, the cheapest row of each provider that rents this accelerator as a reserved cluster
    (data/reservations.csv: Lambda's 1-Click Clusters, AWS EC2 Capacity Blocks), from the power of two of instances
    that holds its smallest
    cluster: a run past the on-demand orders is priced as that reservation, its minimum term billed. Not for spot
    goals: a reservation is not a spot price."""
    kind = get_accelerator(accelerator_id).kind
    best: dict[tuple[str, int], tuple[float, PriceRow, Reservation]] = {}
    for r in rows:
        if r.accelerator_id != accelerator_id or (res := reserved_cluster(r, kind)) is None:
            continue
        price = reserved_usd_per_instance_hour(r, res)
        key = (r.provider, r.accelerators_per_instance)
        if price is not None and (key not in best or (price, r.instance_type) < (best[key][0], best[key][1].instance_type)):
            best[key] = (price, r, res)
    out = []
    for (_, size), (price, r, res) in sorted(best.items()):
        first = max(1, math.ceil(res.min_devices / size))
        out.append(Rental(r, price, True, first=1 << math.ceil(math.log2(first)), reservation=res))
    return out


def larger_orders(rows: tuple[PriceRow, ...], accelerator_id: str, spot: bool) -> list[Rental]:
    """For each instance size, the clustered rows of providers whose on-demand order holds more devices than any
    cheaper row's (data/providers.csv max_devices): the cheapest row of a size may stop at 64 devices where a dearer
    provider rents 512, and a run on more devices is priced on that one (from the power of two of instances past
    the cheaper bound, as _candidates walks them)."""
    kind = get_accelerator(accelerator_id).kind
    out: list[Rental] = []
    by_size: dict[int, list[tuple[float, PriceRow]]] = {}
    for r in rows:
        price = r.spot_usd_per_hour if spot else r.on_demand_usd_per_hour
        if r.accelerator_id == accelerator_id and price is not None and forms_cluster(r, kind):
            by_size.setdefault(r.accelerators_per_instance, []).append((price, r))
    for size, priced in by_size.items():
        for price, r, before in wider_orders(priced)[1:]:  # the first step is the cheapest clustered row, rented above
            past = int(before) // size + 1  # instances past the cheaper bound, walked in powers of two as from one
            out.append(Rental(r, price, True, first=1 << math.ceil(math.log2(past))))
    return out


@dataclass
class PlannedRun:
    """A priced plan before it is written out (the search makes thousands; only the ones shown become Plans). Not
    core/money/cost.TrainingOption, the Training page's row per price row and device count."""

    accelerator: Accelerator
    row: PriceRow
    price: float
    instances: int
    candidate: _Candidate
    devices: int
    accumulation: int
    hours: float
    scaling_efficiency: float
    cost: float
    within_bounds: bool
    stack: str = "hf"  # the training stack it runs under (a TPU's: PyTorch/XLA, stack_for)
    pareto: bool = False
    reservation: Reservation | None = None  # rented as this reserved cluster (None: on demand)
    paid_hours: float | None = None  # hours paid for (a reservation's whole terms; the run's hours on demand)

    @property
    def duration(self) -> float:
        return self.hours

    @property
    def pays_idle_term(self) -> bool:
        """A reservation whose minimum term outlasts the run: most of what it pays for sits idle (core/money/picks.py
        calls such a plan neither cheapest nor fastest while another exists)."""
        return self.reservation is not None and self.hours < self.reservation.min_term_hours


def plan_training(goal: Goal, prices: tuple[PriceRow, ...] | None = None) -> tuple[list[PlannedRun], list[str], int]:
    """Every priced plan that fits (priced from `prices`, the built-in catalog when None), and the accelerators left
    out with why."""
    refused = [objective_problem(goal.training_stack, goal.objective, m) for m in _methods(goal)]
    if all(refused):  # the goal's own stack has no recipe for its objective and methods: one line, no part by part
        return [], [str(refused[0])], 0
    shapes_of: dict[str, list[_Shape]] = {}  # by training stack: a TPU trains under PyTorch/XLA (stack_for)
    total_params = float(base_scenario(goal, "full", False).architecture.total_params)
    global_seqs = global_sequences(goal, total_params)
    rows = goal_rows(goal, prices)  # the goal's providers' rows only, where it names them
    horizon = goal.deadline_hours if goal.deadline_hours is not None else HORIZON_HOURS
    wanted = set(goal.accelerators) if goal.accelerators else None
    spot = goal.pricing == "spot"
    options: list[PlannedRun] = []
    skipped: list[str] = []
    scenarios: dict[tuple[str, str, bool, int, int], Scenario] = {}
    timed: dict[tuple[Any, ...], tuple[float, float]] = {}
    costs: dict[tuple[Any, ...], TokenCosts] = {}
    rows_of: dict[str, list[PriceRow]] = {}
    unplanned: dict[str, list[str]] = {}  # one line for the parts one reason leaves out (every TPU under DPO)
    for r in rows:
        rows_of.setdefault(r.accelerator_id, []).append(r)
    for aid in rows_of:
        if wanted is not None and aid not in wanted:
            continue
        acc = get_accelerator(aid)
        if aid in INFERENCE_ONLY:
            skipped.append(f"{aid}: an inference-only part")
            continue
        if goal.require_bf16 and not acc.supports_bf16:
            skipped.append(f"{aid}: no BF16 (the goal requires it)")
            continue
        stack = stack_for(goal.training_stack, acc.kind)
        if stack is None:
            skipped.append(no_stack_problem(acc))
            continue
        if stack not in shapes_of:
            shapes_of[stack] = _shapes(goal, stack)
        shapes = shapes_of[stack]
        usable = [s for s in shapes if part_problem(acc, s.method, stack) is None and s.fa2_part in (None, acc.runs_flash_attention_2)]
        if not shapes:  # the stack it trains under has no recipe for the goal's objective (a TPU's PyTorch/XLA and DPO)
            why = next((p for m in _methods(goal) if (p := objective_problem(stack, goal.objective, m))), "nothing to train")
            unplanned.setdefault(why, []).append(aid)
            continue
        if not usable:
            skipped.append(part_problem(acc, shapes[0].method, goal.training_stack))  # type: ignore[arg-type]
            continue
        found = False
        fit = _part_fit(usable, acc)  # the same for every rental of the part
        for rental in training_rows(tuple(rows_of[aid]), aid, spot):  # its own rows: every rental is one of them
            row, price = rental.row, rental.price
            for cand, _ in _candidates(fit, acc, rental, global_seqs, stack):
                s, dp, b = cand.shape, cand.data_parallel, cand.micro_batch
                used = dp * s.tensor_parallel * s.pipeline_parallel
                accumulation = max(1, math.ceil(global_seqs / (dp * b)), MICROBATCHES_PER_STAGE * s.pipeline_parallel if s.pipeline_parallel > 1 else 1)
                if acc.kind == "tpu" and row.accelerators_per_instance == 1 and rentable_chips(aid, used) != used:
                    continue  # a TPU priced by the chip rents whole slices (data/tpu_slices.csv): one v5p chip is none
                if not rental.holds(math.ceil(used / row.accelerators_per_instance)):
                    continue  # beyond one on-demand order of the provider, or the reservation's sizes: the bill would refuse it
                key = (aid, s.method, s.gradient_checkpointing, s.zero_stage, s.tensor_parallel, s.pipeline_parallel, dp, b)
                if key not in timed:
                    skey = (stack, s.method, s.gradient_checkpointing, b, s.zero_stage)
                    if skey not in scenarios:
                        scenarios[skey] = base_scenario(goal, s.method, s.gradient_checkpointing, stack, batch_size=b, zero_stage=s.zero_stage)
                    ckey = (*skey, aid)
                    if ckey not in costs:
                        costs[ckey] = token_costs(scenarios[skey], acc)  # the same on every layout of the part
                    timed[key] = run_hours(scenarios[skey], acc, Layout(dp, s.tensor_parallel, s.pipeline_parallel), costs[ckey], batch=b, accumulation=accumulation)
                compute_hours, efficiency = timed[key]
                # The one bill (core/money/run_bill.py): setup + computation, the instances the used devices need.
                billed = bill(row, used, compute_hours, spot=spot, setup_hours=goal.setup_hours, reservation=rental.reservation)
                if billed is None or billed.instances < rental.first:
                    continue
                within = billed.hours <= horizon and (goal.budget_usd is None or billed.usd <= goal.budget_usd)
                options.append(
                    PlannedRun(
                        acc,
                        row,
                        price,
                        billed.instances,
                        cand,
                        used,
                        accumulation,
                        billed.hours,
                        efficiency,
                        billed.usd,
                        within,
                        stack,
                        reservation=rental.reservation,
                        paid_hours=billed.paid_hours,
                    )
                )
                found = True
        if not found:
            skipped.append(f"{aid}: no layout of up to {MAX_DEVICES:,} devices fits, or no price for it")
    skipped[:0] = [f"{', '.join(aids)}: {why}" for why, aids in unplanned.items()]
    return options, skipped, len(options)


def term_words(hours: float) -> str:
    """A reserved term in the unit it is sold in: '3 weeks', '2 days', '30 h'."""
    for unit, name in ((168.0, "week"), (24.0, "day")):
        if hours >= unit and abs(hours / unit - round(hours / unit)) < 1e-9:
            n = round(hours / unit)
            return f"{n} {name}{'s' * (n != 1)}"
    return f"{hours:,.0f} h"


def days_words(hours: float) -> str:
    """A minimum term in days: '7 days', '1 day'."""
    days = hours / 24.0
    return f"{days:g} day{'s' * (days != 1)}"


def reservation_note(res: Reservation, hours: float, paid_hours: float) -> str:
    """What a plan on a reserved cluster says: the product, its minimum term, what is paid, the rate's basis."""
    if res.usd_per_device_hour is not None:
        rate = f"; at its published ${res.usd_per_device_hour:,.3f} per device-hour (as of {res.as_of})"
    else:
        rate = "; priced at the on-demand rate (the reservation's rate is not in our sources)"
    return (
        f"needs a reservation: {res.product}, minimum {days_words(res.min_term_hours)} ({res.provider}, data/reservations.csv); "
        f"{term_words(paid_hours)} paid for a run of {hours:,.1f} h{rate}"
    )


def training_plan_of(goal: Goal, o: PlannedRun) -> Plan:
    s, dp, b = o.candidate.shape, o.candidate.data_parallel, o.candidate.micro_batch
    k = o.row.accelerators_per_instance
    idle = o.instances * k - o.devices
    notes = []
    if idle:
        notes.append(f"{idle} of the {o.instances * k} rented devices stay idle: the global batch of {dp * b * o.accumulation} sequences has no work for them")
    if o.scaling_efficiency < 0.5:
        notes.append(f"only {o.scaling_efficiency:.0%} of the time is computation: communication dominates at this scale")
    if o.reservation is not None:
        notes.append(reservation_note(o.reservation, o.hours, o.paid_hours or o.hours))
    if goal.pricing == "spot":
        notes.append("spot capacity can be reclaimed: checkpoint often")
    if o.stack != goal.training_stack:
        notes.append(f"{o.accelerator.name} trains under {STACKS[o.stack].label}: {goal.training_stack} does not run on it (data/stack_layouts.csv)")
    if not o.accelerator.supports_bf16:
        notes.append(
            f"{o.accelerator.name} has no BF16 and no FlashAttention-2 (Ampere and later): FP16 with loss scaling, and "
            "PyTorch's memory-efficient attention kernel, at the part's FP16 rate"
        )
    model = goal.model if isinstance(goal.model, str) else goal.model.model_dump(exclude_none=True)
    # Parts without BF16 (V100, T4, Turing) train in FP16 with loss scaling: the same bytes, their FP16 tensor rate.
    precision = s.precision if o.accelerator.supports_bf16 else s.precision.replace("bf16", "fp16")
    scenario = {
        "model": model,
        "mode": "training",
        "method": s.method,
        "precision": precision,
        "gradient_checkpointing": s.gradient_checkpointing,
        "flash_attention": True,
        "zero_stage": s.zero_stage,
        "data_parallel": dp,
        "tensor_parallel": s.tensor_parallel,
        "pipeline_parallel": s.pipeline_parallel,
        "batch_size": b,
        "gradient_accumulation_steps": o.accumulation,
        "seq_len": goal.seq_len,
        "train_tokens": goal.train_tokens,
        "accelerator": o.accelerator.id,
        "training_stack": o.stack,
    }
    if goal.fused_cross_entropy:  # left out when off: a plan's scenario carries what the plan changed
        scenario["fused_cross_entropy"] = True
    if goal.objective != "sft":
        scenario["objective"] = goal.objective
    return Plan.model_construct(
        **rental_fields(o.accelerator.id, o.accelerator.name, o.row, o.instances, o.price, spot_priced(goal.pricing, o)),
        devices=o.devices,
        idle_devices=idle,
        method=s.method,
        precision=precision,
        weights_format="nf4" if s.method == "qlora" else "bf16" if o.accelerator.supports_bf16 else "fp16",
        gradient_checkpointing=s.gradient_checkpointing,
        zero_stage=s.zero_stage,
        tensor_parallel=s.tensor_parallel,
        pipeline_parallel=s.pipeline_parallel,
        data_parallel=dp,
        micro_batch=b,
        gradient_accumulation_steps=o.accumulation,
        scaling_efficiency=o.scaling_efficiency,
        hours=o.hours,
        usd=o.cost,
        pareto=o.pareto,
        within_bounds=o.within_bounds,
        notes=tuple(notes),
        scenario=scenario,
        reservation=None if o.reservation is None else o.reservation.product,
        reservation_min_term_hours=None if o.reservation is None else o.reservation.min_term_hours,
        paid_hours=o.paid_hours,
        goal=goal.goal,
    )


def price_training_scenario(goal: Goal, sc: Scenario, prices: tuple[PriceRow, ...] | None = None) -> tuple[PriceRow, int, float, float] | None:
    """A configuration as it stands (the sidebar's), priced by the one bill (core/money/run_bill.py): (row, instances,
    hours, USD) on the cheapest row of its accelerator a training run can rent, or None when no row can."""
    layout = Layout(sc.data_parallel, sc.tensor_parallel, sc.pipeline_parallel)
    rt = run_time(sc, get_accelerator(sc.accelerator), layout, tokens=goal.train_tokens)
    b = cheapest_bill(sc.accelerator, sc.devices, sc.tensor_parallel, rt.compute_hours, prices, spot=goal.pricing == "spot", setup_hours=goal.setup_hours)
    return None if b is None else (b.row, b.instances, b.hours, b.usd)
