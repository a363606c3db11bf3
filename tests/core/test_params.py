"""Parameter counts, KV-cache bytes per token and LoRA sizes against published numbers."""

import json

import pytest

from core.catalog.presets import load_presets, preset
from core.memory.components import lora_params

# Published totals (each preset's `published_params_source` in data/models.json
# names the model card / safetensors metadata / paper it comes from).
PUBLISHED = {
    "llama-2-7b": 6.74e9,  # Llama 2 model card, "7B" = 6,738,415,616 in safetensors
    "llama-2-13b": 13.02e9,
    "llama-2-70b": 68.98e9,
    "llama-3.1-8b": 8.03e9,  # HF model card
    "llama-3.1-70b": 70.55e9,
    "llama-3.1-405b": 405.85e9,
    "mistral-7b-v0.1": 7.24e9,
    "mixtral-8x7b": 46.7e9,  # Mistral AI, "Mixtral of experts" (arXiv 2401.04088): 47B total
    "mixtral-8x22b": 140.6e9,
    "qwen2.5-7b": 7.61e9,  # Qwen2.5 technical report / model card
    "qwen2.5-72b": 72.7e9,
    "gemma-2-9b": 9.24e9,
    "gemma-2-27b": 27.2e9,
    "phi-3-mini-4k": 3.82e9,  # Phi-3 report: 3.8B
    "deepseek-v3": 671e9,  # DeepSeek-V3 report (arXiv 2412.19437): 671B total, 37B activated
    "gpt2": 124.44e6,
}


@pytest.mark.parametrize("preset_id", sorted(PUBLISHED))
def test_total_params_within_half_percent_of_published(preset_id):
    total = preset(preset_id).architecture.total_params
    assert total == pytest.approx(PUBLISHED[preset_id], rel=0.005)


def test_every_preset_matches_its_published_count():
    presets = load_presets()
    assert len(presets) >= 25
    for p in presets.values():
        assert p.architecture.total_params == pytest.approx(p.published_params, rel=0.005), p.id
        assert p.source and p.as_of


@pytest.mark.parametrize(
    ("preset_id", "active"),
    [
        ("mixtral-8x7b", 12.9e9),  # Mixtral paper: 13B active parameters per token
        ("mixtral-8x22b", 39.1e9),  # Mistral AI announcement: 39B active of 141B
        ("deepseek-v3", 37e9),  # DeepSeek-V3 report: 37B activated
    ],
)
def test_moe_active_params(preset_id, active):
    assert preset(preset_id).architecture.active_params == pytest.approx(active, rel=0.02)


def test_dense_active_equals_total():
    arch = preset("llama-3.1-8b").architecture
    assert arch.active_params == arch.total_params


# KV cache bytes per token in 16-bit: 2 (K and V) x layers x KV heads x head dim x 2 bytes.
# Llama-2-7B 524,288 (0.5 MiB, vLLM paper Sec. 2.3 quotes 800 KB for 13B = 819,200);
# MLA: DeepSeek-V3 caches (512 + 64) x 61 layers (report Sec. 2.1.1).
KV_BYTES = {
    "llama-2-7b": 524_288,
    "llama-2-13b": 819_200,
    "llama-2-70b": 327_680,
    "llama-3.1-8b": 131_072,
    "llama-3.1-70b": 327_680,
    "llama-3.1-405b": 516_096,
    "mistral-7b-v0.1": 131_072,
    "mixtral-8x22b": 229_376,
    "qwen2.5-0.5b": 12_288,
    "qwen2.5-7b": 57_344,
    "gemma-2-9b": 344_064,
    "gemma-2-27b": 376_832,
    "phi-3-mini-4k": 393_216,
    "falcon-40b": 122_880,
    "gpt2": 36_864,
    "deepseek-v3": 70_272,
}


@pytest.mark.parametrize("preset_id", sorted(KV_BYTES))
def test_kv_bytes_per_token_exact(preset_id):
    from core.memory.components import kv_cache_bytes_per_token

    assert kv_cache_bytes_per_token(preset(preset_id).architecture, "bf16") == KV_BYTES[preset_id]


def test_llama3_8b_kv_at_8k_is_one_gib():
    # peers.md: Llama-3-8B, bf16, 8,192 tokens, batch 1 = 1.00 GiB (GQA-aware).
    from core.memory.components import kv_cache_bytes_per_token

    assert kv_cache_bytes_per_token(preset("llama-3.1-8b").architecture, "bf16") * 8192 == 2**30


def test_lora_trainable_params_match_peft_printouts():
    arch = preset("llama-2-7b").architecture
    # PEFT print_trainable_parameters for Llama-2-7B, r=16 on all 7 linear
    # modules: "trainable params: 39,976,960" (PEFT docs / QLoRA notebooks).
    assert lora_params(arch, 16, "all-linear") == 39_976_960
    # LitGPT resource tables: r=8 on query+value only = 4,194,304; our
    # "attention" target adds key and output, doubling it.
    assert lora_params(arch, 8, "attention") == 2 * 4_194_304


def test_catalog_file_is_sourced():
    from core.catalog.presets import DATA_DIR

    rows = json.loads((DATA_DIR / "models.json").read_text())
    for row in rows:
        assert row["source"].strip() and row["published_params_source"].strip()
