"""Parse a Hugging Face `config.json` object into an Architecture.

Each model family names its fields its own way; the conventions below follow
the configuration classes in `transformers` (LlamaConfig, MistralConfig,
MixtralConfig, Qwen2Config, Gemma2Config, Phi3Config, GPT2Config,
FalconConfig, DeepseekV3Config). An unknown `model_type` is read with the
Llama conventions and every guess is listed as an assumption.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import ValidationError

from core.model.architecture import Architecture

KNOWN_TYPES = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "gemma2",
    "phi3",
    "gpt2",
    "gpt_bigcode",
    "deepseek_v3",
    "deepseek_v2",
    "falcon",
)

# Alternative names for the same quantity, tried in order (the first is the
# Llama name; the others are GPT-2 / BLOOM / T5-style spellings).
ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
}


def safe_label(value: Any) -> str:
    """A model name or type from untrusted input, reduced to plain characters
    (letters, digits, '.', '/', '-', '_', ' ') so that no page renders it as
    Markdown, HTML or a link."""
    if not isinstance(value, str):
        return ""
    return re.sub(r"[^\w./ -]", "", value)[:120].strip()


class ConfigError(ValueError):
    """A config.json that cannot be sized; the message names the fields."""


def _get(cfg: dict[str, Any], name: str) -> Any:
    for alias in ALIASES.get(name, (name,)):
        if cfg.get(alias) is not None:
            return cfg[alias]
    return None


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, (int, float, bool)) or value is None else type(value).__name__
    return text[:40]


def _int(cfg: dict[str, Any], name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value != int(value):
        raise ConfigError(f"config.json field {name!r} must be a whole number, got {_shown(value)}")
    if value < 1:
        raise ConfigError(f"config.json field {name!r} must be at least 1, got {_shown(value)}")
    return int(value)


def parse_hf_config(cfg: Any, name: str | None = None) -> Architecture:
    if not isinstance(cfg, dict):
        raise ConfigError("config.json must be a JSON object")
    if _get(cfg, "hidden_size") is None and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", cfg.get("model_type"))}
    model_type = safe_label(cfg.get("model_type")) or "unknown"
    required = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    missing = [r for r in required if _get(cfg, r) is None]
    if missing:
        raise ConfigError("config.json is missing required fields: " + ", ".join(missing))
    h = _int(cfg, "hidden_size", _get(cfg, "hidden_size"))
    layers = _int(cfg, "num_hidden_layers", _get(cfg, "num_hidden_layers"))
    heads = _int(cfg, "num_attention_heads", _get(cfg, "num_attention_heads"))
    vocab = _int(cfg, "vocab_size", _get(cfg, "vocab_size"))
    assumptions: list[str] = []
    if model_type not in KNOWN_TYPES:
        assumptions.append(f"model_type {model_type!r} is not one we know; read with Llama conventions (gated MLP, RMSNorm, no biases) where the config is silent")
    fields: dict[str, Any] = {
        "name": safe_label(name) or safe_label(cfg.get("_name_or_path")) or model_type,
        "model_type": model_type,
        "num_layers": layers,
        "hidden_size": h,
        "num_heads": heads,
        "vocab_size": vocab,
        "max_context": _int(cfg, "max_position_embeddings", cfg.get("max_position_embeddings") or cfg.get("n_positions") or cfg.get("seq_length") or 4096),
    }
    reader = _READERS.get(model_type, _read_llama_like)
    fields.update(reader(cfg, h, heads, assumptions))
    fields["assumptions"] = tuple(assumptions)
    try:
        return Architecture(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        raise ConfigError(f"config.json is inconsistent: {where}: {first['msg']}") from None


def _intermediate(cfg: dict[str, Any], h: int, assumptions: list[str], default_mult: float) -> int:
    for key in ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"):
        if cfg.get(key) is not None:
            return _int(cfg, key, cfg[key])
    guess = int(default_mult * h)
    assumptions.append(f"no intermediate_size: assumed {guess} ({default_mult:g} x hidden)")
    return guess


def _heads(cfg: dict[str, Any], h: int, heads: int) -> tuple[int, int]:
    kv = cfg.get("num_key_value_heads") or cfg.get("num_kv_heads") or heads
    head_dim = cfg.get("head_dim") or h // heads
    return _int(cfg, "num_key_value_heads", kv), _int(cfg, "head_dim", head_dim)


def _read_llama_like(cfg: dict[str, Any], h: int, heads: int, assumptions: list[str]) -> dict[str, Any]:
    model_type = cfg.get("model_type")
    kv, head_dim = _heads(cfg, h, heads)
    out: dict[str, Any] = {
        "num_kv_heads": kv,
        "head_dim": head_dim,
        "intermediate_size": _intermediate(cfg, h, assumptions, 8 / 3),
        "tie_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "qkv_bias": bool(cfg.get("attention_bias", False)) or model_type == "qwen2",
        "o_bias": bool(cfg.get("attention_bias", False)),
        "mlp_bias": bool(cfg.get("mlp_bias", False)),
        "dropout": float(cfg.get("attention_dropout") or 0) > 0,
    }
    window = cfg.get("sliding_window")
    uses_window = cfg.get("use_sliding_window", model_type != "qwen2")
    if window and uses_window:
        out["sliding_window"] = _int(cfg, "sliding_window", window)
    if cfg.get("num_local_experts"):  # Mixtral
        out.update(
            num_experts=_int(cfg, "num_local_experts", cfg["num_local_experts"]),
            experts_per_token=_int(cfg, "num_experts_per_tok", cfg.get("num_experts_per_tok", 2)),
            moe_intermediate_size=out["intermediate_size"],
        )
    return out


def _read_gemma2(cfg: dict[str, Any], h: int, heads: int, assumptions: list[str]) -> dict[str, Any]:
    out = _read_llama_like(cfg, h, heads, assumptions)
    # Gemma 2: tied embeddings, four RMSNorms per block (pre/post attention and
    # MLP), sliding-window attention on every other layer (Gemma 2 report, Sec. 2).
    out.update(tie_embeddings=bool(cfg.get("tie_word_embeddings", True)), norms_per_layer=4)
    if "sliding_window" in out:
        out["sliding_window_layers"] = "alternate"
    return out


def _read_gpt2(cfg: dict[str, Any], h: int, heads: int, assumptions: list[str]) -> dict[str, Any]:
    n_inner = cfg.get("n_inner") or 4 * h
    return {
        # GPTBigCode (StarCoder) is GPT-2 with multi-query attention.
        "num_kv_heads": 1 if cfg.get("multi_query") else heads,
        "head_dim": h // heads,
        "intermediate_size": _int(cfg, "n_inner", n_inner),
        "tie_embeddings": bool(cfg.get("tie_word_embeddings", True)),
        "gated_mlp": False,
        "qkv_bias": True,
        "o_bias": True,
        "mlp_bias": True,
        "norm": "layernorm",
        "learned_positions": _int(cfg, "n_positions", cfg.get("n_positions", 1024)),
        "dropout": float(cfg.get("attn_pdrop", 0.1) or 0) > 0,
    }


def _read_falcon(cfg: dict[str, Any], h: int, heads: int, assumptions: list[str]) -> dict[str, Any]:
    new_arch = bool(cfg.get("new_decoder_architecture", False))
    if new_arch:
        kv = cfg.get("num_kv_heads") or heads
    else:
        kv = 1 if cfg.get("multi_query", True) else heads
    parallel = bool(cfg.get("parallel_attn", True))
    bias = bool(cfg.get("bias", False))
    return {
        "num_kv_heads": _int(cfg, "num_kv_heads", kv),
        "head_dim": h // heads,
        "intermediate_size": _int(cfg, "ffn_hidden_size", cfg.get("ffn_hidden_size") or 4 * h),
        "tie_embeddings": bool(cfg.get("tie_word_embeddings", True)),  # FalconConfig default
        "gated_mlp": False,
        "qkv_bias": bias,
        "o_bias": bias,
        "mlp_bias": bias,
        "norm": "layernorm",
        # new_decoder_architecture: ln_attn + ln_mlp; else one shared norm when parallel.
        "norms_per_layer": 2 if new_arch or not parallel else 1,
    }


def _read_deepseek(cfg: dict[str, Any], h: int, heads: int, assumptions: list[str]) -> dict[str, Any]:
    out = _read_llama_like(cfg, h, heads, assumptions)
    if cfg.get("num_nextn_predict_layers"):
        assumptions.append(f"the {cfg['num_nextn_predict_layers']} multi-token-prediction module(s) are not counted (DeepSeek-V3 report: 671B main model + MTP)")
    if cfg.get("kv_lora_rank"):
        out.update(
            q_lora_rank=cfg.get("q_lora_rank") or None,
            kv_lora_rank=_int(cfg, "kv_lora_rank", cfg["kv_lora_rank"]),
            qk_rope_head_dim=_int(cfg, "qk_rope_head_dim", cfg.get("qk_rope_head_dim", 64)),
            qk_nope_head_dim=_int(cfg, "qk_nope_head_dim", cfg.get("qk_nope_head_dim", 128)),
            v_head_dim=_int(cfg, "v_head_dim", cfg.get("v_head_dim", 128)),
            num_kv_heads=heads,
        )
    if cfg.get("n_routed_experts"):
        out.update(
            num_experts=_int(cfg, "n_routed_experts", cfg["n_routed_experts"]),
            experts_per_token=_int(cfg, "num_experts_per_tok", cfg.get("num_experts_per_tok", 8)),
            num_shared_experts=int(cfg.get("n_shared_experts") or 0),
            moe_intermediate_size=_int(cfg, "moe_intermediate_size", cfg.get("moe_intermediate_size")),
            first_dense_layers=int(cfg.get("first_k_dense_replace") or 0),
        )
    return out


_READERS = {
    "gemma2": _read_gemma2,
    "gpt2": _read_gpt2,
    "gpt_bigcode": _read_gpt2,
    "falcon": _read_falcon,
    "deepseek_v3": _read_deepseek,
    "deepseek_v2": _read_deepseek,
}
