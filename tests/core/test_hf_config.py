"""config.json parsing: family conventions and clear errors."""

import pytest

from core.catalog.presets import preset
from core.model.hf_config import ConfigError, parse_hf_config

LLAMA2_7B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
}


def test_pasted_config_equals_preset():
    assert parse_hf_config(LLAMA2_7B).total_params == preset("llama-2-7b").architecture.total_params


def test_head_dim_explicit_differs_from_hidden_over_heads():
    nemo = preset("mistral-nemo-12b").architecture  # head_dim 128 while 5120 / 32 = 160
    assert nemo.head_dim == 128
    assert nemo.hidden_size // nemo.num_heads == 160


def test_qwen2_has_qkv_bias_and_no_window_by_default():
    arch = preset("qwen2.5-7b").architecture
    assert arch.qkv_bias and not arch.o_bias
    assert arch.sliding_window is None  # use_sliding_window is false


def test_gemma2_alternating_window_and_four_norms():
    arch = preset("gemma-2-9b").architecture
    assert arch.sliding_window == 4096
    assert arch.windowed_layers == 21 and arch.norms_per_layer == 4  # 42 layers, every other one local
    assert arch.tie_embeddings


def test_mixtral_moe_fields():
    arch = preset("mixtral-8x7b").architecture
    assert (arch.num_experts, arch.experts_per_token) == (8, 2)


def test_deepseek_mla_and_shared_experts():
    arch = preset("deepseek-v3").architecture
    assert arch.is_mla and arch.kv_lora_rank == 512 and arch.qk_rope_head_dim == 64
    assert arch.shared_expert_intermediate_size == arch.moe_intermediate_size  # n_shared_experts = 1
    assert arch.num_moe_layers == 61 - 3  # first_k_dense_replace = 3
    assert any("multi-token" in a for a in arch.assumptions)


def test_gpt2_conventions():
    arch = preset("gpt2").architecture
    assert arch.norm == "layernorm" and not arch.gated_mlp and arch.learned_positions == 1024


def test_nested_text_config_is_used():
    arch = parse_hf_config({"model_type": "llava", "text_config": LLAMA2_7B})
    assert arch.num_layers == 32


def test_unknown_model_type_gets_a_named_warning():
    arch = parse_hf_config({**LLAMA2_7B, "model_type": "brandnew"})
    assert any("brandnew" in a for a in arch.assumptions)


def test_missing_intermediate_size_is_assumed_and_said():
    cfg = {k: v for k, v in LLAMA2_7B.items() if k != "intermediate_size"}
    arch = parse_hf_config(cfg)
    assert any("intermediate_size" in a for a in arch.assumptions)


@pytest.mark.parametrize(
    ("cfg", "needle"),
    [
        ({"model_type": "llama"}, "missing required fields: hidden_size, num_hidden_layers, num_attention_heads, vocab_size"),
        ({**LLAMA2_7B, "num_hidden_layers": 0}, "num_hidden_layers"),
        ({**LLAMA2_7B, "hidden_size": -5}, "hidden_size"),
        ({**LLAMA2_7B, "hidden_size": "big"}, "hidden_size"),
        ({**LLAMA2_7B, "num_key_value_heads": 5}, "multiple"),
        ({**LLAMA2_7B, "vocab_size": float("inf")}, "vocab_size"),
        ([1, 2, 3], "JSON object"),
        ("hello", "JSON object"),
    ],
)
def test_bad_configs_raise_config_error_naming_the_field(cfg, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_hf_config(cfg)
