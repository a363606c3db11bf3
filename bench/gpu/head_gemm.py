"""The output head's two matmuls in fp32 and bf16 (issue #27: QLoRA's fp32 upcast runs the head in fp32).

For each head shape, the forward (tokens x hidden @ hidden x vocab) and the input gradient (tokens x vocab @
vocab x hidden) are timed in fp32 with TF32 off (PyTorch's default, which prepare_model_for_kbit_training's fp32
head runs under) and in bf16: median of 5 after 2 warm-ups, one JSON line a shape. Needs torch and a GPU:

    python3 bench/gpu/head_gemm.py > $OUT/gemm.jsonl
"""

from __future__ import annotations

import json
import statistics
import time

SHAPES = [(8192, 2048, 32000), (8192, 2048, 128256), (8192, 2048, 256000), (8192, 3584, 256000), (8192, 4096, 128256), (8192, 5120, 32000), (8192, 5120, 152064)]


def _time(torch, fn) -> float:
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    for tokens, hidden, vocab in SHAPES:
        row = {"tokens": tokens, "hidden": hidden, "vocab": vocab, "gpu": torch.cuda.get_device_name()}
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(tokens, hidden, device="cuda", dtype=dtype)
            w = torch.randn(vocab, hidden, device="cuda", dtype=dtype)
            g = torch.randn(tokens, vocab, device="cuda", dtype=dtype)
            s = _time(torch, lambda x=x, w=w, g=g: (x @ w.T, g @ w))
            name = str(dtype).removeprefix("torch.")
            row[f"{name}_seconds"] = s
            row[f"{name}_tflops"] = 4 * tokens * hidden * vocab / s / 1e12
            del x, w, g
            torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
