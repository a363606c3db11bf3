"""The planner: from a goal ("fine-tune this model on these tokens", "serve it to this traffic") to the plans worth
running, cheapest first, with the time-vs-cost frontier. It sits on top of the core: memory decides what fits,
speed and communication decide how long, prices decide what it costs."""

from __future__ import annotations

import functools
from typing import Any

from core.catalog.api_prices import load_api_prices, monthly_usd
from core.catalog.presets import preset
from core.catalog.prices import PriceRow, load_prices
from core.catalog.stack_layouts import INFERENCE_ONLY
from core.memory.stacks import FUSED_CROSS_ENTROPY_STACKS, FUSED_LOSS_LOGITS_BYTES
from core.money.pricing import DAYS_PER_MONTH
from core.plan import frontier as fr
from core.plan.goal import CHINCHILLA_TOKENS_PER_PARAM, Goal, compute_optimal_tokens, fine_tuning_sized, missing_providers
from core.plan.result import ApiQuote, Plan, PlanResult, price_note, spot_priced
from core.plan.serve import plan_serving, serving_plan_of
from core.plan.train import FINE_TUNE_GLOBAL_SEQUENCES, HORIZON_HOURS, base_scenario, plan_training, training_plan_of

__all__ = ["Goal", "Plan", "PlanResult", "plan"]

PLANS_SHOWN = 60
COMPARABLE_SIZE = 0.35  # an API model counts as comparable within +-35% of the goal model's total parameters


def plan(goal: Goal, rows: tuple[PriceRow, ...] | None = None) -> PlanResult:
    """The goal's plans priced from `rows` (the built-in catalog when None)."""
    if goal.goal == "serve":
        s_options, skipped, considered = plan_serving(goal, rows)
        options: list[Any] = list(s_options)
        build: Any = serving_plan_of
    else:
        t_options, skipped, considered = plan_training(goal, rows)
        options, build = list(t_options), training_plan_of
    # A reservation the run would leave idle most of its minimum term is priced (and picked only when nothing else
    # exists) but kept off the frontier and the shown plans: no one rents a cluster for a week to run 16 minutes.
    bounded = [o for o in options if o.within_bounds and not _idle_term(o)]
    for i in fr.frontier(bounded):
        bounded[i].pareto = True
    cheapest, fastest = fr.cheapest(options), fr.fastest(options)
    longer = _cheaper_if_longer(goal, options, cheapest)
    at_market = _at_market(goal, options, cheapest)
    made: dict[int, Plan] = {}

    def plan_of(o: Any) -> Plan:
        if id(o) not in made:
            made[id(o)] = build(goal, o)
        return made[id(o)]

    return PlanResult.model_construct(
        goal=goal.goal,
        plans=tuple(plan_of(o) for o in _shown(options, cheapest, fastest, longer, at_market)),
        cheapest=None if cheapest is None else plan_of(cheapest),
        fastest=None if fastest is None else plan_of(fastest),
        api_quotes=tuple(api_quotes(goal)) if goal.goal == "serve" else (),
        considered=considered,
        assumptions=tuple(assumptions(goal)),
        skipped=(*missing_providers(goal, rows), *skipped),
        cheaper_if_longer=None if longer is None else plan_of(longer),
        cheapest_at_market=None if at_market is None else plan_of(at_market),
    )


def _below_market(goal: Goal, o: Any) -> bool:
    """Whether an option is priced on a catalog row far below its accelerator's market (price_trust.market_note): a
    marketplace host's listing or a promotion. A user's own price is theirs and never counts as one."""
    if id(o.row) not in _catalog_rows():  # by identity: the catalog's rows are one cached tuple's (hashing 3,000 took 10 ms)
        return False
    return price_note(o.row, o.price, spot_priced(goal.pricing, o)) is not None


@functools.cache
def _catalog_rows() -> frozenset[int]:
    return frozenset(id(r) for r in load_prices())


def _at_market(goal: Goal, options: list[Any], cheapest: Any) -> Any:
    """When the cheapest plan is priced far below its accelerator's market, the cheapest plan (by the same rule,
    core/money/picks.cheapest) priced within it: what the run costs if that one listing is gone. None otherwise."""
    if cheapest is None or not _below_market(goal, cheapest):
        return None
    return fr.cheapest([o for o in options if not _below_market(goal, o)])


def _cheaper_if_longer(goal: Goal, options: list[Any], cheapest: Any) -> Any:
    """Training: the cheapest plan that only the time limit (the deadline, or the 30-day horizon) ruled out and that
    finishes within twice it (core/money/picks.cheaper_if_longer), when it costs less than the cheapest plan within it."""
    if not goal.training:
        return None
    return fr.cheaper_if_longer(options, cheapest, time_limit_hours(goal), goal.budget_usd)


def time_limit_hours(goal: Goal) -> float:
    """The run time a training plan must keep to: the goal's deadline, or without one the 30-day horizon."""
    return goal.deadline_hours if goal.deadline_hours is not None else HORIZON_HOURS


def _idle_term(o: Any) -> bool:
    return bool(getattr(o, "pays_idle_term", False))


def _key(o: Any) -> tuple[Any, ...]:
    return (o.accelerator.id, o.row.provider, o.row.instance_type, o.instances, _variant(o))


def _variant(o: Any) -> str:
    if hasattr(o, "candidate"):
        s = o.candidate.shape
        return f"{s.method}/{s.gradient_checkpointing}/{s.zero_stage}/{s.tensor_parallel}/{s.pipeline_parallel}"
    return f"{o.weights_format}/{o.tensor_parallel}/{o.kv_cache_format}" + ("/ep" if o.scenario.expert_parallel else "")


def _shown(options: list[Any], cheapest: Any, fastest: Any, longer: Any = None, at_market: Any = None) -> list[Any]:
    """The picks (and the cheaper plan past the time limit, and the cheapest at a market price), the frontier, and the
    cheapest option of each accelerator and variant, cheapest first."""
    keep: dict[tuple[Any, ...], Any] = {}
    for o in (cheapest, fastest, longer, at_market):
        if o is not None:
            keep.setdefault(_key(o), o)
    for o in sorted((o for o in options if o.pareto), key=lambda o: o.cost):
        keep.setdefault(_key(o), o)
    best: dict[tuple[str, str], Any] = {}
    for o in options:
        k = (o.accelerator.id, _variant(o).split("/")[0])
        if o.within_bounds and not _idle_term(o) and (k not in best or (o.cost, o.duration) < (best[k].cost, best[k].duration)):
            best[k] = o
    for o in sorted(best.values(), key=lambda o: o.cost):
        if len(keep) >= PLANS_SHOWN:
            break
        keep.setdefault(_key(o), o)
    return sorted(keep.values(), key=lambda o: (o.cost, o.duration))


def api_quotes(goal: Goal) -> list[ApiQuote]:
    """The goal's traffic through per-token APIs: the same open model where it is hosted, else models of about its
    size (providers still offering it on the catalog's date)."""
    if not isinstance(goal.model, str):
        total = goal.model.architecture.total_params
        same_id = None
    else:
        same_id = goal.model
        total = preset(goal.model).architecture.total_params
    month_in = (goal.requests_per_day or 0.0) * DAYS_PER_MONTH * goal.input_tokens
    month_out = (goal.requests_per_day or 0.0) * DAYS_PER_MONTH * goal.output_tokens
    rows = [r for r in load_api_prices() if r.available and r.preset]
    same = [r for r in rows if r.preset == same_id]
    pool = same or [r for r in rows if abs(preset(r.preset).architecture.total_params / total - 1) <= COMPARABLE_SIZE]
    quotes = [
        ApiQuote.model_construct(
            provider=r.provider,
            model=r.model,
            usd_per_month=monthly_usd(r, month_in, month_out),
            input_usd_per_million=r.input_usd_per_million,
            output_usd_per_million=r.output_usd_per_million,
            same_model=bool(same),
            as_of=r.as_of.isoformat(),
            source=r.source,
        )
        for r in pool
    ]
    return sorted(quotes, key=lambda q: q.usd_per_month)[:12]


def _pretraining_size(goal: Goal) -> list[str]:
    """A pretraining goal on a tenth or less of its model's compute-optimal tokens says so (core/plan/goal.py)."""
    if goal.goal != "pretrain":
        return []
    params = float(base_scenario(goal, "full", False).architecture.total_params)
    if not fine_tuning_sized(goal.train_tokens, params):
        return []
    return [
        f"{goal.train_tokens:,.0f} tokens is a fine-tuning-sized dataset for pretraining: compute-optimal is about "
        f"{compute_optimal_tokens(params) / 1e9:,.3g} billion ({CHINCHILLA_TOKENS_PER_PARAM:g} tokens a parameter, Hoffmann et al. 2022)."
    ]


def assumptions(goal: Goal) -> list[str]:
    out = [
        "Only plans that fit, sized with the same memory model as the Memory page, on the catalog's price rows (whole "
        "instances billed, 730 hours a month); idle devices on a rented instance are shown.",
        f"A plan that spends more than half its time communicating is never called cheapest or fastest while one that "
        f"does not exists (scaling efficiency below {fr.MIN_SCALING_EFFICIENCY:.0%}).",
        f"Fastest is the cheapest plan within {fr.FAST_ENOUGH - 1:.0%} of the shortest time (core/money/picks.py), not one "
        "that rents many more devices to finish a few minutes sooner.",
    ]
    if goal.providers is not None:
        out.append(f"Only the price rows of {', '.join(goal.providers)} (the goal's providers); the market a price is set against is every provider's.")
    if goal.training:
        out += [
            "Training time = FLOPs / (devices x peak x MFU) plus the communication the core models (tensor-parallel "
            "all-reduces, pipeline bubble, the exposed data-parallel gradient all-reduce over the part's interconnect).",
            "A job spans several instances only when they are whole nodes (8 GPUs) of a provider that rents them on a "
            "cluster network (data/providers.csv); a marketplace's listing (Vast, Lium...) is one host, rented one at a time.",
            f"Global batch: {FINE_TUNE_GLOBAL_SEQUENCES} {'pairs' if goal.objective == 'dpo' else 'sequences'} for fine-tuning; for pretraining by model size as "
            "GPT-3 (Brown et al. 2020, Table 2.1) and Llama (4M tokens): more data-parallel ranks than the batch has "
            "sequences cannot help, so extra devices on an instance stay idle.",
            "Searched: full fine-tuning (mixed bf16, AdamW), LoRA and QLoRA (rank 16, all linear layers, bf16 base), "
            "with and without gradient checkpointing, one device, DDP, ZeRO-3/FSDP over 2-1,024 ranks, tensor parallel "
            "inside an instance, pipeline stages across; the largest micro-batch that fits. CPU offload is not planned: "
            "its time cost is not modelled (set it on the Memory page).",
            f"Accelerators for inference only are left out ({', '.join(sorted(INFERENCE_ONLY))}); QLoRA only on CUDA or ROCm GPUs (bitsandbytes' 4-bit kernels).",
            *(
                [
                    "Preference tuning (DPO): each example of the batch is a pair, a chosen and a rejected sequence of the sequence length; "
                    "the tokens count both; a full fine-tune keeps a frozen reference copy of the weights, and each step "
                    "adds the reference's forward pass (core/memory/objective.py); only the stacks with a DPO trainer and their methods "
                    "(data/stack_layouts.csv dpo_methods)."
                ]
                if goal.objective == "dpo"
                else []
            ),
            *(
                [
                    f"The loss is a fused cross-entropy (Liger Kernel / Cut Cross-Entropy): {FUSED_LOSS_LOGITS_BYTES:g} bytes a token and "
                    "vocabulary entry instead of the stack's own (core/memory/stacks.py)."
                ]
                if goal.fused_cross_entropy and goal.training_stack in FUSED_CROSS_ENTROPY_STACKS
                else []
            ),
            f"Only the layouts the training stack runs ({goal.training_stack}: data/stack_layouts.csv, sourced); a pipeline "
            "plan carries 4 micro-batches per stage in each step, the bubble its time assumes. A part the stack does not "
            "run on trains under one that does: TPUs under Hugging Face on PyTorch/XLA (SPMD FSDPv2 or one chip).",
            "A run is billed setup (0.25 h unless the goal says otherwise) plus its computation with communication, on "
            "whole instances (core/money/run_bill.py, the bill of every page); no run rents more devices on demand than "
            "one order of its provider holds (data/providers.csv: a published size, else a stated default of 64). Past it, "
            "a provider's published reserved cluster (data/reservations.csv: Lambda's 1-Click Clusters, 16-512 H100 or "
            "B200, by the week; AWS EC2 Capacity Blocks, 1-64 instances, by the day up to 14 days then by the week, at "
            "their published rate) prices the run with its whole terms billed, and the plan says it needs a reservation; "
            "elsewhere the run is left out. A Capacity Block also competes within the on-demand order when its rate makes "
            "it cheaper. A reservation that would sit idle past the run is never called cheapest or fastest while "
            "another plan exists.",
            *_pretraining_size(goal),
            f"Without a deadline, a run longer than {HORIZON_HOURS / 24:.0f} days is not called cheapest while a shorter one "
            "exists; where none is (nor, with a deadline or budget, within them), cheapest is the cheapest regardless, marked "
            f"within_bounds false. A cheaper run of up to {fr.LONGER_RUN_FACTOR:g} x the deadline (or the "
            f"{HORIZON_HOURS / 24:.0f} days) is shown with what it would save.",
            "Catalog rows flagged as placeholders, floors or a part of a machine (a GPU without its host), and stale rows, are left out (data/price_flags.csv); a price "
            "under half its accelerator's median provider price (spot against spot) is labelled far below the market, and "
            "where the cheapest plan has one, the cheapest plan at a market price is named beside it.",
        ]
    else:
        out += [
            f"Replicas are sized for the busiest hour: {goal.peak_to_average:g} x the day's average output tokens per "
            "second (whole instances, every slot of an instance serving); each replica serves the largest batch that "
            "keeps time to first token and each user's generation "
            f"speed within the targets ({goal.ttft_s:g} s, {goal.tokens_per_s_per_user:g} tokens/s).",
            "USD per million tokens = the monthly bill / the month's tokens at this traffic (idle capacity included): "
            "input + output tokens, and output tokens alone, are shown under different labels.",
            f"Searched: the engine's weight formats (bf16, FP8 and 4-bit AWQ for vLLM; GGUF for llama.cpp) where it has "
            f"kernels for them on the part (FP8 weight-only before Ada), tensor parallel 1-8, a bf16 KV cache and the "
            f"engine's 8-bit one (FP8; llama.cpp's Q8_0) where it stores it on the part for this model "
            f"(data/kv_cache_kernels.csv), every batch from 1 to what fits; the serving engine is {goal.serving_engine}.",
            "A marketplace listing or a reseller's machine (data/providers.csv) is one host: a fleet on it is one "
            "instance at most; larger fleets rent from providers that rent many instances.",
        ]
    return out
