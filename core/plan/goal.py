"""What a planner user asks for: a goal (fine-tune, pretrain or serve), the model, the work, and optional bounds.

A contract (`python -m core plan`): fields are added, never renamed or dropped."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.catalog.price_trust import billable_prices
from core.catalog.prices import PriceRow, load_prices
from core.memory.engines import EngineId
from core.memory.stacks import StackId
from core.money.run_bill import SETUP_HOURS
from core.scenario import MAX_TRAIN_TOKENS, Method, ModelSpec, Objective, Scenario

# the least dataset a goal plans (tokens, and tokens x epochs): a thousand tokens, a few examples
MIN_TRAIN_TOKENS = 1e3
MAX_SEQUENCE_TOKENS = Scenario.model_fields["seq_len"].metadata[-1].le  # a serving request's input + output, at most

# Compute-optimal pretraining: about 20 tokens a parameter (Hoffmann et al. 2022, "Training Compute-Optimal Large
# Language Models", arXiv 2203.15556, Table 3: 20.2 tokens a parameter at 1B-10T FLOPs budgets). A pretraining goal
# on a tenth of it or less is a fine-tuning-sized dataset: the Plan page and the plan's assumptions say so (a goal
# keeps its own dataset).
CHINCHILLA_TOKENS_PER_PARAM = 20.0
SMALL_PRETRAIN_FRACTION = 0.1


def compute_optimal_tokens(total_params: float) -> float:
    """Pretraining tokens for a model of `total_params` parameters at the compute-optimal ratio."""
    return CHINCHILLA_TOKENS_PER_PARAM * total_params


def fine_tuning_sized(tokens: float, total_params: float) -> bool:
    """Whether a pretraining dataset of `tokens` is a tenth or less of the model's compute-optimal count."""
    return tokens <= SMALL_PRETRAIN_FRACTION * compute_optimal_tokens(total_params)


PROVIDER_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
GoalKind = Literal["fine-tune", "pretrain", "serve"]
Pricing = Literal["on-demand", "spot"]


class Goal(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    goal: GoalKind
    model: ModelSpec = Field(description="as in `estimate`: a preset id, {'params': N} or {'hf_config': {...}}")
    # training goals: tokens per epoch (a dataset's examples x tokens per example) and epochs
    tokens: float | None = Field(default=None, ge=MIN_TRAIN_TOKENS, le=MAX_TRAIN_TOKENS, description="training tokens per epoch")
    epochs: float = Field(default=1.0, gt=0, le=1_000)
    seq_len: int = Field(default=2048, ge=16, le=1_048_576, description="tokens per training example (packed sequence length)")
    setup_hours: float = Field(
        default=SETUP_HOURS,
        ge=0,
        le=100,
        description="time each rented instance is billed beyond the computation: start-up, loading the model and data, the last checkpoint",
    )
    # serving goals: the traffic and the latency a user must see
    requests_per_day: float | None = Field(default=None, gt=0, le=1e12)
    # each up to what the Plan page's inputs take (its traffic is the Inference page's); together at most a
    # sequence's (Scenario.seq_len), checked below
    input_tokens: int = Field(default=1_000, ge=1, le=2_097_151)
    output_tokens: int = Field(default=300, ge=1, le=1_048_576)
    peak_to_average: float = Field(default=2.0, ge=1.0, le=100.0, description="busiest hour's traffic over the day's average")
    ttft_s: float = Field(default=2.0, gt=0, le=600, description="time to first token a user waits at most (seconds)")
    tokens_per_s_per_user: float = Field(default=20.0, gt=0, le=10_000, description="generation speed each user sees at least")
    # bounds and restrictions
    deadline_hours: float | None = Field(default=None, gt=0, le=1e6)
    budget_usd: float | None = Field(default=None, gt=0, le=1e12, description="training: the run's cost; serving: the monthly bill")
    pricing: Pricing = "on-demand"
    accelerators: tuple[str, ...] | None = Field(default=None, max_length=200)
    providers: tuple[str, ...] | None = Field(
        default=None,
        max_length=64,
        description="only these providers' price rows (the catalog's provider ids, data/providers.csv: aws, azure, gcp, lambda...; "
        "or a price list's own); default: every provider",
    )
    methods: tuple[Method, ...] | None = Field(default=None, min_length=1, max_length=3)
    training_stack: StackId = "hf"
    objective: Objective = Field(
        default="sft",
        description="fine-tune goals: 'sft' (next-token loss) or 'dpo' (Direct Preference Optimization: tokens counts both responses of "
        "each pair; a full fine-tune keeps a frozen reference copy: core/memory/objective.py)",
    )
    fused_cross_entropy: bool = Field(
        default=False,
        description="training: the stack's loss replaced by a fused cross-entropy (Liger Kernel / Cut Cross-Entropy) where the stack takes it "
        "(Hugging Face, Axolotl, DeepSpeed: core/memory/stacks.py FUSED_CROSS_ENTROPY_STACKS)",
    )
    require_bf16: bool = Field(
        default=False,
        description="training: plan only parts with BF16 (Ampere and later, TPUs, Trainium...); parts without it train in FP16 with loss scaling",
    )
    serving_engine: EngineId = "vllm"
    expert_parallel: bool = Field(
        default=False,
        description=(
            "serving a mixture-of-experts model: also try expert-parallel replicas (attention data-parallel). Off by "
            "default: their speed model is within 11% of published disaggregated decode runs but 1.05-2.0x over "
            "published aggregated-serving peaks (docs/MOE.md), so the planner does not pick them unasked"
        ),
    )

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: Any) -> Any:
        return Scenario.model_validate({"model": value}).model if isinstance(value, str) else value

    @field_validator("accelerators")
    @classmethod
    def _known(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        from core.catalog.presets import accelerator_ids, suggest

        for a in value:
            if a not in accelerator_ids():
                raise ValueError(f"unknown accelerator {a!r}{suggest(a, accelerator_ids())}")
        if not value:
            raise ValueError("name at least one accelerator, or leave the field out")
        return value

    @field_validator("providers")
    @classmethod
    def _providers(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        names = tuple(dict.fromkeys(v.strip().lower() for v in value))
        if not names:
            raise ValueError("name at least one provider, or leave the field out")
        bad = [n for n in names if not PROVIDER_ID.fullmatch(n)]
        if bad:
            raise ValueError(f"a provider is a short id such as 'aws' or 'lambda' (letters, digits, '.', '_', '-'): not {bad[0][:40]!r}")
        return names

    @model_validator(mode="after")
    def _coherent(self) -> Goal:
        if self.goal == "serve":
            if self.requests_per_day is None:
                raise ValueError("a serve goal needs requests_per_day")
            if self.input_tokens + self.output_tokens > MAX_SEQUENCE_TOKENS:  # one request's sequence (Scenario.seq_len)
                raise ValueError(
                    f"a request's input and output tokens (input_tokens {self.input_tokens:,} + output_tokens {self.output_tokens:,}) "
                    f"come to more than a sequence's {MAX_SEQUENCE_TOKENS:,}"
                )
        elif self.tokens is None:
            raise ValueError(f"a {self.goal} goal needs tokens (the dataset's tokens per epoch)")
        elif self.train_tokens > MAX_TRAIN_TOKENS:  # each bound holds alone; their product must hold too
            raise ValueError(f"tokens x epochs is {self.train_tokens:.3g} training tokens: at most {MAX_TRAIN_TOKENS:.0e} (fewer epochs or a smaller dataset)")
        elif self.train_tokens < MIN_TRAIN_TOKENS:  # a fraction of an epoch below the dataset's own least size
            raise ValueError(f"tokens x epochs is {self.train_tokens:.3g} training tokens: at least {MIN_TRAIN_TOKENS:,.0f} (more epochs or a larger dataset)")
        if self.goal != "fine-tune" and self.objective != "sft":
            raise ValueError("preference tuning (objective 'dpo') tunes a trained model: use goal 'fine-tune'")
        if self.goal == "pretrain" and self.methods not in (None, ("full",)):
            raise ValueError("pretraining trains every weight: methods can only be ['full']")
        return self

    @property
    def training(self) -> bool:
        return self.goal != "serve"

    @property
    def train_tokens(self) -> float:
        return (self.tokens or 0.0) * self.epochs


def goal_rows(goal: Goal, prices: tuple[PriceRow, ...] | None = None) -> tuple[PriceRow, ...]:
    """The price rows a goal is planned on: the bill's rows (billable_prices: a user's list as given, else the
    catalog less its flagged and stale rows), of the goal's providers only when it names them."""
    rows = billable_prices(prices)
    if goal.providers is None:
        return rows
    wanted = set(goal.providers)
    return tuple(r for r in rows if r.provider.lower() in wanted)


def missing_providers(goal: Goal, prices: tuple[PriceRow, ...] | None = None) -> list[str]:
    """The goal's providers that no price row is from, each with why ("nosuch: no price rows from this provider
    (did you mean ...)"): said where the plan is empty or thinner than asked."""
    if goal.providers is None:
        return []
    from core.catalog.presets import suggest

    have = sorted({r.provider.lower() for r in billable_prices(prices)})
    listed = {r.provider.lower() for r in load_prices()} if prices is None else set(have)  # the catalog's, flagged and stale too
    return [
        f"{p}: its price rows are flagged or stale (data/price_flags.csv, older than six months)"
        if p in listed
        else f"{p}: no price rows from this provider{suggest(p, frozenset(have))}"
        for p in goal.providers
        if p not in have
    ]
