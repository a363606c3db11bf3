"""Our estimates next to GPU measurements (the JSON lines bench/gpu/harness.py writes; by default the committed
H100 run, data/measurements/h100-2026-11-23.jsonl): allocated, reserved and nvidia-smi memory, and speed.

    python3 bench/gpu/compare.py [FILE.jsonl]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.measured import load_measured

GIB = 2**30


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    rows = load_measured(path)
    print(f"{'case':72s} {'measured':>9s} {'ours':>9s} {'error':>7s}  fits? (measured / ours)")
    for m in rows:
        est = m.estimate()
        if est is None:
            continue
        err = est / m.measured_used_bytes - 1
        print(f"{m.label:72s} {m.measured_used_bytes / GIB:8.2f}G {est / GIB:8.2f}G {err:+7.1%}  {m.ok!s:5} / {m.predicted_fits()!s:5}")
    speeds = [m for m in rows if m.measured_tokens_per_s]
    for m in speeds:
        ours = m.estimated_tokens_per_s()
        if ours:
            print(f"{m.label:72s} {m.measured_tokens_per_s:9.1f} {ours:9.1f} {ours / m.measured_tokens_per_s - 1:+7.1%}  tokens/s")
    print(json.dumps({"rows": len(rows)}))


if __name__ == "__main__":
    main()
