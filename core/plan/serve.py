"""The serving planner: every accelerator, weight format, tensor-parallel size and instance type that fits, with the
largest batch that still meets the latency target, replicas for the busiest hour, and whole instances billed.

Memory per device does not depend on the device: each (format, tensor-parallel size) is sized once for every batch
(NumPy) and compared with each accelerator's capacity; speeds for all batches come from one vectorised roofline."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.catalog.accelerators import Accelerator, get_accelerator
from core.catalog.engine_hardware import engine_problem
from core.catalog.price_trust import billable_prices
from core.catalog.prices import PriceRow
from core.catalog.providers import can_serve
from core.layout import Layout
from core.memory.estimate import Evaluator, fit_capacity
from core.model.kernels import four_bit_format
from core.money.pricing import DAYS_PER_MONTH, HOURS_PER_MONTH
from core.plan.goal import Goal
from core.plan.result import Plan, rental_fields
from core.plan.train import cheapest_rows
from core.scenario import Scenario
from core.speed.roofline import serving_curve
from core.units import SECONDS_PER_DAY

BATCHES = np.array([2**i for i in range(11)], dtype=np.float64)  # 1 ... 1,024 concurrent sequences per replica
TENSOR_PARALLEL = (1, 2, 4, 8)
# Formats a serving engine loads: 16-bit, FP8 (W8A8 on Hopper and newer, weight-only elsewhere) and 4-bit AWQ;
# llama.cpp serves GGUF files.
FORMATS_BY_ENGINE = {"llama.cpp": ("fp16", "gguf-q8_0", "gguf-q4_k_m")}
DEFAULT_FORMATS = ("bf16", "fp8", "awq-4bit", "gptq-4bit")  # one 4-bit format per part: core/model/kernels.py
FOUR_BIT = ("awq-4bit", "gptq-4bit")


def serving_scenario(goal: Goal, weights_format: str, tp: int, **update: Any) -> Scenario:
    return Scenario.model_validate(
        {
            "model": goal.model,
            "mode": "inference",
            "weights_format": weights_format,
            "tensor_parallel": tp,
            "seq_len": goal.input_tokens + goal.output_tokens,
            "output_tokens": goal.output_tokens,
            "serving_engine": goal.serving_engine,
            "flash_attention": True,
            **update,
        }
    )


def peak_output_tokens_per_s(goal: Goal) -> float:
    return (goal.requests_per_day or 0.0) * goal.output_tokens / SECONDS_PER_DAY * goal.peak_to_average


@dataclass
class ServingOption:
    """A priced serving plan before it is written out."""

    accelerator: Accelerator
    row: PriceRow
    price: float
    scenario: Scenario
    weights_format: str
    tensor_parallel: int
    batch: int
    speed: dict[str, float]
    replicas: int
    instances: int
    cost: float  # USD per month
    within_bounds: bool
    scaling_efficiency: float = 1.0
    pareto: bool = False

    @property
    def duration(self) -> float:
        return 1.0 / self.speed["decode_tokens_per_s"]


def _fleet(goal: Goal, row: PriceRow, tp: int, per_replica: float) -> tuple[int, int]:
    """(replicas, instances) for the busiest hour; every slot of a rented instance serves."""
    replicas = max(1, math.ceil(peak_output_tokens_per_s(goal) / per_replica))
    k = row.accelerators_per_instance
    if tp <= k:
        per_instance = k // tp
        instances = math.ceil(replicas / per_instance)
        return instances * per_instance, instances
    return replicas, replicas * math.ceil(tp / k)


def plan_serving(goal: Goal, prices: tuple[PriceRow, ...] | None = None) -> tuple[list[ServingOption], list[str], int]:
    # rows of providers that may host a serving endpoint (not Colab's notebooks: data/providers.csv)
    rows = tuple(r for r in billable_prices(prices) if can_serve(r.provider))
    wanted = set(goal.accelerators) if goal.accelerators else None
    formats = FORMATS_BY_ENGINE.get(goal.serving_engine, DEFAULT_FORMATS)
    sized: list[tuple[str, int, Scenario, np.ndarray]] = []
    for fmt in formats:
        for tp in TENSOR_PARALLEL:
            sc = serving_scenario(goal, fmt, tp)
            if sc.architecture.num_heads % tp:
                continue
            comps = Evaluator(sc, sc.architecture).components(Layout(1, tp, 1), BATCHES, sc.seq_len)[0]
            sized.append((fmt, tp, sc, np.broadcast_to(np.asarray(comps.total, dtype=np.float64), BATCHES.shape)))
    options: list[ServingOption] = []
    skipped: list[str] = []
    peak = peak_output_tokens_per_s(goal)
    for aid in dict.fromkeys(r.accelerator_id for r in rows):
        if wanted is not None and aid not in wanted:
            continue
        acc = get_accelerator(aid)
        if (problem := engine_problem(goal.serving_engine, acc)) is not None:
            skipped.append(problem)  # the engine does not run there (data/engine_hardware.csv)
            continue
        acc_rows = cheapest_rows(rows, aid, goal.pricing == "spot")
        found, why = False, "no layout fits"
        for fmt, tp, sc, total in sized:
            if fmt == "fp8" and not acc.supports_fp8:
                continue  # FP8 checkpoints need FP8 support (Ada, Hopper, Blackwell, MI300, Trainium)
            if fmt in FOUR_BIT and fmt != four_bit_format(acc):
                continue  # no kernels for it on this part (AWQ before Turing; neither on AMD, TPU, Neuron)
            fits = total <= fit_capacity(sc, float(acc.usable_memory_bytes))
            if not fits.any():
                continue
            n_fit = int(np.flatnonzero(fits).max()) + 1
            curve = serving_curve(sc, acc, Layout(1, tp, 1), BATCHES[:n_fit], goal.input_tokens, goal.output_tokens)
            ok = (curve["time_to_first_token_s"] <= goal.ttft_s) & (curve["decode_tokens_per_s"] >= goal.tokens_per_s_per_user)
            if not ok.any():
                why = f"no batch meets {goal.tokens_per_s_per_user:g} tokens/s per user within {goal.ttft_s:g} s to the first token"
                continue
            top = int(np.flatnonzero(ok).max())
            for row, price in acc_rows:
                if tp > row.accelerators_per_instance and acc.kind != "tpu":
                    continue
                replicas, instances = _fleet(goal, row, tp, float(curve["output_tokens_per_s"][top]))
                # Sized at the largest batch that meets the targets; at the goal's traffic each replica then runs the
                # smallest batch that still carries its share of the busiest hour (faster for each user).
                i = int(np.flatnonzero(curve["output_tokens_per_s"][: top + 1] * replicas >= peak).min())
                cost = instances * price * HOURS_PER_MONTH
                within = goal.budget_usd is None or cost <= goal.budget_usd
                speed = {k: float(v[i]) for k, v in curve.items()}
                options.append(ServingOption(acc, row, price, sc, fmt, tp, int(BATCHES[i]), speed, replicas, instances, cost, within))
                found = True
        if not found:
            skipped.append(f"{aid}: {why}")
    return options, skipped, len(options)


def serving_plan(goal: Goal, o: ServingOption) -> Plan:
    k = o.row.accelerators_per_instance
    tp = o.tensor_parallel
    idle = o.instances * k - o.replicas * tp
    per_replica = o.speed["output_tokens_per_s"]
    requests_per_month = (goal.requests_per_day or 0.0) * DAYS_PER_MONTH
    average = (goal.requests_per_day or 0.0) * goal.output_tokens / SECONDS_PER_DAY
    utilisation = average / (o.replicas * per_replica)
    notes = []
    if idle:
        notes.append(f"{idle} of the {o.instances * k} rented devices stay idle: the next replica needs {tp}")
    if utilisation < 0.2:
        notes.append(f"the fleet is {utilisation:.0%} busy on average: the smallest rentable unit is larger than the traffic")
    model = goal.model if isinstance(goal.model, str) else goal.model.model_dump(exclude_none=True)
    scenario = {
        "model": model,
        "mode": "inference",
        "weights_format": o.weights_format,
        "tensor_parallel": tp,
        "batch_size": o.batch,
        "seq_len": o.scenario.seq_len,
        "output_tokens": goal.output_tokens,
        "serving_engine": goal.serving_engine,
        "flash_attention": True,
        "accelerator": o.accelerator.id,
    }
    return Plan.model_construct(
        **rental_fields(o.accelerator.id, o.accelerator.name, o.row, o.instances, o.price),
        devices=o.replicas * tp,
        idle_devices=idle,
        method="serve",
        precision=o.weights_format,
        weights_format=o.weights_format,
        gradient_checkpointing=False,
        zero_stage=0,
        tensor_parallel=tp,
        pipeline_parallel=1,
        data_parallel=o.replicas,
        micro_batch=o.batch,
        gradient_accumulation_steps=1,
        scaling_efficiency=1.0,
        usd_per_month=o.cost,
        usd_per_million_tokens=o.cost / (requests_per_month * (goal.input_tokens + goal.output_tokens) / 1e6),
        usd_per_million_output_tokens=o.cost / (requests_per_month * goal.output_tokens / 1e6),
        utilisation=utilisation,
        time_to_first_token_s=o.speed["time_to_first_token_s"],
        tokens_per_s_per_user=o.speed["decode_tokens_per_s"],
        output_tokens_per_s_capacity=o.replicas * per_replica,
        pareto=o.pareto,
        within_bounds=o.within_bounds,
        notes=tuple(notes),
        scenario=scenario,
    )
