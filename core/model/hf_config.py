"""Parse a Hugging Face `config.json` object into an Architecture.

A config.json comes from a user or a link, so every value is read through one
typed, bounded getter (`_Cfg`): a field of the wrong kind or size raises
ConfigError naming the field, and nothing else leaves this module.

Each model family names its fields its own way; the readers below follow the
configuration classes in `transformers` (LlamaConfig, MistralConfig,
MixtralConfig, Qwen2/Qwen2Moe/Qwen3/Qwen3MoeConfig, Gemma2/Gemma3TextConfig,
PhiConfig, Phi3Config, GPT2Config, GPTNeoXConfig, FalconConfig, CohereConfig,
Starcoder2Config, Olmo2/OlmoeConfig, Granite/GraniteMoeConfig, DbrxConfig,
Llama4TextConfig, GptOssConfig, DeepseekV3Config, Glm4MoeConfig). Expert
fields are recognised whatever the family (`num_experts`, `num_local_experts`,
`n_routed_experts`, ...). An unknown `model_type` is read with the Llama
conventions and the guess is listed as an assumption; a config whose expert or
layer-structure fields the reader cannot account for is refused, never sized
as a dense model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, cast

from pydantic import ValidationError

from core.model.architecture import MAX_TOTAL_PARAMS, Architecture

KNOWN_TYPES = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "phi",
    "phi3",
    "gpt2",
    "gpt_bigcode",
    "gpt_neox",
    "falcon",
    "cohere",
    "cohere2",
    "starcoder2",
    "olmo",
    "olmo2",
    "olmoe",
    "granite",
    "granitemoe",
    "dbrx",
    "llama4",
    "llama4_text",
    "gpt_oss",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "glm4_moe",
    "mistral3",
    "phi-msft",
    "deepseek_v32",
    "smollm3",
    "ernie4_5",
    "hunyuan_v1_dense",
)
MAX_LAYERS = 2_000
MAX_WIDTH = 10_000_000


def safe_label(value: Any) -> str:
    """A model name or type from untrusted input, reduced to plain characters
    (letters, digits, '.', '/', '-', '_', ' ') and at most 120 of them. Pages
    still escape it (app_pages/shared/text.py) before Markdown sees it."""
    if not isinstance(value, str):
        return ""
    return re.sub(r"[^\w./ -]", "", value)[:120].strip()


class ConfigError(ValueError):
    """A config.json that cannot be sized; the message names the fields."""


def _shown(value: Any) -> str:
    """A value quoted in a message: numbers as they are (shortened), anything else by its kind only."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= 24 else text[:21] + "..."
    kinds: dict[type, str] = {str: "text", list: "a list", dict: "an object"}
    return kinds.get(type(value), type(value).__name__)


_MISSING = object()


def _finite(value: int | float) -> bool:
    return isinstance(value, int) or math.isfinite(value)  # an int of any size is finite (math.isfinite overflows)


def _is_whole(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or (math.isfinite(value) and value == int(value))


class _Cfg:
    """Typed, bounded reads of one config object; remembers which fields were read."""

    def __init__(self, cfg: dict[str, Any], where: str = ""):
        self.cfg = cfg
        self.where = where  # "text_config." etc., for messages
        self.used: set[str] = set()

    def has(self, *names: str) -> bool:
        return any(self.cfg.get(n) is not None for n in names)

    def raw(self, *names: str) -> tuple[str, Any]:
        for n in names:
            if self.cfg.get(n) is not None:
                self.used.add(n)
                return n, self.cfg[n]
        return names[0], _MISSING

    def _fail(self, name: str, problem: str) -> ConfigError:
        return ConfigError(f"config.json field {self.where}{name!r} {problem}")

    def integer(self, *names: str, default: Any = _MISSING, lo: int = 1, hi: int = MAX_WIDTH) -> int:
        name, value = self.raw(*names)
        if value is _MISSING:
            if default is _MISSING:
                raise ConfigError(f"config.json is missing {self.where}{names[0]!r}")
            return cast(int, default)
        if not _is_whole(value):
            raise self._fail(name, f"must be a whole number, got {_shown(value)}")
        if not lo <= value <= hi:
            raise self._fail(name, f"must be between {lo:,} and {hi:,}, got {_shown(value)}")
        return int(value)

    def number(self, *names: str, default: float, lo: float = 0.0, hi: float = 1e6) -> float:
        name, value = self.raw(*names)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
            raise self._fail(name, f"must be a number, got {_shown(value)}")
        if not lo <= value <= hi:
            raise self._fail(name, f"must be between {lo:g} and {hi:g}, got {_shown(value)}")
        return float(value)

    def flag(self, *names: str, default: bool) -> bool:
        name, value = self.raw(*names)
        if value is _MISSING:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise self._fail(name, f"must be true or false, got {_shown(value)}")

    def text(self, *names: str, default: str = "") -> str:
        name, value = self.raw(*names)
        if value is _MISSING:
            return default
        if not isinstance(value, str):
            raise self._fail(name, f"must be text, got {_shown(value)}")
        return value

    def ints(self, name: str, *, hi: int = MAX_LAYERS) -> list[int]:
        _, value = self.raw(name)
        if value is _MISSING:
            return []
        if not isinstance(value, list) or len(value) > MAX_LAYERS:
            raise self._fail(name, f"must be a list of at most {MAX_LAYERS:,} layer numbers, got {_shown(value)}")
        out = []
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= hi:
                raise self._fail(name, f"must list layer numbers between 0 and {hi:,}, got {_shown(item)}")
            out.append(item)
        return out

    def texts(self, name: str) -> list[str]:
        _, value = self.raw(name)
        if value is _MISSING:
            return []
        if not isinstance(value, list) or len(value) > MAX_LAYERS or not all(isinstance(v, str) for v in value):
            raise self._fail(name, f"must be a list of at most {MAX_LAYERS:,} texts, got {_shown(value)}")
        return list(value)

    def sub(self, name: str) -> _Cfg | None:
        _, value = self.raw(name)
        if value is _MISSING:
            return None
        if not isinstance(value, dict):
            raise self._fail(name, f"must be an object, got {_shown(value)}")
        return _Cfg(value, f"{self.where}{name}.")


# Fields that change how many parameters or how much KV cache a model has. A config that sets one of them (to
# anything but its "off" value) and whose reader did not read it is refused rather than sized wrongly.
STRUCTURAL = (
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "moe_num_experts",
    "num_experts_per_tok",
    "moe_topk",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "n_shared_experts",
    "num_shared_experts",
    "decoder_sparse_step",
    "moe_layer_freq",
    "first_k_dense_replace",
    "mlp_only_layers",
    "interleave_moe_layer_step",
    "moe_layers",
    "moe_layer_start_index",
    "moe_layer_end_index",
    "moe_every_k_layers",
    "layers_block_type",
    "attn_layer_indices",
    "attn_layer_period",
    "attn_layer_offset",
    "expert_layer_period",
    "expert_layer_offset",
    "mamba_d_state",
    "mamba_expand",
    "ssm_cfg",
    "cross_attention_layers",
    "num_kv_shared_layers",
    "altup_num_inputs",
    "laurel_rank",
    "hybrid_override_pattern",
    "index_n_heads",
    "num_nextn_predict_layers",
    "block_types",
)
_OFF: tuple[Any, ...] = (None, 0, False, [], {}, "", 1.0)


def parse_hf_config(cfg: Any, name: str | None = None) -> Architecture:
    if not isinstance(cfg, dict):
        raise ConfigError("config.json must be a JSON object")
    top = _Cfg(cfg)
    model_type = safe_label(top.text("model_type") if isinstance(cfg.get("model_type"), str) else "") or "unknown"
    text_cfg = top.sub("text_config") if "hidden_size" not in cfg and "d_model" not in cfg and "n_embd" not in cfg else None
    c = text_cfg or top
    inner_type = safe_label(c.cfg.get("model_type")) if text_cfg and isinstance(c.cfg.get("model_type"), str) else ""
    family = inner_type or model_type
    assumptions: list[str] = []
    reader = _READERS.get(family) or _READERS.get(model_type)
    if reader is None:
        assumptions.append(f"model_type {model_type!r} is not one we know; read with Llama conventions (gated MLP, RMSNorm, no biases) where the config is silent")
        reader = _read_llama_like
    fields: dict[str, Any] = {
        "name": safe_label(name) or safe_label(cfg.get("_name_or_path")) or model_type,
        "model_type": family,
    }
    fields.update(_common(c, assumptions, family))
    fields.update(reader(c, fields, assumptions))
    _check_accounted(c, assumptions)
    if text_cfg is not None:
        vision = top.sub("vision_config")
        if vision is not None:
            fields["vision_params"] = _vision_params(vision, fields["hidden_size"], assumptions)
    try:
        arch = Architecture(**fields, assumptions=tuple(assumptions))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        raise ConfigError(f"config.json is inconsistent: {where}: {first['msg'].removeprefix('Value error, ')}") from None
    if arch.total_params > MAX_TOTAL_PARAMS:
        raise ConfigError(f"config.json describes {arch.total_params:.3g} parameters, more than {MAX_TOTAL_PARAMS:.0e}")
    return arch


def _check_accounted(c: _Cfg, assumptions: list[str]) -> None:
    unread = [k for k in STRUCTURAL if k in c.cfg and k not in c.used and c.cfg[k] not in _OFF]
    if unread:
        raise ConfigError(
            "config.json sets " + ", ".join(repr(k) for k in unread) + ", which change the model's size in a way this "
            "model_type is not read for; it is not sized (pick a preset or a parameter count instead)"
        )


_REQUIRED = {
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
}


# Fields some published configs leave to their configuration class's defaults (the config.json of
# google/gemma-3-27b-it has no text_config.vocab_size: Gemma3TextConfig's default applies).
FAMILY_DEFAULTS: dict[str, dict[str, int]] = {
    "gemma3_text": {"vocab_size": 262_208, "max_position_embeddings": 131_072},
    "gemma3": {"vocab_size": 262_208, "max_position_embeddings": 131_072},
}


def _common(c: _Cfg, assumptions: list[str], family: str) -> dict[str, Any]:
    for key, value in FAMILY_DEFAULTS.get(family, {}).items():
        if key not in c.cfg:
            c.cfg = {**c.cfg, key: value}
            assumptions.append(f"{key} is not in config.json: the {family} configuration default {value:,} is used")
    missing = [name for name, aliases in _REQUIRED.items() if not c.has(*aliases)]
    if missing:
        raise ConfigError(f"config.json is missing required fields: {', '.join(c.where + m for m in missing)}")
    h = c.integer("hidden_size", "n_embd", "d_model", "dim", hi=1_000_000)
    layers = c.integer("num_hidden_layers", "n_layer", "num_layers", "n_layers", hi=MAX_LAYERS)
    heads = c.integer("num_attention_heads", "n_head", "num_heads", "n_heads", hi=100_000)
    vocab = c.integer("vocab_size", "padded_vocab_size", hi=100_000_000)
    context = c.integer("max_position_embeddings", "n_positions", "seq_length", "max_seq_len", default=4096, hi=100_000_000)
    return {"hidden_size": h, "num_layers": layers, "num_heads": heads, "vocab_size": vocab, "max_context": context}


def _intermediate(c: _Cfg, h: int, assumptions: list[str], default_mult: float) -> int:
    if c.has("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"):
        return c.integer("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim")
    guess = max(1, int(default_mult * h))
    assumptions.append(f"no intermediate_size: assumed {guess} ({default_mult:g} x hidden)")
    return guess


def _heads(c: _Cfg, f: dict[str, Any]) -> dict[str, Any]:
    heads = f["num_heads"]
    kv = c.integer("num_key_value_heads", "num_kv_heads", "n_head_kv", default=heads, hi=100_000)
    head_dim = c.integer("head_dim", default=max(1, f["hidden_size"] // heads), hi=100_000)
    return {"num_kv_heads": kv, "head_dim": head_dim}


def _window(c: _Cfg, f: dict[str, Any], *, default_on: bool = True, pattern: int | None = None) -> dict[str, Any]:
    """Sliding-window layers from `layer_types` (transformers >= 4.53), a local:global pattern, or all layers."""
    uses = c.flag("use_sliding_window", default=default_on)
    window = c.integer("sliding_window", default=0, lo=0, hi=100_000_000) if c.has("sliding_window") else 0
    if not uses or not window:
        c.raw("sliding_window_pattern", "max_window_layers")
        return {}
    layers = f["num_layers"]
    types = c.texts("layer_types")
    if types:
        count = sum(t in ("sliding_attention", "chunked_attention") for t in types[:layers])
    elif pattern:
        step = c.integer("sliding_window_pattern", default=pattern, hi=MAX_LAYERS)
        count = layers - layers // step  # every step-th layer is global (Gemma 3: 5 local then 1 global)
    else:
        count = layers
    return {"sliding_window": window, "windowed_layers": count} if count else {}


def _experts(c: _Cfg, f: dict[str, Any], assumptions: list[str], *, dense_width: int) -> dict[str, Any]:
    """Mixture-of-experts fields under any of their names, and which layers have experts."""
    if not c.has("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"):
        return {}
    e = c.integer("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", lo=0, hi=65_536)
    if e == 0:
        return {}
    k = c.integer("num_experts_per_tok", "moe_topk", "moe_top_k", "experts_per_token", default=2, hi=65_536)
    f_exp = c.integer("moe_intermediate_size", default=dense_width)
    layers = f["num_layers"]
    first_dense = c.integer("first_k_dense_replace", default=0, lo=0, hi=MAX_LAYERS)
    freq = c.integer("moe_layer_freq", default=1, hi=MAX_LAYERS)
    step = c.integer("decoder_sparse_step", "interleave_moe_layer_step", default=1, hi=MAX_LAYERS)
    dense_only = set(c.ints("mlp_only_layers"))
    explicit = c.ints("moe_layers") if isinstance(c.cfg.get("moe_layers"), list) else []
    if explicit:
        moe = sum(1 for i in set(explicit) if i < layers)
    else:
        moe = sum(1 for i in range(layers) if i >= first_dense and i % freq == 0 and (i + 1) % step == 0 and i not in dense_only)
    if moe == 0:
        raise ConfigError("config.json has experts but its layer fields leave no layer with experts")
    shared = 0
    if c.has("shared_expert_intermediate_size"):
        shared = c.integer("shared_expert_intermediate_size", lo=0)
    elif c.has("n_shared_experts", "num_shared_experts"):
        shared = c.integer("n_shared_experts", "num_shared_experts", lo=0, hi=1_024) * f_exp
    return {"num_experts": e, "experts_per_token": k, "moe_intermediate_size": f_exp, "num_moe_layers": moe, "shared_expert_intermediate_size": shared}


# ------------------------------------------------------------------------------------------------------------ readers


def _read_llama_like(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    """Llama, Mistral, Mixtral, Qwen2/3 (+MoE), Granite (+MoE), Phi-3/4, SmolLM3 and unknown types."""
    model_type = f["model_type"]
    h = f["hidden_size"]
    out = _heads(c, f)
    bias = c.flag("attention_bias", default=model_type == "qwen2")
    out.update(
        intermediate_size=_intermediate(c, h, assumptions, 8 / 3),
        tie_embeddings=c.flag("tie_word_embeddings", default=False),
        qkv_bias=c.flag("qkv_bias", default=bias),
        o_bias=c.flag("o_bias", default=bias and model_type != "qwen2"),
        mlp_bias=c.flag("mlp_bias", default=False),
        dropout=c.number("attention_dropout", default=0.0, hi=1.0) > 0,
    )
    if model_type in ("qwen3", "qwen3_moe"):
        out["qk_norm"] = "head"  # q_norm / k_norm RMSNorm(head_dim) (Qwen3 technical report, Sec. 2)
    out.update(_window(c, f, default_on=model_type not in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")))
    moe = _experts(c, f, assumptions, dense_width=out["intermediate_size"])
    if moe:
        if model_type == "qwen2_moe" and moe["shared_expert_intermediate_size"]:
            moe["shared_expert_gate"] = True
        if model_type in ("granitemoe", "mixtral") or not c.has("moe_intermediate_size"):
            moe["moe_intermediate_size"] = out["intermediate_size"]
    out.update(moe)
    return out


def _read_gemma(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    out = _read_llama_like(c, f, assumptions)
    # Gemma 2/3: tied embeddings, four RMSNorms per block (pre/post attention and MLP); Gemma 2 alternates local
    # and global attention, Gemma 3 has five local layers per global one and per-head q/k norms (Gemma 3 report).
    out["tie_embeddings"] = c.flag("tie_word_embeddings", default=True)
    if f["model_type"] in ("gemma2", "gemma3", "gemma3_text"):
        out["norms_per_layer"] = 4
        out.pop("sliding_window", None)
        out.pop("windowed_layers", None)
        out.update(_window(c, f, pattern=2 if f["model_type"] == "gemma2" else 6))
    if f["model_type"] in ("gemma3", "gemma3_text"):
        out["qk_norm"] = "head"
    return out


def _read_gpt2(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    h, heads = f["hidden_size"], f["num_heads"]
    return {
        # GPTBigCode (StarCoder) is GPT-2 with multi-query attention.
        "num_kv_heads": 1 if c.flag("multi_query", default=False) else heads,
        "head_dim": max(1, h // heads),
        "intermediate_size": c.integer("n_inner", default=4 * h),
        "tie_embeddings": c.flag("tie_word_embeddings", default=True),
        "gated_mlp": False,
        "qkv_bias": True,
        "o_bias": True,
        "mlp_bias": True,
        "norm": "layernorm",
        "learned_positions": c.integer("n_positions", default=1024, hi=100_000_000),
        "dropout": c.number("attn_pdrop", default=0.1, hi=1.0) > 0,
    }


def _read_gpt_neox(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    h = f["hidden_size"]
    return {
        "num_kv_heads": f["num_heads"],
        "head_dim": max(1, h // f["num_heads"]),
        "intermediate_size": c.integer("intermediate_size", default=4 * h),
        "tie_embeddings": c.flag("tie_word_embeddings", default=False),
        "gated_mlp": False,
        "qkv_bias": c.flag("attention_bias", default=True),
        "o_bias": c.flag("attention_bias", default=True),
        "mlp_bias": True,
        "norm": "layernorm",
        "parallel_block": c.flag("use_parallel_residual", default=True),
        "dropout": c.number("attention_dropout", default=0.0, hi=1.0) > 0,
    }


def _read_phi(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    """Phi-1.5 / Phi-2: one LayerNorm per parallel block, biases everywhere, a plain GELU MLP, lm_head with a bias."""
    h = f["hidden_size"]
    out = _heads(c, f)
    out.update(
        intermediate_size=c.integer("intermediate_size", default=4 * h),
        tie_embeddings=c.flag("tie_word_embeddings", default=False),
        gated_mlp=False,
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        lm_head_bias=True,
        norm="layernorm",
        norms_per_layer=1,
        parallel_block=True,
    )
    if c.flag("qk_layernorm", default=False):
        assumptions.append("phi qk_layernorm: the per-head LayerNorms on Q and K are counted as head-dim norms")
        out["qk_norm"] = "head"
    return out


def _read_falcon(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    h, heads = f["hidden_size"], f["num_heads"]
    new_arch = c.flag("new_decoder_architecture", default=False)
    multi_query = c.flag("multi_query", default=True)
    kv = c.integer("num_kv_heads", default=heads, hi=100_000) if new_arch else (1 if multi_query else heads)
    parallel = c.flag("parallel_attn", default=True)
    bias = c.flag("bias", default=False)
    return {
        "num_kv_heads": kv,
        "head_dim": max(1, h // heads),
        "intermediate_size": c.integer("ffn_hidden_size", default=4 * h),
        "tie_embeddings": c.flag("tie_word_embeddings", default=True),  # FalconConfig default
        "gated_mlp": False,
        "qkv_bias": bias,
        "o_bias": bias,
        "mlp_bias": bias,
        "norm": "layernorm",
        # new_decoder_architecture: ln_attn + ln_mlp; else one shared norm when parallel.
        "norms_per_layer": 2 if new_arch or not parallel else 1,
        "parallel_block": parallel,
    }


def _read_cohere(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    """Command R: one bias-free LayerNorm per parallel block, tied embeddings, optional per-head q/k norms."""
    out = _read_llama_like(c, f, assumptions)
    out.update(norm="layernorm_nobias", norms_per_layer=1, parallel_block=True, tie_embeddings=c.flag("tie_word_embeddings", default=True))
    if c.flag("use_qk_norm", default=False):
        out["qk_norm"] = "full"  # CohereLayerNorm over (heads, head_dim) for Q and (kv heads, head_dim) for K
    return out


def _read_starcoder2(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    out = _heads(c, f)
    bias = c.flag("use_bias", default=True)
    out.update(
        intermediate_size=c.integer("intermediate_size", default=4 * f["hidden_size"]),
        tie_embeddings=c.flag("tie_word_embeddings", default=True),
        gated_mlp=False,
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=bias,
        norm="layernorm" if bias else "layernorm_nobias",
        dropout=c.number("attention_dropout", default=0.0, hi=1.0) > 0,
    )
    out.update(_window(c, f))
    return out


def _read_olmo2(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    """OLMo 2 / OLMoE: RMSNorm on the full query and key projections (q_norm, k_norm); OLMo 2 normalises after
    attention and after the MLP instead of before (2 norms per block either way)."""
    out = _read_llama_like(c, f, assumptions)
    out["qk_norm"] = "full"
    return out


def _read_dbrx(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    """DBRX: attention and expert fields live in attn_config and ffn_config; bias-free LayerNorms."""
    attn = c.sub("attn_config") or _Cfg({}, "attn_config.")
    ffn = c.sub("ffn_config") or _Cfg({}, "ffn_config.")
    heads = f["num_heads"]
    width = ffn.integer("ffn_hidden_size", default=4 * f["hidden_size"])
    e = ffn.integer("moe_num_experts", default=1, hi=65_536)
    out: dict[str, Any] = {
        "num_kv_heads": attn.integer("kv_n_heads", default=heads, hi=100_000),
        "head_dim": max(1, f["hidden_size"] // heads),
        "intermediate_size": width,
        "tie_embeddings": c.flag("tie_word_embeddings", default=False),
        "norm": "layernorm_nobias",
    }
    if e > 1:
        out.update(num_experts=e, experts_per_token=ffn.integer("moe_top_k", default=1, hi=65_536), moe_intermediate_size=width, num_moe_layers=f["num_layers"])
    return out


def _read_llama4(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    """Llama 4 text: routed experts plus one shared expert (both of intermediate_size) in every
    `interleave_moe_layer_step`-th layer, dense layers of intermediate_size_mlp, chunked local attention
    (attention_chunk_size) in the layers that use RoPE (3 of 4; no_rope_layers marks them)."""
    out = _heads(c, f)
    f_exp = c.integer("intermediate_size")
    dense = c.integer("intermediate_size_mlp", default=f_exp)
    out.update(
        intermediate_size=dense,
        tie_embeddings=c.flag("tie_word_embeddings", default=False),
        qkv_bias=c.flag("attention_bias", default=False),
        o_bias=c.flag("attention_bias", default=False),
    )
    moe = _experts(c, f, assumptions, dense_width=f_exp)
    if moe:
        moe.update(moe_intermediate_size=f_exp, shared_expert_intermediate_size=f_exp)
        out.update(moe)
    chunk = c.integer("attention_chunk_size", default=0, lo=0, hi=100_000_000)
    rope_flags = c.ints("no_rope_layers", hi=1)
    if chunk:
        local = sum(rope_flags) if rope_flags else f["num_layers"] - f["num_layers"] // 4
        out.update(sliding_window=chunk, windowed_layers=min(local, f["num_layers"]))
        assumptions.append(f"chunked local attention in {out['windowed_layers']} layers: their KV cache keeps at most {chunk:,} tokens (vLLM chunked local attention)")
    return out


def _read_gpt_oss(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    """gpt-oss: every layer has experts (with biases) and a biased router; attention with biases and one learned
    sink per head; sliding-window (128) and full attention alternate (OpenAI gpt-oss model card)."""
    out = _heads(c, f)
    width = c.integer("intermediate_size")
    out.update(
        intermediate_size=width,
        tie_embeddings=c.flag("tie_word_embeddings", default=False),
        qkv_bias=c.flag("attention_bias", default=True),
        o_bias=c.flag("attention_bias", default=True),
        attention_sinks=True,
    )
    moe = _experts(c, f, assumptions, dense_width=width)
    if not moe:
        raise ConfigError("a gpt_oss config.json needs num_local_experts")
    moe.update(moe_intermediate_size=width, expert_bias=True, router_bias=True)
    out.update(moe)
    out.update(_window(c, f, pattern=2))
    return out


def _read_deepseek(c: _Cfg, f: dict[str, Any], assumptions: list[str]) -> dict[str, Any]:
    """DeepSeek-V2/V3, Kimi K2 and GLM-4.5: dense first layers, routed + shared experts, and (DeepSeek, Kimi)
    multi-head latent attention."""
    out = _read_llama_like(c, f, assumptions)
    mtp = c.integer("num_nextn_predict_layers", default=0, lo=0, hi=16)
    if mtp:
        out["mtp_layers"] = mtp
        assumptions.append(
            f"the checkpoint's {mtp} multi-token-prediction layer(s) are not loaded and not counted (DeepSeek-V3 "
            "report: 671B main model + MTP module, used only for speculative decoding)"
        )
    if c.has("index_n_heads"):
        out.update(indexer_heads=c.integer("index_n_heads", hi=100_000), indexer_head_dim=c.integer("index_head_dim", default=128, hi=100_000))
        c.raw("index_topk")
    if c.has("kv_lora_rank"):
        out.update(
            q_lora_rank=c.integer("q_lora_rank", default=None) if c.has("q_lora_rank") else None,
            kv_lora_rank=c.integer("kv_lora_rank"),
            qk_rope_head_dim=c.integer("qk_rope_head_dim", default=64),
            qk_nope_head_dim=c.integer("qk_nope_head_dim", default=128),
            v_head_dim=c.integer("v_head_dim", default=128),
            num_kv_heads=f["num_heads"],
        )
    if out.get("num_experts"):
        # DeepSeek-V3 / GLM-4.5 keep a per-expert score-correction bias with the router (noaux_tc routing).
        out["router_bias"] = c.text("topk_method", default="") == "noaux_tc" or f["model_type"] == "glm4_moe"
    if f["model_type"] == "glm4_moe":
        out["qkv_bias"] = c.flag("attention_bias", default=True)
        out["o_bias"] = False
        if c.flag("use_qk_norm", default=False):
            out["qk_norm"] = "head"
    return out


_READERS: dict[str, Callable[[_Cfg, dict[str, Any], list[str]], dict[str, Any]]] = {
    "gemma": _read_gemma,
    "gemma2": _read_gemma,
    "gemma3": _read_gemma,
    "gemma3_text": _read_gemma,
    "gpt2": _read_gpt2,
    "gpt_bigcode": _read_gpt2,
    "gpt_neox": _read_gpt_neox,
    "phi-msft": _read_phi,
    "deepseek_v32": _read_deepseek,
    "phi": _read_phi,
    "falcon": _read_falcon,
    "cohere": _read_cohere,
    "cohere2": _read_cohere,
    "starcoder2": _read_starcoder2,
    "olmo2": _read_olmo2,
    "olmoe": _read_olmo2,
    "dbrx": _read_dbrx,
    "llama4": _read_llama4,
    "llama4_text": _read_llama4,
    "gpt_oss": _read_gpt_oss,
    "deepseek_v2": _read_deepseek,
    "deepseek_v3": _read_deepseek,
    "kimi_k2": _read_deepseek,
    "glm4_moe": _read_deepseek,
}
for _t in KNOWN_TYPES:
    _READERS.setdefault(_t, _read_llama_like)


def _vision_params(v: _Cfg, text_hidden: int, assumptions: list[str]) -> int:
    """A ViT encoder from its vision_config. SigLIP (Gemma 3) and most others: patch and position embeddings, per
    layer Q/K/V/O with biases, a two-matrix MLP with biases and two LayerNorms, a final LayerNorm, and a linear
    projector into the text width. Pixtral (Mistral 3): bias-free attention, a gated MLP, RMSNorms, no position
    table (RoPE), and a patch merger plus a two-layer projector."""
    h = v.integer("hidden_size", default=1152, hi=1_000_000)
    layers = v.integer("num_hidden_layers", "depth", default=27, hi=MAX_LAYERS)
    f = v.integer("intermediate_size", default=4 * h)
    patch = v.integer("patch_size", default=14, hi=10_000)
    image = v.integer("image_size", default=896, hi=100_000)
    channels = v.integer("num_channels", default=3, hi=16)
    if v.text("model_type", default="") == "pixtral":
        per_layer = 4 * h * h + 3 * h * f + 2 * h
        merge = 2  # spatial_merge_size of Mistral 3
        projector = h + merge * merge * h * h + h * text_hidden + text_hidden * text_hidden
        total = layers * per_layer + channels * patch * patch * h + h + projector
    else:
        per_layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h
        total = layers * per_layer + channels * patch * patch * h + h + (image // patch) ** 2 * h + 2 * h + h * text_hidden
    assumptions.append(
        f"vision encoder sized from vision_config as a ViT ({layers} layers, width {h}): {total / 1e6:,.0f}M parameters loaded with the model, not used for text tokens"
    )
    return total
