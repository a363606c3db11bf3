"""GPU calibration harness: real peak memory and speed of training and inference steps, as JSON lines.

Models are built from published config.json shapes with random weights (memory and time depend on shapes, not
values), trained or run for a few steps, and measured with `torch.cuda.max_memory_allocated()`,
`max_memory_reserved()` and `mem_get_info()` (what nvidia-smi shows). Every case runs in a fresh process so one
case's allocator state or out-of-memory never leaks into the next. Compare the output with the core:

    python3 bench/gpu/harness.py --grid smoke --out $OUT/run.jsonl      # a minute: one case of each kind
    python3 bench/gpu/harness.py --grid h100 --out $OUT/run.jsonl       # the grid of data/measurements/
    python3 bench/gpu/harness.py --list --grid h100                     # print the cases, run nothing
    python3 bench/gpu/compare.py $OUT/run.jsonl

Needs torch, transformers and (for LoRA/QLoRA rows) peft and bitsandbytes; none of them is a project dependency.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from itertools import product
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.catalog.presets import preset  # noqa: E402

WARMUP_STEPS = 2
LORA16 = {"r": 16, "targets": "all-linear"}
TIMED_STEPS = 6


def _config_shape(model: str) -> dict[str, Any]:
    """The Llama-family config.json fields of a preset, as transformers' LlamaConfig wants them."""
    a = preset(model).architecture
    return {
        "model_type": "llama",
        "hidden_size": a.hidden_size,
        "intermediate_size": a.intermediate_size,
        "num_hidden_layers": a.num_layers,
        "num_attention_heads": a.num_heads,
        "num_key_value_heads": a.num_kv_heads,
        "vocab_size": a.vocab_size,
        "tie_word_embeddings": a.tie_embeddings,
        "max_position_embeddings": a.max_context,
        "head_dim": a.head_dim,
        "rope_theta": 500000.0,
    }


def grid(name: str) -> list[dict[str, Any]]:
    """The cases of a named grid (plain dicts: what a child process runs and what the output row echoes)."""
    cases: list[dict[str, Any]] = []
    if name == "smoke":
        cases.append(dict(kind="train", model="llama-3.2-1b", precision="bf16-true", batch_size=1, seq_len=512, gradient_checkpointing=False))
        cases.append(dict(kind="train", model="llama-3.2-1b", precision="lora", batch_size=1, seq_len=512, gradient_checkpointing=True, lora=LORA16))
        cases.append(dict(kind="infer", model="llama-3.2-1b", batch_size=1, prompt_len=512, new_tokens=16))
        cases.append(dict(kind="decode", model="llama-3.2-1b", batch_size=1, context=1024, compiled=False))
        return cases
    if name != "h100":
        raise SystemExit(f"unknown grid {name!r} (smoke, h100)")
    for precision, (batch, seq), gc in product(("bf16-true", "mixed"), ((1, 512), (4, 512), (4, 2048), (8, 2048)), (False, True)):
        cases.append(dict(kind="train", model="llama-3.2-1b", precision=precision, batch_size=batch, seq_len=seq, gradient_checkpointing=gc))
    for precision in ("bf16-true", "mixed"):
        cases.append(dict(kind="train", model="llama-3.1-8b", precision=precision, batch_size=1, seq_len=2048, gradient_checkpointing=True))
    for seq, gc, targets in product((512, 2048, 8192, 16384), (False, True), ("all-linear", "attention")):
        cases.append(dict(kind="train", model="llama-3.1-8b", precision="lora", batch_size=1, seq_len=seq, gradient_checkpointing=gc, lora={"r": 16, "targets": targets}))
    cases.append(dict(kind="train", model="llama-3.1-8b", precision="qlora", batch_size=4, seq_len=2048, gradient_checkpointing=True, lora=LORA16, quant="nf4"))
    for batch, prompt in product((1, 8, 32), (1024, 8192)):
        cases.append(dict(kind="infer", model="llama-3.1-8b", batch_size=batch, prompt_len=prompt, new_tokens=32))
    for batch, compiled in product((1, 16, 64), (False, True)):
        cases.append(dict(kind="decode", model="llama-3.1-8b", batch_size=batch, context=1024, compiled=compiled))
    return cases


def _versions() -> dict[str, str]:
    import torch
    import transformers

    out = {"torch": torch.__version__, "cuda": str(torch.version.cuda), "transformers": transformers.__version__, "gpu": torch.cuda.get_device_name(0)}
    for mod in ("peft", "bitsandbytes"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            pass
    return out


def _memory(torch: Any) -> dict[str, int]:
    free, total = torch.cuda.mem_get_info()
    return {
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "device_used_bytes": total - free,
    }


def _build(case: dict[str, Any]) -> Any:
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = LlamaConfig(**{k: v for k, v in _config_shape(case["model"]).items() if k != "model_type"})
    cfg._attn_implementation = case.get("attn", "sdpa")
    dtype = torch.float32 if case.get("precision") == "mixed" else torch.bfloat16
    if case.get("quant") == "nf4":  # QLoRA the common way: bitsandbytes NF4 + prepare_model_for_kbit_training
        import tempfile

        from peft import prepare_model_for_kbit_training
        from transformers import BitsAndBytesConfig

        qc = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_use_double_quant=True)
        with tempfile.TemporaryDirectory() as tmp:  # bitsandbytes quantizes on load: save random weights, load them back
            AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16).save_pretrained(tmp)
            model = AutoModelForCausalLM.from_pretrained(tmp, quantization_config=qc, device_map="cuda", attn_implementation=case.get("attn", "sdpa"))
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=case["gradient_checkpointing"])
    else:
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype)
    if case.get("lora"):
        from peft import LoraConfig, get_peft_model

        r = case["lora"]["r"]
        targets = "all-linear" if case["lora"]["targets"] == "all-linear" else ["q_proj", "k_proj", "v_proj", "o_proj"]
        model = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, target_modules=targets, task_type="CAUSAL_LM"))
    return model


def _train(case: dict[str, Any]) -> dict[str, Any]:
    import torch

    model = _build(case)
    if case["gradient_checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, fused=True)
    load_allocated = torch.cuda.memory_allocated()
    ids = torch.randint(0, model.config.vocab_size, (case["batch_size"], case["seq_len"]), device="cuda")
    row: dict[str, Any] = {"trainable_params": sum(p.numel() for p in params), "total_params": sum(p.numel() for p in model.parameters())}
    times = []
    for step in range(WARMUP_STEPS + (TIMED_STEPS if case.get("timed") else 0)):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=case.get("precision") == "mixed"):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= WARMUP_STEPS:
            times.append(time.perf_counter() - t0)
    row.update(_memory(torch), load_allocated_bytes=load_allocated)
    if times:
        times.sort()
        row["step_seconds"] = times[len(times) // 2]
        row["tokens_per_second"] = case["batch_size"] * case["seq_len"] / row["step_seconds"]
    return row


def _infer(case: dict[str, Any]) -> dict[str, Any]:
    import torch

    model = _build(case).eval()
    weights = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    ids = torch.randint(0, model.config.vocab_size, (case["batch_size"], case["prompt_len"]), device="cuda")
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model(input_ids=ids)
        torch.cuda.synchronize()
        prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=case["new_tokens"], min_new_tokens=case["new_tokens"], do_sample=False)
        torch.cuda.synchronize()
        total = time.perf_counter() - t0
    decode = max(total - prefill, 1e-9)
    return {
        "weights_allocated_bytes": weights,
        "prefill_seconds": prefill,
        "generate_seconds": total,
        "decode_tokens_per_second_per_seq": (case["new_tokens"] - 1) / decode,
        **_memory(torch),
    }


def _decode(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    from transformers import StaticCache

    model = _build(case).eval()
    b, ctx = case["batch_size"], case["context"]
    cache = StaticCache(config=model.config, max_batch_size=b, max_cache_len=ctx + 16, device="cuda", dtype=torch.bfloat16)
    ids = torch.randint(0, model.config.vocab_size, (b, ctx), device="cuda")
    step = torch.compile(model.forward, mode="reduce-overhead") if case["compiled"] else model.forward
    with torch.no_grad():
        model(input_ids=ids, past_key_values=cache, cache_position=torch.arange(ctx, device="cuda"), use_cache=True)
        tok = ids[:, -1:]
        times = []
        for i in range(WARMUP_STEPS + TIMED_STEPS + (3 if case["compiled"] else 0)):
            pos = torch.tensor([ctx + (i % 8)], device="cuda")
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step(input_ids=tok, past_key_values=cache, cache_position=pos, use_cache=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    timed = sorted(times[-TIMED_STEPS:])
    step_s = timed[len(timed) // 2]
    return {"step_seconds": step_s, "tokens_per_second_per_seq": 1 / step_s, "tokens_per_second_total": b / step_s, **_memory(torch)}


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """Run one case in this process and return its output row (the case's fields plus what was measured)."""
    import torch

    torch.cuda.reset_peak_memory_stats()
    torch.zeros(1, device="cuda")
    free, total = torch.cuda.mem_get_info()
    row = {**case, "context_bytes": total - free - torch.cuda.memory_reserved()}
    try:
        row.update({"train": _train, "infer": _infer, "decode": _decode}[case["kind"]](case), ok=True)
    except torch.cuda.OutOfMemoryError:
        row.update(_memory(torch), ok=False, error="OOM")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default="smoke")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # a child process: one case as JSON
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(json.loads(args.case))))
        return
    cases = grid(args.grid)
    if args.list:
        for c in cases:
            print(json.dumps(c))
        return
    if args.out is None:
        raise SystemExit("--out FILE.jsonl is required to run")
    versions = _versions()
    with args.out.open("a") as fh:
        for c in cases:
            c = {**c, "timed": True}
            done = subprocess.run([sys.executable, __file__, "--case", json.dumps(c)], capture_output=True, text=True)
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
            row = json.loads(lines[-1]) if lines else {**c, "ok": False, "error": done.stderr.strip().splitlines()[-1:] or "crashed"}
            row["versions"] = versions
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(json.dumps({k: row.get(k) for k in ("kind", "model", "precision", "batch_size", "ok", "device_used_bytes")}))


if __name__ == "__main__":
    main()
