"""Activation memory of a training step, per transformer layer.

Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models" (arXiv 2205.05198), Sec. 4.1, count the tensors a GPT
block keeps for the backward pass: 34*s*b*h + 5*a*s^2*b bytes with 16-bit
activations (LayerNorm inputs 4sbh, QKV input 2sbh, Q and K 4sbh, V 2sbh,
attention output 2sbh, MLP input 2sbh, GELU input and output 16sbh, dropout
masks 2sbh; softmax output 2as^2b, its dropout mask as^2b and output 2as^2b).
We count the same tensors for the actual architecture instead of assuming
GPT-3's: norms per block, grouped-query K/V widths, a gated MLP keeping four
intermediate tensors (gate, up, activation, product; 8sbf bytes), mixture of
experts (k routed experts per token), latent attention, and dropout only where
the model uses it. FlashAttention (Dao et al. 2022) keeps no s^2 tensor, only
the fp32 log-sum-exp per head and token.

What an implementation keeps beyond the textbook is a `LayerCosts` argument
(core/memory/components.py fills it in for each training stack): an eager
RMSNorm keeps an fp32 copy of its input (8 bytes per hidden value per norm
instead of 4), eager attention keeps the fp32 softmax and its 16-bit copy
(6 bytes per score), PEFT keeps fp32 copies of the adapted inputs.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from core.model.architecture import Architecture


class LayerCosts(NamedTuple):
    """Implementation-specific bytes of one block, beyond the tensor widths."""

    act_bytes: float = 2.0  # bytes per activation value (16-bit; 4 in fp32)
    norm_bytes: float = 4.0  # bytes per hidden value kept by each norm (textbook: input + output, 2 x 2 B)
    softmax_bytes: float | None = None  # bytes per attention score kept without FlashAttention (textbook: 5, with dropout)
    extra_per_token: float = 0.0  # further bytes per token and layer (e.g. PEFT's fp32 input copies, adapter intermediates)


TEXTBOOK = LayerCosts()


def layer_activation_bytes(arch: Architecture, seq: Any, batch: Any, *, flash: bool, act_bytes: int = 2, costs: LayerCosts | None = None) -> tuple[Any, Any]:
    """(sum over all layers, largest single layer) in bytes, no parallelism.
    `seq` and `batch` may be NumPy arrays (sweeps)."""
    c = costs or TEXTBOOK._replace(act_bytes=act_bytes, norm_bytes=2 * act_bytes)
    a_bytes = c.act_bytes
    s, b, h = seq, batch, arch.hidden_size
    sb = s * b
    a, qk, v = arch.num_heads, arch.qk_head_dim, arch.value_head_dim
    norms = max(arch.norms_per_layer, 1)
    out = norms * sb * h * c.norm_bytes  # each norm's input and output (the next projection's input)
    elems = 0.0
    if arch.is_mla:
        latent = (arch.q_lora_rank or 0) + (arch.kv_lora_rank or 0) + arch.qk_rope_head_dim
        elems += sb * latent + sb * a * (2 * qk + v)  # latents, then Q, K, V per head
    else:
        elems += sb * (a + 2 * arch.num_kv_heads) * arch.head_dim  # Q, K, V
    elems += sb * a * v  # attention output = o_proj input
    extra_bytes = 0.0
    if flash:
        extra_bytes += 4 * a * sb  # fp32 log-sum-exp per head and token
    elif c.softmax_bytes is not None:
        extra_bytes += c.softmax_bytes * a * s * s * b
    else:
        elems += a * s * s * b  # softmax output
        if arch.dropout:
            elems += a * s * s * b  # dropout output
            extra_bytes += a * s * s * b  # dropout mask, 1 byte
    if arch.dropout:
        extra_bytes += 2 * sb * h  # dropout masks after attention and MLP
    common = out + elems * a_bytes + extra_bytes + sb * c.extra_per_token
    mlp_tensors = 4 if arch.gated_mlp else 2  # gate, up, act, product | act in, act out
    dense = sb * mlp_tensors * arch.intermediate_size * a_bytes
    moe: Any = 0.0
    if arch.is_moe:
        k = arch.experts_per_token
        moe = sb * 4 * arch.num_experts  # fp32 router logits
        moe += sb * k * h * a_bytes  # each token's copy sent to k experts
        moe += sb * 4 * arch.routed_width * a_bytes  # k experts' and the shared expert's intermediates
    dense_layers = arch.dense_layers
    total = arch.num_layers * common + dense_layers * dense + arch.moe_layers * moe
    if dense_layers and arch.moe_layers:
        largest = common + np.maximum(dense, moe)
    else:
        largest = common + (moe if arch.moe_layers else dense)
    return total, largest


def korthikanti_gpt_layer_bytes(seq: int, batch: int, hidden: int, heads: int) -> float:
    """The paper's closed form for a GPT-3 block, no parallelism (Eq. 1 / Sec. 4.1)."""
    return seq * batch * hidden * (34 + 5 * heads * seq / hidden)


def logits_bytes(seq: Any, batch: Any, vocab: int, bytes_per_entry: float = 10.0) -> Any:
    """The loss step: bytes per batch x seq x vocabulary entry at its peak (a training stack's `logits_bytes`; the
    Hugging Face loss keeps bf16 logits, their fp32 upcast, the fp32 log-softmax and its gradient: ~14). This is the
    largest single activation for 128k-256k vocabularies."""
    return bytes_per_entry * seq * batch * vocab
