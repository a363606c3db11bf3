"""Our estimates next to GPU measurements (the JSON lines bench/gpu/harness.py writes; by default the committed
H100 run, data/measurements/h100-2026-11-23.jsonl): nvidia-smi, allocated and reserved memory, and speed, each
for the card the row was measured on (`versions.gpu`). With a second file, the cases both runs measured side by
side (one card against another).

    python3 bench/gpu/compare.py [FILE.jsonl [OTHER_CARD.jsonl]]
    python3 bench/gpu/compare.py data/measurements/h200-2026-11-26.jsonl data/measurements/h100-2026-11-23.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.measured import Measured, load_measured

GIB = 2**30


def _err(ours: float, measured: float) -> str:
    return f"{ours / measured - 1:+7.1%}" if measured else "      -"


def memory_table(rows: tuple[Measured, ...]) -> None:
    print(f"{'case':62s} {'card':9s} {'smi':>8s} {'ours':>8s} {'error':>7s} {'alloc':>7s} {'resv':>7s}  fits? (measured / ours)")
    for m in rows:
        est, res = m.estimate(), m.result()
        if est is None or res is None:
            continue
        alloc = _err(res.allocated_peak_bytes, m.peak_allocated_bytes)
        resv = _err(res.reserved_peak_bytes, m.peak_reserved_bytes)
        smi = _err(est, m.measured_used_bytes)
        print(f"{m.label:62s} {m.accelerator:9s} {m.measured_used_bytes / GIB:7.2f}G {est / GIB:7.2f}G {smi} {alloc} {resv}  {m.ok!s:5} / {m.predicted_fits()!s:5}")


def speed_table(rows: tuple[Measured, ...]) -> None:
    print(f"{'case':62s} {'card':9s} {'measured':>9s} {'ours':>9s} {'ours/measured':>13s}  tokens/s")
    for m in rows:
        measured, ours = m.measured_tokens_per_s, m.estimated_tokens_per_s() if m.measured_tokens_per_s else None
        if measured and ours:
            miss = "  miss (>25%)" if abs(ours / measured - 1) > 0.25 else ""
            print(f"{m.label:62s} {m.accelerator:9s} {measured:9.1f} {ours:9.1f} {ours / measured:13.2f}{miss}")


def card_table(rows: tuple[Measured, ...], other: tuple[Measured, ...]) -> None:
    """Cases measured on both cards: measured speed and memory of one over the other, and our estimates' ratio."""
    by_label = {m.label: m for m in other if m.ok}
    print(f"{'case (this card / other card)':62s} {'speed':>7s} {'ours':>7s} {'smi':>7s} {'alloc':>7s}")
    for m in rows:
        o = by_label.get(m.label)
        if o is None or not m.ok:
            continue
        speed = ours = "      -"
        if m.measured_tokens_per_s and o.measured_tokens_per_s:
            speed = f"{m.measured_tokens_per_s / o.measured_tokens_per_s:7.3f}"
            a, b = m.estimated_tokens_per_s(), o.estimated_tokens_per_s()
            ours = f"{a / b:7.3f}" if a and b else ours
        smi = f"{m.device_used_bytes / o.device_used_bytes:7.3f}" if o.device_used_bytes else "      -"
        alloc = f"{m.peak_allocated_bytes / o.peak_allocated_bytes:7.3f}" if o.peak_allocated_bytes else "      -"
        print(f"{m.label:62s} {speed} {ours} {smi} {alloc}")


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    rows = load_measured(path)
    memory_table(rows)
    print()
    speed_table(rows)
    if len(sys.argv) > 2:
        print()
        card_table(rows, load_measured(Path(sys.argv[2])))
    print(json.dumps({"rows": len(rows)}))


if __name__ == "__main__":
    main()
