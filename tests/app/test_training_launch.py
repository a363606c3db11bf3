"""The Training page's "Run this setup" (stop 39): the command and config for the sidebar's setup as set, the same
text core/plan/launch/ writes for the scenario (its layout, optimizer, CPU offload and base), shown as code."""

import pytest

from app_pages.shared.fields import defaults, fields
from app_pages.shared.scenario_io import build_scenario
from core.plan.launch import launch_command

from .conftest import no_exception, open_link

LINKS = [
    {"model": "llama-3.1-8b", "mode": "training", "method": "qlora", "qbase": "gptq-4bit", "stack": "axolotl", "opt": "sgd", "zero": "2", "dp": "2"},
    {"model": "llama-3.1-8b", "mode": "training", "method": "full", "stack": "deepspeed", "zero": "2", "dp": "4", "offload": "optimizer"},
]


@pytest.mark.parametrize("link", LINKS)
def test_the_page_shows_the_launch_of_the_sidebars_setup(link):
    at = open_link("training", link)
    no_exception(at)
    sc, _ = build_scenario(defaults() | {k: fields()[k].parse(v) for k, v in link.items()}, "")
    assert sc is not None
    want = launch_command(sc.model_dump(mode="json", exclude_none=True))
    assert [c.value for c in at.code] == [want]
    if link.get("qbase"):
        assert "gptq: true" in want and 'optimizer: "sgd"' in want
    else:
        assert '"offload_optimizer"' in want


def test_a_layout_that_does_not_fit_is_said_and_the_launch_is_the_timed_one():
    """8B full fine-tune on 8 H100s, data parallel with ZeRO-1 at micro-batch 8: 291 GiB a device. The page timed
    and priced another layout (tensor parallel 8, the smallest that fits) without a word and launched the sidebar's,
    which runs out of memory: it now says so, and *Run this setup* writes the layout it timed."""
    from core.estimate import estimate

    link = {"model": "llama-3.1-8b", "mode": "training", "method": "full", "acc": "h100-sxm", "dp": "8", "zero": "1", "batch": "8", "seq": "4096", "tokens": "1"}
    at = open_link("training", link)
    no_exception(at)
    sc, _ = build_scenario(defaults() | {k: fields()[k].parse(v) for k, v in link.items()}, "")
    r = estimate(sc)
    assert not r.fits and r.layout_needed is not None and r.layout_needed.tensor_parallel == 8
    said = [w.value.replace("\\", "") for w in at.warning if "Your layout" in w.value.replace("\\", "")]
    assert len(said) == 1 and "8 devices: data parallel 8, ZeRO-1, micro-batch 8" in said[0] and "tensor parallel 8" in said[0], said
    timed = sc.replace(data_parallel=1, tensor_parallel=8, zero_stage=r.layout_needed.zero_stage)
    assert [c.value for c in at.code] == [launch_command(timed.model_dump(mode="json", exclude_none=True))]


def test_a_setup_that_fits_nowhere_gets_no_time_or_price_of_its_own():
    """70B QLoRA on one RTX 4090 with Unsloth fits no layout of 4090s: the page said "Your setup (1 x RTX 4090): 12.4
    h, $3.47"; it says it fits nowhere and leaves that line out (the other parts' runs stay)."""
    at = open_link("training", {"model": "llama-3.1-70b", "mode": "training", "method": "qlora", "acc": "rtx-4090", "stack": "unsloth", "tokens": "0.01"})
    no_exception(at)
    assert any("fits on no layout of NVIDIA GeForce RTX 4090" in w.value.replace("\\", "") for w in at.warning), [w.value for w in at.warning]
    assert not [c for c in at.caption if c.value.startswith("Your setup")]
