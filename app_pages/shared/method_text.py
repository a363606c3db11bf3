"""The Method page's formula notes (what core/ computes, with sources)."""

from core.memory.components import training_states
from core.scenario import Scenario

# The per-precision byte table, one row per layout: the scenario that picks it and how to say it.
STATE_LAYOUTS = [
    ("fp32", {"precision": "fp32"}),
    ("bf16-true (everything 16-bit)", {"precision": "bf16-true"}),
    ("bf16 mixed, fp32 master in the optimizer (DeepSpeed, Megatron, any ZeRO stage)", {"precision": "bf16", "training_stack": "deepspeed"}),
    ("bf16 mixed under autocast (Hugging Face, torchtune, Unsloth, LitGPT)", {"precision": "bf16", "training_stack": "hf"}),
]


def state_bytes_table() -> str:
    """Bytes per parameter of a full fine-tune by precision, as the estimate sized the states with them
    (core.memory.components.training_states -> its StateBytes -> a Markdown table)."""
    lines = ["| precision | weights | gradients | optimizer states | fp32 master copy | 16-bit copies while computing |", "|---|---|---|---|---|---|"]
    for label, settings in STATE_LAYOUTS:
        sc = Scenario.model_validate({"model": "llama-3.1-8b", "mode": "training", "method": "full", **settings})
        t = training_states(sc, sc.architecture).bytes_per_param
        assert t is not None
        states = f"{'fp32' if t.state_scale == 4 else '16-bit'} (K x {t.state_scale / 4:g})"
        lines.append(f"| {label} | {t.param:g} B | {t.grad:g} B | {states} | {t.master:g} B | {t.copies:g} B |")
    return "\n".join(lines)


FORMULAS = [
    (
        "Model states in training (weights, gradients, optimizer)",
        r"""
Per parameter, mixed-precision AdamW keeps **2 B** of 16-bit weights, **2 B** of gradients and **K = 12 B** of optimizer
state (fp32 master copy 4 + momentum 4 + variance 4): 16 B in all (Rajbhandari et al. 2019, *ZeRO*, Sec. 3.1).
8-bit AdamW keeps 2 B of state (Dettmers et al. 2022), SGD with momentum 4 B, Adafactor fp32 row and column factors
(Shazeer & Stern 2018); the fp32 master copy is added in mixed precision. By precision (the table the estimate uses):

"""
        + state_bytes_table()
        + r"""

ZeRO / FSDP over $N_d$ data-parallel ranks: stage 1 divides the optimizer state by $N_d$, stage 2 also the gradients,
stage 3 also the weights. Tensor ($t$) and pipeline ($p$) parallelism divide all model states by $t \cdot p$.
Checked against the ZeRO paper's Figure 1: 7.5B parameters, 64 GPUs → 120 / 31.4 / 16.6 / 1.9 GB per device.

**LoRA** trains $r \cdot (d_{in} + d_{out})$ parameters per adapted matrix (Hu et al. 2021); adapters are fp32 (PEFT
default), the frozen base stays in its format. **QLoRA** stores the base in NF4 with double quantization:
$4 + 8/64 + 32/(64\cdot256) \approx 4.127$ bits per weight (Dettmers et al. 2023, Sec. 3). On a GPTQ 4-bit checkpoint
instead (Hugging Face and Axolotl stacks), each linear layer dequantizes its whole weight in PyTorch ops in every forward
pass and autograd keeps the 16-bit weight for the backward pass: about 40 bytes of memory traffic per weight and pass
(auto-gptq's unfused ops, calibrated on ms-swift's A100 benchmark, checked on Qwen's twelve published Q-LoRA runs; an
upper bound for GPTQModel's compiled kernel), and without checkpointing
$2\,\text{B}$ per quantized weight kept; PEFT skips QLoRA's fp32 upcast for GPTQ models.

**QLoRA's fp32 upcast** (the Hugging Face stack's `prepare_model_for_kbit_training`; torchtune, Unsloth and Axolotl
skip it) casts norms, embeddings and the output head to fp32. Profiled on our H200: the head's two matmuls run as
fp32 GEMMs ($4 \cdot V \cdot h$ FLOPs per token at 75% of the FP32 peak, measured), and the fp32 norms make attention
fp32. FlashAttention-2 casts it back to 16-bit (the sidebar's *FlashAttention* on a part that has it; the launch
passes `--attn_implementation flash_attention_2`); otherwise SDPA runs it in fp32: grouped-query heads on its math
path (the whole square of scores as fp32 GEMMs, plus 34 bytes per score element and pass, and 12 bytes per score
element of the recomputed block in memory), multi-head attention on the memory-efficient kernel.
""",
    ),
    (
        "Activations in training",
        r"""
Korthikanti et al. 2022 count what a GPT block keeps for the backward pass: $sbh(34 + 5as/h)$ bytes per layer with 16-bit
activations. We count the same tensors for the real architecture: one input per norm, the QKV input, Q/K/V at their
grouped-query widths, the attention output, the MLP input and its intermediates ($4 \times s b f$ values for a gated
SwiGLU/GeGLU MLP, $2\times$ for a plain one), $k$ routed experts per token for mixture-of-experts models, and dropout masks
only where the model uses dropout. With FlashAttention the $a s^2$ score tensors are not stored (only an fp32 log-sum-exp).

**Gradient checkpointing** (full recomputation) keeps $2sbh$ bytes per layer plus one block rebuilt at a time.
**Tensor parallelism** is taken with sequence parallelism: activations divide by $t$. **Pipeline parallelism** with the
1F1B schedule keeps $p$ micro-batches in flight on the first stage, i.e. all $L$ layers' worth.

**The loss** needs $b \cdot s \cdot V$ logits: bf16 logits, their fp32 upcast and the fp32 log-softmax kept for backward,
10 bytes per element — the largest single activation for 128k–256k vocabularies.
""",
    ),
    (
        "Inference: weights, KV cache, prefill",
        r"""
**Weights** in the chosen format: linear layers at the format's bits per weight (scales and zeros included: GPTQ/AWQ
group 128 ≈ 4.16 bits, NF4 ≈ 4.13, GGUF Q4_K = 4.5, Q6_K = 6.5625, Q8_0 = 8.5 with the _M mixes' higher-precision
tensors), embeddings and lm_head in 16-bit except for GGUF.

**KV cache** per token: $2 \cdot L \cdot n_{kv} \cdot d_{head} \cdot$ bytes (grouped-query aware: Llama-3.1-8B is
131,072 B, so 8,192 tokens take exactly 1 GiB in bf16). Multi-head latent attention (DeepSeek-V3) caches
$(d_c + d_{rope})$ per layer. Sliding-window layers keep at most the window. Tensor parallelism splits KV heads (the MLA
latent is replicated).

**Prefill** working set: one block's tensors for one prefill step (chunked at 8,192 tokens, as serving engines do),
plus fp32 logits of the last token.
""",
    ),
    (
        "Runtime overhead and fit",
        r"""
0.75 GiB per device for the CUDA context and libraries (what nvidia-smi shows beyond PyTorch's reserved pool in every
one of our H100 runs, PyTorch 2.11 / CUDA 13), plus 0.5 GiB of communication buffers when devices cooperate, plus, under ZeRO-3/FSDP, two
gathered blocks. Other vendors' runtimes are counted at the same figure, named as theirs (no measurement of their
own here); Apple's Metal counts none: llama.cpp's Metal memory breakdown leaves 0 MiB unaccounted beyond the engine's
buffers (llama.cpp PR #22673). **Usable memory** is what a framework can allocate (e.g. an "80 GB" H100 shows 79.2 GiB; an Apple GPU
may use macOS's wired-memory limit: 2/3 of the unified memory up to 32 GB and 3/4 above, by default; `sudo sysctl
iogpu.wired_limit_mb=N` raises it, and the advice names the value when that would make a model fit).

**Devices needed** is the smallest layout that fits: more data-parallel ranks under your ZeRO stage, tensor parallelism
up to 8 then pipeline stages, or ZeRO-3 — whichever needs the fewest devices. Serving a mixture-of-experts model
expert-parallel (the sidebar's switch), it is the fewest devices of an expert-parallel replica: each holds every
non-expert weight and 1/n of the routed experts, n splitting the experts evenly; tensor and pipeline layouts only where
none fits.
""",
    ),
    (
        "The hobbyist's machine: llama.cpp offload, CPU, Apple, hardware of your own",
        r"""
**Partial offload** (llama.cpp `-ngl`): $g$ of the $L$ layers sit on the GPU with their KV cache (llama.cpp's default
`offload_kqv`); the other $L-g$ layers' weights and KV cache stay in system RAM, which must hold them. A decode step runs
the GPU's layers, then the CPU's: its time is the GPU part of the roofline plus
$(1-g/L) \cdot (\text{weights} + \text{KV}) / (\text{RAM bandwidth} \times 0.85)$, the 0.85 calibrated on Mixtral 8x7B Q8_0 on a
Ryzen 9 5900X (3.58 tokens/s, llama.cpp issue #4716) and checked on other CPUs. A prompt is computed on the GPU, the RAM
layers' weights crossing PCIe (about 25 GB/s) once per 512-token micro-batch. The most layers that fit is the free
memory after the runtime and compute buffers divided by one layer's weights and KV cache. `-ngl 0` is CPU-only decode.

**Quantized KV cache**: llama.cpp's q8_0 (34 bytes per 32 values) and q4_0 (18 bytes per 32), vLLM's fp8 (1 byte).

**Under load** (core/speed/load.py): with N users each sending a request and waiting for its answer, a continuous-batching
engine runs steps that carry one token of every user decoding plus chunks of arriving prompts, up to its token budget per
step (vLLM's max_num_batched_tokens, chunked prefill as in Sarathi-Serve, arXiv 2403.02310). A user's time between
tokens is the decode step plus the share of steps that carry someone else's prompt times their extra time (the
prefill-decode interference of DistServe, arXiv 2401.09670); the time to first token is the step under way, the wait
behind other prompts (an M/D/1 queue), the prompt's own steps and the step that hands its token over; past
max_num_seqs or the memory's room users wait for a slot. p50 and p90 come from the queue's wait and the number of
interrupted steps. Arrivals are an input: steady (independent users, what production sees and what the planner plans)
or synchronised (a benchmark's closed loop: every user starts at once with identical requests, simulated step by step,
so prompts queue in waves under the step's token budget). The server takes requests in one after another before its
scheduler sees them (2.1 ms each for NIM's TensorRT-LLM server, calibrated on one run), which spreads a wave over short
decode steps. TensorRT-LLM on Hopper also spends 15 ns per decoding sequence, query head on the device and layer in
every decode step beyond the sequence's bytes and FLOPs (calibrated on one 50-user run). Checked on 43 NVIDIA NIM 1.8.0 measurements (Llama 3.3
70B fp8 on two H100s, Llama 3.1 8B fp8 on one, 1-100 users, synchronised; four more calibrate): tokens/s per user
within 25% on all 43 (38 of 44 before the time per sequence); time to first token within 25% on all 8 at one user but
on 10 of 35 under load. Most measured runs lie
between the steady and the synchronised figure: the 70B's long prefill steps keep the simulated users in lockstep
waves that NIM's run leaves. On 11 vLLM runs (Qwen2.5 0.5B on an L4, Mistral 7B on an RTX 4090)
tokens/s per user is within 25% on 10, time to first token on 2: the L4's one-user TTFT carries about 18 ms of
server time per request that the model leaves out. On 11 SGLang runs (its cookbook: Llama 3.1 70B on 8 A100s,
Qwen3-235B-A22B on 8 B200s, 1-100 users; one more calibrates) tokens/s per user is within 25% on all 11, time to first
token on 5: SGLang 0.5.6 ran every step that carries prompt tokens without CUDA graphs (0.75 ms a layer, which also
slows the users decoding beside it), and an A100 spends about 64 us a layer more per decode step than the H100 the
engines' step was fitted on (tests/data/load_latency.csv, data/engine_timing.csv).

**Apple and other unified-memory machines** decode from their memory bandwidth like a GPU (llama.cpp Metal results on
M1 Max, M2 Ultra and M3 Max pinned in tests; the M1 Max's quantized kernels run about a third slower than this predicts).
**MLX** (mlx-lm) serves MLX's own quantized weights: 3, 4, 6 or 8 bits with a 16-bit scale and bias per 64 weights
(4.5 bits per weight at 4-bit), embeddings and output head included. Its decode step reads the weights at 91% of the
bandwidth, calibrated on Llama-3.3-70B 4-bit on an M3 Max (9.35 tokens/s; llama.cpp's q4_0 reaches about the same on
that machine) and checked on an M2 Ultra, an M3 Pro and at long contexts; small models on the Ultras stay a recorded
miss. **mlx-lm** fine-tunes with LoRA on one device, or with QLoRA on an MLX 4-bit base.
**Any hardware I own** takes the memory, bandwidth and 16-bit TFLOPS you type, all of the memory taken as usable.
""",
    ),
    (
        "The planner (Plan page, python -m core plan)",
        r"""
The planner searches, for a goal, every **method** (full fine-tune in mixed bf16, LoRA and QLoRA at rank 16 on all linear
layers), **gradient checkpointing** on and off, **one device, data parallelism, ZeRO-3/FSDP** over 2-1,024 ranks and
tensor parallelism inside an instance with pipeline stages across (only as much model parallelism as memory needs), the
**largest micro-batch that fits**, every **accelerator** and **instance size** in the price catalog, on-demand or spot.
Serving: the engine's weight formats (bf16, FP8 and 4-bit AWQ for vLLM; GGUF for llama.cpp) where it has kernels for
them on the part (vLLM and SGLang run FP8 weight-only on Turing and Ampere), a bf16 KV cache and the engine's 8-bit one
(FP8; llama.cpp's Q8_0) where it stores it on the part for the model's attention (data/kv_cache_kernels.csv), tensor
parallel 1-8, and the largest batch (any number up to what fits) that keeps the time to first token and each user's tokens/s
within the targets for 9 requests in 10 under load (the p90 figures above). The Inference page's bill, Training vs inference and Compare size a fleet by the same rule
(core/money/serving.py), from the same traffic and targets: never from the sidebar's batch.

- **Only plans that fit**, sized with the same memory model as the Memory page.
- **A plan pays for what it rents**: whole instances, 730 hours a month for serving; devices a rented instance leaves
  unused become data-parallel ranks or replicas where the global batch or the traffic has work for them, else they are
  shown as idle. A job spans several instances only when they are whole nodes (8 GPUs) of a provider that rents them
  on a cluster network (InfiniBand, RoCE, EFA, ICI; data/providers.csv, sourced per provider): a marketplace's listing
  (Vast, Lium) or an aggregator's single machine is one host and is rented one at a time, for serving replicas too: a
  fleet on it is one instance at most.
- **Communication-aware time**: tensor-parallel all-reduces, the pipeline bubble, the exposed data-parallel gradient
  all-reduce and ZeRO-3's weight all-gathers over the part's interconnect; each plan shows its scaling efficiency and a
  plan below 50% is never called cheapest or fastest while another is not. Each instance is also billed for a
  start-up time (15 minutes by default: start, load, last checkpoint).
- **Global batch**: 64 sequences for fine-tuning; for pretraining by model size as GPT-3 (Brown et al. 2020, Table 2.1)
  and Llama (4M tokens); more data-parallel ranks than it has sequences cannot help.
- **Fastest** is the cheapest of the plans within 5% of the shortest time. **Serving replicas** are sized for the
  busiest hour (peak-to-average factor); the bill in USD per million tokens counts the month's real tokens at that
  traffic, idle capacity included.
- CPU offload is not planned (its time cost is not modelled); set it on the Memory page.
""",
    ),
]
