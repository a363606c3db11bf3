"""Our estimates next to GPU measurements (data/measurements/*.jsonl, written
by bench/gpu/harness.py): what the Method page tabulates and what the tests pin.

A row is a training step, a `generate()` call, a decode step or a prompt's
forward pass (`prefill`: one row per shape of the harness's sweep) of the
Hugging Face stack, with its peak allocated / reserved memory and what
nvidia-smi showed (`device_used_bytes`), or the out-of-memory it ran into."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.catalog.presets import DATA_DIR, preset
from core.memory.estimate import MemoryResult, estimate_memory
from core.scenario import Scenario

MEASURED = DATA_DIR / "measurements" / "h100-2026-11-23.jsonl"
# torch.cuda.get_device_name() -> our accelerator id; a row without `versions` is from the H100 run (copied without them)
GPU = {"NVIDIA H100 80GB HBM3": "h100-sxm", "NVIDIA H200": "h200"}


def harness_config(model: str, shape: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Llama-family config.json the harness builds a dense preset as (bench/gpu/harness.py), with a row's `shape`
    overrides (config.json fields) on top: what a Scenario's `hf_config` takes for such a row."""
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
        **(shape or {}),
    }


class Measured(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")
    kind: str
    model: str
    ok: bool
    batch_size: int
    peak_allocated_bytes: float = 0.0
    peak_reserved_bytes: float = 0.0
    device_used_bytes: float = 0.0
    row: dict[str, Any]

    @property
    def label(self) -> str:
        r = self.row
        if self.kind == "train":
            lora = r.get("lora") or {}
            targets = lora.get("targets")
            what = f"LoRA r{lora.get('r')} {'all-linear' if targets == 'all-linear' else 'attention'}" if lora else r["precision"]
            if r.get("precision") == "qlora":
                what = f"Q{what} {r.get('quant', 'nf4')}" + (" no-prep" if r.get("kbit_prep") is False else "")
            gc = " +GC" if r.get("gradient_checkpointing") else ""
            attn = f" {r['attn']}" if r.get("attn") in ("eager", "sdpa_bf16") else ""
            shape = "".join(f" {k}={v}" for k, v in (r.get("shape") or {}).items())
            return f"train {self.model} {what} b{self.batch_size} x {r['seq_len']:,}{gc}{attn}{shape}"
        if self.kind == "infer":
            return f"generate {self.model} b{self.batch_size} x {r['prompt_len']:,} + {r['new_tokens']}"
        if self.kind == "prefill":
            return f"prefill {self.model} b{self.batch_size} x {r['prompt_len']:,}"
        return f"decode {self.model} b{self.batch_size} ctx {r['context']:,} {'compiled' if r.get('compiled') else 'eager'}"

    @property
    def accelerator(self) -> str:
        """The card the row was measured on (the harness records torch's device name under `versions`)."""
        gpu = (self.row.get("versions") or {}).get("gpu")
        return "h100-sxm" if gpu is None else GPU[gpu]

    @property
    def measured_used_bytes(self) -> float:
        return self.device_used_bytes

    @property
    def measured_tokens_per_s(self) -> float | None:
        return self.row.get("tokens_per_second") or self.row.get("tokens_per_second_per_seq") or self.row.get("decode_tokens_per_second_per_seq")

    def scenario(self) -> Scenario | None:
        r = self.row
        model: Any = {"hf_config": harness_config(self.model, r["shape"])} if r.get("shape") is not None else self.model
        base: dict[str, Any] = {"model": model, "accelerator": self.accelerator, "batch_size": self.batch_size}
        if self.kind == "train":
            base.update(
                mode="training",
                seq_len=r["seq_len"],
                gradient_checkpointing=bool(r.get("gradient_checkpointing")),
                # SDPA: FlashAttention's kernels in 16-bit, but not under QLoRA's fp32 upcast (components.fp32_attention);
                # `sdpa_bf16` casts q, k and v to bf16 first, as the FlashAttention-2 integration does
                flash_attention=r.get("attn") == "sdpa_bf16" or (r.get("attn", "sdpa") != "eager" and not (r["precision"] == "qlora" and r.get("kbit_prep", True))),
                training_stack="hf",
            )
            if r["precision"] in ("lora", "qlora"):
                lora = r["lora"]
                targets = "all-linear" if lora["targets"] == "all-linear" else "attention"
                base.update(method=r["precision"], precision="bf16-true", lora_rank=lora["r"], lora_targets=targets)
                if r["precision"] == "qlora":
                    base.update(weights_format=r.get("quant", "nf4"))
            else:
                base.update(method="full", precision="bf16-true" if r["precision"] == "bf16-true" else "bf16")
            return Scenario.model_validate(base)
        if self.kind == "infer":
            base.update(mode="inference", seq_len=r["prompt_len"] + r["new_tokens"], output_tokens=r["new_tokens"], serving_engine="hf-transformers")
            return Scenario.model_validate(base)
        if self.kind == "prefill":  # the prompt's forward pass alone (the first token's logits)
            base.update(mode="inference", seq_len=r["prompt_len"] + 1, output_tokens=1, serving_engine="hf-transformers")
            return Scenario.model_validate(base)
        if self.kind == "decode":
            base.update(
                mode="inference", seq_len=r["context"] + 1, output_tokens=1, serving_engine="hf-transformers-compiled" if r.get("compiled") else "hf-transformers"
            )
            return Scenario.model_validate(base)
        return None

    def result(self) -> MemoryResult | None:
        sc = self.scenario()
        return None if sc is None else estimate_memory(sc)

    def estimate(self) -> float | None:
        """Our estimate of what nvidia-smi showed (every component)."""
        res = self.result()
        # a decode step or a prefill sweep: the device's memory is the run's (every shape), not one scenario's
        return None if res is None or self.kind in ("decode", "prefill") else float(res.memory_per_device_bytes.total)

    def predicted_fits(self) -> bool | None:
        if self.kind == "prefill":
            return None
        res = self.result()
        return None if res is None else res.fits

    def estimated_tokens_per_s(self) -> float | None:
        sc = self.scenario()
        if sc is None:
            return None
        if self.kind == "train":
            from core.catalog.accelerators import get_accelerator
            from core.speed.timing import training_time

            return training_time(sc.model_copy(update={"train_tokens": 1e9}), get_accelerator(self.accelerator), 1).tokens_per_s
        from core.memory.engines import ENGINES
        from core.speed.roofline import inference_speed

        r = self.row
        if self.kind == "prefill":
            from core.catalog.accelerators import get_accelerator
            from core.layout import Layout
            from core.speed.roofline import roofline

            seconds = roofline(sc, get_accelerator(self.accelerator), Layout(1, 1, 1)).prefill(self.batch_size, r["prompt_len"])
            return self.batch_size * r["prompt_len"] / float(seconds)
        context = r.get("context") or r.get("prompt_len")
        speed = inference_speed(sc, prompt_tokens=context, output_tokens=1 if self.kind == "decode" else r.get("new_tokens"))
        if self.kind == "decode":  # one decode step timed on its own: no generate() loop around it
            return 1.0 / (speed.decode_step_s - ENGINES[sc.serving_engine].step_overhead_s)
        return speed.decode_tokens_per_s


@cache
def load_measured(path: Path | None = None) -> tuple[Measured, ...]:
    out = []
    for line in (path or MEASURED).read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            # a prefill sweep is one line with a point per shape: one row per point
            for row in [{**r, **p} for p in r.get("points", ())] if r["kind"] == "prefill" else [r]:
                out.append(
                    Measured(
                        kind=row["kind"],
                        model=row["model"],
                        ok=row["ok"],
                        batch_size=row["batch_size"],
                        peak_allocated_bytes=row.get("peak_allocated_bytes", 0.0),
                        peak_reserved_bytes=row.get("peak_reserved_bytes", 0.0),
                        device_used_bytes=row.get("device_used_bytes", 0.0),
                        row=row,
                    )
                )
    return tuple(out)


class MeasuredPeak(BaseModel):
    """One of our GPU runs' peaks (what nvidia-smi showed) beside our estimate of it."""

    model_config = ConfigDict(frozen=True)
    label: str
    accelerator: str
    measured_bytes: float
    estimated_bytes: float
    source: str  # the measurement file

    @property
    def error(self) -> float:
        return self.estimated_bytes / self.measured_bytes - 1


@cache
def measured_peaks() -> tuple[MeasuredPeak, ...]:
    """Every training and generate() peak our H100 and H200 runs measured (data/measurements/*.jsonl) that our
    estimate covers, with it: the Method page's second chart, and the basis of fit.BORDERLINE_FRACTION (90% of them
    within 7%, recomputed by tests/core/test_measured_h200.py)."""
    out = []
    for path in sorted((DATA_DIR / "measurements").glob("*.jsonl")):
        for m in load_measured(path):
            if m.ok and m.kind != "decode" and (est := m.estimate()) and m.device_used_bytes:
                out.append(MeasuredPeak(label=m.label, accelerator=m.accelerator, measured_bytes=m.device_used_bytes, estimated_bytes=est, source=path.name))
    return tuple(out)
