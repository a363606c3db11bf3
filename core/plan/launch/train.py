"""The training stacks' launch text and config files: Hugging Face / Accelerate, Axolotl, Unsloth, torchtune, LitGPT,
DeepSpeed, Megatron and mlx-lm (flags and keys from data/launch_flags.csv)."""

from __future__ import annotations

import json
from typing import Any

from core.catalog.stack_layouts import FSDP_OFFLOAD_STACKS, objective_problem, offload_optimizer_problem, offload_problem, part_problem
from core.plan.launch.facts import (
    ATTENTION_MODULES,
    AXOLOTL_DS_CONFIG,
    MASTER_PORT,
    MLP_MODULES,
    MLX_LORA_SCALE,
    SGD_MOMENTUM,
    _command,
    _comment,
    _Facts,
    _file,
    _header,
    _q,
    _yaml,
)
from core.plan.launch.serve import _mlx_convert

# --- mlx-lm LoRA ----------------------------------------------------------------------------------------------------


def _mlx_lora(p: _Facts) -> list[str]:
    qlora = p.method == "qlora"
    out = [
        _comment("./data holds train.jsonl and valid.jsonl (mlx_lm.lora --train reads both)"),
        _comment("--iters: the optimizer steps to run (1,000 by default): your examples / (batch x accumulation) per epoch"),
    ]
    if qlora:
        out.append(_comment("QLoRA in MLX: LoRA on an MLX 4-bit (group 64) copy of the model"))
    out += _mlx_convert(p, 4 if qlora else None)
    args: list[tuple[str, Any] | str] = [
        ("--model", "mlx_model"),
        "--train",
        ("--data", "./data"),
        ("--fine-tune-type", "full" if p.method == "full" else "lora"),
        ("--batch-size", p.micro_batch),
        ("--grad-accumulation-steps", p.accumulation),
        ("--max-seq-length", p.seq_len),
        ("--num-layers", -1),
        ("--adapter-path", "adapters"),
    ]
    if p.gradient_checkpointing:
        args.append("--grad-checkpoint")
    config: dict[str, Any] = {}
    if p.method != "full":
        keys = [f"self_attn.{m}" for m in ATTENTION_MODULES] + ([f"mlp.{m}" for m in MLP_MODULES] if p.lora_all_linear else [])
        config["lora_parameters"] = {"rank": p.lora_rank, "scale": MLX_LORA_SCALE, "dropout": 0.0, "keys": keys}
    if not p.optimizer_problem:  # mlx_lm/lora.py --optimizer (adam by default); SGD's momentum (MLX's default 0) in the config
        args.append(("--optimizer", p.optimizer))
        if p.optimizer == "sgd":
            config["optimizer_config"] = {"sgd": {"momentum": SGD_MOMENTUM}}
    if config:
        out.append(_file("lora_config.yaml", _yaml(config)))
        args.append(("--config", "lora_config.yaml"))
    out.append(_command(["mlx_lm.lora"], args))
    return out


# --- training --------------------------------------------------------------------------------------------------------

_MIXED = {"bf16": "bf16", "fp16": "fp16", "bf16-true": "bf16", "fp16-true": "fp16", "fp32": "no"}
_LITGPT_PRECISION = {"bf16": "bf16-mixed", "bf16-true": "bf16-true", "fp16": "16-mixed", "fp16-true": "16-true", "fp32": "32-true"}
_TORCHTUNE_DTYPE = {"bf16": "bf16", "bf16-true": "bf16", "fp32": "fp32"}  # torchtune trains in bf16 or fp32


def _training(p: _Facts) -> str:
    full = {"pretrain": "Pretraining", "fine-tune": "Full fine-tune"}.get(p.goal or "", "Full fine-tune" if p.dpo else "Full training")
    what = {"full": full, "lora": "LoRA fine-tune", "qlora": "QLoRA fine-tune"}.get(p.method, p.method)
    if p.dpo:
        what += " by preference tuning (DPO)"
    lines = _header(p, f"{what} with {p.stack}")
    if p.dpo and (problem := objective_problem(p.stack, "dpo", p.method)) is not None:  # no command that would not run
        return "\n".join([*lines, _comment(f"no launch command: {problem}")])
    plural = "s" if p.global_batch != 1 else ""
    examples = f"pair{plural}, a chosen and a rejected sequence of {p.seq_len:,} tokens each" if p.dpo else f"sequence{plural} of {p.seq_len:,} tokens"
    lines.append(
        _comment(
            f"layout: data parallel {p.data_parallel} x tensor parallel {p.tensor_parallel} x pipeline parallel "
            f"{p.pipeline_parallel}, ZeRO stage {p.zero_stage}; micro-batch {p.micro_batch}, gradient accumulation "
            f"{p.accumulation} (global batch {p.global_batch} {examples}); precision {p.precision}"
        )
    )
    if p.multi_node:
        lines.append(
            _comment(f"{p.instances} nodes of {p.per_instance} devices: run on every node with NODE_RANK=0..{p.instances - 1} and MAIN_IP set to node 0's address")
        )
    if p.vendor in ("google", "aws", "intel") and p.stack != "hf-xla":
        lines.append(
            _comment(f"{p.accelerator_name}: run the stack through its port for this part (PyTorch/XLA, Optimum Neuron or Optimum Habana); the layout is the same")
        )
    if p.dpo:
        lines.append(_comment("data/train.jsonl: your preference pairs, one per line: prompt, chosen and rejected"))
    else:
        lines.append(_comment("data/train.jsonl: your dataset, one example per line"))
    if _pretrains(p) and p.stack not in ("hf", "hf-xla"):  # TRL's stacks write the initialisation themselves (_from_config)
        lines.append(_comment("pretraining from scratch: start from the model's config (random weights) rather than its checkpoint"))
    elif p.method == "full" and p.goal is None and not p.dpo:  # a bare scenario does not say which (DPO tunes a trained model)
        lines.append(_comment("a fine-tune starts from the checkpoint below; to pretrain, start from the model's config (random weights)"))
    body = {
        "hf": _hf,
        "torchtune": _torchtune,
        "unsloth": _unsloth,
        "litgpt": _litgpt,
        "deepspeed": _deepspeed,
        "megatron": _megatron,
        "mlx-lm": _mlx_lora,
        "hf-xla": _hf_xla,
        "axolotl": _axolotl,
    }.get(p.stack)
    if body is None:
        return "\n".join([*lines, _comment(f"no launch command for training stack {p.stack!r}")])
    if p.optimizer_problem:
        lines.append(_comment(f"{p.stack} cannot run this optimizer: {p.optimizer_problem}; no optimizer is set below"))
    if problem := offload_problem(p.stack, p.offload):
        lines.append(_comment(f"{problem}: the command below keeps them on the device, more memory than the scenario counts"))
    elif p.offload == "optimizer" and p.zero_stage == 3 and p.stack in FSDP_OFFLOAD_STACKS:
        lines.append(_comment("FSDP's CPU offload moves the parameters with the optimizer states: less device memory than the scenario counts, slower steps"))
    if problem := offload_optimizer_problem(p.stack, p.zero_stage, p.offload, p.optimizer):
        lines.append(_comment(f"{problem}: the run steps with AdamW, whose states the scenario does not count"))
    return "\n".join([*lines, *body(p)])


def _node_args(p: _Facts) -> list[tuple[str, Any] | str]:
    """accelerate launch's multi-node flags (NODE_RANK and MAIN_IP are the user's environment variables)."""
    if not p.multi_node:
        return []
    return ['--machine_rank "$NODE_RANK"', '--main_process_ip "$MAIN_IP"', ("--main_process_port", MASTER_PORT)]


def _accelerate_config(p: _Facts) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "num_machines": p.instances,
        "num_processes": p.processes,
        "mixed_precision": _MIXED.get(p.precision, "no"),
    }
    if p.processes == 1 and p.zero_stage == 0:  # ZeRO on one GPU still runs its engine (16-bit adapters, offload), as counted
        cfg["distributed_type"] = "NO"
    elif p.zero_stage == 3 or _tp_with_data_parallel(p):
        cfg["distributed_type"] = "FSDP"
        cfg["fsdp_config"] = {
            "fsdp_version": 2,
            "fsdp_reshard_after_forward": True,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_activation_checkpointing": p.gradient_checkpointing,
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        }
        if p.offload != "none":  # FSDP's CPUOffload: parameters, gradients and optimizer states (Accelerate fsdp_offload_params)
            cfg["fsdp_config"]["fsdp_offload_params"] = True
    elif p.zero_stage in (1, 2):
        cfg["distributed_type"] = "DEEPSPEED"
        cfg["deepspeed_config"] = {"zero_stage": p.zero_stage, "gradient_accumulation_steps": p.accumulation}
        if p.offload != "none":  # ZeRO-Offload of the optimizer states (Accelerate deepspeed_config offload_optimizer_device)
            cfg["deepspeed_config"]["offload_optimizer_device"] = "cpu"
    else:
        cfg["distributed_type"] = "MULTI_GPU"
    if p.tensor_parallel > 1:
        cfg["parallelism_config"] = {"parallelism_config_tp_size": p.tensor_parallel, "parallelism_config_dp_shard_size": p.data_parallel}
    return cfg


def _tp_with_data_parallel(p: _Facts) -> bool:
    """Accelerate composes tensor parallelism with sharded data parallelism only (ParallelismConfig: DDP + TP is not
    supported), so a plan's replicated ranks beside TP shard with FSDP2 instead."""
    return p.tensor_parallel > 1 and p.data_parallel > 1


# Where a pretraining run's randomly initialised model is saved for TRL to load (_from_config)
INIT_DIR = "./init"


def _pretrains(p: _Facts) -> bool:
    return p.method == "full" and p.goal == "pretrain"


def _from_config(p: _Facts) -> list[str]:
    """A pretraining run under TRL (which loads a checkpoint: `--model_name_or_path`): a script that builds the model
    from its config with random weights (transformers' AutoModelForCausalLM.from_config) and saves it with the
    tokenizer to INIT_DIR for TRL to load. Seeded, so every node writes the same weights."""
    if not _pretrains(p):
        return []
    script = [
        "import torch",
        "from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer",
        "",
        "torch.manual_seed(0)  # the same initial weights on every node",
        f"config = AutoConfig.from_pretrained({json.dumps(p.model)})",
        "AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).save_pretrained(" + json.dumps(INIT_DIR) + ")",
        f"AutoTokenizer.from_pretrained({json.dumps(p.model)}).save_pretrained(" + json.dumps(INIT_DIR) + ")",
    ]
    return [
        _comment(f"random initial weights from the model's config (its checkpoint is not loaded), saved to {INIT_DIR}"),
        _file("init_model.py", "\n".join(script)),
        "python init_model.py",
    ]


def _sft_args(p: _Facts) -> list[tuple[str, Any] | str]:
    """TRL's `trl sft` flags for the model, the data and the batch (the Hugging Face stacks on GPU and on TPU); a
    pretraining run loads the randomly initialised model _from_config saved."""
    return [
        ("--model_name_or_path", INIT_DIR if _pretrains(p) else p.model),
        ("--dataset_name", "./data"),
        ("--per_device_train_batch_size", p.micro_batch),
        ("--gradient_accumulation_steps", p.accumulation),
        ("--max_length", p.seq_len),
        *([] if p.dpo else ["--packing"]),  # DPO's pairs are not packed (TRL's DPOConfig has no packing)
        ("--dtype", _load_dtype(p)),
    ]


def _load_dtype(p: _Facts) -> str:
    """The dtype the Trainer loads the model in. A full fine-tune in mixed precision loads fp32 weights and autocasts
    (the plan counts fp32 parameters: core/memory/components.py); loading them in bf16 would train in bf16 (true).
    LoRA's frozen base loads in the 16-bit type whatever the precision (PEFT keeps the adapters fp32)."""
    if p.method == "full" and p.precision in ("bf16", "fp16"):
        return "float32"
    return "bfloat16" if "bf16" in p.precision else "float16" if "fp16" in p.precision else "float32"


def _transformers_optim(p: _Facts, sharded: bool) -> tuple[str, str | None] | None:
    """Transformers' `optim` name for the scenario's optimizer (TrainingArguments: TRL's flag, Unsloth's SFTConfig,
    Axolotl's `optimizer`) and its `optim_args`, or None where the stack cannot run it. Names from
    huggingface/transformers@0a14d8d src/transformers/trainer_optimizer.py: adamw_torch (torch.optim.AdamW),
    adamw_bnb_8bit (bitsandbytes' block-wise AdamW8bit), sgd (torch.optim.SGD, whose momentum is 0 unless optim_args
    sets it: _get_sgd passes them on), adafactor (Transformers' Adafactor, no first moment). Under FSDP2 or tensor
    parallelism 8-bit AdamW is torchao's adamw_torch_8bit (the same 8-bit block-wise states, block 256): bitsandbytes'
    fails there (Axolotl's validation: "FSDP2 not compatible with adamw_bnb_8bit, use adamw_torch_8bit instead", and
    tensor_parallel_size refused with it)."""
    if p.optimizer_problem:
        return None
    if p.optimizer == "adamw-8bit":
        return ("adamw_torch_8bit" if sharded else "adamw_bnb_8bit"), None
    if p.optimizer == "sgd":
        return "sgd", f"momentum={SGD_MOMENTUM}"
    return ("adafactor" if p.optimizer == "adafactor" else "adamw_torch"), None


def _torchao_note(optim: tuple[str, str | None] | None) -> list[str]:
    if optim is None or optim[0] != "adamw_torch_8bit":
        return []
    return [_comment("8-bit AdamW under FSDP2 or tensor parallelism: torchao's AdamW8bit (pip install torchao), where bitsandbytes' fails")]


def _optim_args(optim: tuple[str, str | None] | None) -> list[tuple[str, Any] | str]:
    """TRL's --optim (and --optim_args) flags."""
    if optim is None:
        return []
    return [("--optim", optim[0]), *([("--optim_args", optim[1])] if optim[1] else [])]


def _peft_args(p: _Facts) -> list[tuple[str, Any] | str]:
    """TRL's LoRA flags (ModelConfig): the scenario's rank, alpha twice it, and its targets (PEFT's all-linear, or the
    attention's four projections)."""
    targets = "all-linear" if p.lora_all_linear else " ".join(p.lora_modules)
    return ["--use_peft", ("--lora_r", p.lora_rank), ("--lora_alpha", 2 * p.lora_rank), ("--lora_target_modules", targets)]


def _hf(p: _Facts) -> list[str]:
    args: list[tuple[str, Any] | str] = [
        ("--accelerate_config", "accelerate_config.yaml"),
        ("--num_processes", p.processes),
        ("--num_machines", p.instances),
        *_node_args(p),
        *_sft_args(p),
    ]
    mixed = _MIXED.get(p.precision, "no")
    if mixed != "no":
        args.append(f"--{mixed}")
    config = _accelerate_config(p)
    optim = _transformers_optim(p, config["distributed_type"] == "FSDP" or p.tensor_parallel > 1)
    args += _optim_args(optim)
    if p.gradient_checkpointing and config["distributed_type"] != "FSDP":  # under FSDP: fsdp_activation_checkpointing
        args.append("--gradient_checkpointing")
    if p.method in ("lora", "qlora"):
        args += _peft_args(p)
    if p.method == "qlora" and not p.gptq_base:
        args += ["--load_in_4bit", ("--bnb_4bit_quant_type", "nf4")]
        if p.flash_attention_2:  # prepare_model_for_kbit_training makes q, k, v fp32: FlashAttention-2 casts them back
            args.append(("--attn_implementation", "flash_attention_2"))
    if p.fused_cross_entropy and not p.dpo:
        args.append("--use_liger_kernel")  # Liger Kernel (pip install liger-kernel): its fused linear cross-entropy, norms and SwiGLU
    trainer = "DPO" if p.dpo else "SFT"
    out = [_comment(f"TRL's {trainer} trainer over Accelerate (trl passes the accelerate launch flags on); ./data holds train.jsonl"), *_torchao_note(optim)]
    out += _gptq_note(p) + _upcast_note(p)
    if _tp_with_data_parallel(p):
        out.append(
            _comment(
                f"Accelerate pairs tensor parallelism with sharded data parallelism only: the {p.data_parallel} data-parallel "
                "ranks shard with FSDP2 (more memory headroom than the plan's replicas, a little more communication)"
            )
        )
    out.append(_file("accelerate_config.yaml", _yaml(config)))
    out += _from_config(p)
    out.append(_command(["trl", "dpo" if p.dpo else "sft"], args))
    return out


def _upcast_note(p: _Facts) -> list[str]:
    """TRL's QLoRA calls prepare_model_for_kbit_training, whose fp32 norms make attention fp32 (core/memory/components.
    fp32_attention): FlashAttention-2 takes it back to 16-bit; without it SDPA runs it in fp32, which the numbers count."""
    if p.method != "qlora" or p.gptq_base:
        return []
    if p.flash_attention_2:
        return [_comment("FlashAttention-2 (pip install flash-attn --no-build-isolation) keeps attention 16-bit under QLoRA's fp32 upcast")]
    return [_comment("QLoRA's fp32 upcast runs attention in fp32 on SDPA (no FlashAttention-2 here): the time and memory counted")]


def _gptq_note(p: _Facts) -> list[str]:
    """QLoRA on a GPTQ base loads a published GPTQ checkpoint (its config.json's quantization_config), not the 16-bit one."""
    if not p.gptq_base:
        return []
    return [
        _comment(
            "LoRA on a GPTQ 4-bit checkpoint (pip install gptqmodel optimum; no bitsandbytes): PEFT trains the adapters on it. "
            "Its time is counted for auto-gptq's unfused dequantization, an upper bound for GPTQModel's compiled one"
        )
    ]


def _axolotl_config(p: _Facts) -> dict[str, Any]:
    """Axolotl's YAML config for the plan (key names from axolotl-ai-cloud/axolotl@067b021
    src/axolotl/utils/schemas/config.py and its docs/multi-gpu.qmd, nd_parallelism.qmd)."""
    cfg: dict[str, Any] = {"base_model": p.model}
    if p.fused_cross_entropy and p.precision != "fp32":  # Cut Cross-Entropy (integrations/cut_cross_entropy: 16-bit only)
        cfg["plugins"] = ["axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"]
    if p.gptq_base:  # LoRA on a GPTQ checkpoint (examples/llama-2/gptq-lora.yml; adapter qlora refuses gptq)
        cfg |= {"gptq": True, "gptq_disable_exllama": True}
    elif p.method == "qlora":
        cfg["load_in_4bit"] = True
    if p.method in ("lora", "qlora"):
        adapter = "lora" if p.gptq_base else p.method
        cfg |= {"adapter": adapter, "lora_r": p.lora_rank, "lora_alpha": 2 * p.lora_rank}
        cfg |= {"lora_target_linear": True} if p.lora_all_linear else {"lora_target_modules": list(p.lora_modules)}
    if p.dpo:  # docs/rlhf.qmd: rl: dpo; prompt_strategies/dpo/chatml.py prompt_pairs reads prompt, chosen, rejected
        cfg["rl"] = "dpo"
    cfg |= {
        "datasets": [{"path": "data/train.jsonl", "ds_type": "json", "type": "chatml.prompt_pairs" if p.dpo else "alpaca"}],
        "output_dir": "./outputs",
        "sequence_len": p.seq_len,
        "micro_batch_size": p.micro_batch,
        "gradient_accumulation_steps": p.accumulation,
        "num_epochs": 1,
    }
    cfg["bf16"] = "bf16" in p.precision  # explicit: Axolotl's default "auto" turns bf16 on wherever the part has it
    if "fp16" in p.precision:
        cfg["fp16"] = True
    # FlashAttention-2 needs a part that runs it (Accelerator.runs_flash_attention_2) and 16-bit inputs (fp32 runs
    # use SDPA); packing needs it for a full fine-tune (Axolotl's validation: packing without it in fp16 "is likely to
    # raise errors", src/axolotl/utils/schemas/validation.py)
    fa2 = (p.accelerator is None or p.accelerator.runs_flash_attention_2) and p.precision != "fp32"
    cfg["sample_packing"] = (fa2 or p.method != "full") and not p.dpo  # RL trainers take pairs unpacked
    cfg["attn_implementation"] = "flash_attention_2" if fa2 else "sdpa"
    sharded = p.zero_stage == 3 or _tp_with_data_parallel(p)
    cfg["gradient_checkpointing"] = p.gradient_checkpointing and not sharded  # under FSDP2: fsdp_config.activation_checkpointing
    if sharded:  # Axolotl pairs TP with FSDP only (dp_shard_size needs an fsdp_config), as Accelerate does
        cfg["fsdp_version"] = 2
        cfg["fsdp_config"] = {
            "reshard_after_forward": True,
            "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "activation_checkpointing": p.gradient_checkpointing,
            "state_dict_type": "SHARDED_STATE_DICT",
        }
        if p.offload != "none":  # FSDP's CPU offload (src/axolotl/utils/schemas/fsdp.py offload_params)
            cfg["fsdp_config"]["offload_params"] = True
    elif p.zero_stage in (1, 2):
        cfg["deepspeed"] = AXOLOTL_DS_CONFIG
    if p.tensor_parallel > 1:
        cfg["tensor_parallel_size"] = p.tensor_parallel
        cfg["dp_shard_size"] = p.data_parallel
    # Transformers' optimizer names (docs/optimizers.qmd); optim_args as a mapping (core/builders/base.py joins it
    # into TrainingArguments' "momentum=0.9"); torchao's 8-bit AdamW under FSDP2 or TP (validation.py refuses bitsandbytes')
    if (optim := _transformers_optim(p, sharded or p.tensor_parallel > 1)) is not None:
        cfg["optimizer"] = optim[0]
        if optim[1]:
            cfg["optim_args"] = {"momentum": SGD_MOMENTUM}
    return cfg


def _axolotl(p: _Facts) -> list[str]:
    """`axolotl train` on the plan's config: accelerate on one node, torchrun on every node of several
    (docs/cli.qmd: launcher arguments after `--`; docs/multi-node.qmd)."""
    cfg = _axolotl_config(p)
    fmt = "chatml.prompt_pairs: prompt, chosen, rejected" if p.dpo else "alpaca: instruction / input / output"
    out = [_comment(f"Axolotl reads the whole run from its YAML config; set datasets[0].type to your data's format ({fmt})")]
    out += _gptq_note(p)
    if p.accelerator is not None and (problem := part_problem(p.accelerator, p.method, "axolotl")):
        out.append(_comment(f"Axolotl cannot run this: {problem}"))
    if p.fused_cross_entropy and "plugins" not in cfg:
        out.append(_comment("no fused cross-entropy: Cut Cross-Entropy needs 16-bit training"))
    if _tp_with_data_parallel(p):
        out.append(_comment(f"Axolotl pairs tensor parallelism with sharded data parallelism only: the {p.data_parallel} data-parallel ranks shard with FSDP2"))
    if cfg.get("optimizer") == "adamw_torch_8bit":
        out += _torchao_note(("adamw_torch_8bit", None))
    if "deepspeed" in cfg:
        out.append(_file(AXOLOTL_DS_CONFIG, json.dumps(_axolotl_deepspeed_config(p), indent=2)))
    out.append(_file("axolotl_config.yaml", _yaml(cfg)))
    args: list[tuple[str, Any] | str] = []
    if p.multi_node:
        args = [
            ("--launcher", "torchrun"),
            "--",
            ("--nnodes", p.instances),
            ("--nproc_per_node", p.per_instance),
            ("--rdzv_backend", "c10d"),
            f'--rdzv_endpoint "$MAIN_IP:{MASTER_PORT}"',
        ]
    elif p.processes > 1:
        args = [("--launcher", "accelerate"), "--", ("--num_processes", p.processes)]
    out.append(_command(["axolotl", "train", "axolotl_config.yaml"], args))
    return out


def _hf_xla(p: _Facts) -> list[str]:
    """TRL's SFT trainer on PyTorch/XLA: SPMD FSDPv2 over the slice's chips (Transformers' fsdp_config xla_fsdp_v2),
    one process per TPU host."""
    args = _sft_args(p)
    args += _optim_args(_transformers_optim(p, False))  # no 8-bit AdamW on a TPU (data/stack_layouts.csv)
    if "bf16" in p.precision and p.precision != "bf16-true":
        args.append("--bf16")
    if p.zero_stage == 3:
        args += [("--fsdp", "full_shard"), ("--fsdp_config", "fsdp_config.json")]
    elif p.gradient_checkpointing:
        args.append("--gradient_checkpointing")
    if p.method == "lora":
        args += _peft_args(p)
    out = [
        _comment("PyTorch/XLA on the TPU VM: one process per host, SPMD over its chips (run on every host of a multi-host slice)"),
        "export PJRT_DEVICE=TPU XLA_USE_SPMD=1",
    ]
    if p.zero_stage == 3:
        fsdp = {"xla": True, "xla_fsdp_v2": True, "xla_fsdp_grad_ckpt": p.gradient_checkpointing}
        out.append(_file("fsdp_config.json", json.dumps(fsdp, indent=2)))
    out += _from_config(p)
    out.append(_command(["trl", "dpo" if p.dpo else "sft"], args))
    return out


def _torchtune(p: _Facts) -> list[str]:
    distributed = p.processes > 1 or p.offload != "none"  # CPU offload is FSDP's (fsdp_cpu_offload): the distributed recipe, one process too
    kind = "full_finetune" if p.method == "full" else "lora_finetune"
    suffix = {"full": "full", "lora": "lora", "qlora": "qlora"}[p.method if p.method in ("full", "lora", "qlora") else "full"]
    if p.dpo:  # recipes full_dpo_distributed (no single-device one), lora_dpo_single_device, lora_dpo_distributed
        distributed = distributed or p.method == "full"
        kind, suffix = ("full_dpo" if p.method == "full" else "lora_dpo"), f"{suffix}_dpo"
    recipe = f"{kind}_{'distributed' if distributed else 'single_device'}"
    config = f"REPLACE_WITH_CONFIG_{suffix}"
    dataset = (
        "torchtune.datasets.preference_dataset with source json: prompt, chosen and rejected messages"
        if p.dpo
        else "torchtune.datasets.instruct_dataset with source json"
    )
    out = [
        _comment(f"replace {config} with the torchtune config of your model for {suffix} ('tune ls' lists them, e.g. llama3_1/8B_{suffix})"),
        _comment(f"point the config's dataset at data/train.jsonl ({dataset})"),
    ]
    if p.dpo and p.method == "full":
        out.append(_comment("full DPO keeps a frozen reference copy of the model: point ref_checkpointer.checkpoint_dir at ./model too"))
    if p.precision.startswith("fp16"):
        out.append(_comment("torchtune trains in bf16 or fp32 only: this part has no bf16, so the run uses fp32"))
    if distributed and p.zero_stage == 0:
        out.append(_comment("torchtune's distributed recipes shard with FSDP2 (the plan's DDP layout becomes ZeRO-3 sharding)"))
    launcher: list[tuple[str, Any] | str] = []
    if distributed:
        launcher += [("--nnodes", p.instances), ("--nproc_per_node", p.per_instance)]
        if p.multi_node:
            launcher += [("--rdzv_backend", "c10d"), f'--rdzv_endpoint "$MAIN_IP:{MASTER_PORT}"']
    overrides = [
        f"batch_size={p.micro_batch}",
        f"gradient_accumulation_steps={p.accumulation}",
        f"dtype={_TORCHTUNE_DTYPE.get(p.precision, 'fp32')}",
        f"enable_activation_checkpointing={p.gradient_checkpointing}",
        f"tokenizer.max_seq_len={p.seq_len}",
        "checkpointer.checkpoint_dir=./model",
    ]
    if p.method in ("lora", "qlora"):  # the configs' own LoRA is rank 8 on q, v and the output projection, and the MLP
        attention = ["q_proj", "k_proj", "v_proj", "output_proj"]  # torchtune's names of the attention's projections
        overrides += [
            f"model.lora_rank={p.lora_rank}",
            f"model.lora_alpha={2 * p.lora_rank}",
            _q("model.lora_attn_modules=[" + ",".join(attention) + "]"),  # quoted: the shell would glob [...]
            f"model.apply_lora_to_mlp={p.lora_all_linear}",
        ]
    if p.dpo and p.method == "full":
        overrides.append("ref_checkpointer.checkpoint_dir=./model")
    elif p.method == "full":  # the fused step the plan counts at one micro-batch a step (STACKS grads_freed_in_backward)
        overrides.append(f"optimizer_in_bwd={p.accumulation == 1}")
    if p.offload != "none":  # FSDP2's CPU offload: parameters, gradients and optimizer states
        overrides.append("fsdp_cpu_offload=True")
    component = _torchtune_optimizer(p, distributed)
    if component is not None:
        overrides.append(f"optimizer._component_={component}")
        if p.optimizer == "sgd":
            overrides.append(f"optimizer.momentum={SGD_MOMENTUM}")
        if component not in ("torch.optim.AdamW", "torch.optim.SGD"):
            out.append(_comment(f"if the config's optimizer sets fused (torch.optim.AdamW's argument), add ~optimizer.fused: {component} takes no such argument"))
        if component.startswith("torchao."):
            out.append(_comment("8-bit AdamW in a distributed recipe: torchao's (pip install torchao; before 0.11 torchao.prototype.low_bit_optim.AdamW8bit)"))
    out.append(_command(["tune", "download", _q(p.model)], [("--output-dir", "./model")]))
    out.append(_command(["tune", "run"], [*launcher, recipe, ("--config", config), *overrides]))
    return out


def _torchtune_optimizer(p: _Facts, distributed: bool) -> str | None:
    """The optimizer's _component_ (every torchtune config names one; the single-device full configs default to
    bitsandbytes' PagedAdamW8bit, so AdamW is written too), or None where torchtune cannot run it. torchtune's docs
    (docs/source/tutorials/memory_optimizations.rst, Lower Precision Optimizers): torchao's 8-bit optimizers in every
    recipe, bitsandbytes' in single-device ones."""
    if p.optimizer_problem:
        return None
    eight_bit = "torchao.optim.AdamW8bit" if distributed else "bitsandbytes.optim.PagedAdamW8bit"
    return {"adamw-8bit": eight_bit, "sgd": "torch.optim.SGD", "adafactor": "torch.optim.Adafactor"}.get(p.optimizer, "torch.optim.AdamW")


def _unsloth(p: _Facts) -> list[str]:
    four_bit = p.method == "qlora"
    bf16 = "bf16" in p.precision
    optim = _transformers_optim(p, p.processes > 1 and p.zero_stage == 3)  # FSDP through Accelerate: torchao's 8-bit
    optim_kwargs = [] if optim is None else [f"        optim={json.dumps(optim[0])},"]
    if optim is not None and optim[1]:
        optim_kwargs.append(f"        optim_args={json.dumps(optim[1])},")
    trainer = "DPO" if p.dpo else "SFT"
    script = [
        "from datasets import load_dataset",
        f"from trl import {trainer}Config, {trainer}Trainer",
        f"from unsloth import FastLanguageModel{', PatchDPOTrainer' if p.dpo else ''}",
        "",
        *(["PatchDPOTrainer()  # Unsloth's kernels in TRL's DPO trainer", ""] if p.dpo else []),
        "model, tokenizer = FastLanguageModel.from_pretrained(",
        f"    model_name={json.dumps(p.model)},",
        f"    max_seq_length={p.seq_len},",
        f"    load_in_4bit={four_bit},",
        f"    full_finetuning={p.method == 'full'},",
        ")",
    ]
    if p.method in ("lora", "qlora"):
        gc = '"unsloth"' if p.gradient_checkpointing else "False"
        script += [
            "model = FastLanguageModel.get_peft_model(",
            "    model,",
            f"    r={p.lora_rank},",
            f"    lora_alpha={2 * p.lora_rank},",
            f"    target_modules={json.dumps(list(p.lora_modules))},",
            f"    use_gradient_checkpointing={gc},",
            ")",
        ]
    script += [
        f"trainer = {trainer}Trainer(",
        "    model=model,",
        *(["    ref_model=None,  # the base with the adapters off, or a copy of the model (full fine-tune)"] if p.dpo else []),
        "    processing_class=tokenizer,",
        '    train_dataset=load_dataset("json", data_files="data/train.jsonl", split="train"),',
        f"    args={trainer}Config(",
        f"        per_device_train_batch_size={p.micro_batch},",
        f"        gradient_accumulation_steps={p.accumulation},",
        f"        max_length={p.seq_len},",
        f"        bf16={bf16},",
        f"        fp16={not bf16 and 'fp16' in p.precision},",
        f"        gradient_checkpointing={p.gradient_checkpointing and p.method == 'full'},",
        *optim_kwargs,
        '        output_dir="outputs",',
        "    ),",
        ")",
        "trainer.train()",
    ]
    out = [*_torchao_note(optim), _file("train_unsloth.py", "\n".join(script))]
    if p.processes > 1:
        out.append(_command(["accelerate", "launch"], [*(["--use_fsdp"] if p.zero_stage == 3 else []), ("--num_processes", p.processes), "train_unsloth.py"]))
    else:
        out.append("python train_unsloth.py")
    return out


# LitGPT's --optimizer (Lightning-AI/litgpt@2685705 litgpt/utils.py instantiate_torch_optimizer): a torch.optim class
# name or a dotted class path, or a {class_path, init_args} mapping (as JSON: litgpt issue #1905) for SGD's momentum.
# A QLoRA base (--quantize bnb.*) trains with bitsandbytes' PagedAdamW whatever AdamW is named.
_LITGPT_OPTIMIZER = {
    "adamw": "AdamW",
    "adamw-8bit": "bitsandbytes.optim.AdamW8bit",
    "sgd": json.dumps({"class_path": "torch.optim.SGD", "init_args": {"momentum": SGD_MOMENTUM}}),
    "adafactor": "Adafactor",
}


def _litgpt(p: _Facts) -> list[str]:
    sub = {"full": "finetune_full", "lora": "finetune_lora", "qlora": "finetune_lora"}.get(p.method, "finetune_full")
    args: list[tuple[str, Any] | str] = [
        ("--devices", p.per_instance),
        ("--num_nodes", p.instances),
        ("--precision", _LITGPT_PRECISION.get(p.precision, "bf16-true")),
        ("--train.micro_batch_size", p.micro_batch),
        ("--train.global_batch_size", p.global_batch),
        ("--train.max_seq_length", p.seq_len),
        ("--data", "JSON"),
        ("--data.json_path", "data/train.jsonl"),
        ("--out_dir", "out"),
    ]
    if p.method == "qlora":
        args.append(("--quantize", "bnb.nf4"))
    if p.method in ("lora", "qlora"):  # LitGPT adapts the query and value alone by default (finetune/lora.py setup)
        args += [("--lora_r", p.lora_rank), ("--lora_alpha", 2 * p.lora_rank), ("--lora_key", "true"), ("--lora_projection", "true")]
        args.append(("--lora_mlp", "true" if p.lora_all_linear else "false"))
    if not p.optimizer_problem:
        args.append(("--optimizer", _LITGPT_OPTIMIZER[p.optimizer]))
    out = [_comment(f"gradient accumulation {p.accumulation} = global batch / (micro-batch x {p.data_parallel} data-parallel ranks); several devices run FSDP")]
    if p.method == "full":
        out.append(_comment("pretraining: litgpt pretrain takes the same flags"))
    out.append(_command(["litgpt", sub, _q(p.model)], args))
    return out


DEEPSPEED_ADAMW_LR = 2e-5


def _zero_optimization(p: _Facts) -> dict[str, Any]:
    """DeepSpeed's zero_optimization block: the stage, and ZeRO-Offload as the scenario counts it (the optimizer states
    and gradients in CPU memory; with optimizer+params at stage 3 the parameters too: DeepSpeed config-json docs,
    offload_optimizer / offload_param)."""
    block: dict[str, Any] = {"stage": p.zero_stage}
    if p.offload != "none" and p.zero_stage >= 1:
        block["offload_optimizer"] = {"device": "cpu"}
    if p.offload == "optimizer+params" and p.zero_stage == 3:
        block["offload_param"] = {"device": "cpu"}
    return block


def _axolotl_deepspeed_config(p: _Facts) -> dict[str, Any]:
    """The DeepSpeed json of an Axolotl run at ZeRO 1-2, written out rather than fetched: Axolotl's own
    deepspeed_configs/zero2.json offloads the optimizer to the CPU (axolotl-ai-cloud/axolotl@067b021), which the plan
    does not count unless it offloads. The Trainer builds the optimizer and fills the batch keys (values that match)."""
    bf16 = "bf16" in p.precision
    return {
        "zero_optimization": _zero_optimization(p),
        "bf16": {"enabled": bf16},
        "fp16": {"enabled": not bf16 and "fp16" in p.precision},
        "train_micro_batch_size_per_gpu": p.micro_batch,
        "gradient_accumulation_steps": p.accumulation,
        "train_batch_size": p.global_batch,
        "gradient_clipping": "auto",  # the Trainer's max_grad_norm, as in Axolotl's own configs
    }


def _deepspeed_config(p: _Facts) -> dict[str, Any]:
    bf16 = "bf16" in p.precision
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": p.micro_batch,
        "gradient_accumulation_steps": p.accumulation,
        "train_batch_size": p.global_batch,
        "gradient_clipping": 1.0,
        "zero_optimization": _zero_optimization(p),
        "bf16": {"enabled": bf16},
        "fp16": {"enabled": not bf16 and "fp16" in p.precision},
    }
    if p.tensor_parallel > 1:
        cfg["tensor_parallel"] = {"autotp_size": p.tensor_parallel}
    # the optimizer block (deepspeedai/DeepSpeed@edaa722 runtime/engine.py _configure_basic_optimizer): AdamW, or a
    # torch.optim class by name; 8-bit AdamW is a client optimizer (bitsandbytes) passed to deepspeed.initialize
    # AdamW at TRL's SFTConfig default rate (2e-5: what the Hugging Face stacks' launches train at), not DeepSpeed's own
    # 1e-3 default, which a fine-tune would diverge at (the estimate helper's review of stop 48, L7)
    block = {
        "adamw": {"type": "AdamW", "params": {"lr": DEEPSPEED_ADAMW_LR}},
        "sgd": {"type": "SGD", "params": {"momentum": SGD_MOMENTUM}},
        "adafactor": {"type": "Adafactor"},
    }
    if not p.optimizer_problem and p.optimizer in block:
        cfg["optimizer"] = block[p.optimizer]
    if not p.optimizer_problem and p.optimizer != "adamw" and p.zero_stage >= 1:
        cfg["zero_allow_untested_optimizer"] = True  # ZeRO asserts on an optimizer outside its tested list (SGD, Adafactor, bitsandbytes')
    return cfg


def _deepspeed(p: _Facts) -> list[str]:
    config = _deepspeed_config(p)
    if "optimizer" in config:
        init = "deepspeed.initialize(args=args, model=model, model_parameters=model.parameters()) with the config below (which builds the optimizer)"
    elif p.optimizer == "adamw-8bit" and not p.optimizer_problem:
        init = (
            "deepspeed.initialize(args=args, model=model, optimizer=bitsandbytes.optim.AdamW8bit(model.parameters())) with the config below: "
            "8-bit AdamW is bitsandbytes', a client optimizer"
        )
    else:
        init = "deepspeed.initialize(args=args, model=model, model_parameters=model.parameters(), optimizer=...) with the config below"
    out = [_comment(f"train.py: your training script; it loads --model_name_or_path and calls {init}")]
    if p.pipeline_parallel > 1:
        out.append(_comment(f"pipeline parallel {p.pipeline_parallel}: build the model as deepspeed.pipe.PipelineModule(layers, num_stages={p.pipeline_parallel})"))
    if p.gradient_checkpointing:
        out.append(_comment("gradient checkpointing: turn it on in the model (model.gradient_checkpointing_enable() for a Transformers model)"))
    if p.fused_cross_entropy:
        out.append(_comment("fused cross-entropy: apply Liger Kernel's patch before building the model (liger_kernel.transformers.apply_liger_kernel_to_llama or kin)"))
    if p.method == "qlora" and not p.gptq_base:
        load = 'attn_implementation="flash_attention_2"' if p.flash_attention_2 else 'attn_implementation="sdpa"'
        out.append(_comment(f"QLoRA: load the 4-bit model with {load} before prepare_model_for_kbit_training"))
        out += _upcast_note(p)
    out.append(_file("ds_config.json", json.dumps(config, indent=2)))
    launcher: list[tuple[str, Any] | str] = [("--num_nodes", p.instances), ("--num_gpus", p.per_instance)]
    if p.multi_node:
        launcher += [("--hostfile", "hostfile"), '--master_addr "$MAIN_IP"', ("--master_port", MASTER_PORT)]
        out.append(_comment(f"hostfile: one line per node, 'HOSTNAME slots={p.per_instance}'"))
    out.append(_command(["deepspeed"], [*launcher, "train.py", ("--model_name_or_path", p.model), ("--deepspeed", "ds_config.json")]))
    return out


def _megatron(p: _Facts) -> list[str]:
    out = [
        _comment("Megatron-LM's pretrain_gpt.py; add your model's architecture flags (--num-layers, --hidden-size, --num-attention-heads ...) and data flags"),
    ]
    if p.method in ("lora", "qlora"):
        out.append(_comment("LoRA runs through Megatron Bridge / NeMo PEFT on the same parallel layout"))
    out.append(_comment("fine-tuning: load the converted checkpoint with --load and add --finetune"))
    launcher: list[tuple[str, Any] | str] = [("--nnodes", p.instances), ("--nproc_per_node", p.per_instance)]
    if p.multi_node:
        launcher += ['--node_rank "$NODE_RANK"', '--master_addr "$MAIN_IP"', ("--master_port", MASTER_PORT)]
    args: list[tuple[str, Any] | str] = [
        *launcher,
        "pretrain_gpt.py",
        ("--tensor-model-parallel-size", p.tensor_parallel),
        ("--pipeline-model-parallel-size", p.pipeline_parallel),
        ("--micro-batch-size", p.micro_batch),
        ("--global-batch-size", p.global_batch),
        ("--seq-length", p.seq_len),
        ("--max-position-embeddings", p.seq_len),
        ("--tokenizer-type", "HuggingFaceTokenizer"),
        ("--tokenizer-model", p.model),
        "--bf16" if "bf16" in p.precision else "--fp16",
    ]
    if not p.optimizer_problem:  # adam: Adam with decoupled weight decay (AdamW); sgd: momentum 0.9 by default, written
        args += [("--optimizer", "sgd"), ("--sgd-momentum", SGD_MOMENTUM)] if p.optimizer == "sgd" else [("--optimizer", "adam")]
    if p.tensor_parallel > 1:  # the activations the memory counts split over the group (Korthikanti et al. 2022, Sec. 4.2.2)
        args.append("--sequence-parallel")
    if p.zero_stage >= 1:
        args.append("--use-distributed-optimizer")
    if p.offload != "none" and p.zero_stage >= 1:  # the hybrid-device optimizer (arguments.py: needs the precision-aware one)
        args += ["--optimizer-cpu-offload", "--use-precision-aware-optimizer"]
    if p.gradient_checkpointing:
        args += [("--recompute-granularity", "full"), ("--recompute-method", "uniform"), ("--recompute-num-layers", 1)]
    out.append(_command(["torchrun"], args))
    return out
