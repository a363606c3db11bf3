"""estimate(scenario) -> Result: the memory answer (core/memory/estimate.py)
with, on top, the time and cost of a training run (when train_tokens is set)
and the serving speed and price (in inference mode), composed in
core/money/blocks.py, and when it does not fit, what would help with its time and cost
(core/money/help_options.py). The CLI's contract: a Result carries every MemoryResult
field plus `training`, `inference` and `help_options`."""

from __future__ import annotations

from pydantic import Field

from core.catalog.prices import PriceRow
from core.memory.estimate import MemoryResult
from core.money.blocks import InferenceEstimate, TrainingEstimate, estimate_blocks
from core.money.help_options import HelpOption, help_options
from core.scenario import Scenario


class Result(MemoryResult):
    training: TrainingEstimate | None = None  # when train_tokens is set
    inference: InferenceEstimate | None = None  # in inference mode
    help_options: list[HelpOption] = Field(default_factory=list)  # when it does not fit: each change that fits, with time and cost, cheapest first


def estimate(sc: Scenario, rows: tuple[PriceRow, ...] | None = None, *, with_help: bool = True) -> Result:
    """The scenario's memory, fit, training and serving blocks, priced from `rows` (the built-in catalog when None).
    `with_help` False leaves out the priced search of what would help (about half of a non-fitting estimate's time),
    for callers that do not show it; the app asks for it on the Memory page alone (app_pages/shared/results.py)."""
    mem, training, inference = estimate_blocks(sc, rows=rows)  # hop: Scenario -> MemoryResult (+ priced blocks)
    fields = {name: getattr(mem, name) for name in MemoryResult.model_fields}  # hop: MemoryResult -> Result, as is
    helps = [] if mem.fits or not with_help else help_options(sc, rows)  # hop: Scenario -> the fixes that fit, timed and priced
    return Result.model_construct(**fields, training=training, inference=inference, help_options=helps)
