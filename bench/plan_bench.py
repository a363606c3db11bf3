"""How long the planner's full search takes for one goal, on one core (issue #11: under 300 ms).

Each goal is planned `--repeats` times in this process after one warm-up (catalogs loaded, presets parsed); the
median and the slowest run are printed, with how many priced plans the search weighed.

Run:  python3 bench/plan_bench.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.plan import Goal, plan

GOALS = {
    "serve 8B, 2k requests/day": {"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 2000},
    "serve 70B, 2M requests/day": {"goal": "serve", "model": "llama-3.1-70b", "requests_per_day": 2_000_000},
    "serve DeepSeek-V3, 100k/day": {"goal": "serve", "model": "deepseek-v3", "requests_per_day": 100_000},
    "fine-tune 8B, 20M tokens": {"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 2e7},
    "fine-tune 70B, 20M tokens": {"goal": "fine-tune", "model": "llama-3.1-70b", "tokens": 2e7},
    "fine-tune 405B, 100M tokens": {"goal": "fine-tune", "model": "llama-3.1-405b", "tokens": 1e8},
    "pretrain 1B, 1B tokens": {"goal": "pretrain", "model": "llama-3.2-1b", "tokens": 1e9},
    "pretrain 70B, 2T tokens": {"goal": "pretrain", "model": "llama-3.1-70b", "tokens": 2e12},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print(f"{'goal':32s} {'median ms':>10s} {'max ms':>8s} {'plans weighed':>14s}  cheapest")
    out = {}
    for name, spec in GOALS.items():
        goal = Goal.model_validate(spec)
        plan(goal)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            r = plan(goal)
            times.append((time.perf_counter() - t0) * 1e3)
        c = r.cheapest
        what = "none" if c is None else f"{c.devices} x {c.accelerator} ({c.method}, {c.weights_format}), ${c.cost:,.0f}"
        print(f"{name:32s} {statistics.median(times):10.1f} {max(times):8.1f} {r.considered:14,d}  {what}")
        out[name] = {"median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1), "considered": r.considered}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
