"""What a plan says, from a Plan or a bare scenario (`_Facts`), the launch text's shared constants, and the helpers that
write a command, a comment, a here-document or YAML safely (see core/plan/launch/__init__.py)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from core.catalog.presets import preset, preset_ids
from core.catalog.prices import region_text
from core.catalog.stack_layouts import optimizer_problem
from core.memory.engines import ENGINES
from core.memory.stacks import trains_on_gptq

if TYPE_CHECKING:
    from core.catalog.accelerators import Accelerator


GPTQ_PLACEHOLDER = "REPLACE_WITH_THE_GPTQ_CHECKPOINT"  # LoRA on a GPTQ base loads a GPTQ repo, not the 16-bit one
AWQ_PLACEHOLDER = "REPLACE_WITH_THE_AWQ_CHECKPOINT"  # vLLM, SGLang and Transformers load AWQ weights from an AWQ repo
PLACEHOLDER_MODEL = "REPLACE_WITH_YOUR_MODEL"  # a model given by config or parameter count has no repository we know
FP8_PLACEHOLDER = "REPLACE_WITH_THE_FP8_CHECKPOINT"  # FP8 weights whose 16-bit checkpoint vLLM cannot load first
GPU_MEMORY_FRACTION = 0.90  # vLLM's --gpu-memory-utilization default (0.9); SGLang's --mem-fraction-static likewise
MASTER_PORT = 29500  # torchrun's default rendezvous port
HEREDOC_END = "LAUNCH_EOF"
ALL_LAYERS_ON_GPU = 999  # llama.cpp -ngl: more layers than any model has puts every layer on the GPU
MII_RESTFUL_PORT = 28080
LORA_RANK = 16  # the planner's LoRA: rank 16 on all linear layers (core/plan/__init__.assumptions)
# The projections each LoRA target set adapts, in the Llama-family module names (Llama, Qwen, Mistral, Gemma): the
# attention's four, and with them the MLP's three for "all-linear" (PEFT's all-linear: every linear layer but the head)
ATTENTION_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")
OWN_STACK_VENDORS = frozenset({"groq", "cerebras"})  # their chips run the vendor's own serving stack
MLX_LORA_SCALE = 20.0  # mlx-lm's default lora_parameters scale (mlx_lm/lora.py CONFIG_DEFAULTS)
MLX_SERVER_PORT = 8080  # mlx_lm.server's default port
# SGD's momentum where the trainer's default has none (torch.optim.SGD and MLX's SGD: momentum 0): the memory counts one
# momentum buffer (core/memory/components.py OPTIMIZER_STATE_BYTES); 0.9 is Megatron-LM's --sgd-momentum default
SGD_MOMENTUM = 0.9
AXOLOTL_DS_CONFIG = "ds_config.json"  # Axolotl's DeepSpeed json, written by the launch text (_axolotl_deepspeed_config)


# --- what a plan says, from a Plan or a bare scenario ---------------------------------------------------------------


def _known_accelerator(accelerator_id: str) -> Accelerator | None:
    """The accelerator an id names (the catalog's, or a custom-... id's), or None for one it does not know."""
    from core.catalog.accelerators import UnknownAcceleratorError, get_accelerator

    try:
        return get_accelerator(accelerator_id)
    except UnknownAcceleratorError:
        return None


class _Facts:
    """The plan's fields that a command carries, read from a Plan or a scenario dict."""

    def __init__(self, sc: Mapping[str, Any], plan: Any = None) -> None:
        self.sc = sc
        self.serving = sc.get("mode") == "inference"
        tp = int(sc.get("tensor_parallel", 1) or 1)
        pp = int(sc.get("pipeline_parallel", 1) or 1)
        self.tensor_parallel = tp
        self.pipeline_parallel = pp
        self.data_parallel = int(plan.data_parallel if plan is not None else sc.get("data_parallel", 1) or 1)
        self.micro_batch = int(plan.micro_batch if plan is not None else sc.get("batch_size", 1) or 1)
        if self.serving and plan is not None and getattr(plan, "max_batch_meeting_targets", None):
            # a serving replica's engine cap is the most concurrent requests that still meet the latency targets (what
            # the planner sized the fleet against), not the average concurrency at the goal's traffic: at 2,000
            # requests a day that is 1, and --max-num-seqs 1 would queue every burst behind one request
            self.micro_batch = int(plan.max_batch_meeting_targets)
        self.accumulation = int(sc.get("gradient_accumulation_steps", 1) or 1)
        self.seq_len = int(sc.get("seq_len", 2048) or 2048)
        self.method = str(sc.get("method", "serve" if self.serving else "full"))
        # the scenario's LoRA (core/memory/components.lora_params counts it): every stack's launch writes these
        self.lora_rank = int(sc.get("lora_rank", LORA_RANK))
        self.lora_all_linear = sc.get("lora_targets", "all-linear") != "attention"
        self.goal = getattr(plan, "goal", None)  # fine-tune | pretrain | serve; None for a bare scenario
        self.precision = str(sc.get("precision", "bf16"))
        self.weights_format = str(sc.get("weights_format", "bf16"))
        self.kv_cache_format = str(sc.get("kv_cache_format", "bf16"))
        self.zero_stage = int(sc.get("zero_stage", 0) or 0)
        self.gradient_checkpointing = bool(sc.get("gradient_checkpointing", False))
        self.fused_cross_entropy = bool(sc.get("fused_cross_entropy", False))
        self.dpo = not self.serving and sc.get("objective", "sft") == "dpo"  # preference tuning (core/memory/objective.py)
        self.offload = str(sc.get("offload", "none"))  # ZeRO-Offload: none, optimizer, optimizer+params (ZeRO-3)
        self.optimizer = str(sc.get("optimizer", "adamw") or "adamw")
        self.stack = str(sc.get("training_stack", "hf"))
        # LoRA on a GPTQ checkpoint where the stack trains on one (core/memory/components.gptq_base), else QLoRA on NF4
        self.gptq_base = not self.serving and trains_on_gptq(self.method, self.weights_format, self.stack)
        # the scenario's FlashAttention on a part that runs FlashAttention-2 (core/memory/components.fp32_attention)
        self.engine = str(sc.get("serving_engine", "vllm"))
        # the engine's scheduler and memory settings the scenario states (the Inference page's sidebar; a plan leaves
        # them to the engine's defaults): the launch writes what the memory and the latency under load were sized with
        self.max_num_seqs = _positive(sc.get("max_num_seqs"))
        self.max_num_batched_tokens = _positive(sc.get("max_num_batched_tokens"))
        self.gpu_layers = None if sc.get("gpu_layers") is None else int(sc["gpu_layers"])
        fraction = sc.get("gpu_memory_utilization") or (ENGINES[self.engine].preallocate_fraction if self.engine in ENGINES else None)
        self.gpu_memory_fraction = float(fraction or GPU_MEMORY_FRACTION)
        self.expert_parallel = self.serving and bool(sc.get("expert_parallel", False)) and tp > 1
        # vLLM's data-parallel engines and TensorRT-LLM's attention-DP ranks each schedule their own requests: the
        # replica's cap is split over its GPUs (SGLang's --max-running-requests stays the replica's)
        split = self.expert_parallel and self.engine in ("vllm", "tensorrt-llm")
        self.engine_batch = -(-self.micro_batch // tp) if split else self.micro_batch
        self.accelerator_id = str(sc.get("accelerator", ""))
        self.devices = int(plan.devices) if plan is not None else self.data_parallel * tp * pp
        self.accelerator = _known_accelerator(self.accelerator_id)
        self.instances = int(plan.instances) if plan is not None else _nodes(self.devices, self.accelerator)
        self.where = "" if plan is None else f"{plan.instances} x {plan.instance} ({plan.provider}, {region_text(plan.region)})"
        if plan is not None and getattr(plan, "reservation", None):
            self.where += f", a reserved {plan.reservation}"
        self.flash_attention_2 = bool(sc.get("flash_attention", True)) and (self.accelerator is None or self.accelerator.runs_flash_attention_2)
        self.accelerator_name, self.vendor, self.per_instance = self._accelerator(plan)
        self.model, self.model_note = _model_id(sc.get("model"))
        if self.gptq_base:  # the 16-bit checkpoint would train plain LoRA: the text names a placeholder to replace
            self.model_note = f"replace {GPTQ_PLACEHOLDER} with the GPTQ 4-bit checkpoint of {self.model} (a '-GPTQ-Int4' repo or path)"
            self.model = GPTQ_PLACEHOLDER
        # vLLM's --quantization fp8 quantizes a 16-bit checkpoint after loading it (online_fp8_overflow): where those
        # weights do not fit first, the plan's FP8 weights come from a published FP8 checkpoint instead
        self.fp8_checkpoint = online_fp8_overflow(sc, self) if self.serving and self.weights_format == "fp8" and self.engine == "vllm" else None
        if self.fp8_checkpoint is not None:
            need, room = self.fp8_checkpoint
            of = self.model if self.model_note is None else "the model"
            self.model_note = (self.model_note + "; then " if self.model_note else "") + (
                f"replace {FP8_PLACEHOLDER} with an FP8 checkpoint of {of} (the maker's or RedHatAI's '-FP8' repos): vLLM "
                f"quantizes a 16-bit checkpoint to FP8 only after loading it whole, {need / 1e9:,.0f} GB a GPU here "
                f"against the {room / 1e9:,.0f} GB it takes (vLLM's FP8 docs)"
            )
            self.model = FP8_PLACEHOLDER
        if self.serving and self.weights_format in PREQUANTIZED:  # AWQ / GPTQ weights load from such a checkpoint only
            kind, holder, repo = PREQUANTIZED[self.weights_format]
            of = self.model if self.model_note is None else "the model"
            self.model_note = (self.model_note + "; then " if self.model_note else "") + f"replace {holder} with the {kind} 4-bit checkpoint of {of} ({repo})"
            self.model = holder
        # why the training stack (on this part) cannot run the scenario's optimizer (data/stack_layouts.csv), or None:
        # then the text says so and sets no optimizer, rather than another one than the memory counts
        self.optimizer_problem = None if self.serving else optimizer_problem(self.stack, self.method, self.optimizer, self.accelerator)

    @property
    def running_limit(self) -> int:
        """The engine's cap on running requests: the scenario's max_num_seqs where it sets one, else the batch."""
        return self.max_num_seqs or self.engine_batch

    @classmethod
    def of(cls, value: Any) -> _Facts:
        if isinstance(value, Mapping):
            return cls(value)
        return cls(value.scenario, value)

    def _accelerator(self, plan: Any) -> tuple[str, str, int]:
        if self.accelerator is not None:
            name, vendor = self.accelerator.name, self.accelerator.vendor
        else:  # an unknown id: the command still comes out, without the vendor's notes
            name, vendor = self.accelerator_id or "the accelerator", "other"
        if plan is not None:
            name = plan.accelerator_name
        per_instance = max(1, -(-self.devices // max(1, self.instances)))  # devices used on each instance
        return name, vendor, per_instance

    @property
    def lora_modules(self) -> tuple[str, ...]:
        return ATTENTION_MODULES + (MLP_MODULES if self.lora_all_linear else ())

    @property
    def global_batch(self) -> int:
        return self.data_parallel * self.micro_batch * self.accumulation

    @property
    def processes(self) -> int:
        return self.data_parallel * self.tensor_parallel * self.pipeline_parallel

    @property
    def multi_node(self) -> bool:
        return self.instances > 1


# Serving weights the engine loads only from a checkpoint quantized in that format: (name, placeholder, what to look for)
PREQUANTIZED = {
    "awq-4bit": ("AWQ", AWQ_PLACEHOLDER, "an '-AWQ' repo or path, with its quantization_config"),
    "gptq-4bit": ("GPTQ", GPTQ_PLACEHOLDER, "a '-GPTQ-Int4' repo or path, with its quantization_config"),
}


def online_fp8_overflow(sc: Mapping[str, Any], p: _Facts) -> tuple[float, float] | None:
    """(16-bit weight bytes a GPU, the bytes vLLM takes of it) where vLLM's online FP8 (--quantization fp8 on a 16-bit
    checkpoint) cannot load: "we load the model at original precision before quantizing down to 8-bits, so you need
    enough memory to load the whole model" (docs.vllm.ai, "FP8 W8A8", online dynamic quantization). None where it
    loads, where the model ships in FP8, or for a part or model the catalog does not know."""
    from core.model.formats import FORMATS, weight_bytes
    from core.scenario import Scenario

    model = sc.get("model")
    if p.accelerator is None or (isinstance(model, str) and model in preset_ids() and preset(model).published_format == "fp8"):
        return None
    try:
        arch = Scenario.model_validate(dict(sc)).architecture
    except ValueError:
        return None
    config = model.get("hf_config") if isinstance(model, Mapping) else None
    quant = config.get("quantization_config") if isinstance(config, Mapping) else None
    if isinstance(quant, Mapping) and quant.get("quant_method") == "fp8":
        return None
    need = weight_bytes(arch, FORMATS["bf16"]) / max(1, p.tensor_parallel)
    room = float(p.accelerator.usable_memory_bytes) * p.gpu_memory_fraction
    return (need, room) if need > room else None


def _positive(value: Any) -> int | None:
    return int(value) if value else None


def _nodes(devices: int, acc: Accelerator | None) -> int:
    """A bare scenario's nodes (a plan names its instances): its devices over the nodes the speed model times them on
    (core/speed/comm.py DEVICES_PER_NODE: 8 GPUs, 16 Trainium chips), so 128 GPUs launch as 16 nodes of 8, not one
    node of 128 (the estimate helper's review of stop 48, M2). A TPU slice is one host group (its launch runs on every
    host), an unknown part one node."""
    from core.speed.comm import DEVICES_PER_NODE

    if acc is None or acc.kind == "tpu":
        return 1
    return max(1, -(-devices // DEVICES_PER_NODE.get(acc.kind, devices)))


def _model_id(model: Any) -> tuple[str, str | None]:
    """The Hugging Face repo (or path) to load, and a note when it is a placeholder or comes from user input."""
    if isinstance(model, str) and model in preset_ids():
        repo = preset(model).hf_repo
        if repo:
            return repo, None
        return PLACEHOLDER_MODEL, f"replace {PLACEHOLDER_MODEL} with the Hugging Face repo or local path of {preset(model).name}"
    spec: Mapping[str, Any] = model if isinstance(model, Mapping) else {}
    if hasattr(model, "model_dump"):
        spec = model.model_dump(exclude_none=True)
    config = spec.get("hf_config") if isinstance(spec.get("hf_config"), Mapping) else {}
    name_or_path = config.get("_name_or_path") if isinstance(config, Mapping) else None
    if isinstance(name_or_path, str) and name_or_path.strip():
        if name_or_path.lstrip().startswith("-"):  # would reach the program as an option (--trust-remote-code)
            # quoting keeps it one word, not a name: refused (stop 50's hosting review, LOW 7)
            why = "the config's _name_or_path starts with '-', which a program reads as an option"
            return PLACEHOLDER_MODEL, f"replace {PLACEHOLDER_MODEL} with the Hugging Face repo or local path ({why})"
        return name_or_path, "the model is the config's _name_or_path: check it is the repo or path you mean"
    what = spec.get("name") or (model if isinstance(model, str) else "your model")
    return PLACEHOLDER_MODEL, f"replace {PLACEHOLDER_MODEL} with the Hugging Face repo or local path of {what}"


# --- text helpers ----------------------------------------------------------------------------------------------------


def _comment(text: str) -> str:
    """One comment line: control characters (a newline would end the comment) become spaces."""
    clean = "".join(ch if ch.isprintable() else " " for ch in str(text))
    return "# " + clean


def _q(value: Any) -> str:
    """One shell word. shlex.quote, except that text with a control character (a newline, say) becomes bash's $'...'
    with the character escaped, so that every command stays on its own lines and a comment stays a comment."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if all(ch.isprintable() for ch in text):
        return shlex.quote(text)
    return "$'" + "".join(_ansi_c(ch) for ch in text) + "'"


def _ansi_c(ch: str) -> str:
    if ch in "\\'":
        return "\\" + ch
    if ch.isprintable():
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _command(program: Sequence[str], args: Sequence[tuple[str, Any] | str]) -> str:
    """A command over several lines: the program words (already quoted), then `--flag value` pairs or bare flags."""
    parts = [" ".join(program)]
    for a in args:
        parts.append(a if isinstance(a, str) else f"{a[0]} {_q(a[1])}")
    return " \\\n  ".join(parts)


def _file(path: str, body: str) -> str:
    """A here-document that writes `body` to `path`; the quoted delimiter keeps the shell from expanding anything."""
    if any(line.strip() == HEREDOC_END for line in body.splitlines()):  # cannot happen: user text is JSON-encoded
        raise ValueError("config text would close its here-document")
    return f"cat > {shlex.quote(path)} <<'{HEREDOC_END}'\n{body.rstrip()}\n{HEREDOC_END}"


def _yaml(data: Mapping[str, Any], indent: int = 0) -> str:
    """Block YAML with every string JSON-encoded (a JSON string is a YAML double-quoted scalar)."""
    lines = []
    pad = "  " * indent
    for key, value in data.items():
        if isinstance(value, Mapping):
            lines.append(f"{pad}{key}:")
            lines.append(_yaml(value, indent + 1))
        else:
            lines.append(f"{pad}{key}: {json.dumps(value)}")
    return "\n".join(lines)


def _header(p: _Facts, what: str) -> list[str]:
    lines = [_comment(f"{what} on {p.devices} x {p.accelerator_name}" + (f": {p.where}" if p.where else ""))]
    if p.model_note:
        lines.append(_comment(p.model_note))
    return lines
