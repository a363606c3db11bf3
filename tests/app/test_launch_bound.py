"""The Training page says when kernel launches bound the step (issue #27, training throughput per stack): an eager
stack's short micro-batch leaves the GPU waiting for the CPU (core/speed/timing.py launch_floor_seconds_per_token),
the same share as `python -m core estimate`'s launch_bound_fraction result field, with what removes it."""

from .conftest import no_exception, open_link
from .test_one_answer import _cli

LINK = {"mode": "training", "model": "llama-3.1-8b", "acc": "a100-sxm-80gb", "method": "lora", "batch": "1"}


def _captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def _cli_share(seq_len: int) -> float:
    # the page's defaults for the rest (field table: no checkpointing, LoRA rank 16, the Hugging Face stack)
    sc = {"model": "llama-3.1-8b", "mode": "training", "method": "lora", "accelerator": "a100-sxm-80gb", "train_tokens": 1e9}
    return _cli("estimate", sc | {"batch_size": 1, "seq_len": seq_len})["training"]["launch_bound_fraction"]


def test_a_short_micro_batch_is_launch_bound_and_the_page_says_so() -> None:
    at = open_link("training", {**LINK, "seq": "256"})
    no_exception(at)
    share = _cli_share(256)
    assert 0.1 < share < 0.5
    text = _captions(at)
    assert f"1 x 256 tokens a micro-batch leaves the GPU waiting for the CPU {share:.0%} of the computation's time" in text
    assert "a larger micro-batch, packed sequences or a stack that fuses its kernels (Unsloth) remove it" in text


def test_a_long_micro_batch_hides_the_launches() -> None:
    at = open_link("training", {**LINK, "seq": "4096"})
    no_exception(at)
    assert _cli_share(4096) == 0.0 and "Kernel launches bound" not in _captions(at)


def test_a_share_that_rounds_to_nothing_is_not_mentioned() -> None:
    """Just past the micro-batch where the launches stop binding, the share is under half a percent: no "0%" line."""
    share = _cli_share(341)
    assert 0.0 < share < 0.005
    at = open_link("training", {**LINK, "seq": "341"})
    no_exception(at)
    assert "Kernel launches bound" not in _captions(at)
