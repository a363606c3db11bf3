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


def counted(p) -> int:
    """Our count on the basis the published figure uses (see Preset.published_params_basis)."""
    a = p.architecture
    stored_head = a.vocab_size * a.hidden_size if p.published_params_basis == "checkpoint+stored-head" else 0
    return a.total_params + (a.mtp_params if p.published_params_basis.startswith("checkpoint") else 0) + stored_head


def rounding_tolerance(published: float) -> float:
    """A model-card figure such as "7B", "3.3B" or "132B" is good to half a unit of its last digit."""
    scale = 1e9 if published >= 1e9 else 1e6
    text = f"{published / scale:g}"
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10.0**-decimals * scale / published


def test_every_preset_matches_its_published_count():
    presets = load_presets()
    assert len(presets) >= 60
    for p in presets.values():
        rel = rounding_tolerance(p.published_params) if p.published_params_basis == "rounded" else 0.005
        assert counted(p) == pytest.approx(p.published_params, rel=rel), (p.id, counted(p), p.published_params)
        assert p.source and p.as_of


def test_exact_counts_are_most_of_the_catalog():
    rounded = [p.id for p in load_presets().values() if p.published_params_basis == "rounded"]
    assert len(rounded) <= 6, rounded


# One published config per model type the reader knows natively (issue #10): each sized within 0.5%.
MODEL_TYPES = [
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma3",
    "gemma3_text",
    "llama4",
    "gpt_oss",
    "phi",
    "olmo2",
    "olmoe",
    "granite",
    "granitemoe",
    "cohere",
    "starcoder2",
    "gpt_neox",
    "mistral3",
    "dbrx",
    "glm4_moe",
    "deepseek_v3",
    "kimi_k2",
    "phi3",
    "smollm3",
]


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_a_published_config_of_every_model_type(model_type):
    hits = [p for p in load_presets().values() if p.config and p.config.get("model_type") == model_type]
    assert hits, f"no preset of type {model_type}"
    for p in hits:
        assert not any("not one we know" in a for a in p.architecture.assumptions), p.id
        rel = 0.005 if p.published_params_basis != "rounded" else rounding_tolerance(p.published_params)
        assert counted(p) == pytest.approx(p.published_params, rel=rel), p.id


def active_counted(p) -> int:
    a = p.architecture
    embedding = a.vocab_size * a.hidden_size
    drop = {"all": 0, "without-embedding": embedding, "without-embedding-and-head": embedding * (1 if a.tie_embeddings else 2)}
    return a.active_params - drop[p.active_params_basis]


def test_moe_active_counts_within_2_percent_of_the_model_cards():
    moe = [p for p in load_presets().values() if p.active_params_published]
    assert len(moe) >= 12
    for p in moe:
        assert p.architecture.is_moe, p.id
        assert active_counted(p) == pytest.approx(p.active_params_published, rel=0.02), (p.id, active_counted(p))


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


def test_unknown_moe_configs_are_never_sized_as_dense():
    """A Qwen1.5-MoE config under a type name the reader has never seen still has 14.3B parameters, not 1.9B."""
    from core.model.hf_config import parse_hf_config

    cfg = {**preset("qwen1.5-moe-a2.7b").config, "model_type": "qwen9_moe"}
    assert parse_hf_config(cfg).total_params == pytest.approx(14.3e9, rel=0.01)


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
