"""A representative decoder-only shape for a bare parameter count.

Only activations and the KV cache need a shape; the parameter count itself is
taken as exact. The shape follows the Llama family: SwiGLU MLP with
intermediate ~ 8/3 x hidden (Touvron et al. 2023), 128-dim heads, grouped-query
attention with up to 8 KV heads (Llama 3 / Qwen 2.5), and a hidden size
growing with the count (Kaplan et al. 2020 find loss flat over a wide range of
aspect ratios, so any sensible shape is representative).
"""

from __future__ import annotations

from core.model.architecture import Architecture

REPRESENTATIVE_VOCAB = 32_000
REPRESENTATIVE_CONTEXT = 131_072


def representative_architecture(params: float, name: str | None = None) -> Architecture:
    """Layers grow as the cube root of the count (about 32 at 7B, 69 at 70B,
    close to Llama's 32 and 80) and the hidden size fills in the rest, so that
    layers, width and KV cache all grow with the count (no jumps backwards)."""
    n = float(params)
    layers = max(2, min(2_000, round(n ** (1 / 3) / 60)))
    per_layer_params = 12  # x h^2: attention 4h^2 (at most) + SwiGLU 3 x h x 8h/3
    h = max(64, round((n / (per_layer_params * layers)) ** 0.5 / 64) * 64)
    if h >= 1024:  # 128-dim heads in groups of 8, 8 KV heads (Llama 3 / Qwen 2.5 style GQA)
        head_dim, heads, kv = 128, 8 * max(1, round(h / 1024)), 8
    else:  # small models: 64-dim heads, multi-head attention
        head_dim, heads = 64, max(1, h // 64)
        kv = heads
    f = max(128, round(8 / 3 * h / 128) * 128)
    label = name or f"{n / 1e9:.3g}B parameters"
    return Architecture(
        name=label,
        model_type="representative",
        num_layers=layers,
        hidden_size=h,
        intermediate_size=f,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        vocab_size=REPRESENTATIVE_VOCAB,
        max_context=REPRESENTATIVE_CONTEXT,
        params_override=round(n),
        assumptions=(
            f"bare parameter count {round(n):,} taken as exact; for activations and KV cache a "
            f"representative Llama-style shape is assumed: {layers} layers, hidden {h}, "
            f"{heads} heads ({kv} KV heads, head dim {head_dim}), SwiGLU intermediate {f}, "
            f"vocabulary {REPRESENTATIVE_VOCAB:,}",
        ),
    )
