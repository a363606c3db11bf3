"""The one table of inputs. Each Field names its widget, its URL key (a
contract: links written today keep working), the Scenario field it feeds and
how (a scale such as billions or percent, "0 means unset"), and when the
sidebar shows it. Loading a link, writing the URL, building the scenario,
reading an uploaded scenario and the Compare page's settings table are loops
over this table; adding an input is adding a row here."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from core.catalog.accelerators import load_accelerators
from core.catalog.engine_formats import kv_format_name, load_engine_formats
from core.catalog.presets import load_presets
from core.memory.engines import ENGINES
from core.memory.stacks import FUSED_CROSS_ENTROPY_STACKS, STACKS
from core.model.formats import FORMATS

SEQ_OPTIONS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
BATCH_OPTIONS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
RANK_OPTIONS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# The stacks that train QLoRA on another base than their own (a GPTQ checkpoint), and those bases.
QLORA_BASE_STACKS = frozenset(k for k, s in STACKS.items() if s.qlora_other_bases)
QLORA_OTHER_BASES = tuple(sorted({b for s in STACKS.values() for b in s.qlora_other_bases}))

Values = dict[str, Any]
Kind = Literal["choice", "int", "float", "bool"]
Widget = Literal["select", "segmented", "slider", "number", "toggle"]


def _always(values: Values) -> bool:
    return True


def training(values: Values) -> bool:
    return values.get("mode") == "training"


def inference(values: Values) -> bool:
    return values.get("mode") != "training"


def _bound(value: float | None) -> str:
    """A range's end in a message: 2,097,152 rather than 2.09715e+06."""
    return "" if value is None else f"{value:,.0f}" if float(value).is_integer() else f"{value:,g}"


# Engines as a KV-cache choice's label names them: short, so the label reads whole in the sidebar's box (LONG_CHOICE)
KV_ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "tensorrt-llm": "TRT-LLM", "llama.cpp": "llama.cpp", "hf-transformers": "HF", "mlx": "MLX"}


def kv_labels(formats: tuple[str, ...]) -> dict[str, str]:
    """Each KV-cache format's name, with the engines that store it where not all do: 'FP8 (vLLM, SGLang, TRT-LLM)'
    (data/engine_formats.csv; an engine storing only what every engine stores is not named)."""
    rows = load_engine_formats()
    out = {}
    for kv in formats:
        engines = [KV_ENGINE_NAMES.get(e, ENGINES[e].label) for e, r in rows.items() if kv in r.kv_cache_formats and e in ENGINES]
        out[kv] = kv_format_name(kv) + (f" ({', '.join(engines)})" if engines and len(engines) < len(rows) else "")
    return out


@dataclass(frozen=True)
class Field:
    key: str  # widget key = URL query parameter
    label: str
    kind: Kind
    default: Any
    options: tuple = ()
    lo: float | None = None
    hi: float | None = None
    help: str = ""
    labels: dict = field(default_factory=dict)
    widget: Widget = "select"  # an "int" field with options and widget "slider": stops, any whole number in [lo, hi]
    section: str = "page"  # sidebar section, or "page" for inputs drawn by a page
    scenario: str | None = None  # the Scenario field it feeds
    scale: float = 1.0  # scenario value = widget value x scale
    zero_is_unset: bool = False  # 0 in the widget = the scenario field left out (None)
    lo_set: float | None = None  # zero_is_unset: the least value that sets the field (0 or lo_set..hi, the scenario's bound)
    unset: Any = None  # another widget value that leaves the scenario field out (e.g. -1 = all layers)
    applies: Callable[[Values], bool] = _always  # whether it shapes the scenario (and shows) for these values
    # Another input sets the same scenario field where this one does not apply (their `applies` never overlap): a
    # scenario value outside this input's options stands for its default (QLoRA's base: a format that is no QLoRA base
    # trains on the stack's NF4).
    others_as_default: bool = False

    def parse(self, raw: Any) -> Any:
        """The value a URL string stands for, or raise ValueError."""
        if not isinstance(raw, str):
            raise ValueError("expected text")
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
            raise ValueError(f"must be between {_bound(self.lo)} and {_bound(self.hi)}")
        return value

    def refused(self, value: Any) -> str | None:
        """Why a value the input holds (typed, or from a link) cannot set the scenario field, or None: the input
        keeps it and the scenario is built without it (zero_is_unset: 0, or lo_set and more, the scenario's bound)."""
        if self.lo_set is not None and isinstance(value, int | float) and value and value < self.lo_set:
            return f"{self.label}: {self.fmt(value)} is not used (it must be 0 or at least {_bound(self.lo_set)}); 0 is used until it is changed."
        return None

    def serialize(self, value: Any) -> str:
        return str(value)

    def fmt(self, value: Any) -> str:
        if value in self.labels:
            return self.labels[value]
        return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)

    def shows(self, scenario_value: Any, widget_value: Any) -> bool:
        """Whether the widget value stands for the scenario value exactly (a slider snaps to its nearest stop)."""
        if scenario_value is None:
            return True
        if self.others_as_default and scenario_value not in self.options:
            scenario_value = self.default
        back = self.to_scenario(widget_value)
        if isinstance(scenario_value, float) and isinstance(back, int | float) and not isinstance(back, bool):
            return math.isclose(back, scenario_value, rel_tol=1e-9)
        return back == scenario_value

    def scenario_text(self, value: Any) -> str:
        """A scenario's value in this input's terms (its scale and labels), exactly: not snapped to a slider stop."""
        if value is None or (self.others_as_default and value not in self.options):
            return self.fmt(self.default)
        if self.scale != 1.0:
            value = value / self.scale
            value = int(value) if float(value).is_integer() and self.kind != "float" else value
        return self.fmt(value)

    def stops(self, value: Any) -> list[Any]:
        """A slider's stops: its options, plus the current value when a whole-number field holds one between them."""
        if self.kind == "int" and value not in self.options:
            return sorted({*self.options, value})
        return list(self.options)

    def to_scenario(self, value: Any) -> Any:
        if (self.zero_is_unset and not value) or (self.unset is not None and value == self.unset):
            return None
        if self.scale != 1.0:
            return value * self.scale
        return value

    def from_scenario(self, value: Any) -> Any:
        """The widget value that shows a scenario value (nearest slider stop for sliders)."""
        if value is None or (self.others_as_default and value not in self.options):
            return self.default
        if self.scale != 1.0:
            value = value / self.scale
        if self.widget == "slider" and self.options and self.kind == "choice":
            return min(self.options, key=lambda o: abs(o - value))
        return value


def _preset_labels() -> dict[str, str]:
    """ "Family · Name (size, dense | MoE k-of-E experts)", in family then size order (the picker searches as you type)."""
    rows = []
    for p in load_presets().values():
        a = p.architecture
        size = f"{a.total_params / 1e9:,.3g}B"
        kind = f"MoE {a.experts_per_token}-of-{a.num_experts} experts, {a.active_params / 1e9:,.3g}B active" if a.is_moe else "dense"
        name = p.name if p.name.lower().startswith(p.family.lower()) else f"{p.family} · {p.name}"
        rows.append((p.family.lower(), a.total_params, p.id, f"{name} ({size}, {kind})"))
    return {pid: label for _, _, pid, label in sorted(rows)}


CUSTOM_ACC = "custom"  # the accelerator picker's "Any hardware I own": memory, bandwidth and TFLOPS typed below it


def _accelerator_labels() -> dict[str, str]:
    return {**{a.id: f"{a.name} ({a.memory_gib:g} GB)" for a in load_accelerators()}, CUSTOM_ACC: "Any hardware I own (type its memory and speed)"}


@cache
def _gpu_ids() -> frozenset[str]:
    return frozenset(a.id for a in load_accelerators() if a.kind == "gpu")


def custom_hardware(values: Values) -> bool:
    return values.get("acc") == CUSTOM_ACC


def llama_cpp(values: Values) -> bool:
    return inference(values) and values.get("engine") == "llama.cpp"


@cache
def fields() -> dict[str, Field]:
    presets = _preset_labels()
    accs = _accelerator_labels()
    rows = [
        # --- the model (the sidebar's "Model" section; `model` is built from src + model / params / cfg) ------
        Field(
            "src",
            "Model from",
            "choice",
            "preset",
            ("preset", "params", "config"),
            widget="segmented",
            section="model",
            labels={"preset": "Catalog", "params": "Parameter count", "config": "config.json"},
        ),
        Field(
            "model",
            "Model",
            "choice",
            "llama-3.1-8b",
            tuple(sorted(presets, key=lambda k: presets[k].lower())),
            labels=presets,
            section="model",
            help="Type to search: family, name, size or 'MoE'",
            applies=lambda v: v.get("src", "preset") == "preset",
        ),
        Field(
            "params",
            "Parameters (billions)",
            "float",
            7.0,
            lo=0.001,
            hi=100_000.0,
            widget="number",
            section="model",
            help="Taken as exact; a representative Llama-style shape is assumed for activations and KV cache",
            applies=lambda v: v.get("src") == "params",
        ),
        # --- the workload -------------------------------------------------------------------------------------
        Field(
            "mode",
            "Workload",
            "choice",
            "inference",
            ("inference", "training"),
            widget="segmented",
            section="workload",
            scenario="mode",
            labels={"inference": "Serve (inference)", "training": "Train / fine-tune"},
        ),
        Field("acc", "Accelerator", "choice", "h100-sxm", tuple(accs), labels=accs, section="workload", scenario="accelerator", help="Type to search"),
        Field("cmem", "Your device's memory (GiB)", "float", 24.0, lo=0.5, hi=16384.0, widget="number", section="workload", applies=custom_hardware),
        Field(
            "cbw",
            "Its memory bandwidth (GB/s)",
            "float",
            936.0,
            lo=1.0,
            hi=100_000.0,
            widget="number",
            section="workload",
            applies=custom_hardware,
            help="datasheet figure; for a CPU, channels x 8 bytes x MT/s (dual-channel DDR5-5600: 89.6)",
        ),
        Field(
            "ctf",
            "Its 16-bit TFLOPS (dense)",
            "float",
            71.0,
            lo=0.01,
            hi=50_000.0,
            widget="number",
            section="workload",
            applies=custom_hardware,
            help="sets prefill and compute-bound speed; a desktop CPU does about 1",
        ),
        Field("batch", "Batch (per device) / concurrent sequences", "choice", 1, BATCH_OPTIONS, widget="slider", section="workload", scenario="batch_size"),
        Field(
            "seq",
            "Sequence length / context (tokens)",
            "int",
            4096,
            SEQ_OPTIONS,
            lo=1,
            hi=2_097_152,
            widget="slider",
            section="workload",
            scenario="seq_len",
            help="Slide between powers of two; a link or a loaded plan can set any length (e.g. 1,300 = 1,000 in + 300 out)",
        ),
        Field(
            "method",
            "Method",
            "choice",
            "full",
            ("full", "lora", "qlora"),
            widget="segmented",
            section="workload",
            scenario="method",
            applies=training,
            labels={"full": "Full fine-tune", "lora": "LoRA", "qlora": "QLoRA (4-bit base)"},
        ),
        Field(
            "fmt",
            "Weight format",
            "choice",
            "bf16",
            tuple(FORMATS),
            labels={k: f.label for k, f in FORMATS.items()},
            section="workload",
            scenario="weights_format",
            applies=lambda v: inference(v) or v.get("method") == "lora",
        ),
        Field(
            "qbase",
            "QLoRA base",
            "choice",
            "nf4",
            ("nf4", *QLORA_OTHER_BASES),
            labels={"nf4": "NF4 (bitsandbytes, from the 16-bit checkpoint)", "gptq-4bit": "GPTQ 4-bit checkpoint"},
            section="workload",
            scenario="weights_format",
            applies=lambda v: training(v) and v.get("method") == "qlora" and v.get("stack", "hf") in QLORA_BASE_STACKS,
            others_as_default=True,
            help="The frozen 4-bit model QLoRA trains adapters on: bitsandbytes quantizes the 16-bit checkpoint to NF4 as it loads, "
            "or PEFT trains on a published GPTQ checkpoint, which dequantizes every weight in each forward pass (slower) and skips "
            "the fp32 upcast. The Hugging Face and Axolotl stacks take either",
        ),
        Field(
            "opt",
            "Optimizer",
            "choice",
            "adamw",
            ("adamw", "adamw-8bit", "sgd", "adafactor"),
            section="workload",
            scenario="optimizer",
            applies=training,
            labels={"adamw": "AdamW", "adamw-8bit": "8-bit AdamW", "sgd": "SGD + momentum", "adafactor": "Adafactor"},
        ),
        Field(
            "prec",
            "Precision",
            "choice",
            "bf16",
            ("bf16", "fp16", "bf16-true", "fp16-true", "fp32"),
            section="workload",
            scenario="precision",
            applies=training,
            labels={"bf16": "BF16 mixed", "fp16": "FP16 mixed", "bf16-true": "BF16 true (no fp32 copy)", "fp16-true": "FP16 true (no fp32 copy)", "fp32": "FP32"},
            help="Mixed keeps fp32 weights or a master copy for the update; 'true' trains in the 16-bit type, optimizer states too (LitGPT bf16-true)",
        ),
        Field(
            "stack",
            "Training stack",
            "choice",
            "hf",
            tuple(STACKS),
            labels={k: s.label for k, s in STACKS.items()},
            section="workload",
            scenario="training_stack",
            applies=training,
            help="The software changes the memory: its loss, norms, adapters and QLoRA recipe (see Explain)",
        ),
        Field(
            "ga",
            "Gradient accumulation steps",
            "int",
            1,
            lo=1,
            hi=100_000,
            widget="number",
            section="run",
            scenario="gradient_accumulation_steps",
            applies=training,
            help="Micro-batches per optimizer step: the global batch grows, memory per device does not",
        ),
        Field("gc", "Gradient checkpointing", "bool", False, widget="toggle", section="workload", scenario="gradient_checkpointing", applies=training),
        Field(
            "flash",
            "FlashAttention",
            "bool",
            True,
            widget="toggle",
            section="workload",
            scenario="flash_attention",
            help="Attention without the s^2 scores. QLoRA on the Hugging Face stack: FlashAttention-2 "
            "(--attn_implementation flash_attention_2) keeps attention 16-bit; off, SDPA runs it in fp32",
        ),
        Field(
            "fce",
            "Fused cross-entropy",
            "bool",
            False,
            widget="toggle",
            section="workload",
            scenario="fused_cross_entropy",
            applies=lambda v: training(v) and v.get("stack", "hf") in FUSED_CROSS_ENTROPY_STACKS,
            help="Liger Kernel's fused linear cross-entropy or Cut Cross-Entropy: the loss never holds the whole logits "
            "(gigabytes at a 128k vocabulary). The Hugging Face, Axolotl and DeepSpeed stacks take it as an option; the others have their own loss",
        ),
        Field(
            "kv",
            "KV cache format",
            "choice",
            "bf16",
            ("bf16", "fp16", "fp8", "int8", "q8_0", "q4_0"),
            section="workload",
            scenario="kv_cache_format",
            applies=inference,
            labels=kv_labels(("bf16", "fp16", "fp8", "int8", "q8_0", "q4_0")),
            help="What K and V are stored in. Each format names the engines that store it (data/engine_formats.csv); "
            "an engine's cache also needs kernels on the part for the model's attention (data/kv_cache_kernels.csv: vLLM's "
            "FP8 cache from Ampere, not with MLA or attention sinks there)",
        ),
        Field(
            "engine",
            "Serving engine",
            "choice",
            "vllm",
            tuple(ENGINES),
            labels={k: e.label for k, e in ENGINES.items()},
            section="workload",
            scenario="serving_engine",
            applies=inference,
            help="How the memory is reserved and how fast a decode step runs depend on the engine (see Explain)",
        ),
        Field(
            "out",
            "Generated tokens per sequence (0 = a quarter of the context)",
            "int",
            0,
            lo=0,
            hi=2_097_151,
            widget="number",
            section="workload",
            scenario="output_tokens",
            zero_is_unset=True,
            applies=inference,
        ),
        Field(
            "ngl",
            "Layers on the GPU (llama.cpp -ngl; -1 = all, 0 = CPU only)",
            "int",
            -1,
            lo=-1,
            hi=1024,
            widget="number",
            section="workload",
            scenario="gpu_layers",
            unset=-1,
            applies=llama_cpp,
            help="the other layers (weights and KV cache) stay in system RAM and are read by the CPU each token",
        ),
        Field(
            "ram",
            "System RAM (GiB)",
            "float",
            64.0,
            lo=1.0,
            hi=65536.0,
            widget="number",
            section="workload",
            scenario="host_memory_gib",
            applies=lambda v: llama_cpp(v) and v.get("ngl", -1) != -1,
        ),
        Field(
            "rambw",
            "System RAM bandwidth (GB/s, 0 = the accelerator's usual host)",
            "float",
            0.0,
            lo=0.0,
            hi=100_000.0,
            widget="number",
            section="workload",
            scenario="host_memory_bandwidth_gbps",
            zero_is_unset=True,
            applies=lambda v: llama_cpp(v) and v.get("ngl", -1) != -1,
            help="channels x 8 bytes x MT/s: dual-channel DDR4-3200 51.2, DDR5-4800 76.8, DDR5-6000 96; 12-channel DDR5-4800 server 460.8. "
            "0: a desktop's 76.8, or for a data-centre GPU its server's share (data/host_memory.csv: a DGX H100's 614.4 over its 8 GPUs)",
        ),
        Field(
            "gmu",
            "Memory the engine reserves (% of the device, 0 = the engine's default)",
            "float",
            0.0,
            lo=0.0,
            hi=100.0,
            widget="number",
            section="workload",
            scenario="gpu_memory_utilization",
            scale=0.01,
            zero_is_unset=True,
            applies=lambda v: inference(v) and getattr(ENGINES.get(v.get("engine", "vllm")), "preallocate_fraction", None) is not None,
            help="vLLM's and SGLang's gpu_memory_utilization / mem_fraction_static: the share of the card taken at start",
        ),
        Field(
            "rank",
            "LoRA rank",
            "choice",
            16,
            RANK_OPTIONS,
            widget="slider",
            section="workload",
            scenario="lora_rank",
            applies=lambda v: training(v) and v.get("method") != "full",
        ),
        Field(
            "targets",
            "LoRA targets",
            "choice",
            "all-linear",
            ("all-linear", "attention"),
            widget="segmented",
            section="workload",
            scenario="lora_targets",
            applies=lambda v: training(v) and v.get("method") != "full",
            labels={"all-linear": "All linear layers", "attention": "Attention only"},
        ),
        # --- sharding and parallelism ---------------------------------------------------------------------------
        Field(
            "zero",
            "ZeRO / FSDP stage",
            "choice",
            0,
            (0, 1, 2, 3),
            section="parallel",
            scenario="zero_stage",
            applies=training,
            labels={0: "0 - none", 1: "1 - optimizer", 2: "2 - + gradients", 3: "3 - + weights (FSDP full shard)"},
        ),
        Field(
            "offload",
            "CPU offload",
            "choice",
            "none",
            ("none", "optimizer", "optimizer+params"),
            section="parallel",
            scenario="offload",
            applies=training,
            labels={"none": "None", "optimizer": "Optimizer + gradients", "optimizer+params": "All three (+ weights)"},
        ),
        Field("dp", "Data parallel", "int", 1, lo=1, hi=4096, widget="number", section="parallel", scenario="data_parallel", applies=training),
        Field("tp", "Tensor parallel", "choice", 1, (1, 2, 4, 8, 16), section="parallel", scenario="tensor_parallel"),
        Field("pp", "Pipeline parallel", "int", 1, lo=1, hi=128, widget="number", section="parallel", scenario="pipeline_parallel"),
        Field(
            "ep",
            "Expert parallel (MoE: experts split over the tensor-parallel GPUs)",
            "bool",
            False,
            widget="toggle",
            section="parallel",
            scenario="expert_parallel",
            applies=inference,
            help="Each GPU holds 1/n of the experts, every other weight and its own requests' KV cache (attention data-parallel); "
            "vLLM, SGLang and TensorRT-LLM only (data/expert_parallel.csv)",
        ),
        # --- the training run -----------------------------------------------------------------------------------
        Field(
            "tokens",
            "Training tokens (billions, 0 = none)",
            "float",
            0.0,
            lo=0.0,
            hi=1_000_000.0,
            widget="number",
            section="run",
            scenario="train_tokens",
            scale=1e9,
            zero_is_unset=True,
            applies=training,
        ),
        Field(
            "mfu",
            "MFU % (0 = default for the setup)",
            "float",
            0.0,
            lo=0.0,
            hi=100.0,
            widget="number",
            section="run",
            scenario="mfu",
            scale=0.01,
            zero_is_unset=True,
            applies=training,
        ),
        # --- display ----------------------------------------------------------------------------------------------
        Field(
            "units",
            "Memory units",
            "choice",
            "GiB",
            ("GiB", "GB"),
            widget="segmented",
            section="display",
            help="GiB = 2^30 bytes (what nvidia-smi and PyTorch show); GB = 10^9 bytes (datasheets, price pages)",
        ),
        Field(
            "present",
            "Presenter view",
            "bool",
            False,
            widget="toggle",
            section="display",
            help="For a projector: the page's chart first, at large type, with the few inputs that move it beside it; "
            "the sidebar starts folded away. In a link: ?present=true",
        ),
        # --- page inputs (drawn by the cost and serving pages; in the URL too) -----------------------------------
        Field("sweep", "Sweep", "choice", "context", ("context", "batch"), widget="segmented", labels={"context": "Context length", "batch": "Batch size"}),
        Field(
            "price",
            "Price",
            "choice",
            "on-demand",
            ("on-demand", "spot"),
            widget="segmented",
            labels={"on-demand": "On-demand", "spot": "Spot"},  # "Spot / preemptible" was cut off in the Plan page's column
            help="Spot (preemptible) instances cost less but the cloud can take them back; on-demand ones stay yours",
        ),
        Field("rpd", "Requests per day", "int", 10_000, lo=1, hi=1_000_000_000, widget="number"),
        Field("tin", "Input tokens per request", "int", 1_000, lo=1, hi=2_000_000, widget="number"),
        Field("tout", "Output tokens per request", "int", 300, lo=1, hi=200_000, widget="number"),
        # util: a link key from before the busiest hour (peak) sized every fleet; a link with util and no peak opens
        # with peak = 100 / util, the same replicas (app_pages/shared/state.py, load_link_once)
        Field("util", "Highest utilisation to plan for (%)", "float", 70.0, lo=1.0, hi=100.0, widget="number"),
        # the Inference page's engine scheduler (core/speed/load.py): 0 = the engine's own default, so a link from
        # before these inputs shows what it showed
        Field(
            "mns",
            "Most running requests (max_num_seqs, 0 = the engine's default)",
            "int",
            0,
            lo=0,
            hi=65_536,
            widget="number",
            scenario="max_num_seqs",
            zero_is_unset=True,
            applies=inference,
            help="vLLM --max-num-seqs, TensorRT-LLM max_batch_size: users beyond it wait for a slot",
        ),
        Field(
            "mnbt",
            "Tokens per engine step (max_num_batched_tokens, 0 = the engine's default)",
            "int",
            0,
            lo=0,
            hi=2_097_152,
            widget="number",
            scenario="max_num_batched_tokens",
            zero_is_unset=True,
            lo_set=16,  # the Scenario's bound (core/scenario.py max_num_batched_tokens ge=16)
            applies=inference,
            help="vLLM --max-num-batched-tokens: each step's decodes plus the chunk of prompts prefilled in it (16 at least). "
            "Smaller: steadier tokens for those decoding, a slower first token",
        ),
        Field(
            "pcache",
            "Prompt found in the prefix cache (%, 0 = caching off)",
            "float",
            0.0,
            lo=0.0,
            hi=99.0,
            widget="number",
            scenario="prefix_cache_hit_fraction",
            scale=0.01,
            applies=inference,
            help="the share of each prompt the engine has cached from earlier requests (a shared system prompt, a chat's history) and does not prefill again",
        ),
        Field(
            "arrive",
            "How users arrive",
            "choice",
            "steady",
            ("steady", "synchronised"),
            widget="segmented",
            labels={"steady": "Independently (production)", "synchronised": "All at once (a benchmark)"},
            scenario="arrivals",
            applies=inference,
            help="Independently: users come and go at random, as in production (what the serving plan assumes). All at once: a "
            "benchmark's users start together with identical requests and their prompts queue in waves (NIM's, genai-perf's runs)",
        ),
        # the Inference page's box of different cards (core/speed/mixed.py)
        Field("box1", "Cards of the sidebar's type", "int", 1, lo=1, hi=8, widget="number"),
        Field(
            "box2",
            "Plus cards of another type",
            "choice",
            "none",
            ("none", *(a for a in accs if a in _gpu_ids())),
            labels={"none": "None", **accs},
            help="Type to search: a second kind of GPU in the same box (e.g. a 3090 next to a 4090)",
        ),
        Field("box2n", "How many of those", "int", 1, lo=1, hi=7, widget="number"),
        Field(
            "api_in",
            "Per-token API price, input (USD per million, 0 = the catalog's)",
            "float",
            0.0,
            lo=0.0,
            hi=1_000.0,
            widget="number",
            help=API_HELP,
        ),
        Field("api_out", "Per-token API price, output (USD per million)", "float", 0.0, lo=0.0, hi=1_000.0, widget="number", help=API_HELP),
        Field("months", "Horizon (months)", "int", 24, lo=1, hi=120, widget="number"),
        Field("kwh", "Electricity (USD per kWh)", "float", 0.15, lo=0.0, hi=5.0, widget="number"),
        Field("busy", "Utilisation of owned hardware (%)", "float", 60.0, lo=1.0, hi=100.0, widget="number"),
        Field("buy_usd", "Purchase price per device (USD, 0 = catalog)", "float", 0.0, lo=0.0, hi=10_000_000.0, widget="number"),
        Field(
            "pue",
            "PUE (facility power / IT power)",
            "float",
            1.58,
            lo=1.0,
            hi=5.0,
            widget="number",
            help="cooling and power delivery on top of the servers: 1.58 is the industry average (Uptime Institute, 2023), 1.1 a hyperscaler",
        ),
        Field(
            "pmode",
            "Your prices",
            "choice",
            "replace",
            ("replace", "only"),
            widget="segmented",
            labels={"replace": "Mine + catalog", "only": "Only mine"},
            help="replace: your rows replace the catalog's rows for the accelerators they price, the rest of the catalog still answers; "
            "only: every page prices from your rows alone",
        ),
        Field(
            "pflag",
            "Also price from the catalog's flagged rows",
            "bool",
            False,
            widget="toggle",
            help="left out of every bill unless this is on: rows the catalog flags as placeholders or auction floors "
            "(data/price_flags.csv, with why) and rows older than six months",
        ),
        # --- the Plan page's goal (core/plan/goal.py) ------------------------------------------------------------
        Field(
            "goal",
            "Goal",
            "choice",
            "fine-tune",
            ("fine-tune", "pretrain", "serve"),
            widget="segmented",
            labels={"fine-tune": "Fine-tune", "pretrain": "Pretrain", "serve": "Serve"},
        ),
        Field("ptok", "Dataset (million tokens per epoch)", "float", 20.0, lo=0.001, hi=1e10, widget="number", help="examples x tokens per example"),
        Field("epochs", "Epochs", "float", 1.0, lo=0.01, hi=1_000.0, widget="number"),
        Field("pseq", "Tokens per example", "choice", 2048, SEQ_OPTIONS[:10], labels={v: f"{v:,}" for v in SEQ_OPTIONS}, help="the packed sequence length"),
        Field("peak", "Busiest hour / average", "float", 2.0, lo=1.0, hi=100.0, widget="number", help="replicas are sized for the busiest hour"),
        Field("ttft", "Time to first token at most (s)", "float", 2.0, lo=0.01, hi=600.0, widget="number"),
        Field("tps", "Tokens/s each user sees at least", "float", 20.0, lo=0.1, hi=10_000.0, widget="number"),
        Field("deadline", "Deadline (hours, 0 = none)", "float", 0.0, lo=0.0, hi=1e6, widget="number"),
        Field("budget", "Budget (USD, 0 = none; serving: per month)", "float", 0.0, lo=0.0, hi=1e12, widget="number"),
        Field(
            "pbf16",
            "Require BF16 (Ampere or newer)",
            "bool",
            False,
            widget="toggle",
            help="training plans only on parts with BF16 and FlashAttention-2; off, a V100 or T4 may be planned in FP16 with loss scaling when it is cheapest",
        ),
        Field(
            "pep",
            "Try expert-parallel replicas (MoE)",
            "bool",
            False,
            widget="toggle",
            help=(
                "serving a mixture-of-experts model on vLLM, SGLang or TensorRT-LLM: also plan replicas whose devices each hold a share of "
                "the experts. Off by default: that speed model is 1.05-2.0x over published peaks of serving with prefill on the same GPUs"
            ),
        ),
    ]
    return {f.key: f for f in rows}


API_HELP = (
    "0 in and out: the cheapest offer of the same model in data/api_prices.csv, or of the model nearest in size where "
    "no API serves it; a price typed here (or set by a link) is used instead"
)


def defaults() -> Values:
    return {k: f.default for k, f in fields().items()}


def url_problems(query: dict[str, Any], table: dict[str, Field] | None = None) -> list[str]:
    """One message per query parameter that a shared link got wrong."""
    table = table or fields()
    problems = []
    for key, raw in query.items():
        f = table.get(key)
        if f is None:
            continue
        try:
            f.parse(raw)
        except (ValueError, OverflowError) as exc:
            text = raw if isinstance(raw, str) else str(raw)
            shown = "".join(c if c.isprintable() else "?" for c in text[:40]) + ("..." if len(text) > 40 else "")
            problems.append(f"URL parameter {key}={shown} was ignored — {f.label}: {exc}; using {f.fmt(f.default)!s}.")
    return problems
