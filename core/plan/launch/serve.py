"""The serving engines' launch text: vLLM, SGLang, TensorRT-LLM, llama.cpp, Transformers, DeepSpeed-MII and mlx-lm
(flags from data/launch_flags.csv)."""

from __future__ import annotations

import json
import shlex
from typing import Any

from core.catalog.expert_parallel import load_expert_parallel
from core.memory.engines import ENGINES
from core.plan.launch.facts import (
    ALL_LAYERS_ON_GPU,
    GPU_MEMORY_FRACTION,
    MII_RESTFUL_PORT,
    MLX_SERVER_PORT,
    OWN_STACK_VENDORS,
    _command,
    _comment,
    _Facts,
    _file,
    _header,
    _q,
    _yaml,
)
from core.speed.load import RUNNING_LIMIT_FLAG
from core.speed.timing import weight_only_note

# --- serving ---------------------------------------------------------------------------------------------------------

_VLLM_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_QUANTIZATION = {"fp8": "fp8", "awq-4bit": "awq", "gptq-4bit": "gptq"}  # runtime FP8; AWQ/GPTQ need such a checkpoint
# GGUF file types of the 16-bit formats, and of MXFP4: llama.cpp's own type for gpt-oss's experts (PR #15091), the
# other weights kept in 16 bits as in the Hugging Face checkpoint
_GGUF_TYPE = {"fp16": "F16", "bf16": "BF16", "mxfp4": "MXFP4"}


def _weight_only_fp8_note(p: _Facts) -> list[str]:
    """FP8 weights on an NVIDIA part without FP8: the engine runs them weight-only through FP8 Marlin, as its log says
    when it loads them (core/speed/timing.weight_only_note)."""
    note = weight_only_note(p.weights_format, p.engine, p.accelerator, ENGINES[p.engine].label) if p.accelerator is not None else None
    return [_comment(note)] if note else []


# How a replica is pinned to its own devices, by vendor: the variable the runtime reads (CUDA's; ROCm's HIP runtime's).
# Elsewhere the note names the devices only (TPU chips, Neuron devices and Gaudi cards are selected their own ways).
VISIBLE_DEVICES = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "HIP_VISIBLE_DEVICES"}
DEVICE_WORDS = {"nvidia": "GPU", "amd": "GPU", "google": "TPU chip", "aws": "Neuron device", "intel": "Gaudi card"}


def _replicas_note(p: _Facts) -> list[str]:
    if p.data_parallel <= 1:
        return []
    n = p.tensor_parallel
    device = DEVICE_WORDS.get(p.vendor, "device")
    pinned = f" ({VISIBLE_DEVICES[p.vendor]})" if p.vendor in VISIBLE_DEVICES else ""
    return [_comment(f"{p.data_parallel} replicas: run this once per replica, each on its own {n} {device}{'s' * (n > 1)}{pinned}, behind a load balancer")]


def _serving(p: _Facts) -> str:
    head = _header(p, f"Serve with {ENGINES[p.engine].label}")
    if p.vendor in OWN_STACK_VENDORS:
        return "\n".join([*head, _comment(f"{p.accelerator_name} runs its vendor's own serving stack: no engine command applies")])
    body = {
        "vllm": _vllm,
        "sglang": _sglang,
        "tensorrt-llm": _trtllm,
        "llama.cpp": _llama_cpp,
        "hf-transformers": _transformers_serve,
        "hf-transformers-compiled": _transformers_serve,
        "deepspeed-mii": _mii,
        "mlx": _mlx_serve,
    }.get(p.engine)
    if body is None:
        return "\n".join([*head, _comment(f"no launch command for engine {p.engine!r}")])
    return "\n".join([*head, *_weight_only_fp8_note(p), *_replicas_note(p), *body(p)])


def _stages(p: _Facts, flag: str) -> list[tuple[str, Any] | str]:
    """The engine's pipeline-parallel flag where the scenario splits a replica into stages (a plan does not)."""
    return [(flag, p.pipeline_parallel)] if p.pipeline_parallel > 1 else []


def _step_budget(p: _Facts, flag: str) -> list[tuple[str, Any] | str]:
    """The engine's tokens-a-step flag where the scenario sets the budget (core/speed/load.py times the prefill in
    chunks of it); otherwise the engine's default, which the latency under load assumes too."""
    return [(flag, p.max_num_batched_tokens)] if p.max_num_batched_tokens else []


def _weights_flag(p: _Facts) -> list[tuple[str, Any]]:
    """vLLM's and SGLang's shared flags for the weights: --quantization for a quantized checkpoint, else --dtype. A
    quantized checkpoint still computes in 16 bits: on a part without bf16 (before Ampere) it says float16, since the
    model's own bf16 would be refused there (vLLM: "Bfloat16 is only supported on GPUs with compute capability of at
    least 8.0")."""
    if p.weights_format in _QUANTIZATION:
        # an FP8 checkpoint names its own method (fbgemm_fp8, compressed-tensors): the engine reads it from there
        out = [] if p.fp8_checkpoint is not None else [("--quantization", _QUANTIZATION[p.weights_format])]
        if p.accelerator is not None and not p.accelerator.supports_bf16:  # an unknown id: nothing to say about its dtypes
            out.append(("--dtype", "float16"))
        return out
    return [("--dtype", _VLLM_DTYPE.get(p.weights_format, "auto"))]


def _ep(p: _Facts) -> tuple[str, str, str, list[tuple[str, Any] | str]]:
    """The engine's expert-parallel, attention-data-parallel and load-balancer flags (data/expert_parallel.csv), and
    its all-to-all backend for decode where the row names one as a flag and value (DeepEP's low-latency kernels)."""
    row = load_expert_parallel()[p.engine]
    words = row.all_to_all.split()
    a2a: list[tuple[str, Any] | str] = [(words[0], words[1])] if len(words) > 1 and words[0].startswith("--") else []
    return row.expert_parallel_flag, row.attention_data_parallel_flag, row.load_balancer_flag, a2a


def _ep_comment(p: _Facts) -> list[str]:
    return [
        _comment(
            f"expert-parallel: each of the {p.tensor_parallel} GPUs holds 1/{p.tensor_parallel} of the experts and every other weight, "
            "attention data-parallel (each GPU its own requests' KV cache); DeepEP needs its kernels installed"
        )
    ]


# vLLM's FP8 KV cache on its platform plugins: Gaudi's accepts only "fp8_inc" (vllm-project/vllm-gaudi
# vllm_gaudi/platform.py is_kv_cache_dtype_supported, snapshot 2026-08-21); elsewhere "fp8"
VLLM_FP8_KV = {"intel": "fp8_inc"}
# AWS Neuron: the 2026 vLLM Neuron plugin (Trn2 / Trn3) reads FP8 from the checkpoint and refuses --quantization; on
# Trn1 / Inf2 the NxD Inference backend takes FP8 weights and an FP8 KV cache from override_neuron_config, not from
# vLLM's flags (aws-neuron-sdk vllm-neuron features guide, 2026-06; NxD Inference feature guide and vLLM user guide)
NXD_NEURON_PARTS = frozenset({"trainium", "inferentia2"})
NEURON_FP8_NOTE = (
    "Neuron: FP8 comes from the checkpoint, not --quantization: a ModelOpt static FP8 checkpoint of the model (Llama 3 "
    "is documented), its KV-cache scales read with --kv-cache-dtype fp8"
)
NXD_FP8_NOTE = (
    "Neuron (Trn1 / Inf2, NxD Inference): FP8 is set in override_neuron_config, not with vLLM's flags: quantized true, "
    "quantization_dtype f8e4m3 (and XLA_HANDLE_SPECIAL_SCALAR=1) for the weights, kv_cache_quant true for the KV cache"
)


# vLLM's hardware plugins register AWQ and GPTQ under their own names (data/format_kernels.csv's sources:
# tpu-inference's platform lists auto_awq, vllm-gaudi's awq_hpu and gptq_hpu): vLLM reads the method from the
# checkpoint's quantization_config, so the command leaves --quantization out there
PLUGIN_QUANT_NAMES = {
    "google": "4-bit on TPU: tpu-inference runs the AWQ checkpoint's quantization_config as its auto_awq method (no --quantization flag)",
    "intel": "4-bit on Gaudi: vllm-gaudi runs the checkpoint's quantization_config as awq_hpu / gptq_hpu (no --quantization flag)",
}


def _vllm(p: _Facts) -> list[str]:
    if p.expert_parallel:
        # EP size = TP x DP (vLLM's Expert Parallel Deployment): attention data-parallel over the replica's GPUs
        ep, dp, eplb, a2a = _ep(p)
        layout: list[tuple[str, Any] | str] = [("--tensor-parallel-size", 1), (dp, p.tensor_parallel), ep, eplb, *a2a]
    else:
        layout = [("--tensor-parallel-size", p.tensor_parallel)]
    neuron_nxd = p.vendor == "aws" and p.accelerator is not None and p.accelerator.id in NXD_NEURON_PARTS
    # vLLM's INT8 cache keeps a scale per token and head, in its Triton attention kernels (data/kv_cache_kernels.csv)
    kv = "auto" if neuron_nxd else {"fp8": VLLM_FP8_KV.get(p.vendor, "fp8"), "int8": "int8_per_token_head"}.get(p.kv_cache_format, "auto")
    args: list[tuple[str, Any] | str] = [
        *layout,
        *_stages(p, "--pipeline-parallel-size"),
        (RUNNING_LIMIT_FLAG["vllm"], p.running_limit),
        *_step_budget(p, "--max-num-batched-tokens"),
        ("--max-model-len", p.seq_len),
        ("--gpu-memory-utilization", p.gpu_memory_fraction),
        ("--kv-cache-dtype", kv),
    ]
    notes = []
    weights = _weights_flag(p)
    if p.weights_format in ("awq-4bit", "gptq-4bit"):
        # vLLM reads the method from the checkpoint's quantization_config and upgrades it to its Marlin kernels where
        # the GPU runs them; an explicit --quantization awq / gptq is taken literally ("you specified quantization=awq
        # explicitly, so forcing awq. Use quantization=awq_marlin for faster inference": vllm/config, _verify_quantization),
        # the slow kernel the plan's speed does not assume
        weights = [w for w in weights if w[0] != "--quantization"]
    if p.vendor == "aws" and "fp8" in (p.weights_format, p.kv_cache_format):
        weights = [w for w in weights if w[0] != "--quantization"]
        notes.append(_comment(NXD_FP8_NOTE if neuron_nxd else NEURON_FP8_NOTE))
    elif p.vendor in PLUGIN_QUANT_NAMES and p.weights_format in ("awq-4bit", "gptq-4bit"):
        # the plugins name their 4-bit methods their own way: the checkpoint's quantization_config picks them
        weights = [w for w in weights if w[0] != "--quantization"]
        notes.append(_comment(PLUGIN_QUANT_NAMES[p.vendor]))
    args += weights
    return [*(_ep_comment(p) if p.expert_parallel else []), *notes, _command(["vllm", "serve", _q(p.model)], args)]


def _sglang(p: _Facts) -> list[str]:
    args: list[tuple[str, Any] | str] = [
        ("--model-path", p.model),
        ("--tp", p.tensor_parallel),
        *_stages(p, "--pp-size"),
        (RUNNING_LIMIT_FLAG["sglang"], p.max_num_seqs or p.micro_batch),
        *_step_budget(p, "--chunked-prefill-size"),
        ("--context-length", p.seq_len),
        ("--mem-fraction-static", p.gpu_memory_fraction),
        ("--kv-cache-dtype", "fp8_e4m3" if p.kv_cache_format == "fp8" else "auto"),
    ]
    args += _weights_flag(p)
    if not p.expert_parallel:
        return [_command(["python", "-m", "sglang.launch_server"], args)]
    # --tp stays the replica's GPUs; attention data-parallel over all of them (--dp), experts over all of them
    ep, dp_attention, eplb, a2a = _ep(p)
    args += [(ep, p.tensor_parallel), dp_attention, ("--dp", p.tensor_parallel), eplb, *a2a]
    return [*_ep_comment(p), _command(["python", "-m", "sglang.launch_server"], args)]


def _trtllm(p: _Facts) -> list[str]:
    out = []
    if p.weights_format in ("fp8", "awq-4bit", "gptq-4bit"):
        out.append(_comment(f"{p.weights_format} weights: serve a checkpoint quantized to it (NVIDIA TensorRT Model Optimizer)"))
    args: list[tuple[str, Any] | str] = [
        ("--backend", "pytorch"),
        ("--tp_size", p.tensor_parallel),
        *_stages(p, "--pp_size"),
        (RUNNING_LIMIT_FLAG["tensorrt-llm"], p.running_limit),
        *_trtllm_step_budget(p, out),
        ("--max_seq_len", p.seq_len),
        ("--kv_cache_free_gpu_memory_fraction", GPU_MEMORY_FRACTION),
    ]
    options: dict[str, Any] = {}
    if p.kv_cache_format == "fp8":
        options["kv_cache_config"] = {"dtype": "fp8"}
    if p.weights_format == "mxfp4" and p.accelerator is not None and p.accelerator.kernel_target == "sm_90":  # Hopper
        # gpt-oss on Hopper: BF16 activations x MXFP4 weights in the Triton MoE kernels, the published runs' backend
        # (TensorRT-LLM's gpt-oss README: "use the TRITON moe_backend on Hopper"); CUTLASS is the default
        options["moe_config"] = {"backend": "TRITON"}
    if p.expert_parallel:
        ep, dp_attention, _, _ = _ep(p)
        options |= {ep: p.tensor_parallel, dp_attention: True}
        out += [*_ep_comment(p), _comment("the expert load balancer (moe_config.load_balancer) takes a config of its own: TensorRT-LLM's wide-EP examples")]
    if options:
        out.append(_file("extra_llm_api_options.yaml", _yaml(options)))
        args.append(("--extra_llm_api_options", "extra_llm_api_options.yaml"))
    out.append(_command(["trtllm-serve", _q(p.model)], args))
    return out


def _trtllm_step_budget(p: _Facts, out: list[str]) -> list[tuple[str, Any] | str]:
    """--max_num_tokens: the scenario's budget, else raised to the longest sequence where that is past the default.
    With chunked prefill off (the default the latency under load assumes: core/speed/load.py) TensorRT-LLM refuses a
    prompt longer than max_num_tokens ("The sum of prompt length (9351.0), query length (0) should not exceed
    max_num_tokens (8192)": NVIDIA/TensorRT-LLM issue #9277), where the load model runs it as one step of its own."""
    default = ENGINES["tensorrt-llm"].prefill_chunk_tokens or 0
    if p.max_num_batched_tokens:
        if p.max_num_batched_tokens < p.seq_len:
            out.append(_comment(f"prompts longer than --max_num_tokens {p.max_num_batched_tokens:,} are refused unless chunked prefill is on (enable_chunked_prefill)"))
        return [("--max_num_tokens", p.max_num_batched_tokens)]
    if p.seq_len > default:
        raised = f"--max_num_tokens raised from its default {default:,} to the {p.seq_len:,}-token sequence"
        out.append(_comment(raised + ": without chunked prefill a longer prompt is refused"))
        return [("--max_num_tokens", p.seq_len)]
    return []


def _llama_cpp(p: _Facts) -> list[str]:
    quant = p.weights_format.removeprefix("gguf-").upper() if p.weights_format.startswith("gguf-") else _GGUF_TYPE.get(p.weights_format, "F16")
    gguf = f"model-{quant}.gguf"
    if quant == "MXFP4":  # convert_hf_to_gguf.py writes gpt-oss's experts in MXFP4 itself; llama-quantize would re-quantize them
        out = [_comment(f"a GGUF file of {p.model} with its experts in MXFP4 (a published GGUF, or convert_hf_to_gguf.py alone)")]
    else:
        out = [_comment(f"a GGUF file of {p.model} at {quant} (a published GGUF, or convert_hf_to_gguf.py then llama-quantize)")]
    slots = f"{p.micro_batch} slot{'s' if p.micro_batch != 1 else ''}"
    out.append(_comment(f"-np {slots} share{'s' if p.micro_batch == 1 else ''} one -c context: {p.micro_batch} x {p.seq_len:,} tokens"))
    args: list[tuple[str, Any] | str] = [
        ("-m", gguf),
        ("-c", p.micro_batch * p.seq_len),
        (RUNNING_LIMIT_FLAG["llama.cpp"], p.micro_batch),
        ("-ngl", ALL_LAYERS_ON_GPU if p.gpu_layers is None else p.gpu_layers),
    ]
    if p.kv_cache_format in ("q8_0", "q4_0"):  # a quantized V cache needs flash attention (llama.cpp refuses it without)
        args += [("--cache-type-k", p.kv_cache_format), ("--cache-type-v", p.kv_cache_format), ("-fa", "on")]
    # a layer split (its default, how the planner splits a replica: stages one after another) or, for a tensor-parallel
    # scenario, a row split (each matrix over the GPUs); one --tensor-split entry per GPU, evenly
    split = "row" if p.tensor_parallel > 1 else "layer"
    if (gpus := p.tensor_parallel * p.pipeline_parallel) > 1:
        args += [("--split-mode", split), ("--tensor-split", ",".join(["1"] * gpus))]
    out.append(_command(["llama-server"], args))
    return out


def _transformers_serve(p: _Facts) -> list[str]:
    out = [
        _comment(
            f"transformers serve loads {p.weights_format} weights as the checkpoint stores them and places them over the "
            f"{p.tensor_parallel} visible GPU(s); it has no batch-size flag (continuous batching schedules up to the "
            f"plan's {p.micro_batch} sequences as memory allows)"
        )
    ]
    if p.engine == "hf-transformers-compiled":
        out.append(_comment("the plan's speed assumes torch.compile with CUDA graphs (a generation_config with compile settings)"))
    args: list[tuple[str, Any] | str] = [("--force-model", p.model), ("--port", 8000), "--continuous-batching"]
    out.append(_command(["transformers", "serve"], args))
    return out


def _mii(p: _Facts) -> list[str]:
    call = (
        f"import mii; mii.serve({json.dumps(p.model)}, tensor_parallel={p.tensor_parallel}, "
        f"replica_num={p.data_parallel}, max_length={p.seq_len}, enable_restful_api=True, "
        f"restful_api_port={MII_RESTFUL_PORT})"
    )
    return [
        _comment(f"MII runs the {p.data_parallel} replica(s) itself behind its load balancer"),
        _command(["python", "-c", shlex.quote(call)], []),
    ]


_MLX_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _mlx_convert(p: _Facts, bits: int | None) -> list[str]:
    """mlx_lm.convert: the checkpoint in MLX's layout, quantized to `bits` (group 64) or in the plan's 16-bit dtype."""
    args: list[tuple[str, Any] | str] = [("--hf-path", p.model), ("--mlx-path", "mlx_model")]
    if bits is not None:
        args += ["-q", ("--q-bits", bits), ("--q-group-size", 64)]
    else:
        args.append(("--dtype", _MLX_DTYPE.get(p.weights_format if p.serving else p.precision.removesuffix("-true"), "bfloat16")))
    return [_command(["mlx_lm.convert"], args)]


def _mlx_bits(weights_format: str) -> int | None:
    return int(weights_format.removeprefix("mlx-q")) if weights_format.startswith("mlx-q") else None


# mlx-lm's quantized KV cache (--kv-bits, group 64): the same bytes as llama.cpp's Q8_0 / Q4_0 blocks (core/model/formats.py)
MLX_KV_BITS = {"q8_0": 8, "q4_0": 4}


def _mlx_serve(p: _Facts) -> list[str]:
    load = _comment(f"the plan's {p.micro_batch} concurrent sequence(s) of {p.seq_len:,} tokens are a load for the server; no flag sets them")
    if p.weights_format == "mxfp4":  # mlx_lm/models/gpt_oss.py loads the shipped MXFP4 experts as MLX quantized weights
        out = [_comment("mlx-lm loads the checkpoint's MXFP4 experts as they ship: no conversion"), load]
        return [*out, _command(["mlx_lm.server"], [("--model", p.model), ("--port", MLX_SERVER_PORT)])]
    out = [_comment("mlx_lm.convert writes the model in MLX's layout (a published mlx-community repo of it can be served directly)"), load]
    out += _mlx_convert(p, _mlx_bits(p.weights_format))
    args: list[tuple[str, Any] | str] = [("--model", "mlx_model"), ("--port", MLX_SERVER_PORT)]
    if p.kv_cache_format in MLX_KV_BITS:  # every token's K and V quantized, as the memory counts them (not after 5,000)
        out.append(_comment("a quantized KV cache is not batched in mlx-lm: the server runs its requests one at a time"))
        args += [("--kv-bits", MLX_KV_BITS[p.kv_cache_format]), ("--kv-group-size", 64), ("--quantized-kv-start", 0)]
    out.append(_command(["mlx_lm.server"], args))
    return out
