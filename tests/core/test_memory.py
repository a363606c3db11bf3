"""Memory model against papers and published measurements."""

import pytest

from core.estimate import estimate
from core.layout import Layout
from core.memory.activations import korthikanti_gpt_layer_bytes, layer_activation_bytes
from core.memory.components import training_components, training_peak
from core.memory.validation import load_cases
from core.model.architecture import Architecture
from core.scenario import Scenario


def model_states_gb(zero_stage: int) -> float:
    # ZeRO is DeepSpeed's: bf16 weights and gradients, the fp32 master copy in the optimizer, gradient buffers kept.
    sc = Scenario(model={"params": 7.5e9}, mode="training", zero_stage=zero_stage, data_parallel=64, training_stack="deepspeed")
    comps, _ = training_components(sc, sc.architecture, Layout(64, 1, 1), 1, 2048)
    return (comps.weights + comps.gradients + comps.optimizer) / 1e9


@pytest.mark.parametrize(("stage", "gb"), [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_figure_1(stage, gb):
    # Rajbhandari et al. 2019 (arXiv 1910.02054), Figure 1: Psi = 7.5B, K = 12,
    # N_d = 64 -> 120, 31.4, 16.6 and 1.9 GB of model states per device.
    assert model_states_gb(stage) == pytest.approx(gb, rel=0.02)


GPT3 = Architecture(
    name="GPT-3 175B",
    model_type="gpt",
    num_layers=96,
    hidden_size=12288,
    intermediate_size=4 * 12288,
    num_heads=96,
    num_kv_heads=96,
    head_dim=128,
    vocab_size=51200,
    max_context=2048,
    gated_mlp=False,
    qkv_bias=True,
    o_bias=True,
    mlp_bias=True,
    norm="layernorm",
    dropout=True,
)


def test_korthikanti_per_layer_formula_gpt3():
    # Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 4.1: per layer
    # s*b*h*(34 + 5*a*s/h) bytes; GPT-3 175B, s=2048, b=1, h=12288, a=96.
    total, largest = layer_activation_bytes(GPT3, 2048, 1, flash=False)
    expected = korthikanti_gpt_layer_bytes(2048, 1, 12288, 96)
    assert largest == pytest.approx(expected, rel=1e-9)
    assert total == pytest.approx(96 * expected, rel=1e-9)
    # evaluated by hand from the paper's expression: 5 a s / h = 5 x 96 x 2048 / 12288 = 80, so 2048 x 12288 x 114
    assert expected == 2_868_903_936  # bytes per layer (2.67 GiB; x 96 layers = 256.5 GiB without recomputation)
    assert total == 275_414_777_856


def test_flash_attention_removes_the_s_squared_terms():
    no_flash, _ = layer_activation_bytes(GPT3, 2048, 1, flash=False)
    flash, _ = layer_activation_bytes(GPT3, 2048, 1, flash=True)
    s, b, a, L = 2048, 1, 96, 96
    assert no_flash - flash == pytest.approx(L * (5 * a * s * s * b - 4 * a * s * b), rel=1e-9)


def test_full_recompute_keeps_2sbh_per_layer():
    # Korthikanti Table 2: full recomputation stores 2*s*b*h per layer (Megatron: bf16 block inputs).
    sc = Scenario(model="llama-2-7b", mode="training", gradient_checkpointing=True, seq_len=2048, training_stack="megatron", batch_size=8)
    arch = sc.architecture
    peak = training_peak(sc, arch, Layout(1, 1, 1), 8, 2048)
    assert peak.kept == 32 * 2 * 8 * 2048 * 4096
    # The loss step then holds the checkpoints and the loss buffers (6 bytes per token and vocabulary entry).
    assert peak.logits == 6 * 8 * 2048 * arch.vocab_size
    assert peak.components.activations == peak.kept + peak.logits and peak.phase == "loss"


CASES = load_cases()


@pytest.mark.parametrize("case", [c for c in CASES if not c.known_miss], ids=lambda c: c.id)
def test_published_measured_peaks_within_15_percent(case):
    # data/validation.json: each case's settings, measured number and source
    # (LitGPT resource tables, transformers' octocoder walkthrough).
    assert abs(case.error()) <= 0.15, f"{case.label}: {case.error():+.1%}"


def test_enough_measured_cases_and_known_misses_are_really_misses():
    good = [c for c in CASES if not c.known_miss]
    assert len(good) >= 5
    assert {c.scenario.get("mode", "inference") for c in good} == {"training", "inference"}
    for c in CASES:
        if c.known_miss:  # if the model improves, drop the flag
            assert abs(c.error()) > 0.15, c.id


def test_lora_memory_grows_linearly_per_sample_like_litgpt():
    # LitGPT: +7.77 GB for the second 1,304-token sample of Llama-2-7B.
    by_id = {c.id: c for c in CASES}
    one, two = by_id["litgpt-llama2-7b-lora-mb1"], by_id["litgpt-llama2-7b-lora-mb2"]
    assert two.estimated_bytes() - one.estimated_bytes() == pytest.approx(two.measured_bytes - one.measured_bytes, rel=0.15)


def test_full_finetune_is_16_bytes_per_param_of_model_states():
    # peers.md: bf16 mixed-precision AdamW = 2 + 2 + 12 bytes per parameter.
    sc = Scenario(model="llama-3.1-8b", mode="training")
    comps, _ = training_components(sc, sc.architecture, Layout(1, 1, 1), 1, 1)
    assert (comps.weights + comps.gradients + comps.optimizer) / sc.architecture.total_params == pytest.approx(16)


def test_qlora_65b_fits_under_48_gb_and_full_needs_over_780():
    # QLoRA paper abstract: finetuning a 65B model needs > 780 GB of GPU memory
    # in 16-bit, < 48 GB with QLoRA (single 48 GB GPU; gradient checkpointing).
    llama65 = {
        "hf_config": {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 22016, "num_hidden_layers": 80, "num_attention_heads": 64, "vocab_size": 32000}
    }
    full = estimate(Scenario(model=llama65, mode="training", seq_len=512, gradient_checkpointing=True))
    assert full.memory_per_device_bytes.total / 1e9 > 780
    q = estimate(
        Scenario(model=llama65, mode="training", method="qlora", lora_rank=64, seq_len=512, gradient_checkpointing=True, optimizer="adamw", accelerator="rtx-a6000")
    )
    # The paper's adapters are bf16; PEFT's default fp32 adapters add ~3 GB, and it
    # still fits one 48 GB (GiB-marketed) RTX A6000.
    assert q.memory_per_device_bytes.total < 48 * 2**30
    assert q.fits


def test_kv_cache_scales_with_context_and_batch():
    a = estimate(Scenario(model="llama-3.1-8b", seq_len=8192, batch_size=1)).memory_per_device_bytes.kv_cache
    b = estimate(Scenario(model="llama-3.1-8b", seq_len=8192, batch_size=4)).memory_per_device_bytes.kv_cache
    assert a == 2**30 and b == 4 * 2**30


def test_sliding_window_caps_kv():
    short = estimate(Scenario(model="mistral-7b-v0.1", seq_len=4096)).memory_per_device_bytes.kv_cache
    long = estimate(Scenario(model="mistral-7b-v0.1", seq_len=32768)).memory_per_device_bytes.kv_cache
    assert short == long == 131_072 * 4096
    g_short = estimate(Scenario(model="gemma-2-9b", seq_len=4096)).memory_per_device_bytes.kv_cache
    g_long = estimate(Scenario(model="gemma-2-9b", seq_len=8192)).memory_per_device_bytes.kv_cache
    per_layer = 2 * 8 * 256 * 2
    assert g_long - g_short == 21 * per_layer * 4096  # only the 21 global layers grow


def test_fp8_kv_halves_kv():
    a = estimate(Scenario(model="llama-3.1-70b", seq_len=8192)).memory_per_device_bytes.kv_cache
    b = estimate(Scenario(model="llama-3.1-70b", seq_len=8192, kv_cache_format="fp8")).memory_per_device_bytes.kv_cache
    assert b * 2 == a


def test_tensor_parallel_splits_gqa_kv_but_not_mla_latent():
    a = estimate(Scenario(model="llama-3.1-70b", tensor_parallel=8)).memory_per_device_bytes.kv_cache
    b = estimate(Scenario(model="llama-3.1-70b")).memory_per_device_bytes.kv_cache
    assert a * 8 == b
    c = estimate(Scenario(model="deepseek-v3", tensor_parallel=8, accelerator="h200")).memory_per_device_bytes.kv_cache
    d = estimate(Scenario(model="deepseek-v3", accelerator="h200")).memory_per_device_bytes.kv_cache
    assert c == d


def test_offload_moves_optimizer_and_gradients_to_cpu():
    """ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840, Sec. 4.1) keeps the fp16 gradients in CPU memory with the
    optimizer states; a device holds one weight group's gradient in flight. Before issue 26 the gradients stayed."""
    on = estimate(Scenario(model="llama-3.1-8b", mode="training", zero_stage=2, data_parallel=2, offload="optimizer"))
    off = estimate(Scenario(model="llama-3.1-8b", mode="training", zero_stage=2, data_parallel=2))
    n = on.params.total
    assert on.memory_per_device_bytes.optimizer == 0
    # ZeRO-2 over 2 ranks: each keeps half the 2-byte gradients and half the 12 bytes of states, all in CPU memory
    assert on.cpu_memory_per_device_bytes == pytest.approx(off.memory_per_device_bytes.optimizer + 2 * n / 2, rel=1e-9)
    assert off.memory_per_device_bytes.optimizer == pytest.approx(12 * n / 2, rel=1e-9)


def test_zero_offload_trains_13b_on_one_v100_as_the_paper_does():
    """ZeRO-Offload's headline (arXiv 2101.06840, abstract and Sec. 6: a 13B model trained on a single 32 GB V100):
    the GPU holds the fp16 parameters (2 bytes each, 24.2 GiB for Llama 2 13B) and the CPU the other 14 bytes per
    parameter (fp16 gradients 2, fp32 master, momentum and variance 12): 14 x 13.0e9 = 182 GB = 169.5 GiB."""
    sc = Scenario(model="llama-2-13b", mode="training", accelerator="v100-32gb", precision="fp16", zero_stage=2, batch_size=1, seq_len=1024, gradient_checkpointing=True)
    n = sc.architecture.total_params
    on = estimate(sc.replace(offload="optimizer"))
    assert on.fits and not estimate(sc).fits
    assert on.memory_per_device_bytes.weights == pytest.approx(2 * n, rel=1e-9)
    assert on.cpu_memory_per_device_bytes == pytest.approx(14 * n, rel=1e-9)


def test_total_is_sum_of_components():
    r = estimate(Scenario(model="mixtral-8x7b", mode="training", method="lora", zero_stage=3, data_parallel=8))
    m = r.memory_per_device_bytes
    assert m.total == m.weights + m.gradients + m.optimizer + m.activations + m.kv_cache + m.overhead + m.allocator


@pytest.mark.parametrize(("accelerator", "library", "other"), [("h100-sxm", "NCCL", "RCCL"), ("mi300x", "RCCL", "NCCL")])
def test_layout_note_names_the_parts_own_collective_library(accelerator, library, other):
    # two data-parallel LoRA ranks without ZeRO hold the whole model each, plus the collective buffers
    sc = Scenario(model="llama-3.2-1b", mode="training", method="lora", accelerator=accelerator, data_parallel=2)
    note = estimate(sc).layout_note
    assert note is not None
    said = note.render()
    assert f"0.5 GiB of {library} buffers" in said
    assert other not in said
