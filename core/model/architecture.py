"""A decoder-only transformer's shape, and everything derived from it that does
not depend on the scenario: parameter counts per tensor role and the linear
layer shapes that LoRA adapts.

Counting follows the modules of the Hugging Face implementations (LlamaModel,
MistralModel, MixtralModel, Qwen2Model, Gemma2Model, Phi3Model, GPT2Model,
FalconModel, DeepseekV3Model): embeddings, per-layer attention and MLP
projections, norms, an untied lm_head.
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Roles of weight tensors. Quantization formats decide per role (see formats.py).
ATTENTION_ROLES = ("attn_q", "attn_k", "attn_v", "attn_o")
MLP_ROLES = ("mlp_gate", "mlp_up", "mlp_down")


class WeightGroup(NamedTuple):
    """`count` matrices of shape in_features x out_features (or `count` vectors
    of `in_features` when out_features == 1), `active` of them used per token."""

    role: str
    in_features: int
    out_features: int
    count: int
    active: int

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
    intermediate_size: int = Field(ge=1, le=10_000_000)
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
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    norms_per_layer: int = Field(default=2, ge=0, le=8)
    learned_positions: int = Field(default=0, ge=0, le=100_000_000)
    dropout: bool = False
    # Mixture of experts (num_experts == 0 means dense).
    num_experts: int = Field(default=0, ge=0, le=65_536)
    experts_per_token: int = Field(default=0, ge=0, le=65_536)
    num_shared_experts: int = Field(default=0, ge=0, le=1_024)
    moe_intermediate_size: int = Field(default=0, ge=0, le=10_000_000)
    first_dense_layers: int = Field(default=0, ge=0, le=2_000)
    # Sliding-window attention: "all" layers (Mistral v0.1) or "alternate" (Gemma 2).
    sliding_window: int | None = Field(default=None, ge=1, le=100_000_000)
    sliding_window_layers: Literal["all", "alternate"] = "all"
    # Multi-head latent attention (DeepSeek-V2/V3).
    q_lora_rank: int | None = Field(default=None, ge=1, le=1_000_000)
    kv_lora_rank: int | None = Field(default=None, ge=1, le=1_000_000)
    qk_rope_head_dim: int = Field(default=0, ge=0, le=100_000)
    qk_nope_head_dim: int = Field(default=0, ge=0, le=100_000)
    v_head_dim: int = Field(default=0, ge=0, le=100_000)
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
            if self.first_dense_layers > self.num_layers:
                raise ValueError("more dense layers than layers")
        if (self.kv_lora_rank is None) != (self.v_head_dim == 0):
            raise ValueError("latent attention needs kv_lora_rank and v_head_dim together")
        return self

    # ------------------------------------------------------------------ shape
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim if self.is_mla else self.head_dim

    @property
    def windowed_layers(self) -> int:
        """Layers whose KV cache is capped at the sliding window."""
        if self.sliding_window is None:
            return 0
        if self.sliding_window_layers == "alternate":
            return (self.num_layers + 1) // 2  # Gemma 2: even-indexed layers are local
        return self.num_layers

    # ------------------------------------------------------------ parameters
    @cached_property
    def weight_groups(self) -> tuple[WeightGroup, ...]:
        """The real tensors of this shape. For a bare parameter count the shape is
        representative and `param_scale` maps its sums to the exact count."""
        h, L = self.hidden_size, self.num_layers
        norm_width = h * (2 if self.norm == "layernorm" else 1)
        groups: list[WeightGroup] = [WeightGroup("embed", self.vocab_size, h, 1, 1)]
        if self.learned_positions:
            groups.append(WeightGroup("embed", self.learned_positions, h, 1, 1))
        groups += self._attention_groups()
        dense_layers = L - self.moe_layers
        groups += _mlp_groups(h, self.intermediate_size, self.gated_mlp, dense_layers, dense_layers)
        if self.mlp_bias and dense_layers:
            groups.append(WeightGroup("bias", self.intermediate_size + h, 1, dense_layers, dense_layers))
        if self.is_moe:
            m, f = self.moe_layers, self.moe_intermediate_size
            groups.append(WeightGroup("router", h, self.num_experts, m, m))
            groups += _mlp_groups(h, f, True, m * self.num_experts, m * self.experts_per_token)
            if self.num_shared_experts:
                shared = f * self.num_shared_experts  # DeepSeek: one MLP of n_shared * f
                groups += _mlp_groups(h, shared, True, m, m)
        if self.norms_per_layer:
            n = L * self.norms_per_layer
            groups.append(WeightGroup("norm", norm_width, 1, n, n))
        groups.append(WeightGroup("norm", norm_width, 1, 1, 1))  # final norm
        if not self.tie_embeddings:
            groups.append(WeightGroup("lm_head", h, self.vocab_size, 1, 1))
        return tuple(groups)

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
        if not self.is_moe:
            return self.total_params
        return round(sum(g.active_params for g in self.weight_groups) * self.param_scale)

    @cached_property
    def largest_layer_params(self) -> int:
        """Parameters of the biggest transformer block: what ZeRO-3 / FSDP
        gathers at a time."""
        h, f = self.hidden_size, self.intermediate_size
        attention = sum(g.params for g in self._attention_groups() if g.role != "norm") // self.num_layers
        dense_mlp = (3 if self.gated_mlp else 2) * h * f if self.moe_layers < self.num_layers else 0
        moe_mlp = 0
        if self.is_moe:
            fm = self.moe_intermediate_size
            moe_mlp = h * self.num_experts + 3 * h * fm * (self.num_experts + self.num_shared_experts)
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
            per_layer = (self.kv_lora_rank or 0) + self.qk_rope_head_dim
        else:
            per_layer = 2 * self.num_kv_heads * self.head_dim  # K and V
        windowed = self.windowed_layers
        return per_layer * (self.num_layers - windowed), per_layer * windowed


def _mlp_groups(h: int, f: int, gated: bool, count: int, active: int) -> list[WeightGroup]:
    if count == 0:
        return []
    groups = [WeightGroup("mlp_up", h, f, count, active), WeightGroup("mlp_down", f, h, count, active)]
    if gated:
        groups.insert(0, WeightGroup("mlp_gate", h, f, count, active))
    return groups
