"""A representative decoder-only shape for a bare parameter count.

Only activations and the KV cache need a shape; the parameter count itself is
taken as exact. The shape follows the Llama family: SwiGLU MLP with
intermediate ~ 8/3 x hidden (Touvron et al. 2023), 128-dim heads, grouped-query
attention with up to 8 KV heads (Llama 3 / Qwen 2.5), and a hidden size
growing as the cube root of the count at about 128 hidden units per layer
(Kaplan et al. 2020 find loss flat over a wide range of aspect ratios).
"""

from __future__ import annotations

from core.architecture import Architecture

REPRESENTATIVE_VOCAB = 32_000
REPRESENTATIVE_CONTEXT = 131_072
_WIDTHS = (256, 512, 768, 1024, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192, 12288, 16384, 20480, 25600, 32768)


def representative_architecture(params: float, name: str | None = None) -> Architecture:
    n = float(params)
    target_h = (n * 128 / 12) ** (1 / 3)
    h = min(_WIDTHS, key=lambda w: abs(w - target_h))
    head_dim = 128 if h >= 2048 else 64
    heads = h // head_dim
    kv = max(d for d in range(1, 9) if heads % d == 0)
    f = max(256, round(8 / 3 * h / 256) * 256)
    per_layer = 4 * h * h * (heads + kv) // (2 * heads) + 3 * h * f
    embeddings = 2 * REPRESENTATIVE_VOCAB * h
    layers = max(1, round((n - embeddings) / per_layer))
    label = name or f"{n / 1e9:.3g}B parameters"
    return Architecture(
        name=label,
        model_type="representative",
        num_layers=min(layers, 2_000),
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
            f"representative Llama-style shape is assumed: {min(layers, 2_000)} layers, hidden {h}, "
            f"{heads} heads ({kv} KV heads, head dim {head_dim}), SwiGLU intermediate {f}, "
            f"vocabulary {REPRESENTATIVE_VOCAB:,}",
        ),
    )
