"""The Explain table's "with your numbers" column (core/memory/explain.py) says what the component holds at the peak:
its product matches its bytes, and where only part of a state exists at the peak (gradients at the loss step, autocast
copies freed before the optimizer step) it says which part."""

from __future__ import annotations

import re

import pytest

from core.memory.components import training_states
from core.memory.estimate import estimate_memory
from core.memory.explain import explain
from core.scenario import Scenario


def rows(sc: Scenario) -> dict[str, tuple[str, int]]:
    result = estimate_memory(sc)
    return {e.component: (e.numbers.render("GiB", digits=2), e.bytes) for e in explain(sc, result)}


def test_autocast_weights_at_the_loss_are_fp32_parameters_plus_their_16_bit_copies():
    """Llama 3.1 70B, full fine-tune under autocast (Hugging Face): the peak is at the loss step, where each
    parameter has its 4-byte fp32 value and a 2-byte bf16 copy, 6 B in all (the row used to say only "x 4 B" next to
    6 B's worth)."""
    sc = Scenario(model="llama-3.1-70b", mode="training", accelerator="h100-sxm", seq_len=4096)
    assert estimate_memory(sc).peak_phase == "loss"
    text, value = rows(sc)["weights"]
    n = sc.architecture.total_params
    assert value == pytest.approx(n * 6, rel=1e-6)
    assert f"{n:,} x 4 B" in text and f"{n:,} x 2 B 16-bit copies" in text


def test_gradients_at_the_loss_are_the_output_heads_only():
    """At the loss step the backward pass has made only the output head's gradient (vocabulary x hidden x 4 B for
    Llama 3.1 70B: 128,256 x 8,192 x 4 B = 3.91 GiB), not all 70B parameters' (the row used to print "70,553,706,496
    x 4 B = 3.91 GiB")."""
    sc = Scenario(model="llama-3.1-70b", mode="training", accelerator="h100-sxm", seq_len=4096)
    text, value = rows(sc)["gradients"]
    arch = sc.architecture
    assert value == pytest.approx(arch.vocab_size * arch.hidden_size * 4, rel=1e-6)
    assert value == pytest.approx(training_states(sc, arch).head_gradient, rel=1e-6)
    assert "only the output head's gradient" in text and "all of them at the optimizer step" in text


def test_lora_has_no_gradient_yet_at_the_loss():
    sc = Scenario(model="llama-3.1-70b", mode="training", method="qlora", accelerator="h100-sxm", seq_len=4096)
    text, value = rows(sc)["gradients"]
    assert value == 0 and text.startswith("none yet at the loss")


def test_at_the_optimizer_step_every_gradient_and_no_copy():
    """Llama 3.1 8B at 512 tokens: the peak is the optimizer step, with every gradient (n x 4 B) and the fp32
    parameters alone (the bf16 copies are freed by then): the products match the bytes."""
    sc = Scenario(model="llama-3.1-8b", mode="training", accelerator="h100-sxm", seq_len=512)
    assert estimate_memory(sc).peak_phase == "optimizer step"
    r = rows(sc)
    n = sc.architecture.total_params
    assert r["gradients"][1] == pytest.approx(n * 4, rel=1e-6) and r["gradients"][0].startswith(f"{n:,} x 4 B (at the optimizer step)")
    assert r["weights"][1] == pytest.approx(n * 4, rel=1e-6) and "copies are freed before the optimizer step" in r["weights"][0]


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-4b", "gemma-3-12b"])
@pytest.mark.parametrize("seq", [512, 4096])
def test_a_plain_product_in_the_gradient_row_equals_its_bytes(model, seq):
    """Wherever the gradient row is a bare "N x k B" product, it equals the row's bytes (the check that caught the
    rows above, over models with and without tied embeddings and at both peaks)."""
    sc = Scenario(model=model, mode="training", accelerator="h100-sxm", seq_len=seq)
    text, value = rows(sc)["gradients"]
    bare = re.fullmatch(r"([\d,]+) x ([\d.]+) B \(at the [a-z ]+\) = .*", text)
    tied = re.fullmatch(r"([\d,]+) x ([\d.]+) B \+ ([\d.]+) GiB \(tied embeddings.*", text)
    if bare:
        assert int(bare.group(1).replace(",", "")) * float(bare.group(2)) == pytest.approx(value, rel=1e-6)
    elif tied:
        assert sc.architecture.tie_embeddings
        head = training_states(sc, sc.architecture).head_gradient
        assert int(tied.group(1).replace(",", "")) * float(tied.group(2)) + head == pytest.approx(value, rel=1e-6)
        assert float(tied.group(3)) == pytest.approx(head / 2**30, abs=0.006)
    else:
        assert "all of them" in text, text
