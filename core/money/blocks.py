"""The `training` and `inference` blocks of an estimate() Result: time, speed
and the cheapest catalog price for the scenario's own accelerator."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from core.catalog.accelerators import Accelerator, get_accelerator
from core.catalog.prices import PriceRow
from core.layout import Layout
from core.memory.components import checkpointing, gptq_base
from core.memory.engines import EAGER_LAYER_OVERHEAD_S
from core.memory.estimate import MemoryResult, estimate_memory
from core.memory.evaluator import Evaluator, fit_capacity
from core.memory.fit import max_batch
from core.memory.objective import reference_forward_passes
from core.model.formats import FORMATS, weight_bytes
from core.money.pricing import cheapest_replica_row, label, replica_usd_per_hour, usd_per_million_tokens
from core.money.run_bill import SETUP_HOURS, cheapest_bill, run_time
from core.scenario import Scenario
from core.speed.roofline import COMPUTE_EFF, inference_speed, roofline
from core.speed.storage import load_sentence
from core.speed.timing import LAUNCH_BOUND_NOTED_FRACTION, dequant_words, forward_passes

_OUT = ConfigDict(frozen=True)


class TrainingEstimate(BaseModel):
    model_config = _OUT
    tokens: float
    flops: float
    flops_per_token: float
    devices: int
    peak_tflops_per_device: float
    mfu: float
    tokens_per_s: float
    wall_hours: float
    gpu_hours: float
    wall_hours_with_comm: float
    comm_overhead_fraction: float
    cost_usd: float | None
    spot_cost_usd: float | None
    price_instance: str | None
    spot_price_instance: str | None
    assumptions: list[str]
    # Added (issue 26, one pricing core): the run as the planner and every page bill it (core/money/run_bill.py).
    # wall_hours and cost_usd above stay the ideal computation alone; these include setup and communication.
    setup_hours: float | None = None  # billed on each instance beyond the computation
    run_hours: float | None = None  # billed wall-clock hours: setup + computation with communication
    run_usd: float | None = None  # on-demand: whole instances x price per hour x run_hours
    run_spot_usd: float | None = None  # the same at the cheapest spot row (None: no spot price)
    instances: int | None = None  # whole instances rented for the on-demand bill
    # Added (issue 26, rentable by product): when run_usd is a provider's reserved cluster's bill (data/reservations.csv)
    run_reservation: str | None = None  # the reserved product ("1-Click Cluster", "EC2 Capacity Block"); None: rented on demand
    run_paid_hours: float | None = None  # hours the bill pays for: run_hours on demand, the reservation's whole terms
    # Added (issue 27, QLoRA's time explained): shares of the computation's time (core/speed/timing.py)
    dequant_fraction: float = 0.0  # dequantizing the 4-bit base in every pass
    upcast_fraction: float = 0.0  # prepare_model_for_kbit_training's fp32 head and residual stream (QLoRA on the hf stack)
    # Added (issue 27): share of the computation's time the GPU waits for an eager stack's kernel launches
    launch_bound_fraction: float = 0.0


class InferenceEstimate(BaseModel):
    model_config = _OUT
    batch_size: int
    prompt_tokens: int
    output_tokens: int
    tensor_parallel: int
    pipeline_parallel: int
    devices_per_replica: int
    time_to_first_token_s: float
    decode_tokens_per_s: float
    aggregate_tokens_per_s: float
    output_tokens_per_s: float
    decode_bound: str
    max_concurrent_sequences: int
    usd_per_replica_hour: float | None
    usd_per_million_tokens: float | None  # basis: output tokens, one replica busy at this batch all the time (= ..._full_load)
    price_instance: str | None
    assumptions: list[str]
    usd_per_million_output_tokens_full_load: float | None = None  # the same number under a name that states its basis
    # expert-parallel serving (scenario expert_parallel, over the replica's tensor-parallel devices; 1: off). The decode
    # figures above add the all-to-alls to the compute (no overlap: the slower bound); these are the faster bound,
    # with perfect two-batch overlap, and the all-to-alls' share of the no-overlap step
    expert_parallel_ranks: int = 1
    decode_tokens_per_s_overlapped: float | None = None
    aggregate_tokens_per_s_overlapped: float | None = None
    all_to_all_share: float | None = None


class FitInfo(NamedTuple):
    """What the memory estimate already knows, passed in to avoid redoing it."""

    layout: tuple[int, int, int]
    fits: bool
    needed: tuple[int, int, int, int] | None  # dp, tp, pp, zero stage of the smallest fitting layout

    @classmethod
    def of(cls, mem: MemoryResult, sc: Scenario) -> FitInfo:
        n = mem.layout_needed
        return cls(
            (sc.data_parallel, sc.tensor_parallel, sc.pipeline_parallel),
            mem.fits,
            None if n is None else (n.data_parallel, n.tensor_parallel, n.pipeline_parallel, n.zero_stage),
        )


def run_layout(sc: Scenario, info: FitInfo) -> tuple[Layout, int]:
    """The layout the time is computed on, and its ZeRO stage: the scenario's
    own when it fits, else the smallest fitting one; training then adds
    data-parallel replicas up to the scenario's device count (never above it
    unless the smallest fitting layout is larger)."""
    layout = Layout(*info.layout)
    if info.fits or info.needed is None:
        return layout, sc.zero_stage
    dp, tp, pp, zero = info.needed
    if sc.mode == "training":
        dp = max(dp, layout.devices // (tp * pp))
    return Layout(dp, tp, pp), zero


def training_estimate(sc: Scenario, acc: Accelerator, info: FitInfo, rows: tuple[PriceRow, ...] | None = None) -> TrainingEstimate:
    arch = sc.architecture
    layout, zero = (Layout(*info.layout), sc.zero_stage) if sc.mode != "training" else run_layout(sc, info)
    comm_sc = sc if zero == sc.zero_stage else sc.model_copy(update={"zero_stage": zero})
    rt = run_time(comm_sc, acc, layout)
    t = rt.time
    tp = layout.tensor_parallel
    # The one bill (core/money/run_bill.py): the cheapest row a training run can rent for these devices.
    on_demand = cheapest_bill(acc.id, layout.devices, tp, rt.compute_hours, rows)
    spot = cheapest_bill(acc.id, layout.devices, tp, rt.compute_hours, rows, spot=True)
    row = None if on_demand is None else on_demand.row
    notes = [
        f"FLOPs = {t.flops_per_token / arch.active_params:.2g} x {arch.active_params:,} active params x {t.tokens:,.0f} tokens"
        + (" (full activation recomputation)" if checkpointing(sc) else "")
        + ("; DPO's reference forward is 2 of them, and the tokens are both answers of each pair" if reference_forward_passes(sc) else ""),
        t.mfu_source,
        f"peak {t.peak_tflops_per_device:g} TFLOP/s per device: {t.peak_basis}",
        f"time on {layout.devices} devices (DP {layout.data_parallel} x TP {layout.tensor_parallel} x PP {layout.pipeline_parallel})",
        f"with communication: +{rt.comm_overhead:.0%} (TP all-reduces, pipeline bubble, exposed gradient all-reduce, interruptions at cluster scale); "
        "pessimistic, as the MFU defaults already include some",
    ]
    if sc.method == "qlora" or gptq_base(sc):
        notes.append(
            f"{'QLoRA' if sc.method == 'qlora' else 'LoRA'}: {dequant_words(sc)} is {t.dequant_fraction:.0%} of the time"
            + (
                f"; prepare_model_for_kbit_training's fp32 upcast (output head and residual stream) {t.upcast_fraction:.0%}: "
                "stacks that skip it run QLoRA near LoRA's speed (our H200, Llama 3.1 8B: 6,530 against 2,925 tokens/s with it)"
                if t.upcast_fraction > 0
                else ""
            )
        )
    if t.launch_bound_fraction >= LAUNCH_BOUND_NOTED_FRACTION:
        notes.append(
            f"kernel launches bound the step: {sc.batch_size} x {sc.seq_len:,} tokens a micro-batch is too little GPU work to hide "
            f"an eager stack's launches ({arch.num_layers // layout.pipeline_parallel} layers a stage, {forward_passes(sc):g} "
            f"passes' worth at {EAGER_LAYER_OVERHEAD_S * 1e3:.2f} ms a layer), {t.launch_bound_fraction:.0%} of the computation's "
            "time; a larger micro-batch, packed sequences or a stack that fuses or compiles its kernels remove it"
        )
    if sc.mode == "training" and not info.fits:
        notes.append(
            "the scenario's own layout does not fit: time is for the smallest layout that fits"
            if info.needed
            else "no layout fits in memory: time shown for the scenario's layout anyway"
        )
    if row is None:
        notes.append(
            f"no cloud price for {acc.id} in the price list with {tp}+ devices per instance (tensor-parallel group), or "
            f"several on a cluster network, within one on-demand order of the provider (data/providers.csv)"
        )
    else:
        where = "catalog" if rows is None else "price list in use"
        notes.append(
            f"cost: cheapest on-demand price in the {where} for {layout.devices} devices as whole instances, {label(row)}; "
            f"the run is billed {SETUP_HOURS:g} h of setup plus the time with communication (run_hours, run_usd)"
        )
    if on_demand is not None and on_demand.reservation is not None:
        res = on_demand.reservation
        notes.append(
            f"{layout.devices} devices are billed cheapest as a reservation (past an on-demand order, or cheaper than one): run_usd is {res.provider}'s {res.product} "
            f"(data/reservations.csv), {on_demand.paid_hours:,.0f} h paid (whole terms, at least {res.min_term_hours:,.0f} h)"
        )
    return TrainingEstimate.model_construct(
        tokens=t.tokens,
        flops=t.flops,
        flops_per_token=t.flops_per_token,
        devices=layout.devices,
        peak_tflops_per_device=t.peak_tflops_per_device,
        mfu=t.mfu,
        tokens_per_s=t.tokens_per_s,
        wall_hours=t.wall_hours,
        gpu_hours=t.gpu_hours,
        wall_hours_with_comm=rt.compute_hours,
        comm_overhead_fraction=rt.comm_overhead,
        cost_usd=None if on_demand is None else on_demand.usd_per_hour * t.wall_hours,
        spot_cost_usd=None if spot is None else spot.usd_per_hour * t.wall_hours,
        price_instance=None if on_demand is None else label(on_demand.row),
        spot_price_instance=None if spot is None else label(spot.row),
        assumptions=notes,
        setup_hours=SETUP_HOURS,
        run_hours=SETUP_HOURS + rt.compute_hours,
        run_usd=None if on_demand is None else on_demand.usd,
        run_spot_usd=None if spot is None else spot.usd,
        instances=None if on_demand is None else on_demand.instances,
        run_reservation=None if on_demand is None or on_demand.reservation is None else on_demand.reservation.product,
        run_paid_hours=None if on_demand is None else on_demand.paid_hours,
        dequant_fraction=t.dequant_fraction,
        upcast_fraction=t.upcast_fraction,
        launch_bound_fraction=t.launch_bound_fraction,
    )


def inference_estimate(
    sc: Scenario, acc: Accelerator, info: FitInfo, memory: Callable[[Layout, int, int], float], max_batch_here: int, rows: tuple[PriceRow, ...] | None = None
) -> InferenceEstimate:
    layout, _ = run_layout(sc, info)
    layout = Layout(1, layout.tensor_parallel, layout.pipeline_parallel)  # one replica
    own = Layout(*info.layout)
    same = (own.tensor_parallel, own.pipeline_parallel) == (layout.tensor_parallel, layout.pipeline_parallel)
    concurrency = max_batch_here if same else max_batch(memory, layout, sc.seq_len, fit_capacity(sc, float(acc.usable_memory_bytes)))
    s = inference_speed(sc, accelerator=acc, layout=layout)
    devices = layout.tensor_parallel * layout.pipeline_parallel
    row = cheapest_replica_row(acc.id, devices, rows, tensor_parallel=layout.tensor_parallel)
    hourly = None if row is None else replica_usd_per_hour(row, devices)
    notes = [
        f"prompt {s.prompt_tokens:,} + output {s.output_tokens:,} tokens (the last quarter of seq_len is generated unless set)",
        f"prefill compute-bound at {COMPUTE_EFF:.0%} of {s.peak_tflops_per_device:g} TFLOP/s ({s.peak_basis}); "
        f"decode reads weights + KV cache at {s.bandwidth_efficiency:.0%} of {acc.memory_bandwidth_gbps:g} GB/s",
        f"decode at batch {s.batch_size} is {s.decode_bound}-bound",
        "serving cycle: prefill the batch's prompts, then decode (no overlap); output tokens/s is the cost basis",
    ]
    if not same:
        notes.append(f"the scenario's layout does not fit: speed is for TP {layout.tensor_parallel} x PP {layout.pipeline_parallel}")
    roof = roofline(sc, acc, layout)
    if roof.prefill_launch_s > 0:
        notes.append(
            f"the prompt's forward pass runs eagerly: at least {roof.prefill_launch_s * 1e3:.0f} ms of kernel launches, "
            f"which bounds short prompts (measured: Llama 3.1 8B, 512 tokens, 38 ms on an H100)"
        )
    if roof.decode_sequence_s > 0:
        # a device of a tensor-parallel group works on all the replica's sequences, an expert-parallel rank on its own;
        # the pipeline's stages take their turns
        sequences = s.batch_size if roof.ep_ranks == 1 else float(roof.ep_decodes_per_rank(s.batch_size))
        on_rank = "" if roof.ep_ranks == 1 else f", {sequences:g} a rank"
        notes.append(
            f"each decoding sequence adds {roof.decode_sequence_layer_s * 1e6:.2f} us per layer to a decode step "
            f"({roof.pp * roof.decode_sequence_s * sequences * 1e3:.1f} ms at batch {s.batch_size}{on_rank}): the engine's work per "
            "sequence and query head on the device beyond its bytes and FLOPs, fitted on NIM's 70B latency at 50 users "
            "(data/engine_timing.csv)"
        )
    if sc.architecture.is_moe and roof.engine.prefill_moe_unfused_bytes > 0:
        notes.append(
            f"the prompt pass routes and combines each MoE layer's tokens in separate kernels: about "
            f"{roof.engine.prefill_moe_unfused_bytes / 1e3:.0f} kB of memory traffic per token and expert it is sent to"
        )
    ep = None
    if roof.ep_ranks > 1:
        ep = roof.ep_step(s.batch_size, s.prompt_tokens + s.output_tokens / 2.0)
        notes.append(
            f"expert-parallel over {roof.ep_ranks} devices: each holds 1/{roof.ep_ranks} of the experts, every other weight and the KV cache "
            f"of its {s.batch_size / roof.ep_ranks:g} sequences (attention data-parallel); two all-to-alls per MoE layer "
            f"(DeepEP low-latency), the busiest device {float(ep.busiest_rank_factor):.2f}x the mean load (core/speed/expert_parallel.py)"
        )
    elif sc.expert_parallel:
        notes.append("expert parallel is set but this replica is one device (or pipeline-parallel): served without it")
    if s.batch_size > concurrency:
        notes.append(f"batch {s.batch_size} exceeds the {concurrency} sequences that fit in memory")
    if row is None:
        notes.append(f"no cloud price for {acc.id} in the price list with {layout.tensor_parallel}+ devices per instance")
    else:
        notes.append(f"price: cheapest on-demand catalog row per replica at 100% utilisation, {label(row)}")
    notes.append(load_sentence(weight_bytes(sc.architecture, FORMATS[sc.weights_format])))  # a cold start's floor (core/speed/storage.py)
    return InferenceEstimate.model_construct(
        batch_size=s.batch_size,
        prompt_tokens=s.prompt_tokens,
        output_tokens=s.output_tokens,
        tensor_parallel=layout.tensor_parallel,
        pipeline_parallel=layout.pipeline_parallel,
        devices_per_replica=devices,
        time_to_first_token_s=s.time_to_first_token_s,
        decode_tokens_per_s=s.decode_tokens_per_s,
        aggregate_tokens_per_s=s.aggregate_tokens_per_s,
        output_tokens_per_s=s.output_tokens_per_s,
        decode_bound=s.decode_bound,
        max_concurrent_sequences=concurrency,
        usd_per_replica_hour=hourly,
        usd_per_million_tokens=(full_load := None if hourly is None else usd_per_million_tokens(s.output_tokens_per_s, hourly)),
        price_instance=None if row is None else label(row),
        assumptions=notes,
        usd_per_million_output_tokens_full_load=full_load,
        expert_parallel_ranks=roof.ep_ranks,
        decode_tokens_per_s_overlapped=None if ep is None else 1.0 / float(ep.overlapped_step_s),
        aggregate_tokens_per_s_overlapped=None if ep is None else s.batch_size / float(ep.overlapped_step_s),
        all_to_all_share=None if ep is None else float(ep.all_to_all_s / ep.step_s),
    )


def estimate_blocks(
    sc: Scenario, ev: Evaluator | None = None, light: bool = False, rows: tuple[PriceRow, ...] | None = None
) -> tuple[MemoryResult, TrainingEstimate | None, InferenceEstimate | None]:
    """The memory answer, then the training block (when train_tokens is set) and
    the serving block (in inference mode) composed on top of it (`ev`, `light`: see estimate_memory), priced
    from `rows` (the built-in catalog when None)."""
    ev = ev or Evaluator(sc, sc.architecture)
    mem = estimate_memory(sc, ev, light)
    acc = get_accelerator(sc.accelerator)
    info = FitInfo.of(mem, sc)
    training = training_estimate(sc, acc, info, rows) if sc.train_tokens else None
    inference = None
    if sc.mode == "inference":
        served, memory = sc, ev.total
        if sc.expert_parallel and not mem.fits and mem.layout_needed is not None and not mem.layout_needed.expert_parallel:
            # no expert-parallel replica fits and the speeds are for the smallest tensor-parallel layout that does
            # (estimate.layout_options): served, and its memory counted, without expert parallelism
            served = sc.model_copy(update={"expert_parallel": False})
            memory = Evaluator(served, sc.architecture).total
        inference = inference_estimate(served, acc, info, memory, mem.max_batch_size, rows)
    return mem, training, inference
