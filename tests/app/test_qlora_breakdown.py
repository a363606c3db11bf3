"""The Training page says where QLoRA's time goes (issue #27, training throughput per stack): the share spent
dequantizing the 4-bit base and, on the Hugging Face stack, the share prepare_model_for_kbit_training's fp32 upcast
takes, the same figures as `python -m core estimate` (its dequant_fraction / upcast_fraction result fields)."""

from .conftest import no_exception, open_link
from .test_one_answer import _cli

LINK = {"mode": "training", "model": "llama-3.1-8b", "acc": "h100-sxm", "method": "qlora"}


def _captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def _cli_fractions(stack: str, flash: bool = True) -> tuple[float, float]:
    # the page's defaults for the rest (field table: batch 1, 4,096 tokens, no checkpointing, LoRA rank 16)
    sc = {"model": "llama-3.1-8b", "mode": "training", "method": "qlora", "accelerator": "h100-sxm", "training_stack": stack, "train_tokens": 1e9}
    sc |= {"batch_size": 1, "seq_len": 4096, "flash_attention": flash}
    t = _cli("estimate", sc)["training"]
    return t["dequant_fraction"], t["upcast_fraction"]


def test_the_hugging_face_recipe_shows_its_fp32_upcast() -> None:
    """With FlashAttention off (SDPA, as our GPU harness ran) the upcast's fp32 attention is most of QLoRA's cost;
    with FlashAttention-2 only the fp32 head is left of it."""
    shares = {}
    for flash in ("false", "true"):
        at = open_link("training", {**LINK, "flash": flash})
        no_exception(at)
        text = _captions(at)
        dequant, upcast = _cli_fractions("hf", flash == "true")
        assert f"pass is {dequant:.0%} of it" in text and f"fp32 upcast is {upcast:.0%}: stacks without it" in text
        tip = next(c.help for c in at.caption if "QLoRA's time" in c.value)
        assert "`prepare_model_for_kbit_training`: norms, embeddings and output head in fp32" in tip and "FlashAttention-2" in tip
        shares[flash] = (dequant, upcast)
    assert shares["false"][1] > 0.5 and shares["false"][0] < 0.05  # the recipe's upcast, not the dequantization
    assert 0.1 < shares["true"][1] < 0.3


def test_a_stack_without_the_upcast_shows_the_dequantization_alone() -> None:
    at = open_link("training", {**LINK, "stack": "torchtune"})
    no_exception(at)
    text = _captions(at)
    dequant, upcast = _cli_fractions("torchtune")
    assert upcast == 0.0
    assert f"dequantizing the 4-bit base in every pass is {dequant:.0%} of it." in text and "fp32 upcast" not in text


def test_no_breakdown_for_lora() -> None:
    at = open_link("training", {**LINK, "method": "lora"})
    no_exception(at)
    assert "dequantizing the 4-bit base" not in _captions(at)
