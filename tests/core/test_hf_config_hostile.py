"""A config.json from a link, an upload or a paste is hostile until read: every
family's config with every field set to every kind of bad value gives an
Architecture or one ConfigError naming the field, never another exception,
and nothing it carries reaches a name, a type or an assumption as markup.

The grid is deterministic (every preset family x every field x every value,
tens of thousands of parses); hypothesis adds random multi-field mixes."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.catalog.presets import load_presets
from core.cli import main
from core.model.architecture import MAX_TOTAL_PARAMS
from core.model.hf_config import STRUCTURAL, ConfigError, parse_hf_config

# One real config per model family (the presets' own config.json copies), plus families with nested configs.
FAMILIES: dict[str, dict] = {}
for _p in load_presets().values():
    if _p.config is not None:
        FAMILIES.setdefault(str(_p.config.get("model_type")), _p.config)

PHISH = "![x](http://evil.example/pixel.png) [Claim your free H100 hours](http://evil.example/phish) <img src=x onerror=alert(1)>"
HOSTILE_VALUES = [
    None,
    True,
    False,
    0,
    -1,
    -(2**63),
    2**63,
    10**30,
    10**400,
    0.5,
    1.5,
    3.0,
    2000,
    10**6,
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    float("-inf"),
    "",
    "4096",
    "x" * 10_000,
    PHISH,
    "www.evil-phish.example/claim",
    [],
    [3],
    [0.1],
    [[[]]],
    ["sliding_attention"] * 5000,
    {},
    {"a": 1},
    {"hidden_size": 1e308},
]


def markup_free(text: str) -> bool:
    """No character that starts a Markdown link or image or an HTML tag, and no URL scheme. (A bare domain such as
    www.example.com can remain: pages escape every dot before Markdown sees it, app_pages/shared/text.py.)"""
    return not (set(text) & set("<>[]`")) and "://" not in text and "](" not in text


def fields_of(cfg: dict) -> list[str]:
    return sorted(set(cfg) | set(STRUCTURAL) | {"_name_or_path", "text_config", "layer_types", "no_rope_layers"})


def check(cfg: dict) -> None:
    """parse_hf_config(cfg) returns a sane Architecture or raises ConfigError; nothing hostile leaks into text."""
    text = json.dumps(cfg, allow_nan=True)
    try:
        arch = parse_hf_config(json.loads(text))
    except ConfigError as exc:
        msg = str(exc)
        assert msg and len(msg) < 600, msg
        assert markup_free(msg), msg
        return
    assert 1 <= arch.total_params <= MAX_TOTAL_PARAMS
    assert 0 < arch.active_params <= arch.total_params
    assert math.isfinite(float(arch.total_params))
    for text_out in (arch.name, arch.model_type, *arch.assumptions):
        assert markup_free(text_out), text_out


def test_the_families_are_covered():
    assert {"llama", "mistral", "mixtral", "qwen2", "gemma2", "deepseek_v3", "gpt2", "falcon", "phi3"} <= set(FAMILIES)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_field_of_every_family_with_every_hostile_value(family):
    base = FAMILIES[family]
    for field in fields_of(base):
        for value in HOSTILE_VALUES:
            check({**base, field: value})


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_nested_as_text_config(family):
    base = FAMILIES[family]
    for field in fields_of(base)[:20]:
        for value in HOSTILE_VALUES[::3]:
            check({"model_type": "llava", "text_config": {**base, field: value}, "vision_config": {field: value}})


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(HOSTILE_VALUES[:24]), st.text(max_size=12)
)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=6)


@settings(max_examples=1500, deadline=None)
@given(family=st.sampled_from(sorted(FAMILIES)), data=st.data())
def test_random_mixes_of_hostile_fields(family, data):
    base = FAMILIES[family]
    over = data.draw(st.dictionaries(st.sampled_from(fields_of(base)), json_values, min_size=1, max_size=4))
    check({**base, **over})


# --- the reproductions of issue #8, each failing before the reader was rewritten --------------------------------------

DSV3 = FAMILIES["deepseek_v3"]
LLAMA = FAMILIES["llama"]
NO_WIDTH = {k: v for k, v in LLAMA.items() if k != "intermediate_size"}


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        ({**DSV3, "n_shared_experts": float("inf")}, "n_shared_experts"),  # OverflowError from int(inf)
        ({**DSV3, "n_shared_experts": 1e400}, "n_shared_experts"),
        ({**DSV3, "first_k_dense_replace": [3]}, "first_k_dense_replace"),  # TypeError from int([3])
        ({**LLAMA, "attention_dropout": [0.1]}, "attention_dropout"),  # TypeError from float([0.1])
        ({**NO_WIDTH, "model_type": "brandnew", "hidden_size": 1e308}, "hidden_size"),  # OverflowError in the guessed width
    ],
)
def test_crash_links_of_issue_8_are_config_errors(cfg, field):
    with pytest.raises(ConfigError, match=field):
        parse_hf_config(json.loads(json.dumps(cfg)))


def test_a_config_too_big_for_a_table_is_refused():
    """hidden_size 1,000,000 x 2,000 layers overflowed int64 in st.dataframe on the GPU vs TPU page."""
    with pytest.raises(ConfigError, match="parameters"):
        parse_hf_config(
            {**LLAMA, "hidden_size": 1_000_000, "num_hidden_layers": 2000, "num_attention_heads": 1000, "num_key_value_heads": 1000, "intermediate_size": 1_000_000}
        )


def test_markup_in_a_config_never_reaches_the_assumptions():
    arch = parse_hf_config({**DSV3, "num_nextn_predict_layers": 1, "_name_or_path": "www.evil-phish.example/claim", "model_type": PHISH})
    assert all(markup_free(a) for a in arch.assumptions)
    with pytest.raises(ConfigError) as err:
        parse_hf_config({**DSV3, "num_nextn_predict_layers": PHISH})
    assert "http" not in str(err.value)


@pytest.mark.parametrize(
    "over",
    [
        {"n_shared_experts": float("inf")},
        {"first_k_dense_replace": [3]},
        {"hidden_size": 1e308, "model_type": "x"},
        {"n_routed_experts": 10**400},
        {"q_lora_rank": "big"},
    ],
)
def test_the_cli_exits_2_on_hostile_configs(over, capsys):
    path_text = json.dumps({"model": {"hf_config": {**DSV3, **over}}}, allow_nan=True)
    import io
    import sys

    old = sys.stdin
    sys.stdin = io.StringIO(path_text)
    try:
        code = main(["estimate", "-"])
    finally:
        sys.stdin = old
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
