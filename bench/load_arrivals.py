"""Time of the latency-under-load model per evaluation (core/speed/load.py), steady vs synchronised arrivals: each row of
tests/data/load_latency.csv (one concurrency), and the Inference page's curve (40 concurrencies up to twice the memory's
room) for a few scenarios, with the simulation's cache cleared before each.

Run:  python3 bench/load_arrivals.py
"""

from __future__ import annotations

import csv
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.catalog.accelerators import get_accelerator  # noqa: E402
from core.estimate import estimate  # noqa: E402
from core.layout import Layout  # noqa: E402
from core.scenario import Scenario  # noqa: E402
from core.speed import load  # noqa: E402
from core.speed.load import load_curve  # noqa: E402


def timed(*args, **kwargs) -> float:
    """Seconds of one load_curve(*args, **kwargs), the simulation's cache cleared first."""
    load._LOOPS.clear()
    start = time.perf_counter()
    load_curve(*args, **kwargs)
    return time.perf_counter() - start


def rows() -> None:
    table = list(csv.DictReader((ROOT / "tests" / "data" / "load_latency.csv").open(newline="")))
    got: dict[str, list[float]] = {"steady": [], "synchronised": []}
    for r in table:
        sc = Scenario(model=r["model"], weights_format=r["weights_format"], kv_cache_format=r["kv_cache_format"], accelerator=r["accelerator"],
                      seq_len=int(r["prompt_tokens"]) + int(r["output_tokens"]), output_tokens=int(r["output_tokens"]), serving_engine=r["engine"],
                      tensor_parallel=int(r["tensor_parallel"]))  # fmt: skip
        acc, lay = get_accelerator(r["accelerator"]), Layout(1, int(r["tensor_parallel"]), 1)
        users = np.array([float(r["concurrency"])])
        for a in got:
            got[a].append(timed(sc, acc, lay, users, int(r["prompt_tokens"]), int(r["output_tokens"]), arrivals=a))
    for a, t in got.items():
        print(f"rows ({len(t)}), {a:12s}: median {statistics.median(t) * 1e3:6.2f} ms, max {max(t) * 1e3:6.2f} ms")


def curves() -> None:
    for model, seq in (("llama-3.1-8b", 4096), ("llama-3.3-70b", 8192), ("qwen2.5-0.5b", 1024)):
        sc = Scenario(model=model, seq_len=seq, weights_format="fp8" if "70b" in model else "bf16")
        inf = estimate(sc).inference
        room = max(1, inf.max_concurrent_sequences)
        users = np.unique(np.geomspace(1, max(8, min(2048, room * 2)), 40).round())
        lay = Layout(1, inf.tensor_parallel, 1)
        for a in ("steady", "synchronised"):
            t = timed(sc, get_accelerator(sc.accelerator), lay, users, inf.prompt_tokens, inf.output_tokens, max_running=room, arrivals=a)
            print(f"page curve {model} seq {seq:,} (room {room:,}), {a:12s}: {t * 1e3:7.1f} ms")


if __name__ == "__main__":
    rows()
    curves()
