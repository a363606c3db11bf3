"""Per-GPU output tokens/s of the serving planner's cheapest plan (issue #27, "Capacity"): a dense and some
mixture-of-experts models at 1,000 prompt / 1,000 output tokens, with latency targets loose enough that the
largest batch that fits is allowed (what the engines' peak-throughput tables measure).

Then, for the mixture-of-experts cases, what one wide expert-parallel layout (core/speed/expert_parallel.py: DP
attention, E/n experts a rank, DeepEP-style all-to-alls) would deliver per GPU on the same part and format as the
cheapest plan, decode only and with its prefill on the same devices. The planner searches EP over a replica's 2, 4 or 8
devices (core/plan/serve.py); the cheapest plan says "EP n" where it is one.

Run:  python3 bench/moe_capacity.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.catalog.accelerators import get_accelerator
from core.catalog.expert_parallel import supports_expert_parallel
from core.plan import Goal, plan
from core.scenario import Scenario
from core.speed.expert_parallel import ep_decode_capacity

EP_SIZES = (8, 16, 32, 64)

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
                "expert_parallel": True,  # EP replicas searched too (the planner's EP column of tests/data/moe_capacity.csv)
            }
        )
        c = plan(goal).cheapest
        if c is None:
            print(f"{name:40s} no plan")
            continue
        s = c.scenario
        per_gpu = c.output_tokens_per_s_capacity / c.devices
        layout = "EP" if s.get("expert_parallel") else "TP"
        how = f"{s.get('weights_format')}, KV {s.get('kv_cache_format')}, {layout} {s.get('tensor_parallel')}, batch {s.get('batch_size')}, {c.devices} GPUs"
        print(f"{name:40s} {per_gpu:9,.0f} output tokens/s per GPU  ({how})")
        out[name] = round(per_gpu)
        if Scenario(model=model).architecture.is_moe and supports_expert_parallel(engine):
            kv = s.get("kv_cache_format") or "bf16"
            ep_sc = Scenario(model=model, weights_format=s.get("weights_format"), kv_cache_format=kv, serving_engine=engine, accelerator=acc)
            for n in EP_SIZES:
                cap = ep_decode_capacity(ep_sc, get_accelerator(acc), n, 1000, 1000)
                if cap is None:
                    continue
                print(
                    f"{'':40s}   EP {n:3d}: {cap.served_output_tokens_per_s_per_device:9,.0f} served, {cap.output_tokens_per_s_per_device:9,.0f} decode only"
                    f" ({cap.batch_per_rank} a rank, busiest x{cap.step.busiest_rank_factor:.2f}, all-to-alls {cap.step.all_to_all_s / cap.step.step_s:.0%} of a step)"
                )
                out[f"{name}, EP {n}, served"] = round(cap.served_output_tokens_per_s_per_device)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
