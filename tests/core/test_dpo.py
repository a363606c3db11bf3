"""Preference tuning (DPO, core/memory/objective.py) against supervised fine-tuning, worked out by hand: two sequences
an example, a frozen reference copy of a full fine-tune's weights (sharded like them), the reference's forward pass
(2N FLOPs a token and its logits at the loss), and the stacks that have a DPO trainer (data/stack_layouts.csv).

No published DPO run states its memory or speed with the batch, length and stack needed to pin it here (the Zephyr
and Unsloth write-ups give hours or a peak without them), so these are the formulas' own checks."""

import numpy as np
import pytest

from core.catalog.accelerators import get_accelerator
from core.estimate import estimate
from core.layout import Layout
from core.memory.components import training_peak, training_states
from core.plan import plan
from core.plan.goal import Goal
from core.scenario import Scenario
from core.speed.attention import attention_flops_per_token
from core.speed.timing import dequant_seconds_per_token, training_flops_per_token

MODEL, SEQ = "llama-3.2-1b", 512


def _sc(**kw) -> Scenario:
    base = {"model": MODEL, "mode": "training", "seq_len": SEQ, "batch_size": 2, "train_tokens": 1e7}
    return Scenario(**(base | kw))


ONE = Layout(1, 1, 1)


def _peak(sc: Scenario, layout: Layout = ONE, batch: int | None = None):
    return training_peak(sc, sc.architecture, layout, sc.batch_size if batch is None else batch, sc.seq_len).components


def test_a_full_fine_tunes_dpo_holds_a_reference_copy_and_two_sequences_an_example():
    sft, dpo = _sc(objective="sft"), _sc(objective="dpo")
    arch = sft.architecture
    # the reference copy: the weights as loaded (the Hugging Face stack's autocast keeps fp32 parameters: 4 bytes each)
    assert training_states(sft, arch).weights == pytest.approx(4.0 * arch.total_params)
    assert _peak(dpo).weights - _peak(sft).weights == pytest.approx(4.0 * arch.total_params)
    # two sequences an example: DPO at 2 pairs keeps SFT's activations at 4 sequences, plus the reference's 16-bit
    # logits at the loss (2 bytes x 4 sequences x 512 tokens x the vocabulary)
    ref_logits = 2.0 * 4 * SEQ * arch.vocab_size
    assert _peak(dpo).activations - _peak(sft, batch=4).activations == pytest.approx(ref_logits)
    assert _peak(dpo).gradients == _peak(sft).gradients and _peak(dpo).optimizer == _peak(sft).optimizer


def test_lora_dpos_reference_is_the_base_with_adapters_off():
    sft, dpo = _sc(method="lora", precision="bf16-true"), _sc(method="lora", precision="bf16-true", objective="dpo")
    assert _peak(dpo).weights == _peak(sft).weights  # no second copy
    assert _peak(dpo).activations > _peak(sft).activations


def test_the_reference_copy_is_sharded_like_the_weights_under_zero3():
    sft, dpo = _sc(zero_stage=3, data_parallel=8), _sc(zero_stage=3, data_parallel=8, objective="dpo")
    arch = sft.architecture
    lay = Layout(8, 1, 1)
    loaded = training_states(dpo, arch).weights  # ZeRO-3 keeps 16-bit parameters (the fp32 master in the optimizer)
    assert loaded == pytest.approx(2.0 * arch.total_params)
    assert _peak(dpo, lay).weights - _peak(sft, lay).weights == pytest.approx(loaded / 8)


@pytest.mark.parametrize("method", ["full", "lora"])
def test_dpo_adds_the_reference_forward_2n_a_token(method):
    """Full, no recomputation: SFT 6N + 3 attention passes a token, DPO 8N + 4 (4/3 of SFT's matmuls). LoRA: the
    frozen base's 4N (no weight gradients) + 6 per adapter parameter; DPO adds 2N and one attention pass."""
    prec = "bf16" if method == "full" else "bf16-true"
    sft, dpo = _sc(method=method, precision=prec), _sc(method=method, precision=prec, objective="dpo")
    arch = sft.architecture
    n = float(arch.active_params)
    attention = attention_flops_per_token(arch, SEQ / 2.0)
    got_sft, got_dpo = training_flops_per_token(sft, arch), training_flops_per_token(dpo, arch)
    assert got_dpo - got_sft == pytest.approx(2.0 * n + attention)
    if method == "full":
        assert got_sft == pytest.approx(6.0 * n + 3 * attention) and got_dpo == pytest.approx(8.0 * n + 4 * attention)
        assert (got_dpo - 4 * attention) / (got_sft - 3 * attention) == pytest.approx(4 / 3)


def test_qloras_reference_forward_dequantizes_the_base_once_more():
    """NF4 under prepare_model_for_kbit_training (checkpointing on): 3 dequantizing passes a micro-batch, 4 with DPO's
    reference forward, over twice the tokens (both answers): 4/3 / 2 of SFT's time a token at the same batch."""
    acc = get_accelerator("h100-sxm")
    sft = _sc(method="qlora", precision="bf16-true")
    dpo = _sc(method="qlora", precision="bf16-true", objective="dpo")
    arch = sft.architecture
    assert dequant_seconds_per_token(dpo, arch, acc) / dequant_seconds_per_token(sft, arch, acc) == pytest.approx((4 / 3) / 2)


def test_a_dpo_run_takes_longer_than_sft_on_the_same_tokens_and_says_why():
    """The same sequences a micro-batch (SFT's 4 against DPO's 2 pairs): DPO's reference forward makes each token
    slower, its reference copy each device fuller."""
    sft = estimate(_sc(objective="sft", batch_size=4))
    dpo = estimate(_sc(objective="dpo"))
    assert dpo.training.wall_hours > sft.training.wall_hours
    assert dpo.memory_per_device_bytes.total > sft.memory_per_device_bytes.total
    assert any("DPO: a micro-batch of 2 pairs runs 4 sequences" in a and "frozen reference copy" in a for a in dpo.assumptions)
    assert "DPO's reference forward" in dpo.training.assumptions[0]
    assert not any("DPO" in a for a in sft.assumptions)


def test_a_stack_without_a_dpo_trainer_says_so():
    r = estimate(_sc(objective="dpo", training_stack="megatron"))
    assert r.stack_problem == "Megatron-LM has no DPO trainer; preference tuning runs on Hugging Face (TRL), torchtune, Unsloth and Axolotl"
    assert estimate(_sc(objective="dpo", method="qlora", precision="bf16-true", training_stack="torchtune")).stack_problem == (
        "torchtune has no DPO recipe for QLoRA (it runs DPO with a full fine-tune and LoRA)"
    )
    assert estimate(_sc(objective="dpo", method="lora", precision="bf16-true", training_stack="axolotl")).stack_problem is None


def test_the_objective_shapes_only_training():
    served = Scenario(model=MODEL, mode="inference", objective="dpo")
    assert estimate(served).memory_per_device_bytes.total == estimate(Scenario(model=MODEL, mode="inference")).memory_per_device_bytes.total


def test_preference_tuning_is_a_fine_tune_goal():
    with pytest.raises(ValueError, match="use goal 'fine-tune'"):
        Goal(goal="pretrain", model=MODEL, tokens=1e9, objective="dpo")


def test_a_dpo_goals_plans_fit_as_the_memory_page_counts_them_and_cost_more_than_sft():
    """The planner sizes DPO's plans with the same memory model (each plan's scenario fits on its part) and prices
    the reference's pass: on the same tokens the cheapest DPO run costs more than the cheapest SFT run."""
    goal = {"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 2e7, "methods": ["full"], "accelerators": ["h100-sxm", "a100-sxm-80gb"]}
    sft, dpo = plan(Goal(**goal)), plan(Goal(**goal, objective="dpo"))
    assert sft.cheapest is not None and dpo.cheapest is not None
    assert dpo.cheapest.usd > sft.cheapest.usd
    for p in dpo.plans[:6]:
        sc = Scenario.model_validate(p.scenario)
        assert sc.objective == "dpo"
        assert estimate(sc).fits, p.scenario
    assert any("Global batch: 64 pairs for fine-tuning" in a for a in dpo.assumptions)
    assert any(a.startswith("Preference tuning (DPO): each example of the batch is a pair") for a in dpo.assumptions)
    hours = np.array([p.hours for p in dpo.plans])
    assert np.all(np.isfinite(hours)) and np.all(hours > 0)


@pytest.mark.parametrize(("gc", "ratio"), [(False, 4 / 3), (True, 5 / 4)])
def test_a_full_dpo_token_is_one_more_forward_pass_of_work(gc, ratio):
    """Llama 3.1 8B full fine-tune on an H100 (neither launch- nor dequantization-bound): each per-token term, the
    matmuls and the bandwidth-bound work alike, gains the reference's forward pass: 4/3 of SFT's time a token without
    recomputation (3 passes -> 4), 5/4 with it (4 -> 5)."""
    from core.speed.timing import training_time

    acc = get_accelerator("h100-sxm")
    sft = Scenario(model="llama-3.1-8b", mode="training", method="full", gradient_checkpointing=gc, train_tokens=1e7)
    dpo = sft.replace(objective="dpo")
    assert training_time(dpo, acc, 1).wall_hours / training_time(sft, acc, 1).wall_hours == pytest.approx(ratio, rel=1e-6)
