"""Weight storage formats: bits per weight for each tensor role.

Quantized formats store linear layers in few bits plus per-group scales (and
zeros); embeddings, lm_head, norms and biases stay in 16-bit for the
PyTorch-side formats, while GGUF quantizes the embedding and stores the output
layer in Q6_K.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from core.model.architecture import MLP_ROLES, Architecture, WeightGroup

WeightFormatId = Literal[
    "fp32",
    "bf16",
    "fp16",
    "fp8",
    "int8",
    "int4",
    "nf4",
    "gptq-4bit",
    "awq-4bit",
    "gguf-q8_0",
    "gguf-q6_k",
    "gguf-q5_k_m",
    "gguf-q4_k_m",
    "gguf-q4_0",
    "gguf-q3_k_m",
    "gguf-q2_k",
    "mxfp4",
    "gguf-tq1_0",
    "gguf-tq2_0",
    "bitnet-i2_s",
    "mlx-q4",
    "mlx-q8",
    "mlx-q3",
    "mlx-q6",
]

# GGML block types, bits per weight = block bytes * 8 / block weights
# (ggml-common.h block_q8_0 / block_q4_0 / block_q*_K layouts: Q8_0 34 B and Q4_0 18 B per 32 weights,
# Q6_K 210 B, Q5_K 176 B, Q4_K 144 B, Q3_K 110 B, Q2_K 84 B per 256 weights).
# Ternary types (ggml-common.h block_tq1_0: 48 bytes of 5 trits each + 4 bytes of 4 trits + an fp16 scale = 54 B per
# 256 weights; block_tq2_0: 2 bits per weight in 64 bytes + an fp16 scale = 66 B per 256; llama.cpp PR #8151). llama-quantize
# lists them as "1.69 bpw ternarization" and "2.06 bpw ternarization".
GGML_BITS = {
    "Q8_0": 8.5,
    "Q4_0": 4.5,
    "Q6_K": 6.5625,
    "Q5_K": 5.5,
    "Q4_K": 4.5,
    "Q3_K": 3.4375,
    "Q2_K": 2.625,
    "TQ1_0": 54 * 8 / 256,
    "TQ2_0": 66 * 8 / 256,
}


class WeightFormat(NamedTuple):
    id: str
    label: str
    linear_bits: float  # bits per weight of a quantized linear layer
    embed_bits: float  # token (and position) embeddings
    lm_head_bits: float
    other_bits: float  # norms, biases, router
    # GGUF _M mixes: role -> (fraction of layers at `more_bits`, more_bits)
    mix: tuple[tuple[str, float, float], ...] = ()
    source: str = ""
    experts_only: bool = False  # only routed-expert weights are quantized; the rest stays 16-bit (gpt-oss MXFP4)
    kernels: str = ""  # which kernels run it, where that is narrower than "any engine"
    short: str = ""  # its name in a sentence, where the label's is long ("MXFP4"); default: the label before " ("

    @property
    def name(self) -> str:
        return self.short or self.label.split(" (")[0]

    @property
    def is_quantized(self) -> bool:
        return self.linear_bits < 16

    def bits(self, group: WeightGroup) -> float:
        role = group.role
        if role == "vision":  # vision encoders ship and run in 16-bit next to quantized text weights
            return 32.0 if self.id == "fp32" else _BF16
        if role == "embed":
            return self.embed_bits
        if role == "lm_head":
            return self.lm_head_bits
        if not group.is_linear:
            return self.other_bits
        if self.experts_only and not group.expert:
            return _BF16
        bits = self.linear_bits + self._per_row_bits(group)
        for mix_role, fraction, more_bits in self.mix:
            if role == mix_role:
                return (1 - fraction) * bits + fraction * more_bits
        return bits

    def _per_row_bits(self, group: WeightGroup) -> float:
        # LLM.int8 keeps one fp32 scale per output row (bitsandbytes Int8Params.SCB);
        # GPTQ keeps an int32 g_idx per input channel (AutoGPTQ QuantLinear).
        if self.id == "int8":
            return 32 / group.in_features
        if self.id == "gptq-4bit":
            return 32 / group.out_features
        return 0.0


_BF16 = 16.0
_Q6 = GGML_BITS["Q6_K"]
# TheBloke's GGUF model cards describe the k-quant mixes of llama.cpp's quantizer:
# Q4_K_M / Q5_K_M "use Q6_K for half of the attention.wv and feed_forward.w2
# tensors"; Q3_K_M uses Q4_K for attention.wv, attention.wo and feed_forward.w2;
# Q2_K uses Q4_K for attention.wv and feed_forward.w2; output.weight is Q6_K.
_GGUF_SRC = "llama.cpp k-quant mixes as described in TheBloke/Llama-2-7B-GGUF model card (2023-09)"
# Ternary GGUF (TQ1_0 / TQ2_0): llama-quantize stores token_embd in Q4_K for these types and the output matrix in Q6_K
# (src/llama-quant.cpp, llama_tensor_get_type); norms stay F32. The weights must already be ternary (BitNet b1.58,
# TriLM): ternarizing a 16-bit model this way destroys it.
_TQ_SRC = "ggml-org/llama.cpp ggml/src/ggml-common.h (block_tq1_0, block_tq2_0), PR #8151; src/llama-quant.cpp (token_embd Q4_K, output Q6_K)"
_TQ_KERNELS = "llama.cpp's ternary dot products (CPU; PR #8151); for models trained ternary (BitNet b1.58, TriLM)"

# MLX affine quantization (mlx.core.quantize, mode "affine"; mlx_lm.convert -q with --q-group-size 64 and --q-bits 4 by
# default): each group of 64 weights along a row shares one scale and one bias stored in the weights' 16-bit dtype, so
# b bits per weight cost b + 2 x 16 / 64 = b + 0.5 (4-bit: 4.5; 8-bit: 8.5). mlx_lm's nn.quantize quantizes every
# Linear and Embedding, so the embedding table and the output head are stored at the same bits; norms stay 16-bit.
MLX_GROUP_SIZE = 64
MLX_SCALE_BIAS_BITS = 2 * 16 / MLX_GROUP_SIZE
_MLX_SRC = (
    "MLX docs, mlx.core.quantize (affine mode: group size 32/64*/128, bits 2-8, 4* default; scale and bias per group "
    "in the input's dtype), https://ml-explore.github.io/mlx/build/html/python/_autosummary/mlx.core.quantize.html; "
    "mlx-lm convert -q (group size 64, 4 bits by default)"
)
_MLX_KERNELS = "MLX's quantized matmul kernels (mlx-lm: Metal on Apple silicon, or MLX's CUDA backend); other engines do not read MLX's packing"


def _mlx_format(bits: int) -> WeightFormat:
    b = bits + MLX_SCALE_BIAS_BITS
    return WeightFormat(f"mlx-q{bits}", f"MLX {bits}-bit (group 64)", b, b, b, _BF16, source=_MLX_SRC, kernels=_MLX_KERNELS)


FORMATS: dict[str, WeightFormat] = {
    f.id: f
    for f in (
        WeightFormat("fp32", "FP32", 32, 32, 32, 32, source="IEEE 754 single precision"),
        WeightFormat("bf16", "BF16", 16, 16, 16, 16, source="bfloat16"),
        WeightFormat("fp16", "FP16", 16, 16, 16, 16, source="IEEE 754 half precision"),
        # FP8 checkpoints (e.g. FBGEMM / llm-compressor FP8) quantize linear layers
        # with per-tensor or per-channel scales; embeddings and lm_head stay BF16.
        WeightFormat("fp8", "FP8 (E4M3)", 8, _BF16, _BF16, _BF16, source="Micikevicius et al. 2022, FP8 Formats for Deep Learning"),
        WeightFormat("int8", "INT8 (LLM.int8)", 8, _BF16, _BF16, _BF16, source="Dettmers et al. 2022, LLM.int8() (arXiv 2208.07339)"),
        # Symmetric group-wise int4 with one fp16 scale per 128 weights.
        WeightFormat("int4", "INT4 (group 128)", 4 + 16 / 128, _BF16, _BF16, _BF16, source="group-wise symmetric int4, fp16 scale per 128 weights"),
        # NF4 with double quantization: 4 bits + 8-bit absmax per 64-block +
        # fp32 second-level constant per 256 blocks = 4 + 8/64 + 32/(64*256)
        # (Dettmers et al. 2023, QLoRA, arXiv 2305.14314, Sec. 3 "Double Quantization").
        WeightFormat("nf4", "NF4 (bitsandbytes, double quant)", 4 + 8 / 64 + 32 / (64 * 256), _BF16, _BF16, _BF16, source="Dettmers et al. 2023, QLoRA, Sec. 3"),
        # GPTQ group 128: 4-bit weights, fp16 scale and 4-bit zero per group
        # (Frantar et al. 2022, arXiv 2210.17323; AutoGPTQ packing), + g_idx.
        WeightFormat("gptq-4bit", "GPTQ 4-bit (g128)", 4 + 16 / 128 + 4 / 128, _BF16, _BF16, _BF16, source="Frantar et al. 2022, GPTQ; AutoGPTQ QuantLinear layout"),
        # AWQ group 128: same scale/zero layout, no g_idx (Lin et al. 2023, arXiv 2306.00978).
        WeightFormat("awq-4bit", "AWQ 4-bit (g128)", 4 + 16 / 128 + 4 / 128, _BF16, _BF16, _BF16, source="Lin et al. 2023, AWQ; AutoAWQ GEMM layout"),
        WeightFormat("gguf-q8_0", "GGUF Q8_0", GGML_BITS["Q8_0"], GGML_BITS["Q8_0"], GGML_BITS["Q8_0"], 32, source=_GGUF_SRC),
        WeightFormat("gguf-q6_k", "GGUF Q6_K", _Q6, _Q6, _Q6, 32, source=_GGUF_SRC),
        WeightFormat("gguf-q5_k_m", "GGUF Q5_K_M", GGML_BITS["Q5_K"], GGML_BITS["Q5_K"], _Q6, 32, mix=(("attn_v", 0.5, _Q6), ("mlp_down", 0.5, _Q6)), source=_GGUF_SRC),
        WeightFormat("gguf-q4_k_m", "GGUF Q4_K_M", GGML_BITS["Q4_K"], GGML_BITS["Q4_K"], _Q6, 32, mix=(("attn_v", 0.5, _Q6), ("mlp_down", 0.5, _Q6)), source=_GGUF_SRC),
        # Q4_0 (the older llama.cpp and Ollama default): every matrix Q4_0 except the output matrix, kept at Q6_K.
        WeightFormat("gguf-q4_0", "GGUF Q4_0", GGML_BITS["Q4_0"], GGML_BITS["Q4_0"], _Q6, 32, source=_GGUF_SRC),
        WeightFormat(
            "gguf-q3_k_m",
            "GGUF Q3_K_M",
            GGML_BITS["Q3_K"],
            GGML_BITS["Q3_K"],
            _Q6,
            32,
            mix=(("attn_v", 1.0, 4.5), ("attn_o", 1.0, 4.5), ("mlp_down", 1.0, 4.5)),
            source=_GGUF_SRC,
        ),
        WeightFormat("gguf-q2_k", "GGUF Q2_K", GGML_BITS["Q2_K"], GGML_BITS["Q2_K"], _Q6, 32, mix=(("attn_v", 1.0, 4.5), ("mlp_down", 1.0, 4.5)), source=_GGUF_SRC),
        # OCP Microscaling (MX) v1.0: FP4 (E2M1) elements in blocks of 32 sharing one 8-bit (E8M0) scale = 4.25 bits;
        # gpt-oss ships its MoE expert weights this way and everything else in BF16 (gpt-oss model card, 2025).
        WeightFormat(
            "mxfp4",
            "MXFP4 experts + BF16",
            4 + 8 / 32,
            _BF16,
            _BF16,
            _BF16,
            experts_only=True,
            source="OCP Microscaling Formats (MX) Specification v1.0; OpenAI gpt-oss model card (2025)",
            short="MXFP4",
        ),
        *(
            WeightFormat(
                f"gguf-{tq.lower()}",
                f"GGUF {tq} (ternary, {GGML_BITS[tq]:.2f} bpw)",
                GGML_BITS[tq],
                GGML_BITS["Q4_K"],
                _Q6,
                32,
                source=_TQ_SRC,
                kernels=_TQ_KERNELS,
            )
            for tq in ("TQ1_0", "TQ2_0")
        ),
        # bitnet.cpp's I2_S: 2 bits per ternary weight (4 per byte in blocks of 128) plus one fp32 scale per tensor in
        # a 32-byte tail (ceil(n / 4) + 32 bytes: left out, 32 bytes a matrix); token_embd and the norms stay F16 and
        # the output reuses the tied embedding (microsoft/BitNet docs/I2_s.md).
        WeightFormat(
            "bitnet-i2_s",
            "BitNet b1.58 I2_S (bitnet.cpp, 2 bpw)",
            2.0,
            _BF16,
            _BF16,
            _BF16,
            source="microsoft/BitNet docs/I2_s.md (I2_S layout); BitNet b1.58 2B4T model card (W1.58A8: ternary weights, 8-bit activations)",
            kernels="bitnet.cpp (Microsoft's llama.cpp fork: I2_S, TL1 and TL2 lookup-table kernels, CPU first) for BitNet b1.58 models; "
            "upstream llama.cpp does not read I2_S (convert to TQ1_0 / TQ2_0 instead)",
        ),
        *(_mlx_format(bits) for bits in (4, 8, 3, 6)),
    )
}

# Bytes per cached K or V element. llama.cpp's quantized caches (--cache-type-k/-v) use its weight blocks:
# q8_0 = 34 bytes per 32 values, q4_0 = 18 bytes per 32 (ggml-common.h block_q8_0 / block_q4_0).
KV_CACHE_BYTES: dict[str, float] = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "q8_0": 34 / 32, "q4_0": 18 / 32}
# mlx-lm's quantized KV cache (mlx_lm.generate --kv-bits 8 or 4, --kv-group-size 64: QuantizedKVCache) stores the same
# bytes: 8 or 4 bits plus a 16-bit scale and bias per 64 values = 8.5 or 4.5 bits, as q8_0 (34 B / 32) and q4_0 (18 B / 32).
KV_FORMAT_SOURCE = "ggml-org/llama.cpp ggml/src/ggml-common.h (block_q8_0, block_q4_0); vLLM docs, Quantized KV cache (fp8)"


def weight_bytes(arch: Architecture, fmt: WeightFormat) -> float:
    """Bytes to hold all weights of `arch` in `fmt` (a checkpoint's size)."""
    # With tied embeddings GGUF stores the shared matrix with the output's type
    # (llama.cpp quantizer treats token_embd as output when there is no output.weight).
    tied_gguf = arch.tie_embeddings and fmt.id.startswith("gguf")
    total_bits = 0.0
    for g in arch.weight_groups:
        bits = fmt.lm_head_bits if tied_gguf and g.role == "embed" and g.in_features == arch.vocab_size else fmt.bits(g)
        total_bits += g.params * bits
    return total_bits / 8 * arch.param_scale


def routed_expert_bytes(arch: Architecture, fmt: WeightFormat) -> float:
    """Bytes of the routed experts' MLPs of `arch` in `fmt` (0 for a dense model), before `param_scale` (as the
    roofline's weight parts)."""
    if not arch.is_moe:
        return 0.0
    return sum(g.params * fmt.bits(g) / 8 for g in arch.weight_groups if g.role in MLP_ROLES and g.count > g.active)
