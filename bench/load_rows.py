"""Latency under load against every published row of tests/data/load_latency.csv: the measured time to first token and
tokens/s per user beside ours under both arrival patterns (core/speed/load.py), the synchronised loop's start-up wave
(every user's prompt queued at once), and how many check rows are within 25% at each concurrency. The numbers behind
docs/VALIDATION.md's "Latency under load".

Run:  python3 bench/load_rows.py           (all rows)
      python3 bench/load_rows.py nim180-l31  (rows whose id contains the text)
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.catalog.accelerators import get_accelerator  # noqa: E402
from core.layout import Layout  # noqa: E402
from core.memory.evaluator import fit_capacity  # noqa: E402
from core.money.serving import memory_by_batch  # noqa: E402
from core.speed.load import closed_loop, load_curve, scenario_scheduler  # noqa: E402
from core.speed.roofline import roofline  # noqa: E402
from tests.core.test_load import ROWS, TOLERANCE, _scenario  # noqa: E402


def figures(row: dict) -> dict[str, float]:
    """Our figures of the row's statistic under both arrival patterns, and the synchronised loop's start-up wave."""
    sc, acc = _scenario(row), get_accelerator(row["accelerator"])
    lay = Layout(1, int(row["tensor_parallel"]), 1)
    room = int(np.flatnonzero(memory_by_batch(sc, lay) <= fit_capacity(sc, float(acc.usable_memory_bytes))).max()) + 1
    prompt, out, users, stat = int(row["prompt_tokens"]), int(row["output_tokens"]), float(row["concurrency"]), row["statistic"]
    got: dict[str, float] = {}
    for arrivals in ("steady", "synchronised"):
        curve = load_curve(sc, acc, lay, np.array([users]), prompt, out, max_running=room, arrivals=arrivals)
        got[f"ttft_{arrivals}"] = float(curve[f"time_to_first_token_{stat}_s"][0])
        got[f"speed_{arrivals}"] = 1.0 / float(curve[f"inter_token_latency_{stat}_s"][0])
    s = scenario_scheduler(sc, prompt, acc)
    loop = closed_loop(roofline(sc, acc, lay), int(min(users, room, s.max_num_seqs)), prompt, out, s, int(min(room, s.max_num_seqs)))
    got["ttft_startup"] = loop["time_to_first_token_startup_mean_s"] if loop else float("nan")
    return got


def main(only: str = "") -> None:
    within: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # concurrency -> [rows, ttft within, speed within]
    print(f"{'row':48s} {'TTFT ms':>9s} {'steady':>7s} {'sync':>7s} {'start-up':>8s} | {'tok/s/user':>10s} {'steady':>7s} {'sync':>7s}")
    for row in ROWS:
        if only not in row["id"]:
            continue
        got = figures(row)
        ttft, speed = float(row["ttft_ms"]) / 1e3, 1e3 / float(row["itl_ms"])
        ours = row["arrivals"]
        e_ttft, e_speed = got[f"ttft_{ours}"] / ttft - 1, got[f"speed_{ours}"] / speed - 1
        print(
            f"{row['id']:48s} {ttft * 1e3:9.1f} {got['ttft_steady'] / ttft - 1:+7.0%} {got['ttft_synchronised'] / ttft - 1:+7.0%}"
            f" {got['ttft_startup'] / ttft - 1:+8.0%} | {speed:10.1f} {got['speed_steady'] / speed - 1:+7.0%} {got['speed_synchronised'] / speed - 1:+7.0%}"
            f"  ({ours}, {row['role']})"
        )
        if row["role"] == "check":
            w = within[f"{row['engine']} {int(row['concurrency']):>3d}"]
            w[0] += 1
            w[1] += abs(e_ttft) <= TOLERANCE
            w[2] += abs(e_speed) <= TOLERANCE
    print("\ncheck rows within 25% under each row's own arrival pattern (engine, users: rows, TTFT within, tokens/s per user within)")
    for k in sorted(within):
        print(f"  {k}: {within[k][0]:2d} rows, TTFT {within[k][1]:2d}, speed {within[k][2]:2d}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
