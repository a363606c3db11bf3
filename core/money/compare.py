"""GPU vs TPU (vs any accelerator): one model and workload on each device
type, per chip and per dollar, with the platform's qualitative trade-offs
(data/ecosystem.csv, each with its source)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from core.catalog.accelerators import get_accelerator, load_accelerators
from core.catalog.ecosystem import EcosystemEntry, ecosystem_for, platform_of
from core.catalog.engine_hardware import engine_problem
from core.catalog.prices import PriceRow
from core.catalog.stack_layouts import training_part_problem
from core.layout import Layout
from core.memory.components import part_memory_key
from core.memory.evaluator import Evaluator
from core.memory.fit import MAX_DEVICES
from core.memory.problems import serving_problem
from core.money.blocks import estimate_blocks
from core.money.pricing import rows_for, serving_rows_for
from core.scenario import Scenario
from core.speed.roofline import inference_speed
from core.speed.timing import inference_peak_tflops, peak_tflops, training_time
from core.units import SECONDS_PER_HOUR

_OUT = ConfigDict(frozen=True)


class ComparisonRow(BaseModel):
    model_config = _OUT
    accelerator_id: str
    name: str
    kind: str
    platform: str
    usable_memory_gib: float
    memory_bandwidth_gbps: float
    peak_tflops: float
    peak_basis: str
    fits_on_one: bool
    devices: int | None  # per serving replica / smallest training layout; None: nothing fits
    usd_per_device_hour: float | None  # cheapest on-demand in the catalog
    time_to_first_token_s: float | None
    decode_tokens_per_s: float | None  # per user at the scenario's batch
    output_tokens_per_s_per_device: float | None
    usd_per_million_tokens: float | None  # basis: output tokens at full load, the scenario's batch (= ..._full_load)
    output_tokens_per_usd: float | None
    training_tokens_per_s_per_device: float | None
    training_wall_hours: float | None
    training_run_usd: float | None
    training_tokens_per_usd: float | None
    ecosystem: tuple[EcosystemEntry, ...]
    notes: tuple[str, ...]
    # training mode: why no stack trains this scenario on the part (the planner's rule), without the part's name; None
    # where it trains (the GPU vs TPU page says each reason once, with the parts it leaves out)
    training_problem: str | None = None
    usd_per_million_output_tokens_full_load: float | None = None  # the same number under a name that states its basis
    training_run_spot_usd: float | None = None  # the same run at the cheapest spot row (None: no spot price)


def _row(sc: Scenario, aid: str, rows: tuple[PriceRow, ...] | None, ev: Evaluator) -> ComparisonRow:
    acc = get_accelerator(aid)
    sc_a = sc if sc.accelerator == aid else sc.model_copy(update={"accelerator": aid})
    res, training, inf = estimate_blocks(sc_a, ev, light=True)
    # serving figures only where the engine runs there, runs the model and has kernels for the weights
    cannot = None if sc.mode == "training" else engine_problem(sc.serving_engine, acc) or serving_problem(sc_a)
    if cannot is not None:
        inf = None
    tp = inf.tensor_parallel if inf is not None else (res.layout_needed.tensor_parallel if res.layout_needed else 1)
    # cheapest per-device price among instances that hold the tensor-parallel group
    pick = rows_for if sc.mode == "training" else serving_rows_for  # serving: not on Colab's notebooks
    per_device = min((r.on_demand_usd_per_device_hour for r in pick(aid, rows, tp)), default=None)
    peak = peak_tflops(acc, sc.precision) if sc.mode == "training" else inference_peak_tflops(acc, sc.weights_format)
    notes: list[str] = [] if not peak.flagged else [peak.basis]
    if cannot is not None:
        notes.append(cannot)
    devices = res.devices_needed
    out_per_dev = usd_mtok = ttft = decode = None
    if inf is not None and res.devices_needed is not None:
        devices = inf.devices_per_replica
        batch = max(1, min(sc.batch_size, inf.max_concurrent_sequences))
        speed = inf if batch == inf.batch_size else inference_speed(sc_a, accelerator=acc, layout=Layout(1, inf.tensor_parallel, inf.pipeline_parallel), batch=batch)
        if batch != sc.batch_size:
            notes.append(f"batch capped at {batch}, the most that fits")
        ttft, decode = speed.time_to_first_token_s, speed.decode_tokens_per_s
        out_per_dev = speed.output_tokens_per_s / devices
        if per_device is not None:
            usd_mtok = per_device * devices / (speed.output_tokens_per_s * SECONDS_PER_HOUR) * 1e6
    train_rate = train_hours = train_usd = train_spot_usd = None
    # training figures only where a stack trains this method on the part (the Training sweep's and the planner's rule:
    # no QLoRA on a TPU, nothing on Inferentia2 or an SRAM inference chip)
    trains = sc.mode == "training" or bool(sc.train_tokens)
    cannot_train = training_part_problem(acc, sc.method, sc.training_stack, sc.optimizer, sc.objective) if trains else None
    if cannot_train is not None:
        cannot_train = cannot_train.removeprefix(f"{acc.id}: ")
        notes.append(cannot_train)
        cannot_train = cannot_train.removeprefix(f"{acc.name}: ")  # the reason alone, for a line naming several parts
    elif trains:
        t = training_time(sc_a, acc, 1, tokens=sc.train_tokens or 1.0)
        train_rate = t.tokens_per_s
        if training is not None:
            train_hours, train_usd = training.run_hours, training.run_usd  # the one bill (core/money/run_bill.py)
            train_spot_usd = training.run_spot_usd
            devices = training.devices if sc.mode == "training" else devices
    if devices is None:
        notes.append(f"does not fit in any layout of up to {MAX_DEVICES:,} devices")
    return ComparisonRow.model_construct(
        accelerator_id=acc.id,
        name=acc.name,
        kind=acc.kind,
        platform=platform_of(acc),
        usable_memory_gib=acc.usable_memory_gib,
        memory_bandwidth_gbps=acc.memory_bandwidth_gbps,
        peak_tflops=peak.tflops,
        peak_basis=peak.basis,
        fits_on_one=res.devices_needed == 1,
        devices=devices,
        usd_per_device_hour=per_device,
        time_to_first_token_s=ttft,
        decode_tokens_per_s=decode,
        output_tokens_per_s_per_device=out_per_dev,
        usd_per_million_tokens=usd_mtok,
        usd_per_million_output_tokens_full_load=usd_mtok,
        output_tokens_per_usd=None if usd_mtok is None else 1e6 / usd_mtok,
        training_tokens_per_s_per_device=train_rate,
        training_wall_hours=train_hours,
        training_run_usd=train_usd,
        training_run_spot_usd=train_spot_usd,
        training_tokens_per_usd=None if train_rate is None or per_device is None else train_rate * SECONDS_PER_HOUR / per_device,
        ecosystem=ecosystem_for(acc),
        notes=tuple(notes),
        training_problem=cannot_train,
    )


def compare_accelerators(sc: Scenario, accelerator_ids: Iterable[str] | None = None, rows: tuple[PriceRow, ...] | None = None) -> tuple[ComparisonRow, ...]:
    """One row per accelerator (default: the whole catalog), in the order given.
    Inference numbers in inference mode; training numbers in training mode or
    when train_tokens is set. $/M tokens here uses the cheapest per-device
    price (replicas packed onto instances)."""
    ids = [a.id for a in load_accelerators()] if accelerator_ids is None else list(accelerator_ids)
    # memory per device does not depend on the device: sized once for all, once more for SRAM-resident chips (no GPU
    # runtime on them)
    # (and per QLoRA attention path: fp32 on SDPA, or FlashAttention-2: components.fp32_attention)
    evs: dict[tuple[bool, bool], Evaluator] = {}
    out = []
    for aid in ids:
        sc_a = sc.model_copy(update={"accelerator": aid})
        key = part_memory_key(sc_a)
        ev = evs[key] if key in evs else evs.setdefault(key, Evaluator(sc_a, sc.architecture))
        out.append(_row(sc, aid, rows, ev))
    return tuple(out)
