"""GPU vs TPU comparison rows and the ecosystem trade-offs (core/money/compare.py, core/catalog/ecosystem.py)."""

import pytest

from core.catalog.accelerators import get_accelerator, load_accelerators
from core.catalog.ecosystem import load_ecosystem, platform_of
from core.money.compare import compare_accelerators
from core.scenario import Scenario
from core.speed.timing import training_flops_per_token, training_time

IDS = ["h100-sxm", "a100-sxm-80gb", "tpu-v5e", "tpu-v5p", "tpu-v6e", "mi300x", "trainium", "apple-m3-max"]


def test_inference_comparison():
    rows = compare_accelerators(Scenario(model="llama-3.1-8b", batch_size=16, seq_len=4096), IDS)
    assert [r.accelerator_id for r in rows] == IDS
    by_id = {r.accelerator_id: r for r in rows}
    h100, v5e = by_id["h100-sxm"], by_id["tpu-v5e"]
    assert h100.fits_on_one and h100.devices == 1
    assert not v5e.fits_on_one and v5e.devices >= 2  # 16 GB chips: 16 GB of weights need two or more
    for r in (h100, v5e, by_id["tpu-v5p"]):
        assert r.usd_per_million_tokens == pytest.approx(r.usd_per_device_hour * r.devices / (r.output_tokens_per_s_per_device * r.devices * 3600) * 1e6)
        assert r.output_tokens_per_usd == pytest.approx(1e6 / r.usd_per_million_tokens)
        assert r.time_to_first_token_s > 0 and r.decode_tokens_per_s > 0
        assert r.training_tokens_per_s_per_device is None
    assert by_id["apple-m3-max"].usd_per_million_tokens is None  # no cloud rents it
    assert by_id["mi300x"].output_tokens_per_s_per_device > h100.output_tokens_per_s_per_device  # 5.3 vs 3.35 TB/s


def test_training_comparison_and_per_dollar():
    sc = Scenario(model="llama-3.1-8b", mode="training", train_tokens=1e10)
    rows = {r.accelerator_id: r for r in compare_accelerators(sc, ["h100-sxm", "tpu-v5p", "tpu-v6e", "t4"])}
    h100 = rows["h100-sxm"]
    assert h100.training_tokens_per_s_per_device == pytest.approx(training_time(sc, get_accelerator("h100-sxm"), 1).tokens_per_s)
    assert 989e12 * 0.3 < h100.training_tokens_per_s_per_device * training_flops_per_token(sc, sc.architecture) < 989e12 * 0.78
    assert h100.training_tokens_per_usd == pytest.approx(h100.training_tokens_per_s_per_device * 3600 / h100.usd_per_device_hour)
    assert h100.training_run_usd > 0 and h100.training_wall_hours > 0
    # v6e: 918 of the H100's 989 TFLOP/s and less than half its bandwidth (the per-layer work is bandwidth-bound)
    assert rows["tpu-v6e"].training_tokens_per_s_per_device < 918 / 989 * h100.training_tokens_per_s_per_device
    assert any("FP16 matrix figure" in n and "train in FP16" in n for n in rows["t4"].notes)
    assert rows["t4"].decode_tokens_per_s is None


def test_every_row_carries_sourced_trade_offs():
    rows = compare_accelerators(Scenario(model="qwen2.5-0.5b"))
    assert len(rows) == len(load_accelerators())
    for r in rows:
        aspects = {e.aspect for e in r.ecosystem}
        assert {"frameworks", "quantization", "scaling"} <= aspects, r.accelerator_id
        assert all(e.source.startswith("https://") and e.platform == r.platform for e in r.ecosystem)


def test_platforms():
    assert platform_of(get_accelerator("tpu-v6e")) == "google-tpu"
    assert platform_of(get_accelerator("inferentia2")) == "aws-trainium"
    assert platform_of(get_accelerator("gaudi3")) == "intel-gaudi"
    assert platform_of(get_accelerator("groq-lpu")) == "groq-lpu"
    assert platform_of(get_accelerator("cerebras-wse-3")) == "cerebras-wse"
    assert {e.platform for e in load_ecosystem()} == {
        "nvidia-gpu",
        "amd-gpu",
        "google-tpu",
        "aws-trainium",
        "apple-silicon",
        "intel-gaudi",
        "groq-lpu",
        "cerebras-wse",
    }


def test_every_platform_names_the_seed_trade_offs():
    """The seed notes' trade-offs: low-precision throughput (quantization), memory capacity, scaling and software
    maturity (frameworks), on every platform, each with its own source."""
    eco = load_ecosystem()
    for platform in {e.platform for e in eco}:
        aspects = {e.aspect for e in eco if e.platform == platform}
        assert {"quantization", "memory", "scaling", "frameworks"} <= aspects, platform


def test_a_part_that_cannot_train_this_way_has_no_training_figures_and_says_why():
    """GPU vs TPU in training mode ranked TPUs for QLoRA and Inferentia2 for a full fine-tune, which the Training page
    and the planner refuse (core/catalog/stack_layouts.training_part_problem, the one rule): no figures there, the
    reason in the notes; a part that trains keeps its figures."""
    from core.catalog.accelerators import get_accelerator
    from core.catalog.stack_layouts import training_part_problem

    ids = ["h100-sxm", "tpu-v5p", "inferentia2", "cerebras-wse-3"]
    qlora = {r.accelerator_id: r for r in compare_accelerators(Scenario(model="llama-3.1-8b", mode="training", method="qlora"), ids)}
    assert qlora["h100-sxm"].training_tokens_per_s_per_device and qlora["h100-sxm"].training_tokens_per_usd
    for aid in ("tpu-v5p", "inferentia2", "cerebras-wse-3"):
        why = training_part_problem(get_accelerator(aid), "qlora", "hf")
        assert why is not None and qlora[aid].training_tokens_per_s_per_device is None and qlora[aid].training_run_usd is None
        assert why.removeprefix(f"{aid}: ") in qlora[aid].notes
    full = {r.accelerator_id: r for r in compare_accelerators(Scenario(model="llama-3.1-8b", mode="training", method="full"), ids)}
    assert full["tpu-v5p"].training_tokens_per_s_per_device and full["inferentia2"].training_tokens_per_s_per_device is None


def test_the_estimate_says_when_its_own_part_cannot_train():
    """The Training page priced a fine-tune on Inferentia2 as the sidebar's part with no word (its sweep skipped the
    check for the sidebar's own part): the estimate's problem names it, by the part's name."""
    from core.memory.problems import scenario_problem

    said = scenario_problem(Scenario(model="llama-3.1-8b", mode="training", method="full", accelerator="inferentia2"))
    assert said == "AWS Inferentia2 (Inf2, per chip): an inference-only part"
    assert scenario_problem(Scenario(model="llama-3.1-8b", mode="training", method="lora", accelerator="tpu-v5p")) is None


def test_a_part_without_bf16_is_said_for_the_workload():
    """A T4 has no BF16: its FP16 matrix figure is used, said as training in FP16 when training and served in FP16
    when serving (a serving page read "train in fp16")."""
    from core.catalog.accelerators import get_accelerator
    from core.speed.timing import inference_peak_tflops, peak_tflops

    t4 = get_accelerator("t4")
    assert peak_tflops(t4, "bf16").basis.endswith("(train in FP16)")
    served = inference_peak_tflops(t4, "bf16")
    assert served.basis.endswith("(served in FP16)") and served.tflops == peak_tflops(t4, "bf16").tflops == t4.bf16_tflops
    rows = compare_accelerators(Scenario(model="llama-3.2-1b"), ["t4"])
    assert not any("train in" in n for n in rows[0].notes)
