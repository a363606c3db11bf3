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
"""

from __future__ import annotations

import numpy as np

from core.model.architecture import Architecture


def layer_activation_bytes(arch: Architecture, seq: int, batch: int, *, flash: bool, act_bytes: int = 2) -> tuple[float, float]:
    """(sum over all layers, largest single layer) in bytes, no parallelism.
    `seq` and `batch` may be NumPy arrays (sweeps)."""
    s, b, h = seq, batch, arch.hidden_size
    sb = s * b
    a, qk, v = arch.num_heads, arch.qk_head_dim, arch.value_head_dim
    elems = arch.norms_per_layer * sb * h  # norm inputs
    elems += sb * h  # QKV projection input (the norm's output)
    if arch.is_mla:
        latent = (arch.q_lora_rank or 0) + (arch.kv_lora_rank or 0) + arch.qk_rope_head_dim
        elems += sb * latent + sb * a * (2 * qk + v)  # latents, then Q, K, V per head
    else:
        elems += sb * (a + 2 * arch.num_kv_heads) * arch.head_dim  # Q, K, V
    elems += sb * a * v  # attention output = o_proj input
    elems += sb * h  # MLP input (the norm's output)
    extra_bytes = 0.0
    if flash:
        extra_bytes += 4 * a * sb  # fp32 log-sum-exp per head and token
    else:
        elems += a * s * s * b  # softmax output
        if arch.dropout:
            elems += a * s * s * b  # dropout output
            extra_bytes += a * s * s * b  # dropout mask, 1 byte
    if arch.dropout:
        extra_bytes += 2 * sb * h  # dropout masks after attention and MLP
    common = elems * act_bytes + extra_bytes
    mlp_tensors = 4 if arch.gated_mlp else 2  # gate, up, act, product | act in, act out
    dense = sb * mlp_tensors * arch.intermediate_size * act_bytes
    moe = 0.0
    if arch.is_moe:
        k = arch.experts_per_token
        moe = sb * 4 * arch.num_experts  # fp32 router logits
        moe += sb * k * h * act_bytes  # each token's copy sent to k experts
        moe += sb * 4 * arch.routed_width * act_bytes  # k experts' and the shared expert's intermediates
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


def logits_bytes(seq: int, batch: int, vocab: int) -> float:
    """The loss step: bf16 logits, their fp32 upcast and the fp32 log-softmax
    kept for the backward pass (Hugging Face causal-LM loss), 10 bytes per
    batch x seq x vocab element. This is the largest single activation for
    128k-256k vocabularies."""
    return 10.0 * seq * batch * vocab
