"""The sidebar's inputs (the model, the workload, sharding and parallelism, the training run, the display), rows of
the one table of inputs (app_pages/shared/fields.py), in the order the sidebar draws them."""

from __future__ import annotations

from app_pages.shared.field import CUSTOM_ACC, Field, custom_hardware, inference, llama_cpp, training
from core.catalog.accelerators import load_accelerators
from core.catalog.engine_formats import kv_format_name, load_engine_formats
from core.catalog.presets import load_presets
from core.memory.engines import ENGINES
from core.memory.objective import OBJECTIVE_LABELS
from core.memory.stacks import FUSED_CROSS_ENTROPY_STACKS, STACKS
from core.model.formats import FORMATS

SEQ_OPTIONS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
BATCH_OPTIONS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
RANK_OPTIONS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# The stacks that train QLoRA on another base than their own (a GPTQ checkpoint), and those bases.
QLORA_BASE_STACKS = frozenset(k for k, s in STACKS.items() if s.qlora_other_bases)
QLORA_OTHER_BASES = tuple(sorted({b for s in STACKS.values() for b in s.qlora_other_bases}))


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


def preset_labels() -> dict[str, str]:
    """ "Family · Name (size, dense | MoE k-of-E experts)", in family then size order (the picker searches as you type)."""
    rows = []
    for p in load_presets().values():
        a = p.architecture
        size = f"{a.total_params / 1e9:,.3g}B"
        kind = f"MoE {a.experts_per_token}-of-{a.num_experts} experts, {a.active_params / 1e9:,.3g}B active" if a.is_moe else "dense"
        name = p.name if p.name.lower().startswith(p.family.lower()) else f"{p.family} · {p.name}"
        rows.append((p.family.lower(), a.total_params, p.id, f"{name} ({size}, {kind})"))
    return {pid: label for _, _, pid, label in sorted(rows)}


def accelerator_labels() -> dict[str, str]:
    return {**{a.id: f"{a.name} ({a.memory_gib:g} GB)" for a in load_accelerators()}, CUSTOM_ACC: "Any hardware I own (type its memory and speed)"}


def sidebar_fields(presets: dict[str, str], accs: dict[str, str]) -> list[Field]:
    """The sidebar's rows: `presets` and `accs` the model and accelerator pickers' labels."""
    return [
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
        Field(
            "batch",
            "Batch (per device) / concurrent sequences",
            "int",
            1,
            BATCH_OPTIONS,
            lo=1,
            hi=4096,  # the scenario's bound (core/scenario.py batch_size)
            widget="slider",
            section="workload",
            scenario="batch_size",
            # a serving plan's batch is what meets its targets (11, say): a slider of powers of two showed it as 8
            help="Slide between powers of two; a link or a loaded plan can set any batch (a serving plan's 11 concurrent requests)",
        ),
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
            labels={"full": "Full (all weights)", "lora": "LoRA", "qlora": "QLoRA (4-bit base)"},  # "Full fine-tune" read wrong on a pretraining preset
        ),
        Field(
            "obj",
            "Objective",
            "choice",
            "sft",
            tuple(OBJECTIVE_LABELS),
            section="workload",
            scenario="objective",
            applies=training,
            labels=OBJECTIVE_LABELS,
            help="SFT trains on example answers (next-token loss). DPO (Rafailov et al. 2023) trains on preference pairs: each example is a "
            "prompt with a chosen and a rejected answer, so a batch of N pairs runs 2N sequences, and the loss compares the model with a "
            "frozen reference: a second copy of the weights for a full fine-tune (LoRA's reference is the base with the adapters off) and "
            "one more forward pass a step (about 4/3 of SFT's compute per token). Trainers: Hugging Face TRL, Unsloth, Axolotl, torchtune",
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
            help="Mixed keeps fp32 weights or a master copy for the update; 'true' trains in the 16-bit type, optimizer states too (LitGPT bf16-true). "
            "BF16 and FP16 take 2 bytes a number alike: BF16 keeps FP32's 8 exponent bits (its range, to about 3e38) with 7 bits of "
            "precision, FP16 has 5 exponent bits (largest 65,504) and 10 of precision, so FP16 training scales the loss to keep small "
            "gradients from rounding to zero. BF16 needs Ampere (A100, RTX 30) or newer; a V100 or T4 trains in FP16.",
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
            applies=lambda v: training(v) and v.get("stack", "hf") in FUSED_CROSS_ENTROPY_STACKS and v.get("obj", "sft") == "sft",
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
            labels={0: "0: none", 1: "1: shard optimizer states", 2: "2: + gradients", 3: "3: + weights (FSDP full shard)"},
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
            lo_set=0.1,  # the Scenario's bound (core/scenario.py mfu ge=0.001), in the field's percent
            applies=training,
            help="Model FLOPs utilisation: the share of the devices' peak FLOP/s a run turns into the model's own arithmetic "
            "(published large runs: 35-55%). 0 keeps the setup's own figure, which the Training page explains.",
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
    ]
