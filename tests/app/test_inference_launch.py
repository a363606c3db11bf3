"""The Inference page's "Run this setup: the serving command" (stop 50): the text core/plan/launch/ writes for the
sidebar's serving scenario, its scheduler settings (max_num_seqs, max_num_batched_tokens, the memory share) and
llama.cpp's -ngl included, on the layout whose speeds the page shows. Before, only a plan had a serving command."""

import pytest

from app_pages.shared.fields import defaults, fields
from app_pages.shared.scenario_io import build_scenario
from core.plan.launch import launch_command

from .conftest import no_exception, open_link

LINKS = [
    (
        {"model": "llama-3.1-8b", "acc": "h100-sxm", "batch": "16", "mns": "64", "mnbt": "2048", "gmu": "80"},
        ["--max-num-seqs 64", "--max-num-batched-tokens 2048", "--gpu-memory-utilization 0.8"],
    ),
    ({"model": "llama-3.1-8b", "acc": "h100-sxm", "engine": "sglang", "tp": "2", "batch": "8"}, ["--tp 2", "--max-running-requests 8", "--mem-fraction-static 0.88"]),
    ({"model": "llama-3.1-70b", "acc": "rtx-4090", "engine": "llama.cpp", "fmt": "gguf-q4_k_m", "ngl": "40", "batch": "1"}, ["-ngl 40", "-c 4096"]),
]


@pytest.mark.parametrize(("link", "flags"), LINKS)
def test_the_page_shows_the_serving_command_of_the_sidebars_setup(link, flags):
    at = open_link("inference", link)
    no_exception(at)
    sc, _ = build_scenario(defaults() | {k: fields()[k].parse(v) for k, v in link.items()}, "")
    assert sc is not None
    want = launch_command(sc.model_dump(mode="json", exclude_none=True))
    assert [c.value for c in at.code] == [want]
    for flag in flags:
        assert flag in " ".join(want.replace("\\\n", " ").split()), (flag, want)


def test_a_layout_that_does_not_hold_the_model_launches_the_one_the_speeds_are_for():
    """A 70B in bf16 on 2 H100s does not fit: the page's speeds are the smallest layout that does (3 GPUs, three
    pipeline stages), and the command runs that layout, saying so, not the sidebar's 2 GPUs that run out of memory."""
    at = open_link("inference", {"model": "llama-3.1-70b", "acc": "h100-sxm", "tp": "2", "batch": "16"})
    no_exception(at)
    (code,) = [c.value for c in at.code]
    assert "--pipeline-parallel-size 3" in code and "on 3 x NVIDIA H100" in code
    assert any("smallest layout that holds it (3 devices)" in c.value for c in at.caption)
    assert any("speeds are for the smallest layout that fits (3 devices)" in w.value for w in at.warning)
