"""The scripting interface: python -m core ... (a contract)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from core.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(args, stdin=None):
    proc = subprocess.run([sys.executable, "-m", "core", *args], input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def test_estimate_one_scenario_from_stdin():
    code, out, err = run(["estimate", "-"], stdin=json.dumps({"model": "llama-3.1-8b", "seq_len": 8192}))
    assert code == 0, err
    res = json.loads(out)
    assert res["kv_cache_bytes_per_token"] == 131072
    assert res["memory_per_device_bytes"]["kv_cache"] == 2**30
    for key in ("params", "memory_per_device_bytes", "devices_needed", "fits", "assumptions"):
        assert key in res
    assert set(res["params"]) == {"total", "active", "trainable"}


def test_estimate_list_from_file(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps([{"model": {"params": 7.5e9}, "mode": "training"}, {"model": "gpt2"}]))
    assert main(["estimate", str(f)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 2 and out[0]["params"]["total"] == 7_500_000_000


def test_hf_config_scenario(capsys, tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000}
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": {"hf_config": cfg}}))
    assert main(["estimate", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["total"] == 6_738_415_616


@pytest.mark.parametrize("command", ["models", "accelerators", "prices"])
def test_catalog_listings_have_ids(command, capsys):
    assert main([command]) == 0
    items = json.loads(capsys.readouterr().out)
    assert items and all("id" in i or "instance_type" in i for i in items)


def test_models_and_accelerators_have_ids(capsys):
    main(["models"])
    assert all("id" in i for i in json.loads(capsys.readouterr().out))
    main(["accelerators"])
    assert all("id" in i for i in json.loads(capsys.readouterr().out))


def test_schema_is_the_scenario_model(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "model" in schema["properties"] and schema["required"] == ["model"]


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ('{"model": {"params": -5}}', "model"),
        ('{"model": "llama-9000"}', "unknown model preset"),
        ('{"model": "llama-3.1-8b", "accelerator": "h1000"}', "accelerator"),
        ('{"model": "llama-3.1-8b", "batch_size": 0}', "batch_size"),
        ('{"model": {"hf_config": {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 0, "num_attention_heads": 4, "vocab_size": 10}}}', "num_hidden_layers"),
        ("this is not json", "not valid JSON"),
        ("[]", "empty"),
        ("[1]", "JSON object"),
        ('{"model": "gpt2", "seq_len": "NaN"}', "seq_len"),
        ('{"model": "gpt2", "typo_field": 1}', "typo_field"),
        ("[" * 100000 + "]" * 100000, "nested"),
    ],
    ids=[
        "negative-params",
        "unknown-preset",
        "unknown-accelerator",
        "zero-batch",
        "zero-layer-config",
        "not-json",
        "empty-list",
        "non-object",
        "nan-string",
        "unknown-field",
        "deep-nesting",
    ],
)
def test_bad_input_exits_2_with_one_line(payload, needle):
    code, out, err = run(["estimate", "-"], stdin=payload)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_missing_file_exits_2():
    code, _, err = run(["estimate", "/nonexistent/x.json"])
    assert code == 2 and "cannot read" in err


def test_binary_file_exits_2(tmp_path):
    f = tmp_path / "b.json"
    f.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run(["estimate", str(f)])
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_a_step_budget_under_16_exits_2_with_one_line():
    """max_num_batched_tokens under the engine's least (16): refused by the scenario, exit 2, one line naming the field."""
    code, out, err = run(["estimate", "-"], stdin=json.dumps({"model": "llama-3.1-8b", "max_num_batched_tokens": 5}))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["error: max_num_batched_tokens: Input should be greater than or equal to 16"]
    code, out, err = run(["estimate", "-"], stdin=json.dumps({"model": "llama-3.1-8b", "max_num_batched_tokens": 16}))
    assert code == 0, err


def test_validation_message_names_the_field_as_the_reader_knows_it():
    """describe_validation_error(names=...): a page names its input (the label), the CLI the field; nested fields keep
    their path."""
    from pydantic import ValidationError

    from core.cli import describe_validation_error
    from core.scenario import Scenario

    with pytest.raises(ValidationError) as bad:
        Scenario(model="llama-3.1-8b", max_num_batched_tokens=5)
    assert describe_validation_error(bad.value) == "max_num_batched_tokens: Input should be greater than or equal to 16"
    named = describe_validation_error(bad.value, names={"max_num_batched_tokens": "Tokens per engine step"})
    assert named == "Tokens per engine step: Input should be greater than or equal to 16"


def test_results_carry_no_binary_rounding_noise(tmp_path, capsys):
    """A plan's bill came out as 401.50000000000006 and a price as 3942.0000000000005: the CLI writes floats to 12
    significant digits (core/cli.RESULT_DIGITS), ints and structure as they are."""
    from core.cli import _tidy

    assert _tidy({"a": [0.1 + 0.2, 3942.0000000000005], "b": 7, "c": "x"}) == {"a": [0.3, 3942.0], "b": 7, "c": "x"}
    f = tmp_path / "g.json"
    f.write_text(json.dumps({"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 20000}))
    assert main(["plan", str(f)]) == 0
    text = capsys.readouterr().out
    assert not re.search(r"\d\.\d*0000000000\d", text) and not re.search(r"\d\.\d*9999999999\d", text)
    assert json.loads(text)["cheapest"]["usd_per_month"] > 0


def test_a_reader_that_stops_early_gets_no_traceback():
    """`python -m core models | head`: the reader closes the pipe; the CLI stops with status 1 and writes no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "core", "models"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1 and b"Traceback" not in err, err


@pytest.mark.parametrize("epochs", ["1e-10", "0.09"])
def test_a_goal_of_under_a_thousand_tokens_in_all_exits_2_with_one_line(epochs):
    """The plan helper's review of stop 48 (M2): tokens 1e7 x epochs 1e-10 passed the goal's own bounds (each alone)
    and crashed in the scenario's (train_tokens >= 1) with a traceback and exit 1."""
    code, out, err = run(["plan", "-"], stdin=f'{{"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 1e4, "epochs": {epochs}}}')
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "at least 1,000" in lines[0] and "Traceback" not in err, err


def test_a_goal_nobody_can_meet_says_so_in_one_line(capsys, tmp_path):
    """The planner review of stop 48 (M1): a latency no hardware meets returned `plans: []` and 42 skipped lines to
    read, an impossible deadline a `cheapest` plan with within_bounds false, both silently. Now `verdict` says it
    (the Plan page's red line) and the CLI writes it to stderr; a goal that is met has none. Exit 0: the goal was a
    valid question and the answer is no."""
    f = tmp_path / "goals.json"
    f.write_text(
        json.dumps(
            [
                {"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 1e5, "ttft_s": 0.001, "tokens_per_s_per_user": 5000},
                {"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 1e7, "deadline_hours": 1e-6},
                {"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 1e7},
            ]
        )
    )
    assert main(["plan", str(f)]) == 0
    captured = capsys.readouterr()
    latency, deadline, met = json.loads(captured.out)
    assert latency["plans"] == [] and latency["verdict"].startswith("No plan fits: no batch meets 5000 tokens/s per user within 0.001 s")
    assert "(on " in latency["verdict"] and latency["verdict"].count("no batch meets") == 1  # one sentence, its parts listed
    assert deadline["cheapest"]["within_bounds"] is False and deadline["verdict"].startswith("No plan meets the deadline and budget")
    assert met["verdict"] is None and met["cheapest"]["within_bounds"] is True
    assert captured.err.splitlines() == ["goal 1: " + latency["verdict"], "goal 2: " + deadline["verdict"]]


def test_a_byte_order_mark_on_stdin_is_read_as_from_a_file():
    """A file is read as utf-8-sig; stdin refused the same text with a BOM (stop 50's hosting review, LOW)."""
    code, out, err = run(["estimate", "-"], stdin="\ufeff" + json.dumps({"model": "gpt2"}))
    assert code == 0 and json.loads(out)["params"]["total"] > 0, err


def test_a_serving_goal_takes_the_plan_pages_longest_prompt_and_bounds_the_sequence():
    """The Plan page takes prompts up to 2,000,000 tokens (its traffic is the Inference page's); the goal stopped at
    1,048,576 with a message naming input_tokens (stop 50's hosting review, LOW 8). Now one request's input and output
    together are bounded by a sequence's length, in one line."""
    code, out, err = run(["plan", "-"], stdin=json.dumps({"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 100, "input_tokens": 1_500_000}))
    assert code == 0 and json.loads(out)["verdict"].startswith("No plan fits: Llama 3.1 8B takes at most 131,072 tokens"), err
    goal = {"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 100, "input_tokens": 2_000_000, "output_tokens": 200_000}
    code, out, err = run(["plan", "-"], stdin=json.dumps(goal))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "more than a sequence's 2,097,152" in err, err
