"""Fine-tuning throughput per stack against published runs (tests/data/finetune_speeds.csv): LoRA, QLoRA and full
fine-tunes of 7B-405B models on 1 to 128 GPUs (up to sixteen nodes), by Answer.AI's FSDP-QLoRA script (early 2024),
torchtune's recipes (September 2024), XTuner on DeepSpeed ZeRO (April 2024), Hugging Face Accelerate with FSDP and
with DeepSpeed ZeRO-3 (June 2024), NeMo AutoModel's LoRA recipes on H100s (December 2025 and April 2026, tensor
parallel 2 on 8 and 16 GPUs), torchtitan's and IBM's fms-fsdp pretraining steps on 64 and 128 A100s (2024: a full
fine-tune's computation), and Qwen's own finetune.py (the Hugging Face Trainer with PEFT, October 2023: Qwen-7B's and
Qwen-14B's LoRA and Q-LoRA on one A100 at 256 to 8,192 tokens), and Axolotl's Llama 3.1 8B full and LoRA steps on 4
A100s under DeepSpeed ZeRO-2 (Anyscale's benchmark, November 2024: the LoRA row is +6% with DeepSpeed's cast of the
adapters to bf16, -21% were they fp32), LLaMA-Factory's comparison of its Hugging Face path and Unsloth on Llama 2 7B
(one A100: LoRA and QLoRA at 1,024 tokens, December 2023; QLoRA at 1,024 to 100,000 tokens, April 2024), and Unsloth's
own TinyLlama notebook on a T4 (January 2024). Nothing in the training model was fitted on these rows:
all are CHECK rows. A model that is no preset is named `config:<name>`: its config.json shape, mapped to a config our
reader knows and sourced in the file, is tests/data/configs/<name>.config.json (Qwen v1's own model_type written as
Qwen2).

Each row is timed as every bill times it (core/money/run_bill.run_time: the per-token model plus the layout's
communication; `tensor_parallel` devices a replica, the rest data-parallel), interruptions left out (runs of
minutes). A row is within its tolerance, or a recorded miss whose error stays within 5 points of the recorded one
(its reason in the file), or SUSPECT: its published speed implies more than 75% of the part's dense peak for the FLOPs
the step must do (recomputation included), which the physics-first rule says not to fit or check against.

`modelled_as` is the stack of ours whose timing matches the program's kernels: Answer.AI's train.py (March 2024)
trains in pure bf16 under FSDP, whose flat parameters need one dtype, so the LoRA adapters are bf16 (PEFT of the time
cast them to the base layer's dtype), and it does not call prepare_model_for_kbit_training: no fp32 adapter traffic
and no fp32 upcast, as LitGPT's bf16-true recipes. Its LoRA targets are q, k, v, gate, up and down (ours: all-linear,
which adds o: under 0.2% of the FLOPs at rank 64). NeMo AutoModel's adapters are in the base layer's bf16 too (a
fused Triton LoRA kernel), so it is timed as torchtune. For full fine-tuning the stack's flags do not change the time.

Qwen's table (README 'Profiling of Memory and Speed'): its LoRA runs under the Trainer's bf16 autocast with PEFT's fp32
adapters, timed as hf. Its Q-LoRA is not bitsandbytes: a GPTQ Int4 checkpoint through auto-gptq (`base_format`
gptq-4bit), trained in fp16 under DeepSpeed, whose fp16 engine casts the adapters to fp16, and peft's
prepare_model_for_kbit_training leaves GPTQ models without the fp32 upcast; timed as hf on that base, whose
dequantization cost is calibrated on ms-swift's benchmark (tests/core/test_qlora_gptq.py), not on these rows. Its
"LoRA (emb)" rows train the embedding and output layer too, which we do not model: left out; its 7B full-parameter rows
ran on two GPUs (finetune_ds.sh: ZeRO-3) at 256-1,024 tokens only: left out too, as are (not yet added) the same
table's 1.8B and 72B rows."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.memory.components import gptq_base, lora_fp32_inputs, qlora_upcast, quantized_params
from core.memory.stacks import STACKS
from core.money.run_bill import run_time
from core.scenario import Scenario
from core.speed.comm import interruption_overhead
from core.speed.timing import DEQUANT_BYTES_PER_PARAM, GPTQ_DEQUANT_BYTES_PER_PARAM, peak_tflops, training_time
from tests.core.configs import model_spec
from tests.core.recorded import check_row

DATA = Path(__file__).resolve().parents[1] / "data"
ROWS = list(csv.DictReader((DATA / "finetune_speeds.csv").open(newline="")))
BAND = 0.05
SUSPECT_MFU = 0.75  # issue #27: "more than about 75% of a part's dense peak for a step with recomputation is suspect"


def scenario(row: dict[str, str]) -> Scenario:
    return Scenario(
        model=model_spec(row["model"]),
        mode="training",
        method=row["method"],
        weights_format=row["base_format"] or "bf16",
        accelerator=row["accelerator"],
        training_stack=row["modelled_as"],
        batch_size=int(row["batch"]),
        seq_len=int(row["seq_len"]),
        gradient_checkpointing=row["gradient_checkpointing"] == "true",
        lora_rank=int(row["lora_rank"]),
        lora_targets=row["lora_targets"],
        precision=row["precision"],
        zero_stage=int(row["zero_stage"]),
        offload=row["offload"],
        data_parallel=int(row["devices"]) // int(row["tensor_parallel"]),
        tensor_parallel=int(row["tensor_parallel"]),
        train_tokens=float(row["tokens"] or 1e9),
    )


def published_tokens_per_s(row: dict[str, str]) -> float:
    """All devices together: Answer.AI gives seconds for 1,024 sequences of 2,048 tokens, torchtune tokens/s."""
    return float(row["tokens"]) / float(row["seconds"]) if row["seconds"] else float(row["tokens_per_s"])


def modelled_tokens_per_s(row: dict[str, str]) -> float:
    sc, devices, tp = scenario(row), int(row["devices"]), int(row["tensor_parallel"])
    hours = run_time(sc, get_accelerator(row["accelerator"]), Layout(devices // tp, tp, 1)).compute_hours / (1.0 + interruption_overhead(devices))
    return float(sc.train_tokens or 0) / (hours * 3600)


def implied_mfu(row: dict[str, str]) -> float:
    """The share of the devices' dense peak the published speed implies for the step's FLOPs (recomputation included)."""
    sc, acc = scenario(row), get_accelerator(row["accelerator"])
    per_token = training_time(sc, acc, 1).flops_per_token
    return published_tokens_per_s(row) * per_token / (int(row["devices"]) * peak_tflops(acc, sc.precision).tflops * 1e12)


def implied_dequantization(row: dict[str, str], passes: int = 3) -> tuple[float, float, float]:
    """A QLoRA row's published time a micro-batch over the model's without dequantization (seconds, every device at
    once), the quantized weights each device dequantizes, and the bytes of traffic a weight and pass (`passes` of them:
    bitsandbytes' three with recomputation, GPTQ's two forward passes) at the device's bandwidth that the difference
    implies."""
    sc, acc, devices = scenario(row), get_accelerator(row["accelerator"]), int(row["devices"])
    tokens = float(sc.batch_size * sc.seq_len * devices)
    t = training_time(sc, acc, devices, tokens)
    # the GPU's work without dequantization: not the time the GPU waits for an eager stack's launches either (a
    # micro-batch takes the longer of its GPU work and its launches: core/speed/timing.py launch_floor_seconds_per_token)
    extra_s = tokens / published_tokens_per_s(row) - t.wall_hours * 3600 * (1 - t.dequant_fraction - t.launch_bound_fraction)
    weights = quantized_params(sc.architecture)
    return extra_s, weights, extra_s / (passes * weights) * acc.memory_bandwidth_bytes_per_s


CHECKED = [r for r in ROWS if r["status"] != "suspect"]


@pytest.mark.parametrize("row", CHECKED, ids=[r["id"] for r in CHECKED])
def test_published_fine_tuning_speeds(row: dict[str, str]) -> None:
    measured = published_tokens_per_s(row)
    recorded = (measured, measured * (1 + float(row["recorded_error"] or 0)), row["reason"] if row["status"] == "miss" else "")
    check_row(modelled_tokens_per_s(row), measured, recorded, float(row["tolerance"]), BAND)


def test_suspect_rows_are_the_ones_physics_rules_out() -> None:
    """A row is suspect exactly when its published speed needs more than 75% of the dense peak."""
    implied = {r["id"]: implied_mfu(r) for r in ROWS}
    assert {i for i, m in implied.items() if m > SUSPECT_MFU} == {r["id"] for r in ROWS if r["status"] == "suspect"}, implied
    assert implied["tt-a6000-8b-full"] > 1.0 and implied["tt-a6000-8b-lora"] > 1.0  # more than the whole peak
    assert implied["tt-4090-8b-qlora"] < SUSPECT_MFU < implied["tt-4090-8b-lora"]


def test_the_rows_cover_every_method_and_each_program() -> None:
    """Issue #27's 'LoRA, QLoRA and full fine-tune throughput per stack': each method is checked on rows within
    tolerance, on one GPU and on several (two to sixteen nodes included), by twelve programs (Unsloth's own notebook, and
    Unsloth through LLaMA-Factory)."""
    within = [r for r in CHECKED if r["status"] == "check"]
    assert {r["method"] for r in within} == {"full", "lora", "qlora"}
    programs = {"Answer.AI", "torchtune", "NeMo", "Hugging", "DeepSpeed", "torchtitan", "fms-fsdp", "XTuner", "Qwen", "Axolotl", "LLaMA-Factory", "Unsloth"}
    assert {r["program"].split()[0] for r in within} == programs
    assert {int(r["devices"]) for r in within} >= {1, 2, 4, 8, 16, 64, 128}
    assert any(int(r["tensor_parallel"]) > 1 for r in within)
    assert len(within) == 71 and len(ROWS) == 84
    # issue #27's stacks: Unsloth's rows (through LLaMA-Factory) within on LoRA and QLoRA
    assert {r["method"] for r in within if r["modelled_as"] == "unsloth"} == {"lora", "qlora"}


def test_answer_ai_is_timed_as_a_stack_without_fp32_adapters_or_upcast() -> None:
    for r in ROWS:
        stack, sc = STACKS[r["modelled_as"]], scenario(r)
        if r["program"].startswith("Answer.AI"):
            assert not stack.lora_fp32_inputs and not stack.qlora_upcast
        if r["program"].startswith("Qwen") and r["method"] == "qlora":  # ZeRO-2's fp16 engine, and peft's GPTQ branch
            assert r["base_format"] == "gptq-4bit" and gptq_base(sc) and not lora_fp32_inputs(sc) and not qlora_upcast(sc)
        if r["program"].startswith("Qwen") and r["method"] == "lora":
            assert stack.lora_fp32_inputs


def test_qwens_q_lora_rows_need_their_gptq_base() -> None:
    """Timed on a bitsandbytes NF4 base instead, Qwen's twelve Q-LoRA rows miss: under the Hugging Face stack (with
    prepare_model_for_kbit_training's fp32 upcast, FlashAttention-2 keeping attention 16-bit: the fp32 head alone) 6
    of 12 (half or more is what the test holds), -29% to +199% (11 of 12 under the upcast's earlier fitted model, until
    2026-11-27); without the upcast (as LitGPT, how they were timed until 2026-11-27) the eight rows at 256-2,048 tokens, +42% to +284%: GPTQ's dequantization is a cost a
    micro-batch that bitsandbytes' 2.5 bytes a weight and pass leave out. On their GPTQ base all twelve are within
    (test_published_fine_tuning_speeds)."""
    rows = [r for r in ROWS if r["program"].startswith("Qwen") and r["method"] == "qlora"]
    as_nf4_hf = {r["id"]: modelled_tokens_per_s(dict(r, base_format="")) / published_tokens_per_s(r) - 1 for r in rows}
    as_nf4_litgpt = {r["id"]: modelled_tokens_per_s(dict(r, base_format="", modelled_as="litgpt")) / published_tokens_per_s(r) - 1 for r in rows}
    assert len(rows) == 12 and sum(abs(e) > 0.25 for e in as_nf4_hf.values()) >= 6, as_nf4_hf  # half or more
    missed = {i for i, e in as_nf4_litgpt.items() if abs(e) > 0.25}
    assert missed == {r["id"] for r in rows if int(r["seq_len"]) <= 2048}, as_nf4_litgpt
    assert all(0.4 < as_nf4_litgpt[i] < 2.9 for i in missed), as_nf4_litgpt


def test_the_two_a100_batch_sizes_bound_the_early_2024_dequantization() -> None:
    """The 2 x A100 batch-1 miss's reason, worked out: its time over the model's without dequantization, spread
    over three passes of every quantized weight (68 billion; each GPU dequantizes the whole model under FSDP), is
    about 14 bytes of traffic a weight and pass at the A100's bandwidth (0.6 s a pass); the model counts 2.5 (checked
    on our H200)."""
    row = next(r for r in ROWS if r["id"] == "aai-2xa100-40-70b-qlora")
    extra_s, weights, implied_bytes = implied_dequantization(row)
    assert implied_bytes == pytest.approx(13.6, abs=0.5) and DEQUANT_BYTES_PER_PARAM == 2.5
    assert weights == pytest.approx(68.45e9, rel=0.001)
    assert extra_s / 3 == pytest.approx(0.6, abs=0.01)


def test_qwens_gptq_rows_imply_25_to_48_bytes_a_weight_and_forward_pass() -> None:
    """What Qwen's Q-LoRA rows imply for the GPTQ dequantization, worked out as the 2 x A100 row's but over the two
    forward passes that dequantize (the backward reuses the weight autograd kept): Qwen-7B, 6.48 billion quantized
    weights (the blocks' linears; the head and embedding stay fp16), 0.16 to 0.31 s a micro-batch over the model's
    time without it, 25-48 bytes a weight and pass; Qwen-14B, 12.61 billion, 0.47 to 0.55 s, 38-44 bytes. A cost a
    micro-batch, whatever its tokens. The model's 40 (calibrated on ms-swift's two rows) lies inside both ranges."""
    rows = [r for r in ROWS if r["program"].startswith("Qwen") and r["method"] == "qlora"]
    implied = {(r["model"], r["seq_len"]): implied_dequantization(r, passes=2) for r in rows}
    bytes_7b = {L: implied[("config:qwen-7b", L)][2] for L in ("256", "512", "1024", "2048", "4096", "8192")}
    bytes_14b = {L: implied[("config:qwen-14b", L)][2] for L in ("256", "512", "1024", "2048", "4096", "8192")}
    assert bytes_7b == pytest.approx({"256": 48.1, "512": 37.2, "1024": 24.9, "2048": 48.3, "4096": 43.7, "8192": 46.9}, abs=0.5)
    assert bytes_14b == pytest.approx({"256": 43.8, "512": 44.0, "1024": 43.3, "2048": 38.9, "4096": 37.9, "8192": 38.2}, abs=0.5)
    assert min(bytes_7b.values()) < GPTQ_DEQUANT_BYTES_PER_PARAM < max(bytes_7b.values())
    assert min(bytes_14b.values()) < GPTQ_DEQUANT_BYTES_PER_PARAM < max(bytes_14b.values())
    weights = {m: {round(w / 1e9, 2) for (mm, _), (_, w, _) in implied.items() if mm == m} for m in ("config:qwen-7b", "config:qwen-14b")}
    assert weights == {"config:qwen-7b": {6.48}, "config:qwen-14b": {12.61}}
    assert all(0.15 < s < 0.32 if m.endswith("7b") else 0.46 < s < 0.56 for (m, _), (s, _, _) in implied.items())


def test_litgpts_a10g_slowdowns_need_14_to_24_bytes_a_weight_and_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LitGPT A10G rows' reason (tests/data/qlora_speeds.csv, recorded misses or at the edge): the dequantization
    traffic that would reproduce each published QLoRA-over-LoRA slowdown (the slowdown is linear in those bytes):
    Llama 3.1 8B about 23, Mistral 7B 15, Llama 2 7B 14, phi-2 17; Answer.AI's 2 x A100 batch-1 row about 14 (above)."""
    import core.speed.timing
    from tests.core.test_measured_h100 import QLORA, _qlora_slowdown

    rows = [r for r in QLORA if r["id"].startswith("litgpt-")]
    at_model = {r["id"]: _qlora_slowdown(r) for r in rows}
    monkeypatch.setattr(core.speed.timing, "DEQUANT_BYTES_PER_PARAM", 0.0)
    free = {r["id"]: _qlora_slowdown(r) for r in rows}
    needed = {i: DEQUANT_BYTES_PER_PARAM * (float(r["published"]) - free[i]) / (at_model[i] - free[i]) for r in rows for i in [r["id"]]}
    assert needed == pytest.approx({"litgpt-8b": 23.5, "litgpt-mistral-7b": 15.3, "litgpt-llama-2-7b": 13.9, "litgpt-phi-2": 17.1}, abs=0.3)
