"""The sidebar's QLoRA base (link key `qbase`): NF4 through bitsandbytes, or a GPTQ 4-bit checkpoint on the stacks that
train LoRA on one (core/memory/stacks.py qlora_other_bases: Hugging Face, Axolotl). It sets the scenario's
weights_format, which the Weight format input sets for serving and LoRA: the two never apply together."""

import pytest

from app_pages.shared.fields import defaults, fields
from app_pages.shared.scenario_io import build_scenario, input_labels, scenario_values, unshowable
from app_pages.shared.style import Units
from core.estimate import estimate
from core.scenario import Scenario

from .conftest import metric, no_exception, open_link

QLORA = {"model": "llama-3.1-8b", "mode": "training", "method": "qlora", "gc": "true"}


@pytest.mark.parametrize("base", ["gptq-4bit", "nf4"])
def test_the_link_sets_the_base_and_the_figures_follow(base):
    at = open_link("memory", {**QLORA, "qbase": base})
    no_exception(at)
    box = [s for s in at.selectbox if s.label == "QLoRA base"]
    assert len(box) == 1 and box[0].value == base
    link = {**QLORA, "qbase": base}
    sc, _ = build_scenario(defaults() | {k: fields()[k].parse(v) for k, v in link.items()}, "")
    assert sc is not None and sc.weights_format == base
    assert metric(at, "Memory per device") == Units("GiB")(estimate(sc).memory_per_device_bytes.total)
    assert at.query_params.get("qbase") in (base, [base]) or base == "nf4"  # the default may be left out of the URL


def test_the_two_bases_give_different_figures():
    """GPTQ keeps every block's dequantized weights without checkpointing (memory) and dequantizes in PyTorch ops
    (time): both pages move with the base."""
    for page, label in (("memory", "Memory per device"), ("training", "Device-hours")):
        shown = {}
        for base in ("gptq-4bit", "nf4"):
            at = open_link(page, {**QLORA, "qbase": base, "gc": "false", "tokens": "0.2"})  # 200M tokens: device-hours in the tens
            no_exception(at)
            shown[base] = metric(at, label)
            if page == "training":  # the time's share says which dequantization it is
                said = " ".join(c.value for c in at.caption)
                assert ("dequantizing the GPTQ base in PyTorch ops in every forward pass" in said) is (base == "gptq-4bit")
        assert shown["gptq-4bit"] != shown["nf4"], (page, shown)


@pytest.mark.parametrize(
    "link",
    [
        {**QLORA, "stack": "torchtune"},  # a stack with only its own base: no choice
        {**QLORA, "method": "lora"},  # LoRA and serving use the Weight format input
        {"model": "llama-3.1-8b", "mode": "inference"},
    ],
)
def test_no_base_input_where_it_does_not_apply(link):
    at = open_link("memory", {**link, "qbase": "gptq-4bit"})
    no_exception(at)
    assert not [s for s in at.selectbox if s.label == "QLoRA base"]


def test_a_scenario_of_another_format_shows_as_nf4_and_messages_name_the_weight_format():
    """A QLoRA scenario from the CLI with the default weights_format (bf16) trains on NF4 (core): the input shows NF4
    and nothing is reported as unshowable; an error about weights_format names the Weight format input."""
    sc = Scenario(model="llama-3.1-8b", mode="training", method="qlora")
    values = scenario_values(sc)
    assert values["qbase"] == "nf4" and not unshowable(sc, values)
    gptq = Scenario(model="llama-3.1-8b", mode="training", method="qlora", weights_format="gptq-4bit")
    assert scenario_values(gptq)["qbase"] == "gptq-4bit"
    assert input_labels()["weights_format"] == fields()["fmt"].label


def test_the_compare_table_shows_the_base_only_where_it_applies():
    """The Compare page's settings table: a serving scenario's QLoRA base is a dash, not NF4."""
    for link, want in (({"model": "llama-3.1-8b", "mode": "inference"}, "—"), ({**QLORA, "qbase": "gptq-4bit"}, "GPTQ 4-bit checkpoint")):
        at = open_link("compare", link)
        next(b for b in at.button if b.label == "Save current scenario").click().run()
        no_exception(at)
        settings = at.dataframe[-1].value
        assert list(settings.loc["QLoRA base"]) == [want]


@pytest.mark.parametrize("bad", ["<b>x</b>", "=HYPERLINK(1)", "nan", "bf16"])
def test_a_hostile_base_in_a_link_is_one_escaped_warning_and_nf4(bad):
    at = open_link("memory", {**QLORA, "qbase": bad})
    no_exception(at)
    said = [w.value for w in at.warning if "qbase" in w.value or "QLoRA base" in w.value]
    assert len(said) == 1 and "<b>" not in said[0], said
    assert [s.value for s in at.selectbox if s.label == "QLoRA base"] == ["nf4"]
