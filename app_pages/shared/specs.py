"""The scenario's widgets: one spec per input serves the sidebar, the URL
(each key is a query parameter) and the validation of a shared link."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from core.catalog.accelerators import load_accelerators
from core.catalog.presets import load_presets
from core.model.formats import FORMATS

SEQ_OPTIONS = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576]
BATCH_OPTIONS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
RANK_OPTIONS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


@dataclass(frozen=True)
class Spec:
    key: str
    label: str
    kind: str  # "choice" | "int" | "float" | "bool"
    default: Any
    options: tuple = ()
    lo: float | None = None
    hi: float | None = None
    help: str = ""
    labels: dict = field(default_factory=dict)

    def parse(self, raw: str) -> Any:
        """The value a URL string stands for, or raise ValueError."""
        if self.kind == "bool":
            if raw.lower() in ("true", "1", "yes", "on"):
                return True
            if raw.lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError("expected true or false")
        if self.kind == "choice":
            for opt in self.options:
                if str(opt) == raw:
                    return opt
            raise ValueError("not one of the choices")
        try:
            value = float(raw)
        except (ValueError, OverflowError):
            raise ValueError("not a number") from None
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        if self.kind == "int":
            if value != int(value):
                raise ValueError("expected a whole number")
            value = int(value)
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise ValueError(f"must be between {self.lo:g} and {self.hi:g}")
        return value

    def fmt(self, value: Any) -> str:
        return self.labels.get(value, str(value))


def _presets() -> dict[str, str]:
    return {p.id: f"{p.name} ({p.architecture.total_params / 1e9:,.3g}B)" for p in load_presets().values()}


def _accelerators() -> dict[str, str]:
    return {a.id: f"{a.name} ({a.memory_gib:g} GB)" for a in load_accelerators()}


def build_specs() -> dict[str, Spec]:
    presets = _presets()
    accs = _accelerators()
    specs = [
        Spec("src", "Model from", "choice", "preset", ("preset", "params", "config"), labels={"preset": "Catalog", "params": "Parameter count", "config": "config.json"}),
        Spec("model", "Model", "choice", "llama-3.1-8b", tuple(presets), labels=presets, help="Type to search the catalog"),
        Spec(
            "params",
            "Parameters (billions)",
            "float",
            7.0,
            lo=0.001,
            hi=100_000.0,
            help="Taken as exact; a representative Llama-style shape is assumed for activations and KV cache",
        ),
        Spec("mode", "Workload", "choice", "inference", ("inference", "training"), labels={"inference": "Serve (inference)", "training": "Train / fine-tune"}),
        Spec("acc", "Accelerator", "choice", "h100-sxm", tuple(accs), labels=accs),
        Spec("fmt", "Weight format", "choice", "bf16", tuple(FORMATS), labels={k: f.label for k, f in FORMATS.items()}),
        Spec("method", "Method", "choice", "full", ("full", "lora", "qlora"), labels={"full": "Full fine-tune", "lora": "LoRA", "qlora": "QLoRA (4-bit base)"}),
        Spec(
            "opt",
            "Optimizer",
            "choice",
            "adamw",
            ("adamw", "adamw-8bit", "sgd", "adafactor"),
            labels={"adamw": "AdamW", "adamw-8bit": "8-bit AdamW", "sgd": "SGD + momentum", "adafactor": "Adafactor"},
        ),
        Spec("prec", "Precision", "choice", "bf16", ("bf16", "fp16", "fp32"), labels={"bf16": "BF16 mixed", "fp16": "FP16 mixed", "fp32": "FP32"}),
        Spec("batch", "Batch (per device) / concurrent sequences", "choice", 1, tuple(BATCH_OPTIONS)),
        Spec("seq", "Sequence length / context (tokens)", "choice", 4096, tuple(SEQ_OPTIONS), labels={v: f"{v:,}" for v in SEQ_OPTIONS}),
        Spec("gc", "Gradient checkpointing", "bool", False),
        Spec("flash", "FlashAttention", "bool", True),
        Spec("rank", "LoRA rank", "choice", 16, tuple(RANK_OPTIONS)),
        Spec("targets", "LoRA targets", "choice", "all-linear", ("all-linear", "attention"), labels={"all-linear": "All linear layers", "attention": "Attention only"}),
        Spec(
            "zero", "ZeRO / FSDP stage", "choice", 0, (0, 1, 2, 3), labels={0: "0 - none", 1: "1 - optimizer", 2: "2 - + gradients", 3: "3 - + weights (FSDP full shard)"}
        ),
        Spec(
            "offload",
            "CPU offload",
            "choice",
            "none",
            ("none", "optimizer", "optimizer+params"),
            labels={"none": "None", "optimizer": "Optimizer state", "optimizer+params": "Optimizer + parameters"},
        ),
        Spec("dp", "Data parallel", "int", 1, lo=1, hi=4096),
        Spec("tp", "Tensor parallel", "choice", 1, (1, 2, 4, 8, 16)),
        Spec("pp", "Pipeline parallel", "int", 1, lo=1, hi=128),
        Spec("kv", "KV cache format", "choice", "bf16", ("bf16", "fp16", "fp8", "int8")),
        Spec("tokens", "Training tokens (billions, 0 = none)", "float", 0.0, lo=0.0, hi=1_000_000.0),
        Spec("mfu", "MFU % (0 = default for the setup)", "float", 0.0, lo=0.0, hi=100.0),
        # Page-level inputs (cost and serving pages), also in the URL.
        Spec("sweep", "Sweep", "choice", "context", ("context", "batch"), labels={"context": "Context length", "batch": "Batch size"}),
        Spec("price", "Price", "choice", "on-demand", ("on-demand", "spot"), labels={"on-demand": "On-demand", "spot": "Spot / preemptible"}),
        Spec("rpd", "Requests per day", "int", 10_000, lo=1, hi=1_000_000_000),
        Spec("tin", "Input tokens per request", "int", 1_000, lo=1, hi=2_000_000),
        Spec("tout", "Output tokens per request", "int", 300, lo=1, hi=200_000),
        Spec("util", "Highest utilisation to plan for (%)", "float", 70.0, lo=1.0, hi=100.0),
        Spec("api_in", "Per-token API price, input (USD per million, 0 = skip)", "float", 0.0, lo=0.0, hi=1_000.0),
        Spec("api_out", "Per-token API price, output (USD per million)", "float", 0.0, lo=0.0, hi=1_000.0),
        Spec("months", "Horizon (months)", "int", 24, lo=1, hi=120),
        Spec("kwh", "Electricity (USD per kWh)", "float", 0.15, lo=0.0, hi=5.0),
        Spec("busy", "Utilisation of owned hardware (%)", "float", 60.0, lo=1.0, hi=100.0),
        Spec("buy_usd", "Purchase price per device (USD, 0 = catalog)", "float", 0.0, lo=0.0, hi=10_000_000.0),
        Spec(
            "units", "Memory units", "choice", "GiB", ("GiB", "GB"), help="GiB = 2^30 bytes (what nvidia-smi and PyTorch show); GB = 10^9 bytes (datasheets, price pages)"
        ),
    ]
    return {s.key: s for s in specs}


def url_problems(query: dict[str, str], specs: dict[str, Spec]) -> list[str]:
    """One message per query parameter that a shared link got wrong."""
    problems = []
    for key, raw in query.items():
        spec = specs.get(key)
        if spec is None:
            continue
        raw = raw if isinstance(raw, str) else str(raw)
        try:
            spec.parse(raw)
        except (ValueError, OverflowError) as exc:
            shown = "".join(c if c.isprintable() else "?" for c in raw[:40]) + ("..." if len(raw) > 40 else "")
            problems.append(f"URL parameter {key}={shown} was ignored ({exc}); using {spec.fmt(spec.default)!s}.")
    return problems


def plain(text: str) -> str:
    """Untrusted text made safe to show in Markdown: printable characters
    only; the marks that make links, images, HTML, code, headings or bare-URL
    autolinks (': ' and '.') escaped. Underscores and '=' stay readable."""
    out = []
    for c in text:
        if not c.isprintable():
            out.append("?")
        elif c in MD_SPECIAL:
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


MD_SPECIAL = set("\\`*[]()<>#+-.!|~$&:\"'")


def scenario_dict(values: dict[str, Any], model: Any) -> dict[str, Any]:
    """The core Scenario fields for the widget values."""
    training = values["mode"] == "training"
    d: dict[str, Any] = {
        "model": model,
        "mode": values["mode"],
        "weights_format": values["fmt"],
        "batch_size": values["batch"],
        "seq_len": values["seq"],
        "flash_attention": values["flash"],
        "tensor_parallel": values["tp"],
        "pipeline_parallel": values["pp"],
        "kv_cache_format": values["kv"],
        "accelerator": values["acc"],
    }
    if training:
        d.update(
            method=values["method"],
            optimizer=values["opt"],
            precision=values["prec"],
            gradient_checkpointing=values["gc"],
            lora_rank=values["rank"],
            lora_targets=values["targets"],
            zero_stage=values["zero"],
            offload=values["offload"],
            data_parallel=values["dp"],
        )
        if values["method"] == "full" and FORMATS[values["fmt"]].is_quantized:
            d["weights_format"] = "bf16"
        if values["tokens"]:
            d["train_tokens"] = values["tokens"] * 1e9
        if values["mfu"]:
            d["mfu"] = values["mfu"] / 100
    return d
