"""The seed notes' topics a user can now choose (issue 29, part 4), pinned to published figures:
ternary weights (llama.cpp TQ1_0 / TQ2_0, bitnet.cpp I2_S), chips whose model lives in on-chip SRAM (Groq's LPU,
Cerebras' WSE-3) and DeepSpeed-MII as a serving engine."""

import json
import math

import pytest

from core.catalog.accelerators import get_accelerator
from core.catalog.engine_formats import load_engine_formats
from core.layout import Layout
from core.memory.components import inference_components
from core.memory.engines import ENGINES, MII_RESERVED_BYTES
from core.memory.estimate import estimate_memory
from core.memory.evaluator import Evaluator, fit_capacity
from core.memory.layouts import devices_needed_by_accelerator
from core.model.formats import FORMATS, weight_bytes
from core.model.hf_config import parse_hf_config
from core.scenario import Scenario
from core.speed.roofline import inference_speed

# --- ternary weights ----------------------------------------------------------------------------------------------

# ggml-org/llama.cpp ggml/src/ggml-common.h: "// 1.6875 bpw" above block_tq1_0 (48 + 4 + 2 bytes per 256 weights) and
# "// 2.0625 bpw" above block_tq2_0 (64 + 2 bytes per 256); tools/quantize lists them as "1.69 bpw ternarization" and
# "2.06 bpw ternarization".
TQ_BPW = {"gguf-tq1_0": 1.6875, "gguf-tq2_0": 2.0625}

# microsoft/bitnet-b1.58-2B-4T config.json (Hugging Face, as shown on the model's page)
BITNET_2B4T = {
    "architectures": ["BitNetForCausalLM"],
    "model_type": "bitnet",
    "hidden_act": "relu2",
    "hidden_size": 2560,
    "intermediate_size": 6912,
    "max_position_embeddings": 4096,
    "num_attention_heads": 20,
    "num_hidden_layers": 30,
    "num_key_value_heads": 5,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}
# The model card's comparison table: "Memory (Non-emb) 0.4GB" for BitNet b1.58 2B (against 2 GB for Llama 3.2 1B).
CARD_NON_EMBEDDING_GB = 0.4


@pytest.mark.parametrize("fmt", sorted(TQ_BPW))
def test_ternary_gguf_bits_per_weight(fmt):
    assert FORMATS[fmt].linear_bits == TQ_BPW[fmt]
    assert round(FORMATS[fmt].linear_bits, 2) == {"gguf-tq1_0": 1.69, "gguf-tq2_0": 2.06}[fmt]
    assert FORMATS[fmt].is_quantized
    assert [e for e, row in load_engine_formats().items() if fmt in row.weights_formats] == ["llama.cpp"]  # data/engine_formats.csv


def _bitnet():
    return parse_hf_config(BITNET_2B4T, "BitNet b1.58 2B4T")


def test_bitnet_2b4t_non_embedding_memory_matches_the_model_card():
    """0.4 GB is the linear layers at log2(3) = 1.58 bits a weight; the formats that store them spend a little more."""
    arch = _bitnet()
    linear = sum(g.params for g in arch.weight_groups if g.is_linear and g.role not in ("embed", "lm_head"))
    assert linear == pytest.approx(2.084e9, rel=0.001)
    assert linear * math.log2(3) / 8 / 1e9 == pytest.approx(CARD_NON_EMBEDDING_GB, abs=0.05)
    for fmt, bits in (("gguf-tq1_0", 1.6875), ("gguf-tq2_0", 2.0625), ("bitnet-i2_s", 2.0)):
        non_embedding = sum(g.params * FORMATS[fmt].bits(g) for g in arch.weight_groups if g.is_linear and g.role not in ("embed", "lm_head")) / 8
        assert non_embedding == pytest.approx(linear * bits / 8)
        assert CARD_NON_EMBEDDING_GB * 1e9 < non_embedding < 1.4 * CARD_NON_EMBEDDING_GB * 1e9


def test_bitnet_i2_s_file_is_ternary_layers_plus_an_f16_embedding():
    """I2_S keeps token_embd in F16 and ties the output to it (microsoft/BitNet docs/I2_s.md): the 128,256 x 2,560
    table alone is 657 MB of the file, more than the ternary layers."""
    arch = _bitnet()
    total = weight_bytes(arch, FORMATS["bitnet-i2_s"])
    embedding = 128_256 * 2_560 * 2
    assert total == pytest.approx(embedding + 2.084e9 * 2 / 8, rel=0.01)
    assert weight_bytes(arch, FORMATS["gguf-tq1_0"]) < total < weight_bytes(arch, FORMATS["bf16"]) / 4


def test_ternary_formats_are_in_the_schema_and_serve_through_llama_cpp():
    from core.scenario import Scenario as S

    enum = json.dumps(S.model_json_schema())
    for fmt in ("gguf-tq1_0", "gguf-tq2_0", "bitnet-i2_s"):
        assert f'"{fmt}"' in enum
    res = estimate_memory(Scenario(model="llama-3.1-8b", weights_format="gguf-tq1_0", serving_engine="vllm", accelerator="rtx-4090"))
    texts = [t.render() for t in res.assumption_texts]
    assert any("does not load GGUF TQ1_0" in t for t in texts), texts


# --- chips whose model lives in on-chip SRAM ----------------------------------------------------------------------------

# TechPowerUp (Feb 2024): 230 MB of SRAM per Groq LPU at 80 TB/s; Groq serves Llama 2 70B (4,096-token context) at
# 300 tokens/s per user. Cerebras (WSE-3, March 2024): 44 GB of SRAM at 21 PB/s per wafer; Cerebras Inference launch
# (2024-08-27): 1,800 tokens/s on Llama 3.1 8B and 450 on Llama 3.1 70B, 16-bit weights.
GROQ_LLAMA2_70B_TPS = 300
GROQ_LLAMA2_70B_CHIPS = 576  # 8 racks of 9 GroqNodes of 8 chips, as Groq described its Llama 2 70B deployment
CEREBRAS_TPS = {"llama-3.1-8b": 1800, "llama-3.1-70b": 450}


def test_sram_per_chip_and_bandwidth_are_the_datasheets():
    groq, wse = get_accelerator("groq-lpu"), get_accelerator("cerebras-wse-3")
    assert groq.memory_bytes == pytest.approx(230e6, rel=1e-4) and groq.memory_bandwidth_gbps == 80_000
    assert wse.memory_bytes == pytest.approx(44e9, rel=1e-4) and wse.memory_bandwidth_gbps == 21e6
    assert groq.weights_in_sram and wse.weights_in_sram and not get_accelerator("h100-sxm").weights_in_sram


def test_no_gpu_runtime_on_sram_chips():
    sc = Scenario(model="llama-3.1-8b", accelerator="groq-lpu", seq_len=4096)
    comps = inference_components(sc, sc.architecture, Layout(1, 4, 19), 1, 4096)
    assert comps.overhead == 0 and comps.allocator == 0
    assert fit_capacity(sc, 230e6) == 230e6  # no engine reservation


def test_chips_to_hold_llama2_70b():
    """Groq ran Llama 2 70B on 576 chips: fewer than 16-bit weights need (138 GB / 230 MB = 600 or more), more than
    8-bit ones do: Groq stores some weights below 16 bits."""
    bf16 = estimate_memory(Scenario(model="llama-2-70b", accelerator="groq-lpu", seq_len=4096)).devices_needed
    int8 = estimate_memory(Scenario(model="llama-2-70b", accelerator="groq-lpu", weights_format="int8", seq_len=4096)).devices_needed
    assert math.ceil(137.95e9 / 230e6) <= bf16 < 1.1 * math.ceil(137.95e9 / 230e6)
    assert int8 < GROQ_LLAMA2_70B_CHIPS < bf16


def test_wafers_to_hold_a_70b_model():
    need = devices_needed_by_accelerator(Scenario(model="llama-3.1-70b", seq_len=4096), ["cerebras-wse-3", "groq-lpu", "h100-sxm"])
    assert need["cerebras-wse-3"].devices == 4  # 141 GB over 44 GB wafers
    assert need["h100-sxm"].devices == 2
    assert need["groq-lpu"].devices > 600


def _speed(model: str, acc: str) -> float:
    sc = Scenario(model=model, accelerator=acc, seq_len=4096)
    need = estimate_memory(sc).layout_needed
    return inference_speed(sc, layout=Layout(1, need.tensor_parallel, need.pipeline_parallel)).decode_tokens_per_s


def test_groq_decode_speed_against_published():
    est = _speed("llama-2-70b", "groq-lpu")
    assert est == pytest.approx(GROQ_LLAMA2_70B_TPS, rel=0.25)
    # the weights alone, read once per token at one chip's SRAM bandwidth (the chips take turns): a ceiling
    ceiling = 80e12 / 137.95e9
    assert est < ceiling and GROQ_LLAMA2_70B_TPS < ceiling


@pytest.mark.parametrize("model", sorted(CEREBRAS_TPS))
def test_cerebras_decode_speed_against_published(model):
    assert _speed(model, "cerebras-wse-3") == pytest.approx(CEREBRAS_TPS[model], rel=0.35)


def test_sram_chips_serve_in_the_comparison_without_an_hourly_price():
    from core.money.compare import compare_accelerators

    rows = {r.accelerator_id: r for r in compare_accelerators(Scenario(model="llama-3.1-70b", seq_len=4096), ["groq-lpu", "cerebras-wse-3", "h100-sxm"])}
    for aid in ("groq-lpu", "cerebras-wse-3"):
        assert rows[aid].usd_per_device_hour is None and rows[aid].decode_tokens_per_s > 5 * rows["h100-sxm"].decode_tokens_per_s
        assert {e.aspect for e in rows[aid].ecosystem} >= {"memory", "quantization", "scaling", "frameworks"}
    assert rows["groq-lpu"].devices > 600 and rows["cerebras-wse-3"].devices == 4


# --- DeepSpeed-MII --------------------------------------------------------------------------------------------------


def test_deepspeed_mii_keeps_one_gb_back_and_gives_the_rest_to_the_kv_cache():
    """deepspeed/inference/v2/ragged/manager_configs.py: MemoryConfig(mode=RESERVE, size=1_000_000_000),
    max_ragged_batch_size = 768."""
    engine = ENGINES["deepspeed-mii"]
    assert engine.prefill_chunk_tokens == 768 and engine.reserve_bytes == MII_RESERVED_BYTES == 1_000_000_000
    sc = Scenario(model="llama-3.1-8b", serving_engine="deepspeed-mii", seq_len=4096, batch_size=8)
    res = estimate_memory(sc)
    usable = get_accelerator("h100-sxm").usable_memory_bytes
    assert res.engine_reserved_bytes == pytest.approx(usable - 1e9, abs=1)
    vllm = estimate_memory(sc.model_copy(update={"serving_engine": "vllm"}))
    assert res.kv_pool_sequences > vllm.kv_pool_sequences  # all but 1 GB against vLLM's 90%
    ev = Evaluator(sc, sc.architecture)
    assert ev.total(Layout(1, 1, 1), 8, 4096) > 0


# --- Colab and SageMaker price rows -----------------------------------------------------------------------------------

# Colab: $9.99 for 100 compute units (TechCrunch, 2022-09-29); compute units an hour measured on Colab Pro+ on
# 2022-09-30 (currypurin.com): T4 1.96, V100 5.36, A100 13.08.
COLAB_UNITS_PER_HOUR = {"t4": 1.96, "v100-16gb": 5.36, "a100-sxm-40gb": 13.08}


def test_colab_rows_are_compute_units_times_their_price():
    from core.catalog.prices import load_prices

    colab = {r.accelerator_id: r for r in load_prices() if r.provider == "colab"}
    assert set(colab) == set(COLAB_UNITS_PER_HOUR)  # no K80: Colab no longer offers it
    for aid, units in COLAB_UNITS_PER_HOUR.items():
        assert colab[aid].on_demand_usd_per_hour == pytest.approx(units * 9.99 / 100, abs=1e-4)
        assert colab[aid].estimate and "K80" in colab[aid].notes


def test_colab_prices_training_but_hosts_no_serving_endpoint():
    from core.catalog.prices import load_prices
    from core.catalog.providers import can_serve, spans_nodes
    from core.money.pricing import rows_for, serving_rows_for

    assert not can_serve("colab") and not spans_nodes("colab") and can_serve("sagemaker") and spans_nodes("sagemaker")
    # Colab's compute-unit rates were measured in 2022: stale rows price a bill only when the user opts in
    # (core/catalog/price_trust.py), and then they price training but host no serving endpoint
    assert not any(r.provider == "colab" for r in rows_for("t4"))
    everything = load_prices()
    assert any(r.provider == "colab" for r in rows_for("t4", everything))
    assert not any(r.provider == "colab" for r in serving_rows_for("t4", everything))
    from core.money.serving import Traffic, serving_options

    plans = serving_options(
        Scenario(model="qwen2.5-0.5b", accelerator="t4", seq_len=2048),
        Traffic(requests_per_day=1000, input_tokens_per_request=500, output_tokens_per_request=200),
        everything,
        accelerator_ids=["t4"],
    )
    assert plans and all(p.provider != "colab" for p in plans)
    sage = {r.instance_type: r for r in load_prices() if r.provider == "sagemaker"}
    assert sage["ml.g5.xlarge"].on_demand_usd_per_hour == 1.408 and sage["ml.p4d.24xlarge"].accelerators_per_instance == 8


def test_explain_covers_the_new_engine_and_the_sram_chips():
    from core.estimate import estimate
    from core.memory.explain import explain

    mii = Scenario(model="llama-3.1-8b", serving_engine="deepspeed-mii")
    reservation = next(e for e in explain(mii, estimate(mii)) if e.component == "engine reservation")
    assert reservation.bytes == pytest.approx(get_accelerator("h100-sxm").usable_memory_bytes - 1e9, abs=1)
    groq = Scenario(model="llama-3.1-8b", accelerator="groq-lpu")
    parts = {e.component: e for e in explain(groq, estimate(groq))}
    assert parts["overhead"].bytes == 0 and "SRAM" in parts["overhead"].formula


# --- quantization methods the seed notes name (GPTQ, AWQ, SmoothQuant, BiLLM) ----------------------------------------


def test_smoothquant_and_billm_are_said_where_their_formats_are_chosen():
    """The seed notes name SmoothQuant and BiLLM beside GPTQ and AWQ: each is a sourced quality note
    (data/quality_notes.csv) on the formats it speaks to, with its paper's own figures: SmoothQuant's W8A8 at up to
    1.56x the speed and half the memory; BiLLM's 8.41 perplexity on Llama 2 70B at 1.08 bits a weight."""
    from core.catalog.quality import caveats

    smooth = {n.id: n for n in caveats("int8")}["smoothquant-w8a8"]
    assert "1.56x" in smooth.caveat and "arXiv:2211.10438" in smooth.source
    assert "smoothquant-w8a8" in {n.id for n in caveats("fp8")} and "smoothquant-w8a8" not in {n.id for n in caveats("bf16")}
    billm = {n.id: n for n in caveats("gguf-q2_k")}["billm-1bit"]
    assert "8.41" in billm.caveat and "1.08 bits" in billm.caveat and "arXiv:2402.04291" in billm.source
    assert {n.id for n in caveats("gguf-tq1_0")} >= {"billm-1bit"} and "billm-1bit" not in {n.id for n in caveats("gguf-q4_k_m")}


# --- the AMD Radeon PRO V620 (the seed notes list it among Azure's GPU VMs) -----------------------------------------


def test_the_radeon_pro_v620_serves_with_the_engines_that_build_for_rdna2():
    """32 GB at 512 GB/s, 20.28 TFLOPS FP32 (2 x 4,608 shaders x 2.2 GHz) and FP16 at twice that (no matrix cores, no
    BF16): vLLM's ROCm builds skip RDNA 2's gfx1030 and say so with the AMD clause of their reason (not the CUDA one);
    llama.cpp (HIP) serves it."""
    from core.catalog.engine_hardware import engine_problem

    v620 = get_accelerator("radeon-pro-v620")
    assert (v620.memory_gib, v620.memory_bandwidth_gbps, v620.kernel_target) == (32, 512, "gfx1030")
    assert v620.fp32_tflops == pytest.approx(2 * 4608 * 2.2e9 / 1e12, rel=0.001)
    assert v620.bf16_tflops == pytest.approx(2 * v620.fp32_tflops, rel=0.001) and not v620.supports_bf16
    said = engine_problem("vllm", v620)
    assert said is not None and "not RDNA 2's gfx1030" in said and "CUDA" not in said and "llama.cpp" in said
    assert "CUDA builds need compute capability 7.5" in (engine_problem("vllm", get_accelerator("k80")) or "")
    assert engine_problem("llama.cpp", v620) is None
    served = estimate_memory(Scenario(model="llama-3.1-8b", accelerator="radeon-pro-v620", serving_engine="llama.cpp", weights_format="gguf-q4_k_m"))
    assert served.fits
