"""Weight formats against published checkpoint sizes."""

import pytest

from core.catalog.presets import preset
from core.model.formats import FORMATS, weight_bytes
from core.model.hf_config import parse_hf_config

LLAMA2_7B = preset("llama-2-7b").architecture

# TheBloke/Llama-2-7B-GGUF file sizes in bytes (Hugging Face file listing,
# 2023-09; the same files llama.cpp's llama-bench prints as 3.80 / 4.45 /
# 6.67 GiB in ggml-org/llama.cpp PR #3084).
GGUF_LLAMA2_7B_BYTES = {
    "gguf-q4_k_m": 4_081_004_224,
    "gguf-q5_k_m": 4_783_156_928,
    "gguf-q8_0": 7_161_089_728,
}
# llama.cpp examples/quantize README, Llama 2 7B bits per weight.
GGUF_LLAMA2_7B_BPW = {"gguf-q6_k": 6.56, "gguf-q3_k_m": 3.91, "gguf-q2_k": 3.35}


@pytest.mark.parametrize("fmt", sorted(GGUF_LLAMA2_7B_BYTES))
def test_gguf_file_sizes_llama2_7b(fmt):
    # A GGUF file also holds the tokenizer and metadata (~0.5 MB): 2% tolerance.
    assert weight_bytes(LLAMA2_7B, FORMATS[fmt]) == pytest.approx(GGUF_LLAMA2_7B_BYTES[fmt], rel=0.02)


@pytest.mark.parametrize("fmt", sorted(GGUF_LLAMA2_7B_BPW))
def test_gguf_bits_per_weight_llama2_7b(fmt):
    bpw = weight_bytes(LLAMA2_7B, FORMATS[fmt]) * 8 / LLAMA2_7B.total_params
    # Q2_K's mix changed across llama.cpp versions (attention.wo also raised): 10%.
    assert bpw == pytest.approx(GGUF_LLAMA2_7B_BPW[fmt], rel=0.10 if fmt == "gguf-q2_k" else 0.03)


def test_gguf_llama2_13b_q4_k_m():
    # TheBloke/CodeLlama-13B-Instruct-GGUF Q4_K_M: 7,866,070,016 bytes (Llama 2 13B
    # shape with a 32,016-token vocabulary).
    arch = preset("llama-2-13b").architecture
    assert weight_bytes(arch, FORMATS["gguf-q4_k_m"]) == pytest.approx(7_866_070_016, rel=0.02)


def test_gguf_llama3_70b_q4_k_m_gib():
    # XiongjieDai/GPU-Benchmarks-on-LLM-Inference: Llama 3 70B Q4_K_M 39.59 GiB, F16 131.42 GiB.
    arch = preset("llama-3.1-70b").architecture
    assert weight_bytes(arch, FORMATS["gguf-q4_k_m"]) / 2**30 == pytest.approx(39.59, rel=0.02)
    assert weight_bytes(arch, FORMATS["fp16"]) / 2**30 == pytest.approx(131.42, rel=0.01)


def test_nf4_double_quant_bits():
    # QLoRA paper Sec. 3: double quantization cuts the constants from 0.5 to 0.127 bits per parameter.
    assert FORMATS["nf4"].linear_bits - 4 == pytest.approx(0.127, abs=0.001)


def test_nf4_llama2_7b_matches_litgpt_inference_peak():
    # LitGPT resource tables (A100-40GB, bnb.nf4-dq, Llama-2-7b): 4.26 GB peak
    # (max_memory_allocated / 1e9), weights plus ~0.4 GB of dequantization buffers.
    assert weight_bytes(LLAMA2_7B, FORMATS["nf4"]) / 1e9 == pytest.approx(4.26, rel=0.10)


def test_gptq_llama2_13b_main_branch():
    # TheBloke/Llama-2-13B-GPTQ README "Provided files": main branch, 4 bits,
    # group size 128, act order False, AutoGPTQ: 7.26 GB.
    arch = preset("llama-2-13b").architecture
    assert weight_bytes(arch, FORMATS["gptq-4bit"]) / 1e9 == pytest.approx(7.26, rel=0.02)


def test_awq_is_gptq_without_g_idx():
    arch = preset("llama-2-13b").architecture
    gap = weight_bytes(arch, FORMATS["gptq-4bit"]) - weight_bytes(arch, FORMATS["awq-4bit"])
    assert 0 < gap < 0.01 * weight_bytes(arch, FORMATS["awq-4bit"])


def test_ggml_llama2_13b_k_quants():
    # localmodels/Llama-2-13B-ggml README (TheBloke's GGMLv3 table): q3_K_M 6.31 GB, q2_K 5.51 GB.
    arch = preset("llama-2-13b").architecture
    assert weight_bytes(arch, FORMATS["gguf-q3_k_m"]) / 1e9 == pytest.approx(6.31, rel=0.03)
    assert weight_bytes(arch, FORMATS["gguf-q2_k"]) / 1e9 == pytest.approx(5.51, rel=0.06)


def test_octocoder_bf16_and_int8():
    # transformers docs "Optimizing LLMs for Speed and Memory": bigcode/octocoder
    # peak max_memory_allocated 29.03 GiB in bf16 and 15.22 GiB with load_in_8bit.
    octo = parse_hf_config(
        {
            "model_type": "gpt_bigcode",
            "n_embd": 6144,
            "n_layer": 40,
            "n_head": 48,
            "n_positions": 8192,
            "vocab_size": 49152,
            "multi_query": True,
            "n_inner": 24576,
        }
    )
    assert weight_bytes(octo, FORMATS["bf16"]) / 2**30 == pytest.approx(29.03, rel=0.02)
    assert weight_bytes(octo, FORMATS["int8"]) / 2**30 == pytest.approx(15.22, rel=0.05)


def test_formats_order_by_size():
    sizes = [weight_bytes(LLAMA2_7B, FORMATS[f]) for f in ("fp32", "bf16", "int8", "gguf-q4_k_m", "nf4", "gguf-q2_k")]
    assert sizes == sorted(sizes, reverse=True)


def test_embeddings_stay_16_bit_for_bnb_and_gptq():
    emb = LLAMA2_7B.vocab_size * LLAMA2_7B.hidden_size
    nf4 = weight_bytes(LLAMA2_7B, FORMATS["nf4"])
    linears = LLAMA2_7B.total_params - 2 * emb
    assert nf4 == pytest.approx(2 * emb * 2 + linears * FORMATS["nf4"].linear_bits / 8, rel=0.001)
