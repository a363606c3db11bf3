"""Training time = FLOPs / (devices x peak x MFU), pinned to published runs (tests/data/training_runs.csv)."""

import csv
from pathlib import Path

import pytest

from core.catalog.accelerators import get_accelerator, load_accelerators
from core.scenario import Scenario
from core.speed.timing import MFU_DEFAULTS, default_mfu, peak_tflops, training_flops_per_token, training_time

RUNS = list(csv.DictReader((Path(__file__).resolve().parents[1] / "data" / "training_runs.csv").open(newline="")))


def scenario_of(run: dict, **extra) -> Scenario:
    model = {"params": float(run["model"])} if run["model"][0].isdigit() else run["model"]
    return Scenario(
        model=model,
        mode="training",
        accelerator=run["accelerator"],
        train_tokens=float(run["tokens"]),
        gradient_checkpointing=run["gradient_checkpointing"] == "true",
        mfu=float(run["mfu"]) if run["mfu"] else None,
        **extra,
    )


@pytest.mark.parametrize("run", RUNS, ids=[r["id"] for r in RUNS])
def test_published_runs_are_reproduced(run):
    sc = scenario_of(run)
    t = training_time(sc, get_accelerator(run["accelerator"]), int(run["devices"] or 1024))
    got = {"gpu_hours": t.gpu_hours, "wall_days": t.wall_hours / 24, "tokens_per_s": t.tokens_per_s}[run["metric"]]
    assert got == pytest.approx(float(run["published"]), rel=float(run["tolerance"])), run["source"]


def test_reference_errors_stay_where_documented():
    """The errors quoted in the report: Llama 2 within 8% at the default MFU;
    405B 9% low at 38% (the model-card hours also cover restarts: the Herd paper
    reports >90% effective training time), 20% low at the top of the range."""
    errors = {}
    for run in RUNS:
        if run["metric"] == "gpu_hours":
            t = training_time(scenario_of(run), get_accelerator(run["accelerator"]), 1024)
            errors[run["id"]] = t.gpu_hours / float(run["published"]) - 1
    assert all(abs(errors[k]) < 0.08 for k in ("llama-2-7b", "llama-2-13b", "llama-2-70b"))
    assert errors["llama-3.1-405b-mfu38"] == pytest.approx(-0.09, abs=0.01)
    run_405b = next(r for r in RUNS if r["id"] == "llama-3.1-405b-mfu38")
    top = training_time(scenario_of(run_405b).model_copy(update={"mfu": 0.43}), get_accelerator("h100-sxm"), 1)
    assert top.gpu_hours / 30.84e6 - 1 == pytest.approx(-0.195, abs=0.01)


def test_moe_uses_active_parameters():
    sc = Scenario(model="deepseek-v3", mode="training", train_tokens=1e12)
    arch = sc.architecture
    assert training_flops_per_token(sc, arch) == pytest.approx(6 * arch.active_params)
    assert arch.total_params > 15 * arch.active_params


def test_flop_rules_by_method():
    base = Scenario(model="llama-3.1-8b", mode="training", train_tokens=1e9)
    arch = base.architecture
    n = arch.active_params
    assert training_flops_per_token(base, arch) == 6 * n
    assert training_flops_per_token(base.model_copy(update={"gradient_checkpointing": True}), arch) == 8 * n
    lora = training_flops_per_token(base.model_copy(update={"method": "lora"}), arch)
    assert 4 * n < lora < 4.05 * n  # no weight gradients for the frozen base; adapters are ~0.5% of N
    lora_gc = training_flops_per_token(base.model_copy(update={"method": "lora", "gradient_checkpointing": True}), arch)
    assert lora_gc == pytest.approx(lora + 2 * n, rel=0.01)


def test_mfu_defaults_and_override():
    sc = Scenario(model="llama-3.1-8b", mode="training", train_tokens=1e9)
    assert default_mfu(sc)[0] == MFU_DEFAULTS["full"][0] == 0.40
    assert default_mfu(sc.model_copy(update={"method": "lora"}))[0] == 0.35
    assert default_mfu(sc.model_copy(update={"method": "qlora"}))[0] == 0.35  # QLoRA's dequantization is time of its own
    assert default_mfu(sc.model_copy(update={"mfu": 0.5}))[0] == 0.5
    assert all(src for _, src in MFU_DEFAULTS.values())


def test_peak_by_precision_and_flags():
    h100 = get_accelerator("h100-sxm")
    assert peak_tflops(h100, "bf16") == (989.0, "BF16 dense tensor figure", False)
    assert peak_tflops(h100, "fp32").tflops == 67.0
    for part in ("t4", "v100-16gb", "quadro-rtx-8000"):
        p = peak_tflops(get_accelerator(part), "bf16")
        assert p.flagged and "FP16 tensor" in p.basis
    k80 = peak_tflops(get_accelerator("k80"), "bf16")
    assert k80.flagged and k80.tflops == 4.37
    for acc in load_accelerators():  # every catalog row yields a positive peak for every precision
        for precision in ("bf16", "fp16", "fp32"):
            assert peak_tflops(acc, precision).tflops > 0, acc.id


def test_time_formula_and_device_invariant():
    sc = Scenario(model="llama-3.1-70b", mode="training", train_tokens=1e11)
    acc = get_accelerator("a100-sxm-80gb")
    previous = None
    for n in (1, 2, 3, 8, 64, 1000, 4096):
        t = training_time(sc, acc, n)
        assert t.wall_hours * 3600 == pytest.approx(t.flops / (n * 312e12 * 0.40))
        assert t.gpu_hours == pytest.approx(n * t.wall_hours)
        if previous is not None:
            assert t.wall_hours <= previous.wall_hours  # more devices never lengthen the ideal time
            assert t.gpu_hours == pytest.approx(previous.gpu_hours)
        previous = t


def test_bad_inputs_raise():
    sc = Scenario(model="llama-3.1-8b", mode="training")
    with pytest.raises(ValueError, match="train_tokens"):
        training_time(sc, get_accelerator("h100-sxm"), 8)
    with pytest.raises(ValueError, match="devices"):
        training_time(sc, get_accelerator("h100-sxm"), 0, tokens=1e9)
