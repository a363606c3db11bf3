"""Per-GPU output tokens/s of the serving planner's cheapest plan (issue #27, "Capacity"): a dense and some
mixture-of-experts models at 1,000 prompt / 1,000 output tokens, with latency targets loose enough that the
largest batch that fits is allowed (what the engines' peak-throughput tables measure).

Run:  python3 bench/moe_capacity.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.plan import Goal, plan

CASES = {
    "llama-3.1-8b fp8 on H100, TensorRT-LLM": ("llama-3.1-8b", "h100-sxm", "tensorrt-llm"),
    "llama-3.1-8b on H100, vLLM": ("llama-3.1-8b", "h100-sxm", "vllm"),
    "qwen3-30b-a3b on H100, vLLM": ("qwen3-30b-a3b", "h100-sxm", "vllm"),
    "qwen3-30b-a3b on H100, TensorRT-LLM": ("qwen3-30b-a3b", "h100-sxm", "tensorrt-llm"),
    "llama-4-maverick on H100, vLLM": ("llama-4-maverick", "h100-sxm", "vllm"),
    "deepseek-v3 on H200, SGLang": ("deepseek-v3", "h200", "sglang"),
}


def main() -> None:
    out = {}
    for name, (model, acc, engine) in CASES.items():
        goal = Goal.model_validate(
            {
                "goal": "serve",
                "model": model,
                "requests_per_day": 5e6,
                "input_tokens": 1000,
                "output_tokens": 1000,
                "ttft_s": 600,
                "tokens_per_s_per_user": 0.01,
                "accelerators": [acc],
                "serving_engine": engine,
            }
        )
        c = plan(goal).cheapest
        if c is None:
            print(f"{name:40s} no plan")
            continue
        s = c.scenario
        per_gpu = c.output_tokens_per_s_capacity / c.devices
        how = f"{s.get('weights_format')}, KV {s.get('kv_cache_format')}, TP {s.get('tensor_parallel')}, batch {s.get('batch_size')}, {c.devices} GPUs"
        print(f"{name:40s} {per_gpu:9,.0f} output tokens/s per GPU  ({how})")
        out[name] = round(per_gpu)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
