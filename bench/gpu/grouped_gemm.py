"""The compute rate of MoE expert GEMMs on one GPU, as JSON lines: torch's grouped GEMM (torch._grouped_mm, what
transformers' `grouped_mm` experts call) at published expert shapes, tokens spread evenly over the experts, and
transformers' whole MoE block (router, sort, gather, the two grouped GEMMs, gate, weighted sum) at the same shape.

What it checks: core/speed/moe.py's grouped-GEMM efficiency, COMPUTE_EFF / (2/3 (1 + K0/hidden) + 1/3 (1 + K0/width)),
fitted on vLLM's fused-MoE Triton kernel, against another kernel family; and how much of transformers' MoE layer is
not the GEMMs (the recorded MoE prefill misses of tests/core/test_measured_h100_prefill.py).

    python3 bench/gpu/grouped_gemm.py --out $OUT/grouped.jsonl        # about a minute on an H100
    python3 bench/gpu/grouped_gemm.py --device cpu --out /tmp/g.jsonl  # plumbing only (tiny shapes, numbers mean nothing)

Needs torch (2.9 or later for torch._grouped_mm) and transformers (for the block); neither is a project dependency.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

# (model id in data/models.json, hidden, expert width, experts, experts per token): published config.json shapes
SHAPES = (
    ("qwen3-30b-a3b", 2048, 768, 128, 8),
    ("gpt-oss-120b", 2880, 2880, 128, 4),
    ("mixtral-8x7b", 4096, 14336, 8, 2),
    ("deepseek-v3", 7168, 2048, 256, 8),
)
TOKENS = (512, 2048, 8192, 16384)


def _time(fn: Any, torch: Any, device: str, warmup: int = 3, reps: int = 10) -> float:
    """Median seconds of `fn()`, timed with CUDA events on a GPU."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def grouped_rows(torch: Any, device: str, shapes: Any, tokens: Any) -> list[dict[str, Any]]:
    """Gate-and-up (K = hidden, N = 2 x width) and down (K = width, N = hidden) grouped GEMMs of each shape."""
    rows = []
    for model, hidden, width, experts, top_k in shapes:
        w_up = torch.randn(experts, hidden, 2 * width, device=device, dtype=torch.bfloat16) * 0.02
        w_down = torch.randn(experts, width, hidden, device=device, dtype=torch.bfloat16) * 0.02
        for t in tokens:
            routed = t * top_k
            per_expert = routed // experts
            offs = torch.arange(1, experts + 1, device=device, dtype=torch.int32) * per_expert
            x = torch.randn(per_expert * experts, hidden, device=device, dtype=torch.bfloat16)
            h = torch.randn(per_expert * experts, width, device=device, dtype=torch.bfloat16)
            up_s = _time(lambda x=x, w=w_up, o=offs: torch._grouped_mm(x, w, offs=o), torch, device)
            down_s = _time(lambda h=h, w=w_down, o=offs: torch._grouped_mm(h, w, offs=o), torch, device)
            flops = 2.0 * per_expert * experts * 3 * hidden * width
            rows.append(
                dict(
                    kind="grouped_gemm",
                    model=model,
                    hidden=hidden,
                    width=width,
                    experts=experts,
                    top_k=top_k,
                    tokens=t,
                    rows_per_expert=per_expert,
                    up_seconds=up_s,
                    down_seconds=down_s,
                    tflops=flops / (up_s + down_s) / 1e12,
                )
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def block_rows(torch: Any, device: str, tokens: Any) -> list[dict[str, Any]]:
    """transformers' Qwen3-MoE block (eager, grouped_mm experts) at the published shape, against its GEMMs alone."""
    from harness import _published_config  # bench/gpu/harness.py, beside this script
    from transformers import AutoConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    published = _published_config("qwen3-30b-a3b")
    cfg = AutoConfig.for_model(published.pop("model_type"), **published)
    cfg._experts_implementation = "grouped_mm"
    with torch.device(device):
        block = Qwen3MoeSparseMoeBlock(cfg).to(torch.bfloat16).eval()
        for p in block.parameters():
            torch.nn.init.normal_(p, std=0.02)
    rows = []
    with torch.no_grad():
        for t in tokens:
            x = torch.randn(1, t, cfg.hidden_size, device=device, dtype=torch.bfloat16)
            seconds = _time(lambda x=x: block(x), torch, device)
            rows.append(dict(kind="moe_block", model="qwen3-30b-a3b", experts_implementation="grouped_mm", tokens=t, seconds=seconds))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = ap.parse_args()
    import torch
    import transformers

    shapes, tokens = SHAPES, TOKENS
    if args.device == "cpu":  # plumbing: tiny shapes
        shapes, tokens = (("tiny", 64, 32, 4, 2),), (64,)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    versions["gpu"] = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    rows = grouped_rows(torch, args.device, shapes, tokens)
    if args.device == "cuda":
        rows += block_rows(torch, args.device, tokens)
    with args.out.open("w") as fh:
        for r in rows:
            fh.write(json.dumps({**r, "versions": versions}) + "\n")


if __name__ == "__main__":
    sys.exit(main())
