"""Attention's own FLOPs per token (QK^T and the weighted sum), used by serving (core/speed/roofline.py) and
training (core/speed/timing.py): forward 2 x context x (heads x (qk_head_dim + value_head_dim)) per layer (each of
the two matmuls is 2 x context x width), sliding-window layers capped at their window."""

from __future__ import annotations

from core.catalog.accelerators import Accelerator
from core.model.architecture import Architecture


def flash_attention(acc: Accelerator) -> bool:
    """Whether the engines' and trainers' attention runs FlashAttention-2 on this part (Accelerator.runs_flash_attention_2)."""
    return acc.runs_flash_attention_2


def attention_flops_per_token(arch: Architecture, context: float) -> float:
    full_layers = arch.num_layers - arch.windowed_layers
    windowed_ctx = min(context, arch.sliding_window) if arch.sliding_window else context
    width = arch.num_heads * (arch.qk_head_dim + arch.value_head_dim)
    return 2.0 * width * (full_layers * context + arch.windowed_layers * windowed_ctx)
