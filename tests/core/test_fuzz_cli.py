"""Fuzzing `python -m core estimate FILE`: any input exits 0 (valid scenario) or
2 (invalid, one stderr line naming the problem), never with a traceback.

Most examples call `core.cli.main` in-process (fast); a few subprocess runs
check the real exit path (`python -m core`)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from core.catalog.presets import accelerator_ids, preset_ids
from core.cli import main
from core.model.formats import FORMATS

ROOT = Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

HOSTILE_STRINGS = [
    "",
    " ",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "Infinity",
    "-0",
    "0",
    "1e999",
    "-1e999",
    "1" * 400,
    "null",
    "true",
    "\x00",
    "\u202e",
    "ℌ",
    "𝟘𝟙",
    "١٢٣",
    "<script>alert(1)</script>",
    "'; DROP TABLE x; --",
    "../../etc/passwd",
    "llama-3.1-8b ",
    "LLAMA-3.1-8B",
    "h100-sxm\n",
    "x" * 10_000,
]
hostile_numbers = st.one_of(
    st.integers(),
    st.sampled_from([0, -1, -(2**63), 2**63, 2**64 + 1, 10**30, 10**300, 10**4000]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.0, 1e-320, 5e-324, 1e308, -1e308, 0.5, 1.5, 4096.0000001]),
)
hostile_scalars = st.one_of(st.none(), st.booleans(), hostile_numbers, st.sampled_from(HOSTILE_STRINGS), st.text(max_size=30))
json_values = st.recursive(hostile_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)

FIELDS = [
    "model",
    "mode",
    "weights_format",
    "method",
    "optimizer",
    "precision",
    "batch_size",
    "seq_len",
    "gradient_checkpointing",
    "flash_attention",
    "lora_rank",
    "lora_targets",
    "zero_stage",
    "offload",
    "data_parallel",
    "tensor_parallel",
    "pipeline_parallel",
    "kv_cache_format",
    "accelerator",
    "train_tokens",
    "mfu",
]
VALID = {
    "model": st.sampled_from(sorted(preset_ids())),
    "mode": st.sampled_from(["training", "inference"]),
    "weights_format": st.sampled_from(sorted(FORMATS)),
    "method": st.sampled_from(["full", "lora", "qlora"]),
    "optimizer": st.sampled_from(["adamw", "adamw-8bit", "sgd", "adafactor"]),
    "precision": st.sampled_from(["bf16", "fp16", "fp32"]),
    "batch_size": st.sampled_from([1, 8, 4096]),
    "seq_len": st.sampled_from([1, 4096, 2_097_152]),
    "gradient_checkpointing": st.booleans(),
    "flash_attention": st.booleans(),
    "lora_rank": st.sampled_from([1, 16, 4096]),
    "lora_targets": st.sampled_from(["attention", "all-linear"]),
    "zero_stage": st.integers(0, 3),
    "offload": st.sampled_from(["none", "optimizer", "optimizer+params"]),
    "data_parallel": st.sampled_from([1, 64, 100_000]),
    "tensor_parallel": st.sampled_from([1, 8, 512]),
    "pipeline_parallel": st.sampled_from([1, 4, 512]),
    "kv_cache_format": st.sampled_from(["bf16", "fp16", "fp8", "int8"]),
    "accelerator": st.sampled_from(sorted(accelerator_ids())),
    "train_tokens": st.sampled_from([1.0, 1e12, 1e16]),
    "mfu": st.sampled_from([1e-9, 0.4, 1.0]),
}
HF_BASE = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
}
HF_KEYS = [
    *HF_BASE,
    "head_dim",
    "tie_word_embeddings",
    "num_local_experts",
    "num_experts_per_tok",
    "n_routed_experts",
    "sliding_window",
    "text_config",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "n_embd",
    "n_layer",
    "n_head",
    "_name_or_path",
    "torch_dtype",
]
hf_configs = st.builds(
    lambda over: {**HF_BASE, **over},
    st.dictionaries(
        st.sampled_from(HF_KEYS),
        st.one_of(hostile_scalars, st.sampled_from(["llama", "mixtral", "deepseek_v3", "gpt2", "gemma2"]), st.sampled_from([1, 2, 64, 2000, 1_000_000, 100_000_000])),
        max_size=4,
    ),
)
models = st.one_of(
    VALID["model"],
    st.builds(lambda p: {"params": p}, st.one_of(hostile_numbers, st.sampled_from([1e6, 1e14, 7.5e9]))),
    st.builds(lambda c: {"hf_config": c}, hf_configs),
    st.builds(lambda c: {"hf_config": c, "name": "n" * 121}, hf_configs),
    json_values,
)


@st.composite
def scenario_dicts(draw):
    """A valid-looking scenario with one to four fields replaced by hostile values."""
    d = {k: draw(VALID[k]) for k in draw(st.lists(st.sampled_from(FIELDS), max_size=6, unique=True))}
    d["model"] = draw(models)
    for key in draw(st.lists(st.sampled_from([*FIELDS, "extra_field", "Model", ""]), max_size=4, unique=True)):
        d[key] = draw(json_values)
    return d


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def _not_json(name: str):
    raise AssertionError(f"the output has {name}, which is not JSON")


def check_contract(capsys, code: int) -> None:
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert code in (0, 2), (code, err[-2000:])
    if code == 0:
        assert err == "", err[-2000:]
        json.loads(out, parse_constant=_not_json)  # strict JSON: no NaN / Infinity for other tools to choke on
    else:
        assert out == ""
        assert err.startswith("error: ") and err.endswith("\n") and err.count("\n") == 1, repr(err[-2000:])
        assert len(err) < 2_000, f"error line is {len(err)} chars"


@FUZZ
@given(value=json_values)
@example(value=[])
@example(value=[[]])
@example(value={"model": "llama-3.1-8b", "seq_len": float("nan")})
def test_any_json_value(tmp_path, capsys, value):
    capsys.readouterr()
    code = main(["estimate", _write(tmp_path / "s.json", json.dumps(value))])
    event(f"exit {code}")
    check_contract(capsys, code)


@FUZZ
@given(d=scenario_dicts(), as_list=st.booleans())
def test_hostile_scenario_fields(tmp_path, capsys, d, as_list):
    capsys.readouterr()
    code = main(["estimate", _write(tmp_path / "s.json", json.dumps([d] if as_list else d))])
    event(f"exit {code}")
    check_contract(capsys, code)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=200), st.sampled_from(["{", "[" * 100_000, "{" * 50 + "}" * 50, "\ufeff{}", "NaN", '{"model": Infinity}'])))
def test_any_text(tmp_path, capsys, text):
    capsys.readouterr()
    code = main(["estimate", _write(tmp_path / "s.json", text)])
    event(f"exit {code}")
    check_contract(capsys, code)


extreme_but_valid = st.fixed_dictionaries(
    {
        "model": st.one_of(st.sampled_from(sorted(preset_ids())), st.builds(lambda p: {"params": p}, st.sampled_from([1e6, 1.0000001e6, 1e14]))),
        "mode": st.sampled_from(["training", "inference"]),
        "batch_size": st.sampled_from([1, 4096]),
        "seq_len": st.sampled_from([1, 2, 2_097_152]),
        "data_parallel": st.sampled_from([1, 100_000]),
        "tensor_parallel": st.sampled_from([1, 512]),
        "pipeline_parallel": st.sampled_from([1, 512]),
        "accelerator": st.sampled_from(sorted(accelerator_ids())),
        "train_tokens": st.sampled_from([None, 1.0, 1e16]),  # 1e-300: see test_denormal_mfu_or_tokens_give_strict_json
        "mfu": st.sampled_from([None, 1e-9, 0.4, 1.0]),  # 5e-324 / 1e-300: same
    }
).map(lambda d: {k: v for k, v in d.items() if v is not None})


@FUZZ
@given(d=extreme_but_valid)
def test_extreme_valid_scenarios_give_finite_numbers(tmp_path, capsys, d):
    capsys.readouterr()
    code = main(["estimate", _write(tmp_path / "s.json", json.dumps(d))])
    event(f"exit {code}")
    check_contract(capsys, code)


@pytest.mark.parametrize("extra", [{"mfu": 1e-300, "train_tokens": 1e16}, {"mfu": 5e-324, "train_tokens": 1e-300}])
def test_denormal_mfu_or_tokens_give_strict_json(tmp_path, capsys, extra):
    d = {"model": "deepseek-v3", "mode": "training", "accelerator": "a10", **extra}
    check_contract(capsys, main(["estimate", _write(tmp_path / "s.json", json.dumps(d))]))


HOSTILE_FILES = {
    "deep-array": "[" * 100_000 + "]" * 100_000,
    "deep-object": '{"a":' * 50_000 + "1" + "}" * 50_000,
    "long-int": '{"model": "llama-3.1-8b", "batch_size": ' + "1" * 5000 + "}",
    "nested-junk-in-config": json.dumps({"model": {"hf_config": {**HF_BASE, "junk": "@"}}}).replace('"@"', "[" * 600 + "]" * 600),
    "huge-architecture": json.dumps(
        {
            "model": {
                "hf_config": {
                    **HF_BASE,
                    "hidden_size": 1_000_000,
                    "intermediate_size": 10_000_000,
                    "num_hidden_layers": 2000,
                    "num_attention_heads": 100_000,
                    "num_key_value_heads": 100_000,
                    "vocab_size": 100_000_000,
                }
            },
            "mode": "training",
            "batch_size": 4096,
            "seq_len": 2_097_152,
            "flash_attention": False,
        }
    ),
    "huge-experts": json.dumps({"model": {"hf_config": {**HF_BASE, "model_type": "mixtral", "num_local_experts": 10**30, "num_experts_per_tok": 10**30}}}),
    "huge-positions": json.dumps({"model": {"hf_config": {**HF_BASE, "model_type": "gpt2", "n_positions": 10**30}}}),
    "nan-literal": '{"model": {"params": NaN}}',
    "bom": "\ufeff" + json.dumps({"model": "llama-3.1-8b"}),
    "empty-list": "[]",
    "big-file": json.dumps({"model": "llama-3.1-8b", "pad": "x" * 5_000_001}),
}


KNOWN_BUGS: dict[str, str] = {}  # name -> reason; add a strict xfail here when a new bug is found


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[n])) if n in KNOWN_BUGS else n for n in sorted(HOSTILE_FILES)])
def test_hostile_files_in_process(tmp_path, capsys, name):
    code = main(["estimate", _write(tmp_path / f"{name}.json", HOSTILE_FILES[name])])
    check_contract(capsys, code)


def test_unreadable_inputs(tmp_path, capsys):
    for args in (["estimate", str(tmp_path / "missing.json")], ["estimate", str(tmp_path)]):
        check_contract(capsys, main(args))
    (tmp_path / "latin1.json").write_bytes(b'{"model": "caf\xe9"}')
    check_contract(capsys, main(["estimate", str(tmp_path / "latin1.json")]))


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [
        (json.dumps({"model": "llama-3.1-8b", "seq_len": 8192}), 0),
        (json.dumps({"model": "llama-3.1-8b", "seq_len": "NaN"}), 2),
        ("[" * 100_000, 2),
        (json.dumps({"model": {"hf_config": {**HF_BASE, "hidden_size": 1e308}}}), 2),
        (json.dumps([{"model": "gpt-17"}]), 2),
        ("\x00\x01binary", 2),
    ],
)
def test_real_exit_path(stdin, expected):
    proc = subprocess.run([sys.executable, "-m", "core", "estimate", "-"], input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == expected, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    if expected == 2:
        assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    else:
        assert proc.stderr == ""
        assert math.isfinite(json.loads(proc.stdout)["memory_per_device_bytes"]["total"])
