"""The serving planner: every accelerator, weight format, KV-cache format, tensor-parallel size and instance type that
fits, priced by the one serving core (core/money/serving.py): the largest batch that meets the latency targets,
replicas for the busiest hour, whole instances billed, a marketplace listing one host.

Memory per device does not depend on the device: each (format, KV cache, tensor-parallel size) is sized once for every
batch from 1 to MAX_BATCH (NumPy) and compared with each accelerator's capacity; speeds for all batches come from one
vectorised roofline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.catalog.accelerators import Accelerator, get_accelerator
from core.catalog.engine_formats import caches, planned_formats
from core.catalog.engine_hardware import engine_problem
from core.catalog.engine_models import model_problem
from core.catalog.expert_parallel import supports_expert_parallel
from core.catalog.format_kernels import FOUR_BIT, four_bit_format, weights_problem
from core.catalog.kv_cache_kernels import kv_cache_problem
from core.catalog.prices import PriceRow
from core.catalog.providers import can_serve
from core.layout import Layout
from core.memory.engines import ENGINES, SINGLE_DEVICE_ENGINES
from core.memory.evaluator import fit_capacity
from core.memory.problems import context_problem as scenario_context_problem
from core.memory.problems import context_window
from core.model.formats import FORMATS
from core.money.serving import (
    Fleet,
    ReplicaCapacity,
    ServingPlan,
    Traffic,
    bill,
    fleet_usd_per_month,
    memory_by_batch,
    replica_capacities,
    serving_rows,
    size_fleets,
)
from core.plan.goal import Goal, goal_rows
from core.plan.result import Plan, rental_fields, spot_priced
from core.scenario import Scenario

TENSOR_PARALLEL = (1, 2, 4, 8)


# config.json quantization_config.quant_method values (Transformers' quantizers) -> this project's weight formats
HF_QUANT_METHODS = {"mxfp4": "mxfp4", "fp8": "fp8"}


def shipped_format(model: Any) -> str | None:
    """The 4-bit-class format a model's makers ship it in (MXFP4: gpt-oss): a preset's published format, or a pasted
    config's quantization_config.quant_method. None for 16-bit and FP8 releases, whose AWQ, GPTQ, FP8 and GGUF copies
    the engines' formats stand for (DeepSeek-V3's FP8 release has AWQ and GGUF copies)."""
    from core.catalog.presets import preset

    if isinstance(model, str):
        fmt: Any = preset(model).published_format
    else:
        quant = getattr(model, "hf_config", {}).get("quantization_config")
        method = quant.get("quant_method") if isinstance(quant, dict) else None
        fmt = HF_QUANT_METHODS.get(method) if isinstance(method, str) else None
    if fmt not in FORMATS or FORMATS[fmt].linear_bits >= 8:
        return None
    # an experts-only format on a dense model quantizes nothing: its engines' own formats stand
    arch = preset(model).architecture if isinstance(model, str) else model.architecture
    return None if FORMATS[fmt].experts_only and not arch.is_moe else fmt


def searched_formats(goal: Goal) -> tuple[str, ...]:
    """The weight formats the planner tries: the engine's (data/engine_formats.csv's searched_formats), or only the
    format a model ships quantized in. gpt-oss's experts ship in MXFP4 and every engine that runs it keeps them so: an AWQ or
    GPTQ copy would be re-quantized from 4-bit weights, and a 16-bit one (unsloth's upcast, for fine-tuning) is four
    times the experts' memory for no quality; the user may still set either on the Inference page."""
    shipped = shipped_format(goal.model)
    return (shipped,) if shipped is not None else planned_formats(goal.serving_engine)


def traffic_of(goal: Goal) -> Traffic:
    """The goal's traffic and latency targets, as every page's serving bill reads them."""
    return Traffic(
        requests_per_day=goal.requests_per_day or 1.0,
        input_tokens_per_request=goal.input_tokens,
        output_tokens_per_request=goal.output_tokens,
        peak_to_average=goal.peak_to_average,
        ttft_s=goal.ttft_s,
        tokens_per_s_per_user=goal.tokens_per_s_per_user,
    )


# Engines that split a replica's model over its GPUs by layers, run one after another for every token: llama.cpp's
# default --split-mode layer (ggml-org/llama.cpp tools/server README, "--split-mode"). Their replicas are pipeline
# stages (core/speed/roofline.py times the stages one after another), not a tensor-parallel group.
LAYER_SPLIT_ENGINES = frozenset({"llama.cpp"})


def replica_layout(engine: str, devices: int) -> Layout:
    """How `engine` spreads one replica over `devices` GPUs: layers (llama.cpp) or tensor parallelism (the others)."""
    return Layout(1, 1, devices) if engine in LAYER_SPLIT_ENGINES else Layout(1, devices, 1)


def serving_scenario(goal: Goal, weights_format: str, tp: int, **update: Any) -> Scenario:
    """The scenario of a replica of `tp` devices (tensor-parallel, or layer-split stages where the engine splits so)."""
    layout = replica_layout(goal.serving_engine, tp)
    return Scenario.model_validate(
        {
            "model": goal.model,
            "mode": "inference",
            "weights_format": weights_format,
            "tensor_parallel": layout.tensor_parallel,
            "pipeline_parallel": layout.pipeline_parallel,
            "seq_len": goal.input_tokens + goal.output_tokens,
            "output_tokens": goal.output_tokens,
            "serving_engine": goal.serving_engine,
            "flash_attention": True,
            **update,
        }
    )


# The 8-bit KV caches the planner tries beside the 16-bit one, the first the engine stores: FP8 (vLLM, SGLang,
# TensorRT-LLM), else Q8_0 (llama.cpp's -ctk / -ctv q8_0). Not Q4_0 (its 4.5 bits cost quality a user should choose
# knowingly) nor INT8 (Transformers' HQQ cache is quantized and dequantized every step: a memory fix).
EIGHT_BIT_KV = ("fp8", "q8_0")
# mlx-lm's quantized cache is not batched: mlx_lm.server runs requests one at a time with --kv-bits (its
# QuantizedKVCache has no merge for the batch generator: ml-explore/mlx-lm PRs #1073 and #1476, 2026; the server took
# --kv-bits in PR #1832 by generate.py's sequential path). A plan of concurrent users is not served that way.
UNBATCHED_QUANTIZED_KV = frozenset({"mlx"})


def kv_formats(goal: Goal) -> tuple[str, ...]:
    """The KV caches searched: 16-bit, and the engine's 8-bit one (data/engine_formats.csv; on the parts where it stores
    it, data/kv_cache_kernels.csv: vLLM's FP8 cache from Ampere on NVIDIA parts)."""
    eight = next((k for k in EIGHT_BIT_KV if caches(goal.serving_engine, k)), None)
    return ("bf16",) if eight is None or goal.serving_engine in UNBATCHED_QUANTIZED_KV else ("bf16", eight)


def expert_parallel_searched(sc: Scenario) -> bool:
    """Whether the planner also tries a mixture-of-experts model expert-parallel over a replica's devices, when the
    goal asks for it (Goal.expert_parallel): where the engine has it (data/expert_parallel.csv), and on each part only
    in the formats whose request does not fit one device (plan_serving)."""
    return sc.architecture.is_moe and supports_expert_parallel(sc.serving_engine)


@dataclass
class ServingOption:
    """A priced serving plan before it is written out: the fleet on a row, its bill built only for the plans shown
    (core/money/serving.bill, the one every page shows)."""

    accelerator: Accelerator
    row: PriceRow
    price: float
    scenario: Scenario
    weights_format: str
    tensor_parallel: int
    capacity: ReplicaCapacity
    fleet: Fleet
    traffic: Traffic
    cost: float  # USD per month at the goal's pricing
    duration: float  # seconds per generated token each user sees in the busiest hour
    within_bounds: bool
    scaling_efficiency: float = 1.0
    pareto: bool = False

    @property
    def instances(self) -> int:
        return self.fleet.instances

    @property
    def kv_cache_format(self) -> str:
        return self.scenario.kv_cache_format

    @property
    def bill(self) -> ServingPlan:
        return bill(self.scenario, self.row, self.capacity, self.traffic, self.fleet)


def context_problem(goal: Goal) -> str | None:
    """Why the goal's requests do not fit the model's context window, in one line, or None: the estimate's rule
    (core/memory/problems.context_problem) on a replica of the goal, said for its prompt and answer."""
    sc = serving_scenario(goal, "bf16", 1)  # seq_len: the goal's prompt + answer
    if scenario_context_problem(sc) is None:
        return None
    window, need = context_window(sc), sc.seq_len
    return (
        f"{sc.architecture.name} takes at most {window:,} tokens a sequence (its context window); a {goal.input_tokens:,}-token prompt "
        f"and a {goal.output_tokens:,}-token answer are {need:,}: serving engines refuse a longer context"
    )


def plan_serving(goal: Goal, prices: tuple[PriceRow, ...] | None = None) -> tuple[list[ServingOption], list[str], int]:
    if (too_long := context_problem(goal)) is not None:  # one line, not a part by part refusal
        return [], [too_long], 0
    # rows of providers that may host a serving endpoint (not Colab's notebooks: data/providers.csv)
    rows = tuple(r for r in goal_rows(goal, prices) if can_serve(r.provider))  # the goal's providers where it names them
    wanted = set(goal.accelerators) if goal.accelerators else None
    formats = searched_formats(goal)
    traffic = traffic_of(goal)
    spot = goal.pricing == "spot"
    sized: list[tuple[str, str, int, Scenario, np.ndarray]] = []
    kvs = kv_formats(goal)
    for fmt in formats:
        for kv in kvs:
            for tp in TENSOR_PARALLEL:
                sc = serving_scenario(goal, fmt, tp, kv_cache_format=kv)
                layout = replica_layout(goal.serving_engine, tp)
                if tp > 1 and goal.expert_parallel and expert_parallel_searched(sc):
                    # the same devices expert-parallel, attention data-parallel (no head split: any head count)
                    ep = sc.replace(expert_parallel=True)
                    sized.append((fmt, kv, tp, ep, memory_by_batch(ep, Layout(1, tp, 1))))
                model = sc.architecture
                if not model.splits_over(layout.tensor_parallel) or tp > model.num_layers or (tp > 1 and goal.serving_engine in SINGLE_DEVICE_ENGINES):
                    continue
                sized.append((fmt, kv, tp, sc, memory_by_batch(sc, layout)))
    # Which parts each candidate runs on (and in what form), then every candidate's capacity on all its parts at once
    # (replica_capacities: one numpy pass per candidate), then the fleets and bills part by part.
    accs: dict[str, Accelerator] = {}
    skip: dict[str, str] = {}  # per part, why it has no plan (the parts in the catalog's order)
    rentable_of: dict[str, dict[int, list[PriceRow]]] = {}
    runs: dict[str, list[int]] = {}  # per part: the candidates (indices of `sized`) it may run
    by_candidate: dict[tuple[int, bool], list[str]] = {}  # (candidate, in fp16 on a part without bf16): its parts
    kernels_why: dict[str, str] = {}  # per part, why the engine runs none of the searched formats there
    # an engine without an implementation of the model's architecture runs it nowhere (data/engine_models.csv)
    arch = sized[0][3].architecture if sized else None
    unrunnable = None if arch is None else model_problem(goal.serving_engine, goal.model, arch.name, ENGINES[goal.serving_engine].label)
    for aid in dict.fromkeys(r.accelerator_id for r in rows):
        if wanted is not None and aid not in wanted:
            continue
        acc = accs[aid] = get_accelerator(aid)  # the parts in the catalog's order (the skipped lines keep it)
        if (problem := unrunnable or engine_problem(goal.serving_engine, acc)) is not None:
            skip[aid] = f"{aid}: {problem}"  # the engine does not run the model, or not there (data/engine_hardware.csv)
            continue
        # the rows that can hold a tensor-parallel group of each size (a TPU row prices one chip of a slice)
        rentable = {tp: [r for r in serving_rows(rows, aid, tp, spot) if tp <= r.accelerators_per_instance or acc.kind == "tpu"] for tp in TENSOR_PARALLEL}
        rentable_of[aid] = rentable
        # formats whose request fits one device of this part: their replicas are single devices, with no all-to-alls
        # to pay, and the expert-parallel layouts are not searched for them (a user may still set one)
        one_device = {(f, k) for f, k, t, c, m in sized if t == 1 and m[0] <= fit_capacity(c, float(acc.usable_memory_bytes))} if goal.expert_parallel else set()
        runs[aid] = []
        # formats the engine has no kernels for on this part, and KV caches it cannot keep there, with those weights
        # or at all (data/format_kernels.csv, data/kv_cache_kernels.csv: gpt-oss's MXFP4 needs Ampere or newer in
        # vLLM; its FP8 weights run weight-only before Ada, with a 16-bit KV cache): the estimate's one rule
        weights = {f: weights_problem(f, goal.serving_engine, acc) for f in formats}
        caches = {k: kv_cache_problem(k, goal.serving_engine, acc, arch=arch) for k in kvs}
        problems = {(f, k): weights[f] or caches[k] for f in formats for k in kvs}  # format_kernels.kernels_problem's order
        four_bit = four_bit_format(goal.serving_engine, acc)  # of AWQ's and GPTQ's equal bytes, the one it serves here
        if all(weights.values()):
            kernels_why[aid] = "; ".join(dict.fromkeys(p for p in weights.values() if p))
        for j, (fmt, kv, tp, sc, _) in enumerate(sized):
            if problems[(fmt, kv)] is not None:
                continue
            if sc.expert_parallel and (fmt, kv) in one_device:
                continue
            if fmt in FOUR_BIT and fmt != four_bit:
                continue  # the same bytes as the 4-bit format this part serves
            if not rentable[tp]:
                continue
            fp16 = not acc.supports_bf16 and "bf16" in (fmt, kv)
            runs[aid].append(j)
            by_candidate.setdefault((j, fp16), []).append(aid)
    caps: dict[tuple[str, int], tuple[str, Scenario, ReplicaCapacity | str]] = {}
    for (j, fp16), aids in by_candidate.items():
        fmt, kv, tp, sc, total = sized[j]
        if fp16:
            # no bf16 before Ampere: the same bytes in fp16, as the engine runs them there (--dtype float16)
            fmt = "fp16" if fmt == "bf16" else fmt
            sc = sc.model_copy(update={"weights_format": fmt, "kv_cache_format": "fp16" if kv == "bf16" else kv})
        layout = Layout(1, tp, 1) if sc.expert_parallel else replica_layout(goal.serving_engine, tp)
        for aid, cap in zip(aids, replica_capacities(sc, [accs[a] for a in aids], layout, traffic, total), strict=True):
            caps[(aid, j)] = (fmt, sc, cap)
    options: list[ServingOption] = []
    for aid, candidates in runs.items():
        acc, rentable = accs[aid], rentable_of[aid]
        found, why = False, kernels_why.get(aid, "no layout fits")
        for j in candidates:
            tp = sized[j][2]
            fmt, sc, cap = caps[(aid, j)]
            if isinstance(cap, str):
                if not cap.startswith("a "):  # memory is the default reason; a latency miss says more
                    why = cap
                continue
            decode = cap.curve["decode_tokens_per_s"]
            for row, f in zip(rentable[tp], size_fleets(rentable[tp], cap, traffic, 1.0, acc.kind), strict=True):
                if f is None:  # one host: the fleet needs more instances than the listing is
                    why = "a layout fits, but the traffic needs more instances than its listings rent"
                    continue
                cost = fleet_usd_per_month(row, f.instances, spot) or 0.0  # serving_rows gave rows with this price
                within = goal.budget_usd is None or cost <= goal.budget_usd
                price = (row.spot_usd_per_hour or 0.0) if spot else row.on_demand_usd_per_hour
                options.append(ServingOption(acc, row, price, sc, fmt, tp, cap, f, traffic, cost, 1.0 / float(decode[f.batch - 1]), within))
                found = True
        if not found:
            skip[aid] = f"{aid}: {why}"
    return options, [skip[a] for a in accs if a in skip], len(options)


def serving_plan_of(goal: Goal, o: ServingOption) -> Plan:
    """The Plan written out from one priced serving option (core/money/serving.serving_plan prices a scenario's fleet;
    this only words what the planner priced)."""
    b = o.bill
    k = o.row.accelerators_per_instance
    tp = o.tensor_parallel  # the replica's devices
    pp = o.scenario.pipeline_parallel  # layer-split stages (llama.cpp), else 1
    idle = b.idle_devices
    notes = []
    if idle:
        notes.append(f"{idle} of the {b.instances * k} rented devices stay idle: the next replica needs {tp}")
    if o.scenario.expert_parallel:
        notes.append(
            f"expert-parallel: each of the {tp} devices of a replica holds 1/{tp} of the experts, all other weights and the KV cache "
            f"of its own requests (attention data-parallel); all-to-alls between them every MoE layer. Its speed model is within 11% "
            "of published disaggregated decode runs but 1.05-2.0x over TensorRT-LLM's published aggregated-serving peaks (docs/MOE.md)"
        )
    if b.utilisation < 0.2:
        notes.append(f"the fleet is {b.utilisation:.0%} busy on average: the smallest rentable unit is larger than the traffic")
    if b.max_batch_meeting_targets < b.max_batch_that_fits:
        notes.append(
            f"each replica runs at most {b.max_batch_meeting_targets:,} concurrent request{'s' * (b.max_batch_meeting_targets > 1)} "
            f"(room for {b.max_batch_that_fits:,}): "
            f"more would miss {goal.tokens_per_s_per_user:g} tokens/s per user or {goal.ttft_s:g} s to the first token for 1 user in 10"
        )
    model = goal.model if isinstance(goal.model, str) else goal.model.model_dump(exclude_none=True)
    scenario = {
        "model": model,
        "mode": "inference",
        "weights_format": o.weights_format,
        "kv_cache_format": o.kv_cache_format,
        "tensor_parallel": tp // pp,
        "batch_size": b.batch_size,
        "seq_len": o.scenario.seq_len,
        "output_tokens": goal.output_tokens,
        "serving_engine": goal.serving_engine,
        "flash_attention": True,
        "accelerator": o.accelerator.id,
    }
    if o.scenario.expert_parallel:
        scenario["expert_parallel"] = True  # a key only where on: a tensor-parallel plan's scenario is as before
    if pp > 1:
        scenario["pipeline_parallel"] = pp  # llama.cpp's layer split: stages run one after another
    traffic = traffic_of(goal)
    in_and_out = o.cost / (traffic.tokens_in_and_out_per_month / 1e6)  # at the goal's pricing (on demand or spot)
    output = o.cost / (traffic.output_tokens_per_month / 1e6)
    return Plan.model_construct(
        **rental_fields(o.accelerator.id, o.accelerator.name, o.row, b.instances, o.price, spot_priced(goal.pricing, o)),
        devices=b.replicas * tp,
        idle_devices=idle,
        method="serve",
        precision=o.weights_format,
        weights_format=o.weights_format,
        gradient_checkpointing=False,
        zero_stage=0,
        tensor_parallel=tp // pp,
        pipeline_parallel=pp,
        data_parallel=b.replicas,
        micro_batch=b.batch_size,
        gradient_accumulation_steps=1,
        scaling_efficiency=1.0,
        usd_per_month=o.cost,
        usd_per_million_tokens=in_and_out,  # the contract's field: input + output tokens at the goal's traffic
        usd_per_million_output_tokens=output,
        usd_per_million_tokens_in_and_out_at_traffic=in_and_out,
        usd_per_million_output_tokens_at_traffic=output,
        utilisation=b.utilisation,
        time_to_first_token_s=b.time_to_first_token_s,
        tokens_per_s_per_user=b.decode_tokens_per_s,
        output_tokens_per_s_capacity=b.replicas * b.output_tokens_per_s_per_replica,
        pareto=o.pareto,
        within_bounds=o.within_bounds,
        notes=tuple(notes),
        scenario=scenario,
        kv_cache_format=o.kv_cache_format,
        expert_parallel=o.scenario.expert_parallel,
        max_batch_that_fits=b.max_batch_that_fits,
        max_batch_meeting_targets=b.max_batch_meeting_targets,
        time_to_first_token_p90_s=b.time_to_first_token_p90_s,
        tokens_per_s_per_user_p90=b.tokens_per_s_per_user_p90,
    )
