"""How long the cost tables take for one scenario (a dashboard rerun builds them).

1. Training: every price row x every priced accelerator x device counts (the
   smallest fitting count and its doublings up to 64x), with time, time with
   communication, on-demand and spot cost -> core.cost.training_options.
2. Serving: a fleet for a stated traffic on every price row of every priced
   accelerator -> core.serving.serving_options.
3. GPU vs TPU comparison over the whole accelerator catalog -> core.compare.
4. estimate() with its new training / inference blocks.

Target: each table well under 50 ms on one core. Run: python bench/cost_bench.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import time_it

from core.estimate import estimate
from core.money.compare import compare_accelerators
from core.money.cost import training_options
from core.money.serving import Traffic, serving_options
from core.scenario import Scenario

TRAIN = {
    "llama-3.1-8b full, 10B tokens": Scenario(model="llama-3.1-8b", mode="training", train_tokens=1e10, gradient_checkpointing=True),
    "llama-3.1-70b ZeRO-3 x8, 1B tokens": Scenario(model="llama-3.1-70b", mode="training", train_tokens=1e9, zero_stage=3, data_parallel=8),
    "mixtral-8x7b qlora, 100M tokens": Scenario(model="mixtral-8x7b", mode="training", method="qlora", train_tokens=1e8),
}
SERVE = Scenario(model="llama-3.1-8b", batch_size=32)
TRAFFIC = Traffic(requests_per_day=1_000_000, input_tokens_per_request=1000, output_tokens_per_request=300)


def main() -> None:
    worst = 0.0
    print("training table (price rows x accelerators x device counts), median of 7:")
    for name, sc in TRAIN.items():
        table = training_options(sc)
        t = time_it(lambda sc=sc: training_options(sc))
        worst = max(worst, t)
        print(f"  {name:38s} {len(table.options):5d} rows  {t * 1e3:7.2f} ms")
    n = len(serving_options(SERVE, TRAFFIC))
    t = time_it(lambda: serving_options(SERVE, TRAFFIC))
    worst = max(worst, t)
    print(f"serving table (price rows x accelerators)  {n:5d} rows  {t * 1e3:7.2f} ms")
    n = len(compare_accelerators(SERVE))
    t = time_it(lambda: compare_accelerators(SERVE))
    worst = max(worst, t)
    print(f"GPU vs TPU comparison (all accelerators)   {n:5d} rows  {t * 1e3:7.2f} ms")
    print(f"slowest table {worst * 1e3:.2f} ms (target < 50 ms): {'OK' if worst < 0.05 else 'MISSED'}")
    for name, sc in (("inference", SERVE), ("training", next(iter(TRAIN.values())))):
        t = time_it(lambda sc=sc: [estimate(sc) for _ in range(50)]) / 50
        print(f"estimate() with the {name} block: {t * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
