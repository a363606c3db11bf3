"""A decoder-only transformer's shape, and everything derived from it that does
not depend on the scenario: parameter counts per tensor role and the linear
layer shapes that LoRA adapts.

Counting follows the modules of the Hugging Face implementations (LlamaModel,
MistralModel, MixtralModel, Qwen2/Qwen2-MoE/Qwen3/Qwen3-MoE, Gemma2/Gemma3,
Phi/Phi3, GPT-2, GPT-NeoX, Falcon, Cohere, StarCoder2, OLMo2/OLMoE, Granite,
DBRX, Llama 4, gpt-oss, DeepseekV3, Glm4Moe): embeddings, per-layer attention
and MLP projections (dense or mixture-of-experts), norms, an untied lm_head,
and a vision encoder where the checkpoint ships one.
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Roles of weight tensors. Quantization formats decide per role (see formats.py).
ATTENTION_ROLES = ("attn_q", "attn_k", "attn_v", "attn_o")
MLP_ROLES = ("mlp_gate", "mlp_up", "mlp_down")
MAX_TOTAL_PARAMS = 10**14  # 100 trillion: far above any model, far below int64 overflow in tables


class WeightGroup(NamedTuple):
    """`count` matrices of shape in_features x out_features (or `count` vectors
    of `in_features` when out_features == 1), `active` of them used per token.
    `expert` marks routed-expert weights (formats such as MXFP4 quantize only them)."""

    role: str
    in_features: int
    out_features: int
    count: int  # type: ignore[assignment]  # a field named like tuple.count, kept for readability
    active: int
    expert: bool = False

    @property
    def params(self) -> int:
        return self.in_features * self.out_features * self.count

    @property
    def active_params(self) -> int:
        return self.in_features * self.out_features * self.active

    @property
    def is_linear(self) -> bool:
        return self.role in ATTENTION_ROLES or self.role in MLP_ROLES or self.role.startswith("mla_")


class Architecture(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    model_type: str
    num_layers: int = Field(ge=1, le=2_000)
    hidden_size: int = Field(ge=1, le=1_000_000)
    intermediate_size: int = Field(ge=1, le=10_000_000)  # the dense MLP's width
    num_heads: int = Field(ge=1, le=100_000)
    num_kv_heads: int = Field(ge=1, le=100_000)
    head_dim: int = Field(ge=1, le=100_000)
    vocab_size: int = Field(ge=1, le=100_000_000)
    max_context: int = Field(ge=1, le=100_000_000)
    tie_embeddings: bool = False
    gated_mlp: bool = True
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    lm_head_bias: bool = False
    # "layernorm_nobias": LayerNorm with a weight only (Cohere, DBRX, OLMo 1).
    norm: Literal["rmsnorm", "layernorm", "layernorm_nobias"] = "rmsnorm"
    norms_per_layer: int = Field(default=2, ge=0, le=8)
    # Norms on queries and keys: "head" = one weight of head_dim per layer for Q and one for K
    # (Qwen3, Gemma 3, Cohere R+ per head), "full" = over all heads (OLMo 2, OLMoE).
    qk_norm: Literal["none", "head", "full"] = "none"
    parallel_block: bool = False  # attention and MLP read the same input (GPT-J/NeoX, Phi-2, Cohere, Falcon)
    learned_positions: int = Field(default=0, ge=0, le=100_000_000)
    dropout: bool = False
    # Mixture of experts (num_experts == 0 means dense). `num_moe_layers` of the layers route each token to
    # `experts_per_token` of `num_experts` experts of width `moe_intermediate_size`, plus an always-on shared
    # expert MLP of width `shared_expert_intermediate_size` (DeepSeek: n_shared x moe width; Qwen2-MoE, Llama 4).
    num_experts: int = Field(default=0, ge=0, le=65_536)
    experts_per_token: int = Field(default=0, ge=0, le=65_536)
    moe_intermediate_size: int = Field(default=0, ge=0, le=10_000_000)
    num_moe_layers: int = Field(default=0, ge=0, le=2_000)
    shared_expert_intermediate_size: int = Field(default=0, ge=0, le=10_000_000)
    shared_expert_gate: bool = False  # Qwen2-MoE: a sigmoid gate Linear(h, 1) on the shared expert
    expert_bias: bool = False  # gpt-oss: biases on every expert's projections
    router_bias: bool = False  # gpt-oss router bias; DeepSeek-V3 / GLM-4.5 e_score_correction_bias
    # Sliding-window (or chunked) attention: `windowed_layers` layers keep at most `sliding_window` tokens of KV cache.
    sliding_window: int | None = Field(default=None, ge=1, le=100_000_000)
    windowed_layers: int = Field(default=0, ge=0, le=2_000)
    attention_sinks: bool = False  # gpt-oss: one learned logit per head and layer
    # Multi-head latent attention (DeepSeek-V2/V3, Kimi K2).
    q_lora_rank: int | None = Field(default=None, ge=1, le=1_000_000)
    kv_lora_rank: int | None = Field(default=None, ge=1, le=1_000_000)
    qk_rope_head_dim: int = Field(default=0, ge=0, le=100_000)
    qk_nope_head_dim: int = Field(default=0, ge=0, le=100_000)
    v_head_dim: int = Field(default=0, ge=0, le=100_000)
    # A vision encoder shipped in the same checkpoint (Gemma 3, Llama 4, Mistral 3): loaded with the model, not run
    # for text tokens.
    vision_params: int = Field(default=0, ge=0, le=10**13)
    # DeepSeek-V3.2's sparse-attention indexer: per layer a small set of heads scoring past tokens, with one cached
    # key of `indexer_head_dim` per token and layer (DeepSeek-V3.2 report, DSA "lightning indexer").
    indexer_heads: int = Field(default=0, ge=0, le=100_000)
    indexer_head_dim: int = Field(default=0, ge=0, le=100_000)
    # Multi-token-prediction layers stored in the checkpoint but not loaded for serving or fine-tuning
    # (DeepSeek-V3, GLM-4.5: num_nextn_predict_layers).
    mtp_layers: int = Field(default=0, ge=0, le=16)
    # A bare parameter count is taken as exact: groups are scaled to it.
    params_override: int | None = Field(default=None, ge=1, le=10**15)
    assumptions: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Architecture:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_attention_heads ({self.num_heads}) must be a multiple of num_key_value_heads ({self.num_kv_heads})")
        if self.num_experts:
            if not 1 <= self.experts_per_token <= self.num_experts:
                raise ValueError("experts per token must be between 1 and the number of experts")
            if self.moe_intermediate_size < 1:
                raise ValueError("a mixture-of-experts model needs an expert intermediate size")
            if not 1 <= self.num_moe_layers <= self.num_layers:
                raise ValueError("a mixture-of-experts model needs between 1 and num_hidden_layers expert layers")
        elif self.num_moe_layers:
            raise ValueError("expert layers without experts")
        if self.windowed_layers > self.num_layers:
            raise ValueError("more sliding-window layers than layers")
        if self.windowed_layers and self.sliding_window is None:
            raise ValueError("sliding-window layers need a window size")
        if (self.kv_lora_rank is None) != (self.v_head_dim == 0):
            raise ValueError("latent attention needs kv_lora_rank and v_head_dim together")
        if self.params_override is None and self.shape_params > MAX_TOTAL_PARAMS:
            raise ValueError(f"the shape has {self.shape_params:.3g} parameters, more than {MAX_TOTAL_PARAMS:.0e}")
        return self

    # ------------------------------------------------------------------ shape
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    def splits_over(self, tp: int, replicate_kv: bool = True) -> bool:
        """Whether `tp` tensor-parallel ranks split the attention evenly: the query heads divide by tp, and the KV
        heads either divide by tp or, where the runtime replicates them (`replicate_kv`), divide tp. vLLM's
        QKVParallelLinear (and SGLang's, TensorRT-LLM's) replicates KV heads over tp / num_kv_heads ranks when there
        are fewer of them and asserts divisibility otherwise: Phi-3-medium's 40 / 10 heads run at TP 2 or 10 (and 5),
        not 4 or 8. Megatron-core and torchtitan divide the query groups by tp, no replication (`replicate_kv`
        False, training). MLA's latent is one KV "head" shared by all: only the query heads count."""
        if tp < 1 or self.num_heads % tp:
            return False
        kv = self.num_heads if self.is_mla else self.num_kv_heads
        return kv % tp == 0 or (replicate_kv and tp % kv == 0)

    @property
    def moe_layers(self) -> int:
        return self.num_moe_layers if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        return self.num_layers - self.moe_layers

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim if self.is_mla else self.head_dim

    @property
    def routed_width(self) -> int:
        """MLP width a token passes through in an expert layer: its k experts plus the shared expert."""
        return self.experts_per_token * self.moe_intermediate_size + self.shared_expert_intermediate_size

    # ------------------------------------------------------------ parameters
    @cached_property
    def weight_groups(self) -> tuple[WeightGroup, ...]:
        """The real tensors of this shape. For a bare parameter count the shape is
        representative and `param_scale` maps its sums to the exact count."""
        h, L = self.hidden_size, self.num_layers
        groups: list[WeightGroup] = [WeightGroup("embed", self.vocab_size, h, 1, 1)]
        if self.learned_positions:
            groups.append(WeightGroup("embed", self.learned_positions, h, 1, 1))
        groups += self._attention_groups()
        dense = self.dense_layers
        groups += _mlp_groups(h, self.intermediate_size, self.gated_mlp, dense, dense)
        if self.mlp_bias and dense:
            width = (2 if self.gated_mlp else 1) * self.intermediate_size
            groups.append(WeightGroup("bias", width + h, 1, dense, dense))
        if self.is_moe:
            m, f, e, k = self.moe_layers, self.moe_intermediate_size, self.num_experts, self.experts_per_token
            groups.append(WeightGroup("router", h, e, m, m))
            if self.router_bias:
                groups.append(WeightGroup("bias", e, 1, m, m))
            groups += _mlp_groups(h, f, True, m * e, m * k, expert=True)
            if self.expert_bias:
                groups.append(WeightGroup("bias", 2 * f + h, 1, m * e, m * k))
            if self.shared_expert_intermediate_size:
                groups += _mlp_groups(h, self.shared_expert_intermediate_size, True, m, m)
            if self.shared_expert_gate:
                groups.append(WeightGroup("router", h, 1, m, m))
        if self.norms_per_layer:
            n = L * self.norms_per_layer
            groups.append(WeightGroup("norm", self.norm_params(h), 1, n, n))
        groups.append(WeightGroup("norm", self.norm_params(h), 1, 1, 1))  # final norm
        if self.qk_norm == "head":
            groups.append(WeightGroup("norm", 2 * self.head_dim, 1, L, L))
        elif self.qk_norm == "full":
            groups.append(WeightGroup("norm", (self.num_heads + self.num_kv_heads) * self.head_dim, 1, L, L))
        if self.attention_sinks:
            groups.append(WeightGroup("bias", self.num_heads, 1, L, L))
        if not self.tie_embeddings:
            groups.append(WeightGroup("lm_head", h, self.vocab_size, 1, 1))
        if self.lm_head_bias:
            groups.append(WeightGroup("bias", self.vocab_size, 1, 1, 1))
        if self.vision_params:
            groups.append(WeightGroup("vision", self.vision_params, 1, 1, 0))
        if self.indexer_heads:
            n, d = self.indexer_heads, self.indexer_head_dim
            q_in = self.q_lora_rank or h
            groups.append(WeightGroup("other", q_in * n * d + h * d + 2 * d + h * n, 1, L, L))
        return tuple(groups)

    def norm_params(self, width: int) -> int:
        return 2 * width if self.norm == "layernorm" else width

    def _attention_groups(self) -> list[WeightGroup]:
        h, L = self.hidden_size, self.num_layers
        a, kv = self.num_heads, self.num_kv_heads
        if self.is_mla:
            qk, v = self.qk_head_dim, self.v_head_dim
            r_kv = self.kv_lora_rank or 0
            out: list[WeightGroup] = []
            if self.q_lora_rank:
                out.append(WeightGroup("mla_q_a", h, self.q_lora_rank, L, L))
                out.append(WeightGroup("norm", self.q_lora_rank, 1, L, L))
                out.append(WeightGroup("mla_q_b", self.q_lora_rank, a * qk, L, L))
            else:
                out.append(WeightGroup("attn_q", h, a * qk, L, L))
            out.append(WeightGroup("mla_kv_a", h, r_kv + self.qk_rope_head_dim, L, L))
            out.append(WeightGroup("norm", r_kv, 1, L, L))
            out.append(WeightGroup("mla_kv_b", r_kv, a * (self.qk_nope_head_dim + v), L, L))
            out.append(WeightGroup("attn_o", a * v, h, L, L))
            return out
        d = self.head_dim
        out = [
            WeightGroup("attn_q", h, a * d, L, L),
            WeightGroup("attn_k", h, kv * d, L, L),
            WeightGroup("attn_v", h, kv * d, L, L),
            WeightGroup("attn_o", a * d, h, L, L),
        ]
        if self.qkv_bias:
            out.append(WeightGroup("bias", a * d + 2 * kv * d, 1, L, L))
        if self.o_bias:
            out.append(WeightGroup("bias", h, 1, L, L))
        return out

    @cached_property
    def mtp_params(self) -> int:
        """Parameters of the checkpoint's multi-token-prediction layers (not counted in total_params): one decoder
        layer each (with experts when the model has them), the projection of [embedding; hidden] (2h x h), three
        norms, and the copies of the embedding and output head that the published checkpoints store with them."""
        if not self.mtp_layers:
            return 0
        h = self.hidden_size
        if self.is_moe:
            e, f = self.num_experts, self.moe_intermediate_size
            mlp = h * e + (e if self.router_bias else 0) + e * 3 * h * f + (e * (2 * f + h) if self.expert_bias else 0)
            mlp += 3 * h * self.shared_expert_intermediate_size + (h if self.shared_expert_gate else 0)
        else:
            mlp = (3 if self.gated_mlp else 2) * h * self.intermediate_size
        return self.mtp_layers * (self._layer_without_mlp() + mlp + 2 * h * h + 3 * h + 2 * self.vocab_size * h)

    def _layer_without_mlp(self) -> int:
        """Attention with its biases and q/k norms, and the block's norms, per layer."""
        L, h = self.num_layers, self.hidden_size
        attention = sum(g.params for g in self._attention_groups()) // L
        qk = {"head": 2 * self.head_dim, "full": (self.num_heads + self.num_kv_heads) * self.head_dim}.get(self.qk_norm, 0)
        indexer = 0
        if self.indexer_heads:
            n, d = self.indexer_heads, self.indexer_head_dim
            indexer = (self.q_lora_rank or h) * n * d + h * d + 2 * d + h * n
        return attention + self.norms_per_layer * self.norm_params(h) + qk + (self.num_heads if self.attention_sinks else 0) + indexer

    @cached_property
    def shape_params(self) -> int:
        return sum(g.params for g in self.weight_groups)

    @cached_property
    def param_scale(self) -> float:
        """1.0, or exact count / shape count for a bare parameter count."""
        return self.params_override / self.shape_params if self.params_override else 1.0

    @cached_property
    def total_params(self) -> int:
        return self.params_override or self.shape_params

    @cached_property
    def active_params(self) -> int:
        """Parameters a text token passes through: k of the routed experts, not the vision encoder."""
        if not self.is_moe and not self.vision_params:
            return self.total_params
        return round(sum(g.active_params for g in self.weight_groups) * self.param_scale)

    @cached_property
    def largest_layer_params(self) -> int:
        """Parameters of the biggest transformer block: what ZeRO-3 / FSDP
        gathers at a time."""
        h = self.hidden_size
        attention = sum(g.params for g in self._attention_groups() if g.role != "norm") // self.num_layers
        dense_mlp = (3 if self.gated_mlp else 2) * h * self.intermediate_size if self.dense_layers else 0
        moe_mlp = 0
        if self.is_moe:
            widths = self.num_experts * self.moe_intermediate_size + self.shared_expert_intermediate_size
            moe_mlp = h * self.num_experts + 3 * h * widths
        return round((attention + max(dense_mlp, moe_mlp)) * self.param_scale)

    def params_by_role(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.weight_groups:
            out[g.role] = out.get(g.role, 0) + g.params
        return out

    def kv_cache_elements_per_token(self) -> tuple[int, int]:
        """(elements per token in full-attention layers, in windowed layers)."""
        if self.is_mla:
            # DeepSeek-V3 caches the compressed latent plus the decoupled RoPE key
            # (arXiv 2412.19437, Sec. 2.1.1): (kv_lora_rank + rope dim) per layer.
            per_layer = (self.kv_lora_rank or 0) + self.qk_rope_head_dim + self.indexer_head_dim
        else:
            per_layer = 2 * self.num_kv_heads * self.head_dim  # K and V
        windowed = self.windowed_layers
        return per_layer * (self.num_layers - windowed), per_layer * windowed


def _mlp_groups(h: int, f: int, gated: bool, count: int, active: int, expert: bool = False) -> list[WeightGroup]:
    if count == 0:
        return []
    groups = [WeightGroup("mlp_up", h, f, count, active, expert), WeightGroup("mlp_down", f, h, count, active, expert)]
    if gated:
        groups.insert(0, WeightGroup("mlp_gate", h, f, count, active, expert))
    return groups
