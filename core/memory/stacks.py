"""Training stacks: what the software people actually run does to memory.

The textbook model (ZeRO's 16 bytes per parameter, Korthikanti's activation
count) is what Megatron-LM does. The stacks most people fine-tune with differ,
measurably (../data/measurements/h100-2026-11-23.jsonl, torchtune's and Unsloth's
published tables):

- where mixed precision keeps its fp32 copy: PyTorch autocast (Hugging Face
  Trainer `bf16=True`, LitGPT `bf16-mixed`) keeps fp32 parameters and caches a
  bf16 copy of every weight during forward and backward; DeepSpeed and
  Megatron keep bf16 parameters and an fp32 master copy in the optimizer;
- how large the loss step is: the Hugging Face causal-LM loss upcasts the full
  logits to fp32 (bf16 logits + fp32 copy + fp32 log-softmax + its gradient:
  ~14 bytes per token and vocabulary entry at its peak), chunked losses
  (torchtune, LitGPT, Unsloth, Megatron's fused vocab-parallel loss) do not;
- whether norms keep an fp32 copy of their input (eager RMSNorm does; fused
  kernels do not);
- PEFT casts each adapted layer's input to the adapters' fp32 dtype;
- `peft.prepare_model_for_kbit_training` (the usual QLoRA recipe) upcasts the
  embeddings, norms and output head to fp32, so activations are fp32 too, and
  turns gradient checkpointing on;
- Axolotl runs the Hugging Face stack but casts the norms, embeddings and head back to the 16-bit dtype after
  `prepare_model_for_kbit_training`, so its QLoRA keeps no fp32 copies and does not force checkpointing on;
- torchtune can fuse the optimizer step into the backward pass (each gradient
  is freed as soon as it is used); Unsloth keeps checkpointed activations in
  CPU memory.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

# A loss that computes the logits and their cross-entropy a chunk at a time (Unsloth's fused loss, Liger Kernel's fused
# linear cross-entropy, Apple's Cut Cross-Entropy) never holds the whole logits: about 0.25 bytes per token and
# vocabulary entry at a time (Unsloth README and blog; Wijmans et al. 2024, "Cut Your Losses in Large-Vocabulary
# Language Models", arXiv 2411.09009: the loss's memory falls from gigabytes to megabytes).
FUSED_LOSS_LOGITS_BYTES = 0.25
# The stacks whose own loss materialises the logits and that take such a loss as an option (the scenario's
# fused_cross_entropy): the Hugging Face Trainer's use_liger_kernel (transformers TrainingArguments, Liger Kernel
# README), Axolotl's CutCrossEntropyPlugin or liger_fused_linear_cross_entropy (axolotl-ai-cloud/axolotl@067b021
# src/axolotl/integrations), and a DeepSpeed training script that applies Liger's patch (liger_kernel.transformers
# apply_liger_kernel_to_llama and its kin). The others have their own loss (chunked or fused: torchtune, Unsloth,
# LitGPT, Megatron's vocabulary-parallel one) or run no Triton kernels (mlx-lm, PyTorch/XLA). Liger and Cut Cross-Entropy
# patch the model types they list (Llama, Mistral, Qwen, Gemma and others).
FUSED_CROSS_ENTROPY_STACKS = frozenset({"hf", "axolotl", "deepspeed"})

# A GPTQ checkpoint as QLoRA's frozen base (core/model/formats.py "gptq-4bit": 4-bit, g128).
GPTQ_BASE = "gptq-4bit"

StackId = Literal["hf", "torchtune", "unsloth", "litgpt", "deepspeed", "megatron", "mlx-lm", "hf-xla", "axolotl"]


class TrainingStack(NamedTuple):
    id: str
    label: str
    mixed_layout: Literal["autocast", "master"]  # where mixed precision keeps fp32: the parameters, or the optimizer
    logits_bytes: float  # bytes per (token x vocabulary entry) at the loss step's peak
    norm_fp32_copy: bool  # each norm keeps an fp32 copy of its input (eager RMSNorm upcast)
    lora_fp32_inputs: bool  # adapters run in fp32 on an fp32 copy of each adapted input (PEFT)
    lora_adapter_bytes: float  # bytes per adapter parameter (PEFT keeps fp32 adapters)
    qlora_upcast: bool  # prepare_model_for_kbit_training: fp32 embeddings, norms, head and activations; checkpointing on
    grads_freed_in_backward: bool  # optimizer step fused into the backward pass (full fine-tuning)
    checkpoints_offloaded: bool  # with gradient checkpointing, the kept layer inputs live in CPU memory
    grads_resident: bool  # gradient buffers exist for the whole step (contiguous buffers), not only after backward
    source: str
    notes: tuple[str, ...]
    qlora_base_format: str = "nf4"  # the frozen 4-bit base of QLoRA (core/model/formats.py): bitsandbytes NF4, or MLX's own
    # PyTorch runs the model eagerly: the CPU launches every op's kernels one after another, so a short micro-batch
    # takes at least the launches' time (core/speed/timing.py launch_floor_seconds_per_token). Off where the step is
    # compiled (PyTorch/XLA, MLX's lazy graph) or its kernels fused (Unsloth's Triton kernels, Megatron's Transformer
    # Engine layers), whose launch counts are not measured here.
    eager_launches: bool = False
    # ZeRO-3 under activation checkpointing: DeepSpeed gathers the weights again for the recomputed forward; FSDP
    # unshards once for the recomputation and the backward together (core/speed/comm.py training_comm).
    zero3_regathers_for_recompute: bool = False
    # The ZeRO stages at which the stack's sharding engine runs PEFT's fp32 LoRA adapters in the 16-bit type, so each
    # adapter runs on the 16-bit input: no fp32 input copies (components.lora_fp32_inputs). DeepSpeed's engine casts the
    # module it wraps, adapters included (deepspeedai/DeepSpeed v0.17.0 deepspeed/runtime/engine.py
    # _configure_distributed_model: self.module.bfloat16() / .half(); HEAD's _cast_module_mixed_precision casts every
    # floating-point parameter but skips a model built under zero.Init, i.e. ZeRO-3, where adapters added afterwards
    # stay fp32: not counted at stage 3); FSDP under Accelerate gathers parameters in the mixed-precision dtype
    # (huggingface/accelerate@16cb6eb src/accelerate/state.py: fsdp_plugin.set_mixed_precision, MixedPrecision
    # param_dtype bf16 / fp16). The Hugging Face stacks' launch configs run ZeRO 1-2 through DeepSpeed and ZeRO-3 as FSDP.
    adapters_16bit_zero_stages: tuple[int, ...] = ()
    # The stack loads the model in the 16-bit type when mixed precision is on and keeps no fp32 copy of the weights
    # outside DeepSpeed (ZeRO 1-2, whose optimizer keeps an fp32 master): its bf16 / fp16 trains as bf16 / fp16 (true)
    # (components.mixed). Axolotl: bf16 -> torch_dtype bfloat16 (src/axolotl/utils/config/__init__.py), its FSDP2 does
    # not upcast the trainable parameters.
    mixed_loads_16bit: bool = False
    # Other frozen 4-bit bases QLoRA trains LoRA on where the scenario's weights_format names one (components.qlora_base):
    # a GPTQ checkpoint through PEFT (huggingface/peft@5d602fd src/peft/tuners/lora/gptq.py: GPTQModel's kernels; in
    # 2023 auto-gptq's) or Axolotl's `gptq: true` (axolotl-ai-cloud/axolotl@067b021 examples/llama-2/gptq-lora.yml).
    qlora_other_bases: tuple[str, ...] = ()
    # Gradients of bf16 parameters kept, accumulated and all-reduced in fp32, 4 bytes a parameter: Megatron-LM forces
    # accumulate_allreduce_grads_in_fp32 under --bf16 (megatron/training/arguments.py: "bfloat16 requires gradient
    # accumulation and all-reduce to be done in fp32"), its distributed optimizer's table counting "bf16 param, fp32
    # grads" as 18 bytes a parameter, 6 + 12/d sharded (NVIDIA/Megatron-LM docs, "Distributed Optimizer").
    fp32_grads_under_bf16: bool = False
    # The stack has mixed precision at all: torchtune ("dtype: bf16" trains every tensor in bf16; its docs, "Memory
    # optimization overview": "we don't support mixed-precision training") and mlx-lm (MLX has no autocast: the model
    # trains in its loaded dtype, the optimizer's states zeros_like each parameter) do not, so their bf16 / fp16 is
    # bf16 / fp16 (true), as their launches run it (components.mixed). Was counted as fp32 weights and states (review
    # of stop 48's estimate helper, H1: a torchtune 8B full fine-tune 110.2 GiB where it runs in 48.8).
    mixed_precision: bool = True


_HF = TrainingStack(
    "hf",
    "Hugging Face Trainer + PEFT + bitsandbytes",
    "autocast",
    14.0,
    True,
    True,
    4.0,
    True,
    False,
    False,
    False,
    "transformers LlamaForCausalLM / ForCausalLMLoss (logits.float()), LlamaRMSNorm (hidden_states.to(float32)); "
    "PEFT LoraLayer (autocast_adapter_dtype=True, input cast to the adapter dtype); "
    "peft.prepare_model_for_kbit_training (fp32 upcast of non-quantized parameters, gradient checkpointing on); "
    "measured on an H100, data/measurements/h100-2026-11-23.jsonl",
    (
        "with mixed precision (BF16 or FP16 mixed), fp32 parameters and a 16-bit autocast copy of each weight during forward and backward",
        "the loss upcasts all logits to fp32: about 14 bytes per token and vocabulary entry at the loss step",
        "each RMSNorm keeps an fp32 copy of its input",
        "LoRA adapters are fp32 and run on an fp32 copy of each adapted input (PEFT)",
        "QLoRA (prepare_model_for_kbit_training): embeddings, norms and the output head in fp32, fp32 activations, gradient checkpointing on",
        "LoRA adapters under ZeRO (DeepSpeed for stages 1-2, FSDP for 3) run in the 16-bit type: no fp32 input copies",
    ),
    eager_launches=True,
    adapters_16bit_zero_stages=(1, 2, 3),
    qlora_other_bases=(GPTQ_BASE,),
)

STACKS: dict[str, TrainingStack] = {
    s.id: s
    for s in (
        _HF,
        TrainingStack(
            "torchtune",
            "torchtune",
            "autocast",
            3.5,
            True,
            False,
            2.0,
            False,
            True,
            False,
            False,
            "torchtune docs, 'Memory optimization overview' (chunked cross-entropy in 8 chunks, optimizer_in_bwd, "
            "activation checkpointing/offloading); torchtune README 'Optimization flags' table",
            (
                "chunked cross-entropy: bf16 logits plus an fp32 copy of one of 8 chunks at a time",
                "optimizer step fused into the backward pass: each gradient is freed as soon as it is applied (full fine-tuning)",
                "LoRA adapters in the model's dtype",
                "no mixed precision: bf16 trains weights, gradients and optimizer states in bf16",
            ),
            eager_launches=True,  # recipes' `compile: False` by default
            mixed_precision=False,
        ),
        TrainingStack(
            "unsloth",
            "Unsloth",
            "autocast",
            FUSED_LOSS_LOGITS_BYTES,
            False,
            False,
            2.0,
            False,
            False,
            True,
            False,
            "Unsloth README and blog (fused chunked cross-entropy, use_gradient_checkpointing='unsloth' offloads the "
            "checkpointed activations to system RAM, fused RMSNorm/RoPE/SwiGLU kernels)",
            (
                "fused linear cross-entropy: the logits are computed and consumed in chunks, never materialised whole "
                "(about 0.25 bytes per token and vocabulary entry at a time)",
                "fused Triton kernels for RMSNorm, RoPE and SwiGLU: no fp32 copies of norm inputs",
                "gradient checkpointing keeps each layer's input in CPU memory, not on the GPU",
            ),
        ),
        TrainingStack(
            "litgpt",
            "LitGPT",
            "autocast",
            4.0,
            True,
            False,
            2.0,
            False,
            False,
            False,
            False,
            "LitGPT finetune scripts (lm_head_chunk_size=128, chunked_cross_entropy), litgpt/model.py RMSNorm (x.float())",
            (
                "chunked cross-entropy over 128-token chunks: bf16 logits and their gradients, fp32 only per chunk",
                "each RMSNorm keeps an fp32 copy of its input",
                "LoRA adapters in the model's dtype (bf16-true by default)",
            ),
            eager_launches=True,
        ),
        TrainingStack(
            "deepspeed",
            "DeepSpeed (ZeRO) with a Hugging Face model",
            "master",
            14.0,
            True,
            True,
            4.0,
            True,
            False,
            False,
            True,
            "Rajbhandari et al. 2019, ZeRO (arXiv 1910.02054), Sec. 3.1; DeepSpeed contiguous gradient buffers; transformers causal-LM loss",
            (
                "with mixed precision, 16-bit parameters and gradients and an fp32 master copy in the optimizer (ZeRO Sec. 3.1)",
                "gradient buffers are allocated for the whole step",
                "the Hugging Face model's loss upcasts all logits to fp32",
                "the engine casts the module, LoRA adapters included, to bf16 or fp16: adapters run on the 16-bit input (not under ZeRO-3's zero.Init)",
            ),
            eager_launches=True,
            zero3_regathers_for_recompute=True,
            adapters_16bit_zero_stages=(0, 1, 2),
        ),
        TrainingStack(
            "megatron",
            "Megatron-LM / Megatron Core",
            "master",
            6.0,
            False,
            False,
            2.0,
            False,
            False,
            False,
            True,
            "Shoeybi et al. 2019 (Megatron-LM); Korthikanti et al. 2022 (arXiv 2205.05198); Megatron fused vocab-parallel cross-entropy and fused layer norm",
            (
                "with mixed precision, 16-bit parameters and an fp32 master copy in the optimizer",
                "fused vocabulary-parallel cross-entropy: bf16 logits and one fp32 copy",
                "fused layer norms keep no fp32 copies",
                "under bf16, gradients accumulated and all-reduced in fp32 (4 bytes a parameter); under fp16, an fp32 copy of them in the optimizer",
            ),
            fp32_grads_under_bf16=True,
        ),
        # mlx-lm's trainer (mlx_lm/tuner): LoRALinear keeps lora_a / lora_b in float32 (MLX's default dtype), so a 16-bit
        # input is promoted to fp32 for the adapter product; the frozen base stays in the checkpoint's dtype, or in MLX
        # 4-bit when --model points at a quantized model ("QLoRA" in LORA.md); mx.fast.rms_norm is fused; the loss is
        # nn.losses.cross_entropy over the whole 16-bit logits (no chunking): logits, their gradient and the fp32
        # log-softmax, about 8 bytes per token and vocabulary entry. --grad-checkpoint checkpoints each layer.
        TrainingStack(
            "mlx-lm",
            "MLX (mlx-lm LoRA / QLoRA)",
            "master",
            8.0,
            False,
            True,
            4.0,
            False,
            False,
            False,
            False,
            "ml-explore/mlx-lm mlx_lm/LORA.md ('If --model points to a quantized model, then the training will use QLoRA'; "
            "--batch-size, --num-layers, --grad-checkpoint) and mlx_lm/tuner (LoRALinear fp32 adapters, cross_entropy loss)",
            (
                "one device: Apple silicon's unified memory (or one NVIDIA GPU through MLX's CUDA backend); no ZeRO, tensor or pipeline parallelism",
                "QLoRA: the frozen base in MLX 4-bit (group 64: 4.5 bits per weight), converted with mlx_lm.convert -q",
                "LoRA adapters in fp32 (MLX's default dtype); each adapted layer's 16-bit input is promoted to fp32 for them",
                "fused RMSNorm (mx.fast.rms_norm): no fp32 copies of norm inputs",
                "the loss runs over all 16-bit logits at once: about 8 bytes per token and vocabulary entry",
                "no mixed precision: mlx-lm trains in the model's 16-bit dtype (no fp32 master copy), its optimizer's states in it too",
            ),
            "mlx-q4",
            mixed_precision=False,
        ),
        # Axolotl (axolotl-ai-cloud/axolotl@067b021, 2026-07-24) trains a Transformers model with PEFT and the Trainer,
        # so it is the Hugging Face stack (fp32 adapters on fp32 inputs, the fp32 loss, eager RMSNorm, eager launches)
        # except QLoRA's upcast: src/axolotl/loaders/model.py _configure_embedding_dtypes runs
        # prepare_model_for_kbit_training with use_gradient_checkpointing=cfg.gradient_checkpointing, then converts
        # every module named "norm" and the embedding modules (embed_tokens, lm_head) back to cfg.torch_dtype "for
        # flash-attn compatibility" whenever an adapter is set (and skips the preparation under QLoRA + FSDP or
        # ZeRO-3): nothing stays in fp32 and checkpointing follows the config.
        _HF._replace(
            id="axolotl",
            label="Axolotl (Transformers + PEFT + bitsandbytes)",
            qlora_upcast=False,
            mixed_loads_16bit=True,
            source="axolotl-ai-cloud/axolotl@067b021 src/axolotl/loaders/model.py (_configure_embedding_dtypes, "
            "_prepare_model_for_quantization, _convert_embedding_modules_dtype); src/axolotl/utils/config/__init__.py "
            "(bf16 -> torch_dtype bfloat16); the Hugging Face stack's transformers and PEFT code underneath",
            notes=(
                "the Hugging Face stack underneath: the loss upcasts all logits to fp32, each RMSNorm keeps an fp32 copy of its input, "
                "LoRA adapters are fp32 on an fp32 copy of each adapted input (PEFT; 16-bit under ZeRO / FSDP)",
                "QLoRA: prepare_model_for_kbit_training runs, then the norms, embeddings and head go back to bf16: "
                "no fp32 copies, checkpointing only when the config turns it on",
                "bf16: true loads the model in bf16 (no fp32 copy of the weights): BF16 mixed is counted as BF16 (true) outside "
                "DeepSpeed; under DeepSpeed ZeRO 1-2 the optimizer keeps an fp32 master copy",
            ),
        ),
        _HF._replace(
            eager_launches=False,  # compiled by XLA
            adapters_16bit_zero_stages=(),  # SPMD FSDPv2 under PyTorch/XLA: not measured here
            qlora_other_bases=(),  # no GPTQ kernels on TPU
            id="hf-xla",
            label="Hugging Face Trainer + PEFT on PyTorch/XLA (TPU)",
            source="the Hugging Face stack's code (transformers causal-LM loss, LlamaRMSNorm, PEFT LoraLayer) run by PyTorch/XLA: "
            "Transformers Trainer docs, fsdp_config 'xla', 'xla_fsdp_v2' (SPMD FSDPv2 on TPU); not measured on a TPU here: "
            "its memory is taken as the Hugging Face stack's",
            notes=(
                "the Hugging Face stack's memory behaviour (the same Transformers and PEFT code), compiled by XLA for TPU",
                "sharding through SPMD FSDPv2 (fsdp_config xla_fsdp_v2): full sharding or one chip, no DeepSpeed, no bitsandbytes",
            ),
        ),
    )
}


def trains_on_gptq(method: str, weights_format: str, stack_id: str) -> bool:
    """LoRA (or QLoRA) on a GPTQ checkpoint: the stack trains LoRA on that format (TrainingStack.qlora_other_bases) and
    the scenario's weights_format names it. PEFT's LoRA on a GPTQ model is one run, asked as QLoRA on a GPTQ base or as
    LoRA on GPTQ weights (core/memory/components.gptq_base; core/plan/launch/)."""
    stack = STACKS.get(stack_id)
    return method in ("lora", "qlora") and weights_format == GPTQ_BASE and stack is not None and GPTQ_BASE in stack.qlora_other_bases
