"""The Plan page's pieces without Streamlit: the goal the inputs describe, the headline sentence of a plan, the
time-vs-cost frontier figure and the memory-per-strategy figure."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from app_pages.shared.charts import component_label, peak_words
from app_pages.shared.style import COMPONENT_COLORS, Units, capacity_line, hmarker, layout
from app_pages.shared.text import NBSP, chart_text, hours_text, provider_name, usd_text
from app_pages.shared.ticks import number_ticks, time_ticks
from core.catalog.accelerators import UnknownAcceleratorError, get_accelerator
from core.memory.engines import ENGINES
from core.memory.estimate import estimate_memory
from core.memory.stacks import FUSED_CROSS_ENTROPY_STACKS
from core.memory.sweep import COMPONENTS
from core.plan import Plan
from core.plan.result import ApiQuote
from core.plan.train import days_words
from core.scenario import Scenario
from core.speed.timing import fp8_weight_only

METHOD_WORDS = {"full": "Full fine-tune", "lora": "LoRA", "qlora": "QLoRA", "pretrain": "Pretrain"}
FORMAT_WORDS = {
    "bf16": "16-bit",
    "fp16": "16-bit",
    "fp8": "FP8",
    "awq-4bit": "4-bit AWQ",
    "gptq-4bit": "4-bit GPTQ",
    "gguf-q4_k_m": "GGUF Q4_K_M",
    "gguf-q8_0": "GGUF Q8_0",
    "mxfp4": "MXFP4",
    "mlx-q4": "MLX 4-bit",
    "mlx-q8": "MLX 8-bit",
}


def goal_dict(values: dict[str, Any], model: Any) -> dict[str, Any]:
    """The Goal the Plan page's inputs describe (validated by the caller)."""
    out: dict[str, Any] = {"goal": values["goal"], "model": model, "pricing": values["price"]}
    if values.get("cloud", "any") != "any":  # the Plan page's cloud filter (Goal.providers)
        out["providers"] = [values["cloud"]]
    if values["goal"] == "serve":
        out |= {
            "requests_per_day": values["rpd"],
            "input_tokens": values["tin"],
            "output_tokens": values["tout"],
            "peak_to_average": values["peak"],
            "ttft_s": values["ttft"],
            "tokens_per_s_per_user": values["tps"],
            "expert_parallel": bool(values.get("pep", False)),
        }
        if values.get("mode", "inference") == "inference":  # the sidebar's engine, as the Inference page serves with it
            out["serving_engine"] = values.get("engine", "vllm")
    else:
        out |= {"tokens": values["ptok"] * 1e6, "epochs": values["epochs"], "seq_len": values["pseq"]}
        out["deadline_hours"] = values["deadline"] or None
        out["require_bf16"] = bool(values.get("pbf16", False))
        if values.get("mode") == "training":  # the sidebar's training stack and loss, as the Training page runs them
            out["training_stack"] = values.get("stack", "hf")
            out["fused_cross_entropy"] = bool(values.get("fce", False)) and out["training_stack"] in FUSED_CROSS_ENTROPY_STACKS
            if values["goal"] == "fine-tune":  # preference tuning is a fine-tune (core/plan/goal.py)
                out["objective"] = values.get("obj", "sft")
    out["budget_usd"] = values["budget"] or None
    return out


def method_words(p: Plan) -> str:
    """What a training plan does: 'Pretrain' for a pretraining goal (all weights trained from scratch), else its
    method ('Full fine-tune', 'LoRA', 'QLoRA'); preference tuning says DPO ('Full DPO fine-tune', 'LoRA DPO')."""
    if p.goal == "pretrain" and p.method == "full":
        return METHOD_WORDS["pretrain"]
    words = METHOD_WORDS.get(p.method, p.method)
    if p.scenario.get("objective") == "dpo":  # preference tuning (core/memory/objective.py)
        return "Full DPO fine-tune" if p.method == "full" else f"{words} DPO"
    return words


def where(p: Plan) -> str:
    """The hardware and who rents it at what: '8 x NVIDIA H100 (lambda 8x H100 SXM, 2.99 USD per GPU-hour as of
    2026-09-20)'; a price far below its market says so."""
    inst = f"{provider_name(p.provider)} {p.instance}" + (f" x {p.instances}" if p.instances > 1 else "")
    rate = f", {p.usd_per_device_hour:,.2f} USD per device-hour as of {p.price_as_of}" if p.usd_per_device_hour is not None else ""
    below = "; far below its market" if p.price_note else ""
    return f"{p.devices} x {p.accelerator_name} ({inst}{rate}{below}{reserved(p)})"


def reserved(p: Plan) -> str:
    """'; needs a reservation: 1-Click Cluster, minimum 7 days' for a plan on a provider's reserved cluster, else ''."""
    if p.reservation is None:
        return ""
    term = f", minimum {days_words(p.reservation_min_term_hours)}" if p.reservation_min_term_hours else ""
    return f"; needs a reservation: {p.reservation}{term}"


# A plan's KV cache in its sentence, where it is not the 16-bit default
KV_WORDS = {"fp8": " with an FP8 KV cache", "int8": " with an INT8 KV cache", "q8_0": " with a Q8_0 KV cache", "q4_0": " with a Q4_0 KV cache"}


def weight_only(p: Plan) -> bool:
    """Whether the plan's FP8 weights run weight-only: its part has no FP8 matmuls (FP8 Marlin on Turing and Ampere)."""
    try:
        return fp8_weight_only(p.weights_format, get_accelerator(p.accelerator))
    except UnknownAcceleratorError:  # a part not in the catalog: nothing to add
        return False


def weights_words(p: Plan) -> str:
    """A plan's weights as its table says them: 'FP8 (weight-only)' on a part without FP8 matmuls."""
    return FORMAT_WORDS.get(p.weights_format, p.weights_format) + (" (weight-only)" if weight_only(p) else "")


def headline(p: Plan, pricing: str, short: bool = False) -> str:
    """The plan as a sentence a manager can repeat: hardware, instance, count, idle devices, time, cost. `short`: the
    hardware without its instance and rate, and a serving plan without its batch and load (one line above the Plan
    page's chart; the full sentence is below it)."""
    idle = f"; {p.idle_devices} rented device{'s' * (p.idle_devices > 1)} idle" if p.idle_devices else ""
    price = "spot" if pricing == "spot" else "reserved" if p.reservation else "on demand"
    on = f"{p.devices} x {p.accelerator_name} at {provider_name(p.provider)}" if short else where(p)
    if p.usd is not None and p.hours is not None:
        what = method_words(p) + (" with gradient checkpointing" if p.gradient_checkpointing else "")
        shard = f", ZeRO-3 over {p.data_parallel}" if p.zero_stage == 3 else ""
        mp = f", tensor parallel {p.tensor_parallel}" if p.tensor_parallel > 1 else ""
        mp += f", {p.pipeline_parallel} pipeline stages" if p.pipeline_parallel > 1 else ""
        # the time never breaks between its number and unit on a phone ("1.8" at a line's end, "h" on the next)
        return f"{what} on {on}{shard}{mp}: {hours_text(p.hours).replace(' ', NBSP)}, {usd_text(p.usd)} {price}{idle}."
    replicas = f"{p.data_parallel} replica{'s' * (p.data_parallel > 1)}"
    replicas += f" (each expert-parallel over {p.tensor_parallel} GPUs)" if p.expert_parallel else ""
    kv = KV_WORDS.get(p.kv_cache_format or "", "")
    weights = f"{FORMAT_WORDS.get(p.weights_format, p.weights_format)} weights" + (" (weight-only)" if weight_only(p) else "")
    bill = f"{usd_text(p.usd_per_month or 0)} a month {price}, {usd_text(p.usd_per_million_tokens or 0)} per million tokens"
    engine = ENGINES.get(str(p.scenario.get("serving_engine", "vllm")))
    served = f" with {engine.label}" if engine is not None else ""  # the engine the plan's speed and launch are for
    if short:
        return f"{replicas} of {weights}{kv} on {on}{served}: {bill}."
    return (
        f"{replicas} of {weights}{kv} on {on}{served}, up to {p.micro_batch} "
        f"concurrent request{'s' * (p.micro_batch > 1)} each in the busiest hour: {bill} (input + output) at {100 * (p.utilisation or 0):.0f}% average load{idle}."
    )


API_COLOR = "#7F3C8D"  # the per-token API's line on the serving chart
GROUP_COLORS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#9D755D")


def _group(p: Plan, serving: bool) -> str:
    """What a point's colour says: the training method, or the weights' format when serving (the accelerator is on
    hover and in the table: one colour per accelerator was 30 legend entries with repeating colours)."""
    return FORMAT_WORDS.get(p.weights_format, p.weights_format) + " weights" if serving else method_words(p)


def frontier_figure(
    plans: tuple[Plan, ...],
    serving: bool,
    deadline: float | None,
    budget: float | None,
    cheapest: Plan | None = None,
    fastest: Plan | None = None,
    api: ApiQuote | None = None,
) -> go.Figure:
    """Each shown plan a point (time or speed vs cost) coloured by method (format when serving), the frontier joined,
    the planner's picks labelled (`cheapest` and `fastest`: PlanResult's, from core/money/picks.py, so the chart
    names the plans the sentences name), bounds shaded; customdata[0] = plan index. Groups come in the order of their
    first plan, and plans come cheapest first, so the first point of the first trace is the cheapest plan. Serving,
    `api` (the cheapest per-token API quote for the traffic) is a dashed line at its monthly bill: the manager's
    other option, on the chart rather than three screens down."""
    fig = go.Figure()
    x_of = (lambda p: p.tokens_per_s_per_user) if serving else (lambda p: p.hours)
    y_of = (lambda p: p.usd_per_month) if serving else (lambda p: p.usd)
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(plans):
        groups.setdefault(_group(p, serving), []).append(i)
    for n, (name, idx) in enumerate(groups.items()):
        fig.add_scatter(
            x=[x_of(plans[i]) for i in idx],
            y=[y_of(plans[i]) for i in idx],
            mode="markers",
            name=chart_text(name),
            marker={
                "color": GROUP_COLORS[n % len(GROUP_COLORS)],
                "size": [13 if plans[i].pareto else 8 for i in idx],
                "opacity": 0.85,
                "line": {"width": [2 if plans[i].pareto else 0 for i in idx], "color": "#333"},
            },
            customdata=[[i, chart_text(where(plans[i])), chart_text(plans[i].weights_format if serving else method_words(plans[i]))] for i in idx],
            hovertemplate=(
                "%{customdata[1]}<br>%{customdata[2]}<br>"
                + ("%{x:,.0f} tokens/s per user, $%{y:,.0f} a month" if serving else "%{x:,.1f} h, $%{y:,.2f}")
                + "<extra></extra>"
            ),
        )
    front = sorted((p for p in plans if p.pareto), key=lambda p: x_of(p) or 0)
    if front:
        fig.add_scatter(
            x=[x_of(p) for p in front],
            y=[y_of(p) for p in front],
            mode="lines",
            name="Frontier (nothing is both cheaper and faster)",
            line={"color": "#444", "dash": "dot"},
            hoverinfo="skip",
        )
    # the fastest plan sits at the chart's left edge when training (the shortest time) and at its right when serving
    # (the most tokens/s): its label goes inwards, clear of the axis's tick labels
    inwards = "middle left" if serving else "middle right"
    marks = [(p, label, at) for p, label, at in ((cheapest, "cheapest", "bottom center"), (fastest, "fastest", inwards)) if p is not None and x_of(p) and y_of(p)]
    if len(marks) == 2 and marks[1][0] == marks[0][0]:
        marks = [(marks[0][0], "cheapest and fastest", "bottom center")]
    if marks:
        fig.add_scatter(
            x=[x_of(p) for p, _, _ in marks],
            y=[y_of(p) for p, _, _ in marks],
            mode="markers+text",
            text=[label for _, label, _ in marks],
            textposition=[where for _, _, where in marks],
            marker={"size": 20, "symbol": "circle-open", "color": "#333", "line": {"width": 2}},
            showlegend=False,
            hoverinfo="skip",
            cliponaxis=False,
        )
    if deadline and not serving:
        fig.add_vrect(x0=deadline, x1=max(x_of(p) or 0 for p in plans) * 2, fillcolor="#E45756", opacity=0.08, line_width=0, annotation_text="past the deadline")
    if budget:
        fig.add_hrect(y0=budget, y1=max(y_of(p) or 0 for p in plans) * 2, fillcolor="#E45756", opacity=0.08, line_width=0, annotation_text="over the budget")
    api_usd = [api.usd_per_month] if serving and api is not None and api.usd_per_month > 0 else []
    for usd in api_usd:
        hmarker(fig, usd, chart_text(f"per-token API ({api.provider}): {usd_text(usd)} a month"), log_y=True, color=API_COLOR)  # type: ignore[union-attr]
    fig.update_layout(
        xaxis={"type": "log", "title": "Generation speed each user sees (tokens/s, log scale)", **number_ticks([x for p in plans if (x := x_of(p))])}
        if serving
        else {"type": "log", "title": "Wall-clock time (log scale)", **time_ticks([p.hours for p in plans if p.hours])},
        yaxis={
            "type": "log",
            "title": "Monthly bill (USD, log scale)" if serving else "Cost of the run (USD, log scale)",
            **number_ticks([y for p in plans if (y := y_of(p))] + api_usd, "$"),
        },
    )
    title = "Speed vs monthly bill of each plan" if serving else "Time vs cost of each plan"
    return layout(fig, title, height=480)


STRATEGIES = (  # each label says how many devices it is on (a bar on one device read as a verdict on a plan over eight)
    ("Full fine-tune, one device", {"method": "full", "precision": "bf16", "gradient_checkpointing": False}),
    ("Full + checkpointing, one device", {"method": "full", "precision": "bf16", "gradient_checkpointing": True}),
    ("Full, ZeRO-3 over 8", {"method": "full", "precision": "bf16", "gradient_checkpointing": True, "zero_stage": 3, "data_parallel": 8}),
    ("Full + optimizer offload, one device", {"method": "full", "precision": "bf16", "gradient_checkpointing": True, "zero_stage": 2, "offload": "optimizer"}),
    ("LoRA, one device", {"method": "lora", "precision": "bf16-true", "gradient_checkpointing": True}),
    ("LoRA, ZeRO-3 over 8", {"method": "lora", "precision": "bf16-true", "gradient_checkpointing": True, "zero_stage": 3, "data_parallel": 8}),
    ("QLoRA, one device", {"method": "qlora", "precision": "bf16-true", "gradient_checkpointing": True}),
)


def strategy_scenarios(sc: Scenario) -> list[tuple[str, Scenario]]:
    base = {k: v for k, v in dict(sc).items() if k not in ("data_parallel", "tensor_parallel", "pipeline_parallel", "zero_stage", "offload")}
    base |= {"mode": "training", "weights_format": "bf16", "batch_size": 1}
    return [(name, Scenario.model_validate(base | update)) for name, update in STRATEGIES]


def strategies_figure(sc: Scenario, units: Units, device_name: str) -> go.Figure:
    """Per-device memory of each fine-tuning strategy for the sidebar's model and accelerator, by component."""
    rows = [(name, estimate_memory(s)) for name, s in strategy_scenarios(sc)]
    # our own labels, the verdict on a second line (a phone's 390 px keeps room for the memory axis and its title)
    # and the moment each bar is drawn at: checkpointing moves a full fine-tune's peak to the optimizer step, where
    # its gradients show and its activations are gone (a room read it as checkpointing creating gradients: stop 50's
    # projector review, M12; the Memory page's axis says the same)
    names = [f"{name}<br>{'fits' if r.fits else '<b>does not fit</b>'}, peak at {peak_words(r)}" for name, r in rows]
    fig = go.Figure()
    for comp in COMPONENTS:
        values = [units.value(getattr(r.memory_per_device_bytes, comp)) for _, r in rows]
        if not any(values):
            continue
        name = component_label(comp, [sc.accelerator])
        fig.add_bar(
            y=names,
            x=values,
            orientation="h",
            name=name,
            marker_color=COMPONENT_COLORS[comp],
            hovertemplate=f"%{{y}}<br>{name}: %{{x:,.1f}} {units.name}<extra></extra>",
        )
    cap = units.value(rows[0][1].fit_capacity_bytes)
    longest = max(units.value(r.memory_per_device_bytes.total) for _, r in rows)
    capacity_line(fig, cap, chart_text(f"{device_name}: {cap:,.1f} {units.name}"), longest, f"{cap:,.1f} {units.name} usable")
    fig.update_layout(barmode="stack", xaxis_title=f"Memory per device ({units.name})", yaxis={"title": None, "autorange": "reversed"})
    model = chart_text(sc.architecture.name)
    # two lines a bar: 50 px each beside room for the axis and a legend that wraps to six lines on a phone
    return layout(fig, f"Memory per device by strategy: {model} on the sidebar's {chart_text(device_name)}", height=200 + 50 * len(rows))


def faster_for_users(plans: tuple[Plan, ...], cheapest: Plan, price_factor: float = 2.0) -> Plan | None:
    """The serving plan that gives each user the most tokens/s for at most `price_factor` x the cheapest bill."""
    pool = [
        p for p in plans if p.within_bounds and p.cost <= price_factor * cheapest.cost and (p.tokens_per_s_per_user or 0) > (cheapest.tokens_per_s_per_user or 0) * 1.1
    ]
    return max(pool, key=lambda p: (p.tokens_per_s_per_user or 0, -p.cost)) if pool else None


def plan_table(plans: tuple[Plan, ...], serving: bool) -> list[dict[str, Any]]:
    """One row per plan, the answer first (the accelerator, then its time and cost or speed and monthly bill: in sight
    at 1280 px without scrolling sideways), then how the plan is laid out and rented."""
    rows = []
    for p in plans:
        row: dict[str, Any] = {"Accelerator": p.accelerator_name, "Devices used": p.devices}
        if serving:
            row |= {
                "Tokens/s per user": round(p.tokens_per_s_per_user or 0, 1),
                "USD per month": round(p.usd_per_month or 0),
                "USD per M tokens (in + out)": round(p.usd_per_million_tokens or 0, 3),
                "Weights": weights_words(p),
                "KV cache": (p.kv_cache_format or "bf16").upper(),
                "Replicas x TP": f"{p.data_parallel} x {p.tensor_parallel}" + (" (expert-parallel)" if p.expert_parallel else ""),
                "Batch": p.micro_batch,
                "Average load": f"{100 * (p.utilisation or 0):.0f}%",
            }
        else:
            row |= {
                "Hours": round(p.hours or 0, 2),
                "USD": round(p.usd or 0, 2),
                "Method": method_words(p) + (" + GC" if p.gradient_checkpointing else ""),
                "Layout": f"DP {p.data_parallel} x TP {p.tensor_parallel} x PP {p.pipeline_parallel}" + (", ZeRO-3" if p.zero_stage == 3 else ""),
                "Micro-batch x accumulation": f"{p.micro_batch} x {p.gradient_accumulation_steps}",
                "Scaling efficiency": f"{100 * p.scaling_efficiency:.0f}%",
                "Rented": reserved(p).removeprefix("; needs a reservation: ") or "on demand",
            }
        row |= {
            "Frontier": "yes" if p.pareto else "",
            "Where": f"{p.provider} {p.instance}" + (f" x {p.instances}" if p.instances > 1 else ""),
            "Idle": p.idle_devices,
        }
        row["Within bounds"] = "yes" if p.within_bounds else "no"
        row["Price as of"] = p.price_as_of + (" (estimate)" if p.price_is_estimate else "")
        row["Against the market"] = "far below" if p.price_note else ""
        rows.append(row)
    return rows


# What the plan table's terse columns mean, on hover (a manager reads "DP 8 x TP 1 x PP 1" without knowing the letters)
PLAN_COLUMN_HELP = {
    "Replicas x TP": "copies of the model serving side by side x the GPUs each copy is split over (tensor parallel)",
    "Layout": "DP: data-parallel copies x TP: GPUs each layer is split over (tensor parallel) x PP: pipeline stages; "
    "ZeRO-3 shards the weights, gradients and optimizer state over the copies",
    "Micro-batch x accumulation": "sequences per device per pass x passes summed before each optimizer step",
    "Scaling efficiency": "the share of the devices' time spent computing rather than waiting on communication",
    "Frontier": "no other plan is both cheaper and faster",
    "Idle": "devices rented with the instance that the plan leaves unused",
    "Within bounds": "meets the goal's deadline, budget and latency targets",
    "Against the market": "the price is under half the median of its accelerator's providers: one listing or a promotion",
    "Average load": "the fleet's busy share over the day, its size set by the busiest hour",
}
