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
