"""GPU calibration harness: real peak memory and speed of training and inference steps, as JSON lines.

Models are built from published config.json shapes with random weights (memory and time depend on shapes, not
values), trained or run for a few steps, and measured with `torch.cuda.max_memory_allocated()`,
`max_memory_reserved()` and `mem_get_info()` (what nvidia-smi shows). Every case runs in a fresh process so one
case's allocator state or out-of-memory never leaks into the next. Compare the output with the core:

    python3 bench/gpu/harness.py --grid smoke --out $OUT/run.jsonl      # a minute: one case of each kind
    python3 bench/gpu/harness.py --grid h100 --out $OUT/run.jsonl       # the grid of data/measurements/
    python3 bench/gpu/harness.py --grid h200 --out $OUT/run.jsonl --budget-s 360   # the H200 grid, stops in 6 min
    python3 bench/gpu/harness.py --grid speed --out $OUT/run.jsonl --budget-s 330  # QLoRA's cost, parted
    python3 bench/gpu/harness.py --grid prefill --out $OUT/run.jsonl --budget-s 420  # prompt processing, dense and MoE
    python3 bench/gpu/harness.py --grid longctx --out $OUT/run.jsonl --budget-s 170  # decode over a long KV cache
    python3 bench/gpu/harness.py --grid qcheck --out $OUT/run.jsonl --budget-s 430  # QLoRA's time, out of sample
    python3 bench/gpu/harness.py --grid head --out $OUT/run.jsonl --budget-s 400    # the fp32 head's cost by shape
    python3 bench/gpu/harness.py --list --grid h200                     # print the cases, run nothing
    python3 bench/gpu/harness.py --device cpu ...                       # plumbing check on a CPU: numbers mean nothing
    python3 bench/gpu/compare.py $OUT/run.jsonl

Each case runs under a time limit (its `limit_s`, else --case-timeout-s); a case that overruns is killed with its
process group and written as `ok: false, error: "timeout"`. With --budget-s the grid stops starting cases once the
budget is spent, so a lease's time limit still returns every row that finished (rows are written as they finish).

Needs torch, transformers and (for LoRA/QLoRA rows) peft and bitsandbytes; none of them is a project dependency.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from itertools import product
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.measured import harness_config  # noqa: E402

DEVICE = "cuda"  # --device cpu runs the same code on a CPU to check the plumbing (memory then reads 0)
GRIDS = ("smoke", "h100", "h200", "speed", "prefill", "longctx", "qcheck", "head", "fa2")
WARMUP_STEPS = 2
LORA16 = {"r": 16, "targets": "all-linear"}
TIMED_STEPS = 6


def grid(name: str) -> list[dict[str, Any]]:
    """The cases of a named grid (plain dicts: what a child process runs and what the output row echoes)."""
    cases: list[dict[str, Any]] = []
    if name == "smoke":
        cases.append(dict(kind="train", model="llama-3.2-1b", precision="bf16-true", batch_size=1, seq_len=512, gradient_checkpointing=False))
        cases.append(dict(kind="train", model="llama-3.2-1b", precision="lora", batch_size=1, seq_len=512, gradient_checkpointing=True, lora=LORA16))
        cases.append(dict(kind="infer", model="llama-3.2-1b", batch_size=1, prompt_len=512, new_tokens=16))
        cases.append(dict(kind="decode", model="llama-3.2-1b", batch_size=1, context=1024, compiled=False))
        return cases
    if name == "h200":
        return _grid_h200()
    if name == "speed":
        return _grid_speed()
    if name == "prefill":
        return _grid_prefill()
    if name == "qcheck":
        return _grid_qcheck()
    if name == "head":
        return _grid_head()
    if name == "fa2":
        # QLoRA's upcast with attention taken back to bf16, as transformers' FlashAttention-2 integration does
        # (`attn: sdpa_bf16`, _register_sdpa_bf16): what the upcast costs on that path (the fp32 head alone?)
        pair = dict(kind="train", seq_len=2048, batch_size=4, gradient_checkpointing=True, lora=LORA16, precision="qlora", quant="nf4", attn="sdpa_bf16")
        return [dict(pair, model="llama-3.2-1b", shape={"vocab_size": 32000}, limit_s=60), dict(pair, model="llama-3.1-8b", limit_s=110)]
    if name == "longctx":
        # decode steps over a long cache: is transformers' grouped-query K/V copied out to every query head
        # (repeat_kv, 1 + 2 x groups reads of the cache) or read once (SDPA's enable_gqa)?
        step = dict(kind="decode", model="llama-3.1-8b", limit_s=70)
        return [
            dict(step, batch_size=1, context=32768, compiled=True),
            dict(step, batch_size=8, context=8192, compiled=True),
            dict(step, batch_size=1, context=32768, compiled=False, limit_s=40),
        ]
    if name != "h100":
        raise SystemExit(f"unknown grid {name!r} ({', '.join(GRIDS)})")
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


def _grid_h200() -> list[dict[str, Any]]:
    """A second card's rows, in the order they matter (a lease that runs out keeps the first ones): the H100 run's
    speed cases again (same shapes, so the two cards compare directly), then LoRA without checkpointing, a long
    sequence, QLoRA on a 13B base and the batch-64 decode step. `limit_s` bounds each case's process."""
    gc_on, gc_off = True, False
    train = dict(kind="train", seq_len=2048)
    return [
        dict(train, model="llama-3.1-8b", precision="lora", batch_size=4, gradient_checkpointing=gc_on, lora=LORA16, limit_s=90),
        dict(train, model="llama-3.2-1b", precision="bf16-true", batch_size=8, gradient_checkpointing=gc_off, limit_s=60),
        dict(train, model="llama-3.2-3b", precision="bf16-true", batch_size=4, gradient_checkpointing=gc_on, limit_s=60),
        dict(train, model="llama-3.1-8b", precision="qlora", batch_size=4, gradient_checkpointing=gc_on, lora=LORA16, quant="nf4", limit_s=120),
        dict(kind="decode", model="llama-3.1-8b", batch_size=1, context=1024, compiled=True, limit_s=120),
        dict(train, model="llama-3.2-3b", precision="lora", batch_size=4, gradient_checkpointing=gc_off, lora=LORA16, limit_s=60),
        dict(train, model="llama-3.1-8b", precision="lora", batch_size=1, seq_len=8192, gradient_checkpointing=gc_on, lora=LORA16, limit_s=90),
        dict(train, model="llama-2-13b", precision="qlora", batch_size=4, gradient_checkpointing=gc_on, lora=LORA16, quant="nf4", timed_steps=4, limit_s=150),
        dict(kind="decode", model="llama-3.1-8b", batch_size=64, context=1024, compiled=True, limit_s=120),
        dict(kind="decode", model="llama-3.1-8b", batch_size=1, context=1024, compiled=False, limit_s=45),
        dict(train, model="llama-3.1-8b", precision="bf16-true", batch_size=4, gradient_checkpointing=gc_on, limit_s=75),
    ]


def _grid_speed() -> list[dict[str, Any]]:
    """What QLoRA's extra time is made of (issue #27): the H200 grid's QLoRA rows again without
    `prepare_model_for_kbit_training` (`kbit_prep: false`: embeddings, norms and head stay bf16, so what is left
    over LoRA is the NF4 dequantization and bitsandbytes' matmul), the LoRA baseline of the 13B row, and a 1B pair
    (the same 128k-vocabulary head as the 8B on a model an eighth the size)."""
    qlora = dict(kind="train", seq_len=2048, batch_size=4, gradient_checkpointing=True, lora=LORA16)
    return [
        dict(qlora, model="llama-3.1-8b", precision="qlora", quant="nf4", kbit_prep=False, limit_s=110),
        dict(qlora, model="llama-2-13b", precision="lora", limit_s=80),
        dict(qlora, model="llama-2-13b", precision="qlora", quant="nf4", kbit_prep=False, timed_steps=4, limit_s=140),
        dict(qlora, model="llama-3.2-1b", precision="lora", limit_s=45),
        dict(qlora, model="llama-3.2-1b", precision="qlora", quant="nf4", limit_s=60),
    ]


def _grid_qcheck() -> list[dict[str, Any]]:
    """Out-of-sample checks of QLoRA's time model (issue #27), none of them fitted: the fp32 upcast's two terms were
    fitted on the 8B and 13B pairs of the speed grid, so these shapes move the head and the residual stream apart.
    Qwen2.5-14B (152k vocabulary, 48 layers of 5,120), Gemma 2 9B's shape (256k tied vocabulary, 42 layers of 3,584)
    and Mistral NeMo 12B (131k, 40 x 5,120), each with its LoRA baseline where the lease allows, Qwen's pair without
    `prepare_model_for_kbit_training`, and the 8B at one sequence a step (the terms are per token, not per step)."""
    qlora = dict(kind="train", seq_len=2048, batch_size=4, gradient_checkpointing=True, lora=LORA16)
    q, noprep = dict(precision="qlora", quant="nf4"), dict(precision="qlora", quant="nf4", kbit_prep=False)
    return [
        dict(qlora, model="qwen2.5-14b", **q, timed_steps=4, limit_s=150),
        dict(qlora, model="qwen2.5-14b", precision="lora", limit_s=80),
        dict(qlora, model="gemma-2-9b", **q, timed_steps=4, limit_s=130),
        dict(qlora, model="gemma-2-9b", precision="lora", limit_s=70),
        dict(qlora, model="qwen2.5-14b", **noprep, timed_steps=4, limit_s=140),
        dict(qlora, model="llama-3.1-8b", **q, batch_size=1, limit_s=100),
        dict(qlora, model="mistral-nemo-12b", **q, timed_steps=4, limit_s=130),
        dict(qlora, model="mistral-nemo-12b", precision="lora", limit_s=70),
    ]


def _grid_head() -> list[dict[str, Any]]:
    """QLoRA's fp32 upcast by the head's shape (issue #27; Gemma 2 9B's 256k head was +34%): pairs with and without
    `prepare_model_for_kbit_training` on one small body, so each pair's difference is the upcast alone, and across
    pairs only the head changes: Llama 3.2 1B's body (16 layers of 2,048, tied) with 256k, 32k and its own 128k
    vocabulary, the 128k head untied, then Gemma 2's 3,584-wide 256k tied head on 8 layers of its own width.
    `shape` overrides the preset's config.json fields."""
    pair = dict(kind="train", model="llama-3.2-1b", seq_len=2048, batch_size=4, gradient_checkpointing=True, lora=LORA16, precision="qlora", quant="nf4", limit_s=60)
    gemma = {"hidden_size": 3584, "intermediate_size": 14336, "num_hidden_layers": 8, "num_attention_heads": 16}
    gemma.update(num_key_value_heads=8, head_dim=256, vocab_size=256000)
    shapes = [{"vocab_size": 256000}, {"vocab_size": 32000}, gemma, {}, {"tie_word_embeddings": False}]
    return [dict(pair, shape=shape, kbit_prep=prep) for shape in shapes for prep in (True, False)]


def _grid_prefill() -> list[dict[str, Any]]:
    """Prompt processing as an engine runs it (issue #27: time to first token): warm forward passes of whole prompts
    with logits for the last position only (`logits_to_keep=1`, as vLLM and SGLang compute them), no KV cache kept.
    A dense 8B over prompt lengths 512-32,768 (attention's share grows with the prompt) and batches, then an MoE whose
    experts run as one grouped GEMM (transformers' `grouped_mm`, torch._grouped_mm) at 1-8 thousand tokens a pass,
    then training steps at long sequences (attention's FLOPs in training), then the MoE's decode step."""
    dense = [[1, 512], [1, 2048], [1, 8192], [1, 32768], [8, 1024], [4, 4096], [16, 2048]]
    moe = [[1, 512], [1, 2048], [1, 8192], [4, 4096], [8, 2048]]
    train = dict(kind="train", batch_size=1, gradient_checkpointing=True)
    return [
        dict(kind="prefill", model="llama-3.1-8b", batch_size=1, shapes=dense, limit_s=100),
        dict(kind="prefill", model="qwen3-30b-a3b", batch_size=1, shapes=moe, experts="grouped_mm", limit_s=150),
        dict(train, model="llama-3.1-8b", precision="lora", seq_len=16384, lora=LORA16, limit_s=75),
        dict(train, model="llama-3.2-1b", precision="bf16-true", seq_len=8192, batch_size=4, limit_s=50),
        dict(train, model="llama-3.2-1b", precision="bf16-true", seq_len=512, batch_size=32, gradient_checkpointing=False, limit_s=50),
        dict(kind="decode", model="qwen3-30b-a3b", batch_size=64, context=1024, compiled=True, experts="grouped_mm", limit_s=150),
    ]


def _versions() -> dict[str, str]:
    import torch
    import transformers

    gpu = torch.cuda.get_device_name(0) if DEVICE == "cuda" else DEVICE
    out = {"torch": torch.__version__, "cuda": str(torch.version.cuda), "transformers": transformers.__version__, "gpu": gpu}
    for mod in ("peft", "bitsandbytes"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            pass
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader,nounits", "--id=0"]
        smi = subprocess.run(query, capture_output=True, text=True, check=False).stdout.strip().split(", ")
        if len(smi) == 2:
            out["driver"], out["memory_total_mib"] = smi
    return out


def _sync(torch: Any) -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _memory(torch: Any) -> dict[str, int]:
    if DEVICE != "cuda":
        return {"peak_allocated_bytes": 0, "peak_reserved_bytes": 0, "device_used_bytes": 0}
    free, total = torch.cuda.mem_get_info()
    return {
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "device_used_bytes": total - free,
    }


def _params(cfg: Any) -> int:
    """Parameter count of a Llama config (to size the scratch space of a save-and-reload)."""
    h, layers, v = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    kv = cfg.num_key_value_heads * cfg.head_dim
    per_layer = h * (cfg.num_attention_heads * cfg.head_dim) * 2 + 2 * h * kv + 3 * h * cfg.intermediate_size
    return layers * per_layer + v * h * (1 if cfg.tie_word_embeddings else 2)


def _scratch_dir(need_bytes: float) -> str | None:
    """A RAM-backed folder when it has room (saving and reloading a 13B model on a disk costs a minute), else the default."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > need_bytes:
        return str(shm)
    return None


def _free(torch: Any) -> None:
    import gc

    gc.collect()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _published_config(model: str) -> dict[str, Any]:
    """The preset's published config.json (data/models.json) without the fields that name files or dtypes."""
    rows = json.loads((ROOT / "data" / "models.json").read_text())
    cfg = dict(next(r for r in rows if r["id"] == model)["config"])
    for key in ("architectures", "torch_dtype", "dtype", "quantization_config", "auto_map"):
        cfg.pop(key, None)
    return cfg


def _register_sdpa_bf16() -> None:
    """An attention implementation `sdpa_bf16`: SDPA on q, k and v cast to bf16 when they arrive in fp32, as
    transformers' FlashAttention-2 integration casts them (flash-attn is not installed on the lent GPU)."""
    import torch
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def sdpa_bf16(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kw: Any) -> Any:
        if query.dtype == torch.float32:
            query, key, value = (t.to(torch.bfloat16) for t in (query, key, value))
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kw)

    AttentionInterface.register("sdpa_bf16", sdpa_bf16)


def _build(case: dict[str, Any]) -> Any:
    import torch

    if case.get("attn") == "sdpa_bf16":
        _register_sdpa_bf16()
    from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig

    if case.get("experts"):  # an MoE: its own architecture from the published config, experts as the case asks
        published = _published_config(case["model"])
        cfg = AutoConfig.for_model(published.pop("model_type"), **published)
        with torch.device(DEVICE):
            return AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16, attn_implementation=case.get("attn", "sdpa"), experts_implementation=case["experts"])
    cfg = LlamaConfig(**{k: v for k, v in harness_config(case["model"], case.get("shape")).items() if k != "model_type"})
    cfg._attn_implementation = case.get("attn", "sdpa")
    dtype = torch.float32 if case.get("precision") == "mixed" else torch.bfloat16
    if case.get("quant") == "nf4":  # QLoRA the common way: bitsandbytes NF4 + prepare_model_for_kbit_training
        from peft import prepare_model_for_kbit_training
        from transformers import BitsAndBytesConfig

        qc = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_use_double_quant=True)
        with tempfile.TemporaryDirectory(dir=_scratch_dir(2.2 * _params(cfg))) as tmp:  # bitsandbytes quantizes on load
            with torch.device(DEVICE):  # random bf16 weights drawn on the device (fast), saved, loaded back quantized
                AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16).save_pretrained(tmp)
            _free(torch)
            model = AutoModelForCausalLM.from_pretrained(tmp, quantization_config=qc, device_map=DEVICE, attn_implementation=case.get("attn", "sdpa"))
        if case.get("kbit_prep", True):  # the usual recipe upcasts embeddings, norms and head to fp32
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=case["gradient_checkpointing"])
        _free(torch)  # the peak of this case starts here: the bf16 copy drawn above is not part of a QLoRA run
    else:
        with torch.device(DEVICE):
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
    opt = torch.optim.AdamW(params, lr=1e-5, fused=DEVICE == "cuda")
    load_allocated = torch.cuda.memory_allocated() if DEVICE == "cuda" else 0
    ids = torch.randint(0, model.config.vocab_size, (case["batch_size"], case["seq_len"]), device=DEVICE)
    row: dict[str, Any] = {"trainable_params": sum(p.numel() for p in params), "total_params": sum(p.numel() for p in model.parameters())}
    times = []
    for step in range(WARMUP_STEPS + (case.get("timed_steps", TIMED_STEPS) if case.get("timed") else 0)):
        _sync(torch)
        t0 = time.perf_counter()
        with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=case.get("precision") == "mixed"):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync(torch)
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
    weights = torch.cuda.memory_allocated() if DEVICE == "cuda" else 0
    _free(torch)
    ids = torch.randint(0, model.config.vocab_size, (case["batch_size"], case["prompt_len"]), device=DEVICE)
    with torch.no_grad():
        _sync(torch)
        t0 = time.perf_counter()
        model(input_ids=ids)
        _sync(torch)
        prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=case["new_tokens"], min_new_tokens=case["new_tokens"], do_sample=False)
        _sync(torch)
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
    cache = StaticCache(config=model.config, max_batch_size=b, max_cache_len=ctx + 16, device=DEVICE, dtype=torch.bfloat16)
    ids = torch.randint(0, model.config.vocab_size, (b, ctx), device=DEVICE)
    step = torch.compile(model.forward, mode="reduce-overhead") if case["compiled"] else model.forward
    with torch.no_grad():
        model(input_ids=ids, past_key_values=cache, cache_position=torch.arange(ctx, device=DEVICE), use_cache=True)
        tok = ids[:, -1:]
        times = []
        for i in range(WARMUP_STEPS + TIMED_STEPS + (3 if case["compiled"] else 0)):
            pos = torch.tensor([ctx + (i % 8)], device=DEVICE)
            _sync(torch)
            t0 = time.perf_counter()
            step(input_ids=tok, past_key_values=cache, cache_position=pos, use_cache=True)
            _sync(torch)
            times.append(time.perf_counter() - t0)
    timed = sorted(times[-TIMED_STEPS:])
    step_s = timed[len(timed) // 2]
    return {"step_seconds": step_s, "tokens_per_second_per_seq": 1 / step_s, "tokens_per_second_total": b / step_s, **_memory(torch)}


def _prefill(case: dict[str, Any]) -> dict[str, Any]:
    """Each shape [batch, prompt]: two warm-up passes, then the median of three timed ones."""
    import torch

    model = _build(case).eval()
    points = []
    with torch.no_grad():
        for batch, prompt in case["shapes"]:
            ids = torch.randint(0, model.config.vocab_size, (batch, prompt), device=DEVICE)
            times = []
            for i in range(WARMUP_STEPS + 3):
                _sync(torch)
                t0 = time.perf_counter()
                model(input_ids=ids, use_cache=False, logits_to_keep=1)
                _sync(torch)
                if i >= WARMUP_STEPS:
                    times.append(time.perf_counter() - t0)
            times.sort()
            points.append({"batch_size": batch, "prompt_len": prompt, "seconds": times[1], "tokens_per_second": batch * prompt / times[1]})
            print(json.dumps({"point": points[-1]}), file=sys.stderr, flush=True)
            del ids
            _free(torch)
    impl = {"attn": model.config._attn_implementation, "experts": getattr(model.config, "_experts_implementation", None)}
    return {"points": points, "implementation": impl, "total_params": sum(p.numel() for p in model.parameters()), **_memory(torch)}


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """Run one case in this process and return its output row (the case's fields plus what was measured)."""
    import torch

    row = dict(case)
    if DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()
        torch.zeros(1, device="cuda")
        free, total = torch.cuda.mem_get_info()
        row["context_bytes"] = total - free - torch.cuda.memory_reserved()
    try:
        row.update({"train": _train, "infer": _infer, "decode": _decode, "prefill": _prefill}[case["kind"]](case), ok=True)
    except torch.cuda.OutOfMemoryError:
        row.update(_memory(torch), ok=False, error="OOM")
    return row


def _same_case(row: dict[str, Any], case: dict[str, Any]) -> bool:
    return all(row.get(k) == v for k, v in case.items() if k not in ("timed", "limit_s"))


def _child_setup() -> None:
    """In the child before it starts: its own process group (a timeout kills it whole, compile workers included),
    and on Linux death with its parent (a harness killed from outside leaves no case running on the GPU)."""
    os.setpgid(0, 0)
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


def _run_child(case: dict[str, Any], limit_s: float) -> dict[str, Any]:
    """One case in a fresh process, killed with its process group when it overruns limit_s."""
    cmd = [sys.executable, __file__, "--device", DEVICE, "--case", json.dumps(case)]
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_child_setup)
    try:
        out, err = child.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        row = {**case, "ok": False, "error": f"timeout after {limit_s:.0f} s", "wall_seconds": time.perf_counter() - t0}
        points = [json.loads(ln)["point"] for ln in err.splitlines() if ln.startswith('{"point"')]
        return {**row, "points": points} if points else row  # a prefill sweep keeps the shapes it finished
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if lines:
        row = json.loads(lines[-1])
    else:
        tail = err.strip().splitlines()[-5:]
        print("\n".join(tail), file=sys.stderr)
        row = {**case, "ok": False, "error": tail[-1] if tail else f"crashed (exit {child.returncode})"}
    row["wall_seconds"] = time.perf_counter() - t0
    return row


def run_grid(cases: list[dict[str, Any]], out: Path, case_timeout_s: float, budget_s: float | None, skip_done: Path | None = None) -> None:
    """Run cases one process each, appending a JSON line per case as soon as it ends."""
    versions = _versions()
    done = [json.loads(ln) for ln in skip_done.read_text().splitlines() if ln.strip()] if skip_done and skip_done.exists() else []
    start = time.perf_counter()
    with out.open("a") as fh:
        for c in cases:
            if any(r.get("ok") and _same_case(r, c) for r in done):
                print(json.dumps({"skipped": "done before", **c}))
                continue
            limit_s = float(c.get("limit_s", case_timeout_s))
            if budget_s is not None:
                left_s = budget_s - (time.perf_counter() - start)
                if left_s < min(limit_s, 20.0):
                    print(json.dumps({"skipped": f"budget ({left_s:.0f} s left)", **c}))
                    continue
                limit_s = min(limit_s, left_s)
            row = _run_child({**c, "timed": True}, limit_s)
            row["versions"] = versions
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            keys = ("kind", "model", "precision", "batch_size", "seq_len", "ok", "error", "device_used_bytes", "tokens_per_second", "step_seconds", "wall_seconds")
            print(json.dumps({k: row.get(k) for k in keys if k in row}), flush=True)


def main() -> None:
    global DEVICE
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", default="smoke", choices=GRIDS)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--list", action="store_true", help="print the grid's cases and exit")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a plumbing check, nothing measured")
    ap.add_argument("--case-timeout-s", type=float, default=600.0, help="limit of a case without its own limit_s")
    ap.add_argument("--budget-s", type=float, help="start no case once this many seconds have gone")
    ap.add_argument("--skip-done", type=Path, help="a JSON-lines file of an earlier run: skip its cases that ran ok")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # a child process: one case as JSON
    args = ap.parse_args()
    DEVICE = args.device
    if args.case:
        print(json.dumps(run_case(json.loads(args.case))))
        return
    cases = grid(args.grid)
    if args.list:
        print(f"# grid {args.grid}: {len(cases)} cases (grids: {', '.join(GRIDS)})")
        for c in cases:
            print(json.dumps(c))
        return
    if args.out is None:
        raise SystemExit("--out FILE.jsonl is required to run")
    run_grid(cases, args.out, args.case_timeout_s, args.budget_s, args.skip_done)


if __name__ == "__main__":
    main()
