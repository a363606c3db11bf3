"""QLoRA on a GPTQ checkpoint (core/memory/components.py qlora_base, gptq_base; core/speed/timing.py
GPTQ_DEQUANT_BYTES_PER_PARAM): where the constant comes from, and what the base changes in memory and time.

CALIBRATION rows (ms-swift's benchmark, modelscope/ms-swift docs/source_en/LLM/Benchmark.md, "Quantization": one
A100 80GB, auto_gptq 0.5.1, bitsandbytes 0.41.3, LoRA rank 8 on c_attn, batch 1, max length 2,048, gradient
checkpointing and FlashAttention on, the same dataset in each run; samples/s): Qwen-7B-Chat bf16 4.31 and GPTQ Int4
2.05; Qwen-14B-Chat bf16 2.60 and GPTQ Int4 1.15. The GPTQ run's extra time a sample is its dequantization, whatever
the samples' lengths (one sample a micro-batch, the same samples in both runs). CHECK rows: Qwen's own README, twelve
Q-LoRA rows in tests/data/finetune_speeds.csv (all within 25%)."""

from __future__ import annotations

import pytest

from core.catalog.accelerators import get_accelerator
from core.memory.components import checkpointing, dequantized_weight_bytes, gptq_base, qlora_base, qlora_upcast, quantized_params
from core.memory.estimate import estimate_memory
from core.model.formats import FORMATS
from core.scenario import Scenario
from core.speed.timing import DEQUANT_BYTES_PER_PARAM, GPTQ_DEQUANT_BYTES_PER_PARAM, dequant_seconds_per_token, training_time
from tests.core.configs import model_spec

A100 = get_accelerator("a100-sxm-80gb")
# samples/s (bf16 LoRA, GPTQ Int4 LoRA), ms-swift Benchmark.md "Quantization" table
MS_SWIFT = {"config:qwen-7b": (4.31, 2.05), "config:qwen-14b": (2.60, 1.15)}


def _qwen(name: str, **kw: object) -> Scenario:
    fields = {
        "model": model_spec(name),
        "mode": "training",
        "method": "qlora",
        "weights_format": "gptq-4bit",
        "accelerator": A100.id,
        "batch_size": 1,
        "seq_len": 2048,
        "gradient_checkpointing": True,
    }
    return Scenario(**(fields | kw))


def test_the_constant_is_ms_swifts_extra_time_a_sample() -> None:
    """Each row's extra seconds a sample over the two forward passes' dequantization of every quantized weight, at the
    A100's bandwidth: 40.2 bytes a weight and pass for Qwen-7B, 39.2 for Qwen-14B; the constant is their mean, rounded."""
    implied = {}
    for name, (bf16, gptq) in MS_SWIFT.items():
        extra_s = 1 / gptq - 1 / bf16
        implied[name] = extra_s / (2 * quantized_params(_qwen(name).architecture)) * A100.memory_bandwidth_bytes_per_s
    assert implied == pytest.approx({"config:qwen-7b": 40.2, "config:qwen-14b": 39.2}, abs=0.1)
    assert GPTQ_DEQUANT_BYTES_PER_PARAM == round(sum(implied.values()) / len(implied))


def test_qwen_72b_is_an_out_of_sample_check_of_the_constant() -> None:
    """CHECK: the same table's Qwen-72B-Chat, GPTQ Int4 on one A100 at 0.23 samples/s against bf16 at 0.59 (two A100s
    through device_map: the layers one after another, one GPU's time), not used in the calibration: 69.8 billion
    quantized weights, 38.7 bytes a weight and forward pass, 3% under the constant."""
    sc = _qwen("config:qwen-72b")
    weights = quantized_params(sc.architecture)
    implied = (1 / 0.23 - 1 / 0.59) / (2 * weights) * A100.memory_bandwidth_bytes_per_s
    assert weights == pytest.approx(69.79e9, rel=1e-3)
    assert implied == pytest.approx(38.75, abs=0.05) and abs(implied / GPTQ_DEQUANT_BYTES_PER_PARAM - 1) < 0.05


@pytest.mark.parametrize(("name", "saved_gib"), [("config:qwen-7b", 27.74 - 19.21), ("config:qwen-14b", 40.14 - 23.30)])
def test_the_memory_a_gptq_base_saves_is_ms_swifts(name: str, saved_gib: float) -> None:
    """CHECK (memory, not calibrated): ms-swift's GPU memory of bf16 LoRA minus GPTQ Int4 LoRA on the same data (its
    table: 27.74 - 19.21 GiB on Qwen-7B-Chat, 40.14 - 23.30 on 14B; LoRA rank 8 on c_attn, 2,048 tokens, checkpointing)
    against the model's difference of peaks (the 16-bit base against the 4-bit one and the block autograd keeps
    dequantized): +4.6% and +3.2%. The absolute peaks are not checked: the samples' lengths are not published."""
    kw = {"model": model_spec(name), "mode": "training", "accelerator": A100.id, "batch_size": 1, "seq_len": 2048}
    kw |= {"gradient_checkpointing": True, "lora_rank": 8, "lora_targets": "attention", "training_stack": "hf"}
    bf16 = estimate_memory(Scenario(method="lora", precision="bf16", **kw)).reserved_peak_bytes
    gptq = estimate_memory(Scenario(method="qlora", weights_format="gptq-4bit", **kw)).reserved_peak_bytes
    assert (bf16 - gptq) / 2**30 == pytest.approx(saved_gib, rel=0.06)


def test_the_model_reproduces_its_calibration() -> None:
    """The model's dequantization time a micro-batch equals the calibration rows' extra time a sample, within the
    constant's rounding."""
    for name, (bf16, gptq) in MS_SWIFT.items():
        sc = _qwen(name)
        per_micro_batch = dequant_seconds_per_token(sc, sc.architecture, A100) * sc.seq_len
        assert per_micro_batch == pytest.approx(1 / gptq - 1 / bf16, rel=0.03)


def test_a_gptq_base_has_no_fp32_upcast_and_dequantizes_in_forward_passes_only() -> None:
    gptq = _qwen("config:qwen-7b")
    nf4 = _qwen("config:qwen-7b", weights_format="nf4")
    assert gptq_base(gptq) and not gptq_base(nf4)
    assert qlora_base(gptq) is FORMATS["gptq-4bit"] and qlora_base(nf4) is FORMATS["nf4"]
    assert not qlora_upcast(gptq) and qlora_upcast(nf4)  # the Hugging Face stack's prepare_model_for_kbit_training
    arch = gptq.architecture
    per_pass_s = quantized_params(arch) / A100.memory_bandwidth_bytes_per_s / gptq.seq_len
    assert dequant_seconds_per_token(gptq, arch, A100) == pytest.approx(2 * GPTQ_DEQUANT_BYTES_PER_PARAM * per_pass_s)
    assert dequant_seconds_per_token(nf4, arch, A100) == pytest.approx(3 * DEQUANT_BYTES_PER_PARAM * per_pass_s)
    no_gc = _qwen("config:qwen-7b", gradient_checkpointing=False)
    # TRL calls prepare_model_for_kbit_training only for bitsandbytes models (is_loaded_in_4bit), so a GPTQ model
    # checkpoints as the run asks (Qwen's finetune.py, which calls it, asked for checkpointing anyway)
    assert not checkpointing(no_gc)
    assert dequant_seconds_per_token(no_gc, arch, A100) == pytest.approx(GPTQ_DEQUANT_BYTES_PER_PARAM * per_pass_s)


def test_autograd_keeps_the_dequantized_weights() -> None:
    """Without checkpointing every block's dequantized 16-bit weight is kept for the backward pass (2 bytes a
    quantized weight); with it, the largest block's while it is recomputed. An NF4 base keeps none (bitsandbytes dequantizes
    again in the backward)."""
    gc = _qwen("config:qwen-7b")
    no_gc = _qwen("config:qwen-7b", gradient_checkpointing=False)
    q = quantized_params(gc.architecture)
    # with checkpointing, the largest block's linears (a dense model: every block's, norms included: within 0.01%)
    assert dequantized_weight_bytes(no_gc, no_gc.architecture) == pytest.approx((2 * q, 2 * q / gc.architecture.num_layers), rel=1e-4)
    assert dequantized_weight_bytes(_qwen("config:qwen-7b", weights_format="nf4"), gc.architecture) == (0.0, 0.0)
    # memory: the step without checkpointing holds at least the whole dequantized model more than the same on NF4
    # without its upcast (Axolotl: no upcast, same activations otherwise)
    ax_gptq = estimate_memory(_qwen("config:qwen-7b", gradient_checkpointing=False, training_stack="axolotl"))
    ax_nf4 = estimate_memory(_qwen("config:qwen-7b", gradient_checkpointing=False, training_stack="axolotl", weights_format="nf4"))
    assert ax_gptq.allocated_peak_bytes - ax_nf4.allocated_peak_bytes == pytest.approx(2 * q, rel=0.02)


def test_a_stack_without_gptq_trains_on_its_own_base_and_says_so() -> None:
    sc = _qwen("config:qwen-7b", training_stack="torchtune")
    assert qlora_base(sc) is FORMATS["nf4"] and not gptq_base(sc)
    assert any("weights_format is not used" in a for a in estimate_memory(sc).assumptions)
    ok = estimate_memory(_qwen("config:qwen-7b"))
    assert not any("weights_format is not used" in a for a in ok.assumptions)
    assert any("GPTQ checkpoint" in a for a in ok.assumptions)


def test_without_the_upcast_nf4_is_faster_than_gptq_as_in_ms_swifts_table() -> None:
    """An invariant of the two costs on Qwen-7B at 2,048 tokens: GPTQ's dequantization (40 bytes a weight, two passes)
    costs more than bitsandbytes' (2.5 bytes, three passes), so without the upcast NF4 is faster, as in ms-swift's
    table (bnb 2.41 samples/s, GPTQ 2.05)."""
    hours = {base: training_time(_qwen("config:qwen-7b", weights_format=base, training_stack="axolotl"), A100, 1, 1e6).wall_hours for base in ("gptq-4bit", "nf4")}
    assert hours["nf4"] < hours["gptq-4bit"]
    assert hours["gptq-4bit"] / hours["nf4"] == pytest.approx(2.41 / 2.05, rel=0.15)


def test_lora_on_gptq_weights_is_the_same_run_as_qlora_on_a_gptq_base() -> None:
    """PEFT's LoRA on a GPTQ model, asked as QLoRA on a GPTQ base or as LoRA with GPTQ weights: one estimate."""
    for gc in (True, False):
        qlora = _qwen("config:qwen-7b", gradient_checkpointing=gc)
        lora = _qwen("config:qwen-7b", gradient_checkpointing=gc, method="lora")
        assert gptq_base(lora)
        assert estimate_memory(lora).reserved_peak_bytes == estimate_memory(qlora).reserved_peak_bytes
        assert training_time(lora, A100, 1, 1e6).wall_hours == pytest.approx(training_time(qlora, A100, 1, 1e6).wall_hours)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"zero_stage": 3, "data_parallel": 8}, "ZeRO-3 / FSDP neither shard nor offload them"),
        ({"tensor_parallel": 2}, "not split by tensor parallelism"),
    ],
)
def test_a_gptq_base_is_not_sharded_and_the_estimate_says_so(fields: dict, words: str) -> None:
    """GPTQ's 4-bit weights are buffers (AutoGPTQ's and GPTQModel's QuantLinear register them), which ZeRO-3 / FSDP and
    tensor parallelism do not split: such a layout gets one line (the estimate's stack_problem); NF4 under FSDP is
    sharded (bitsandbytes' quant_storage) and says nothing."""
    problem = estimate_memory(_qwen("config:qwen-7b", **fields)).stack_problem
    assert problem is not None and words in problem
    if fields.get("zero_stage") == 3:
        assert estimate_memory(_qwen("config:qwen-7b", weights_format="nf4", **fields)).stack_problem is None
