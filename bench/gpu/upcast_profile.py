"""Where QLoRA's fp32 upcast spends its time (issue #27): one training step of a harness case under torch.profiler,
with and without prepare_model_for_kbit_training, the GPU kernels' total time by name (top 30), one JSON line each.

    python3 bench/gpu/upcast_profile.py '{"vocab_size": 32000}' > $OUT/profile.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness


def _step(model: Any, opt: Any, ids: Any) -> None:
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def main() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    shape = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    for prep in (True, False):
        case = dict(harness._grid_head()[0], shape=shape, kbit_prep=prep)
        model = harness._build(case)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.train()
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5, fused=True)
        ids = torch.randint(0, model.config.vocab_size, (4, 2048), device="cuda")
        for _ in range(2):
            _step(model, opt, ids)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            _step(model, opt, ids)
            torch.cuda.synchronize()
        kernels = [(e.key, e.device_time_total / 1e6, e.count) for e in prof.key_averages()]
        kernels.sort(key=lambda k: -k[1])
        total = sum(k[1] for k in kernels)
        print(json.dumps({"shape": shape, "kbit_prep": prep, "gpu_seconds": total, "top": [[n[:120], round(s, 5), c] for n, s, c in kernels[:30]]}), flush=True)
        del model, opt
        harness._free(torch)


if __name__ == "__main__":
    main()
