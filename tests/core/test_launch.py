"""From plan to launch (issue #27, part 5): every generated command is held to the sourced flag table
(data/launch_flags.csv) and to the plan it runs.

- Every `--flag` / `-f`, config-file key, torchtune override and Python keyword the text sets is in the table for
  that engine or stack.
- Each table row that carries a plan field carries the plan's value (tensor parallel 4 -> --tensor-parallel-size 4),
  and each engine or stack carries the fields a run cannot do without (batch, accumulation, layout, nodes).
- Over the plans of several goals: fine-tune, pretrain and serve, for every training stack (data/stack_layouts.csv)
  and every serving engine (data/engine_hardware.csv).
- A hostile model name (`$(rm -rf /)`, quotes, newlines) comes out quoted: the shell parses it back to the same one
  word, and running the text under bash with every program stubbed out runs nothing else."""

from __future__ import annotations

import ast
import csv
import json
import re
import shlex
import shutil
import subprocess
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.catalog.accelerators import get_accelerator
from core.catalog.expert_parallel import load_expert_parallel, supports_expert_parallel
from core.catalog.presets import preset
from core.plan import Goal, plan
from core.plan.launch import GPTQ_PLACEHOLDER, HEREDOC_END, PLACEHOLDER_MODEL, launch_command
from core.plan.result import Plan

ROOT = Path(__file__).resolve().parents[2]
TABLE_CSV = ROOT / "data" / "launch_flags.csv"
PROGRAMS = {"export", "vllm", "python", "trtllm-serve", "llama-server", "transformers", "trl", "tune", "accelerate", "litgpt", "deepspeed", "torchrun", "cat"}
PROGRAMS |= {"mlx_lm.convert", "mlx_lm.server", "mlx_lm.lora", "axolotl"}
HOSTILE = ["$(rm -rf /)", "`rm -rf /`", "a'b\"c", "x\nrm -rf /\n", "; rm -rf / #", "LAUNCH_EOF", "x\nLAUNCH_EOF\nrm -rf /"]


@cache
def table() -> dict[str, dict[str, str]]:
    """engine or stack -> {flag or key: the plan field it carries ('' for none)}."""
    out: dict[str, dict[str, str]] = defaultdict(dict)
    with TABLE_CSV.open() as f:
        for row in csv.DictReader(f):
            out[row["engine_or_stack"]][row["name"]] = row["carries"]
    return dict(out)


def test_every_table_row_is_sourced_and_dated():
    with TABLE_CSV.open() as f:
        rows = list(csv.DictReader(f))
    assert rows
    for r in rows:
        assert r["kind"] in {"flag", "config_key", "override", "kwarg"}, r
        assert len(r["source"]) > 10 and ("http" in r["source"]), r
        assert re.fullmatch(r"\d{4}-\d{2}", r["as_of"]), r
        assert r["meaning"], r


def test_the_table_covers_every_engine_and_stack():
    with (ROOT / "data" / "engine_hardware.csv").open() as f:
        engines = {r["engine"] for r in csv.DictReader(f)}
    with (ROOT / "data" / "stack_layouts.csv").open() as f:
        stacks = {r["stack"] for r in csv.DictReader(f)}
    assert engines | stacks <= set(table())


# --- reading a generated text back --------------------------------------------------------------------------------


def parse(text: str) -> tuple[dict[str, str], list[list[str]]]:
    """The files its here-documents write, and its commands as the shell splits them (comments dropped)."""
    files: dict[str, str] = {}
    commands: list[list[str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.fullmatch(rf"cat > (\S+) <<'{HEREDOC_END}'", line)
        if m:
            end = lines.index(HEREDOC_END, i + 1)
            files[m[1]] = "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        if line.startswith("#") or not line.strip():
            i += 1
            continue
        joined = line
        while joined.endswith("\\"):
            i += 1
            joined = joined[:-1] + lines[i]
        commands.append(shlex.split(joined))
        i += 1
    return files, commands


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: data}


def settings(text: str) -> dict[str, Any]:
    """Every flag, config key, override and keyword the text sets, with its value (None for a bare flag)."""
    files, commands = parse(text)
    found: dict[str, Any] = {}
    for words in commands:
        assert words[0] in PROGRAMS, f"unexpected command {words[0]!r} in:\n{text}"
        for i, w in enumerate(words[1:], 1):
            if w.startswith("-") and not re.fullmatch(r"-?\d+(\.\d+)?", w):
                nxt = words[i + 1] if i + 1 < len(words) else None
                found[w] = None if nxt is None or nxt.startswith("--") else nxt
            elif re.fullmatch(r"[A-Za-z_][\w.]*=.*", w) and words[0] == "tune":
                key, _, value = w.partition("=")
                found[key] = value
        if words[:2] == ["python", "-c"]:
            found.update(_kwargs(words[2]))
    for name, body in files.items():
        if name.endswith(".json"):
            found.update(_flat(json.loads(body)))
        elif name.endswith(".yaml"):
            found.update(_flat(yaml.safe_load(body)))
        elif name.endswith(".py"):
            found.update(_kwargs(body))
        else:
            raise AssertionError(f"unexpected file {name}")
    return found


def _kwargs(source: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                out[kw.arg or "**"] = kw.value.value if isinstance(kw.value, ast.Constant) else ast.unparse(kw.value)
    return out


# --- what a plan's text must carry ----------------------------------------------------------------------------------

REQUIRED = {
    "vllm": {"tensor_parallel", "micro_batch", "seq_len", "kv_cache_format"},
    "sglang": {"tensor_parallel", "micro_batch", "seq_len", "kv_cache_format"},
    "tensorrt-llm": {"tensor_parallel", "micro_batch", "seq_len"},
    "llama.cpp": {"micro_batch", "context_tokens"},
    "hf-transformers": {"model"},
    "hf-transformers-compiled": {"model"},
    "deepspeed-mii": {"tensor_parallel", "data_parallel", "seq_len"},
    "mlx": {"model"},
    "mlx-lm": {"micro_batch", "gradient_accumulation_steps", "seq_len", "method"},
    "hf": {"micro_batch", "gradient_accumulation_steps", "seq_len", "processes", "instances", "precision"},
    "torchtune": {"micro_batch", "gradient_accumulation_steps", "seq_len", "precision"},
    "unsloth": {"micro_batch", "gradient_accumulation_steps", "seq_len", "precision"},
    "litgpt": {"micro_batch", "global_batch", "seq_len", "instances", "devices_per_instance", "precision"},
    "deepspeed": {"micro_batch", "gradient_accumulation_steps", "global_batch", "zero_stage", "instances", "devices_per_instance", "precision"},
    "megatron": {"tensor_parallel", "pipeline_parallel", "micro_batch", "global_batch", "seq_len", "instances", "devices_per_instance", "precision"},
    "hf-xla": {"micro_batch", "gradient_accumulation_steps", "seq_len", "precision"},
    "axolotl": {"model", "micro_batch", "gradient_accumulation_steps", "seq_len", "precision"},
}
for _stack in ("mlx-lm", "hf", "torchtune", "unsloth", "litgpt", "deepspeed", "megatron", "hf-xla", "axolotl"):
    REQUIRED[_stack] = REQUIRED[_stack] | {"optimizer"}  # the plans' AdamW is written, not left to the trainer's default
TENSOR_PARALLEL_STACKS = {"hf", "deepspeed", "megatron", "axolotl"}
SINGLE_MACHINE_STACKS = {"unsloth", "mlx-lm"}  # data/stack_layouts.csv: multi_node false


def expected(field: str, p: Plan) -> str | None:
    """The plan's value of a numeric field, as the command writes it; None where the field is not a number."""
    seq = int(p.scenario["seq_len"])
    per_node = -(-p.devices // p.instances)
    ep = p.method == "serve" and p.expert_parallel
    values = {
        # an expert-parallel vLLM replica runs attention data-parallel: TP 1, --data-parallel-size its GPUs
        "tensor_parallel": 1 if ep and p.scenario.get("serving_engine") == "vllm" else p.tensor_parallel,
        "expert_parallel_ranks": p.tensor_parallel,
        "pipeline_parallel": p.pipeline_parallel,
        "data_parallel": p.data_parallel,
        # a serving replica's engine cap: the most concurrent requests that meet the latency targets (core/plan/launch/)
        "micro_batch": _engine_batch(p, p.max_batch_meeting_targets if p.method == "serve" and p.max_batch_meeting_targets else p.micro_batch),
        "gradient_accumulation_steps": p.gradient_accumulation_steps,
        "global_batch": p.data_parallel * p.micro_batch * p.gradient_accumulation_steps,
        "processes": p.data_parallel * p.tensor_parallel * p.pipeline_parallel,
        "replica_devices": p.tensor_parallel * p.pipeline_parallel,
        "instances": p.instances,
        "devices_per_instance": per_node,
        "seq_len": seq,
        "context_tokens": (p.max_batch_meeting_targets if p.method == "serve" and p.max_batch_meeting_targets else p.micro_batch) * seq,
        "zero_stage": p.zero_stage,
    }
    return None if field not in values else str(values[field])


def _engine_batch(p: Plan, replica_batch: int) -> int:
    """vLLM's and TensorRT-LLM's cap per attention-data-parallel rank of an expert-parallel replica (core/plan/launch/)."""
    if p.method == "serve" and p.expert_parallel and p.scenario.get("serving_engine") in ("vllm", "tensorrt-llm"):
        return -(-replica_batch // p.tensor_parallel)
    return replica_batch


def check(p: Plan, text: str | None = None) -> None:
    text = p.launch if text is None else text
    assert text
    engine = p.scenario.get("serving_engine") if p.method == "serve" else p.scenario.get("training_stack")
    rows = table()[engine]
    found = settings(text)
    unknown = sorted(set(found) - set(rows))
    assert not unknown, f"{engine}: not in data/launch_flags.csv: {unknown}\n{text}"
    carried = set()
    for name, value in found.items():
        field = rows[name]
        if not field:
            continue
        carried.add(field)
        want = expected(field, p)
        if want is None or value is None or isinstance(value, bool):
            continue
        got = str(value)
        if name == "--tensor-split":
            got = str(len(got.split(",")))
        if name == "distributed_type":
            continue
        assert got == want, f"{engine}: {name} carries {field} = {want}, got {got}\n{text}"
    need = set(REQUIRED[engine])
    if p.method != "serve":
        if p.tensor_parallel > 1 and engine in TENSOR_PARALLEL_STACKS:
            need.add("tensor_parallel")
        if p.instances > 1:
            need.add("instances")
        if engine == "torchtune" and p.devices > 1:
            need |= {"instances", "devices_per_instance"}
        if p.zero_stage == 3 and engine == "hf-xla":
            need.add("zero_stage")
        if (p.method in ("lora", "qlora") and engine in ("hf", "hf-xla", "axolotl")) or (p.method == "qlora" and engine == "litgpt"):
            need.add("method")
        _check_precision(engine, p.precision, found, text)
    elif p.data_parallel > 1 and engine not in ("deepspeed-mii",):
        assert f"{p.data_parallel} replicas" in text, text
    if p.method == "serve" and p.expert_parallel:
        need.add("expert_parallel_ranks")  # the EP size; the bare EP, attention-DP flags are checked by name
        ep = load_expert_parallel()[engine]
        assert ep.expert_parallel_flag in found and ep.attention_data_parallel_flag in found, text
    missing = need - carried
    assert not missing, f"{engine}: the plan's {sorted(missing)} not carried\n{text}"
    if p.method != "serve" and p.pipeline_parallel > 1 and engine == "deepspeed":
        assert f"num_stages={p.pipeline_parallel}" in text


def _check_precision(engine: str, precision: str, found: dict[str, Any], text: str) -> None:
    bf16 = "bf16" in precision
    if engine == "deepspeed":
        assert found["bf16.enabled"] is bf16, text
    if engine in ("hf", "hf-xla") and precision in ("bf16", "fp16") and "--use_peft" not in found:
        assert found["--dtype"] == "float32", text  # mixed precision: fp32 weights under autocast, as the plan counts them
    if engine == "hf":
        assert ("--bf16" in found) is bf16 and found["mixed_precision"] == ("bf16" if bf16 else "fp16" if "fp16" in precision else "no"), text
    if engine == "axolotl":
        assert found.get("bf16") is bf16 and found.get("fp16", False) is (not bf16 and "fp16" in precision), text
    if engine == "megatron":
        assert ("--bf16" in found) is bf16 and ("--fp16" in found) is not bf16, text
    if engine == "litgpt":
        assert found["--precision"].startswith("bf16" if bf16 else "16" if "fp16" in precision else "32"), text


# --- the plans of several goals, for every stack and engine ---------------------------------------------------------


def _engines() -> list[str]:
    with (ROOT / "data" / "engine_hardware.csv").open() as f:
        return [r["engine"] for r in csv.DictReader(f)]


def _stacks() -> list[str]:
    with (ROOT / "data" / "stack_layouts.csv").open() as f:
        return [r["stack"] for r in csv.DictReader(f)]


TRAINING_GOALS = [
    {"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 2e7},
    {"goal": "fine-tune", "model": "llama-3.1-70b", "tokens": 2e7, "methods": ["full"]},
    {"goal": "fine-tune", "model": "llama-3.1-70b", "tokens": 2e7, "methods": ["qlora"]},
    {"goal": "pretrain", "model": "llama-3.1-70b", "tokens": 2e12},
]
SERVING_GOALS = [
    {"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 20_000},
    {"goal": "serve", "model": "llama-3.1-70b", "requests_per_day": 2_000_000},
    {"goal": "serve", "model": "llama-3.2-1b", "requests_per_day": 500, "tokens_per_s_per_user": 5, "ttft_s": 30},
    # a mixture of experts: its plans include expert-parallel ones on the engines that have it (data/expert_parallel.csv)
    {"goal": "serve", "model": "deepseek-r1", "requests_per_day": 2_000_000, "input_tokens": 1000, "output_tokens": 1000, "expert_parallel": True},
    # a model that ships quantized (gpt-oss: MXFP4 experts), served as it ships where the engine runs it (data/format_kernels.csv)
    {"goal": "serve", "model": "gpt-oss-20b", "requests_per_day": 20_000},
]


def _plans(spec: dict[str, Any]) -> list[Plan]:
    r = plan(Goal.model_validate(spec))
    picks = [p for p in (r.cheapest, r.fastest, r.cheaper_if_longer) if p is not None]
    return [*picks, *r.plans]


@pytest.mark.parametrize("stack", _stacks())
def test_every_training_plan_of_every_stack_passes_the_flag_table(stack):
    layouts: set[tuple[int, int, int, int, bool]] = set()
    for spec in TRAINING_GOALS:
        for p in _plans({**spec, "training_stack": stack}):
            check(p)
            layouts.add((p.tensor_parallel, p.pipeline_parallel, p.zero_stage, p.instances, p.method == "qlora"))
    assert any(inst > 1 for *_, inst, _q in layouts) or stack in SINGLE_MACHINE_STACKS, f"{stack}: no multi-node plan was checked"


@pytest.mark.parametrize("engine", _engines())
def test_every_serving_plan_of_every_engine_passes_the_flag_table(engine):
    seen = ep = 0
    for spec in SERVING_GOALS:
        for p in _plans({**spec, "serving_engine": engine}):
            check(p)
            seen += 1
            ep += p.expert_parallel
    assert seen
    assert bool(ep) == supports_expert_parallel(engine), f"{engine}: {ep} expert-parallel plans checked"


def test_the_cli_result_carries_the_launch_command():
    r = plan(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=2e7))
    dumped = r.model_dump(mode="json")
    assert r.cheapest is not None
    assert dumped["cheapest"]["launch"] == r.cheapest.launch
    assert all(p["launch"] for p in dumped["plans"])


def test_tensor_parallel_four_is_tensor_parallel_size_four():
    sc = {
        "model": "llama-3.1-70b",
        "mode": "inference",
        "weights_format": "fp8",
        "tensor_parallel": 4,
        "batch_size": 32,
        "seq_len": 4096,
        "serving_engine": "vllm",
        "accelerator": "h100-sxm",
    }
    words = parse(launch_command(sc))[1][0]
    assert words[:3] == ["vllm", "serve", preset("llama-3.1-70b").hf_repo]
    assert words[words.index("--tensor-parallel-size") + 1] == "4"
    assert words[words.index("--quantization") + 1] == "fp8"


@pytest.mark.parametrize(
    ("engine", "fmt", "holder", "first"),
    [
        ("vllm", "awq-4bit", "REPLACE_WITH_THE_AWQ_CHECKPOINT", ["vllm", "serve"]),
        ("vllm", "gptq-4bit", GPTQ_PLACEHOLDER, ["vllm", "serve"]),
        ("sglang", "awq-4bit", "REPLACE_WITH_THE_AWQ_CHECKPOINT", None),
        ("vllm", "bf16", None, ["vllm", "serve"]),
    ],
)
def test_awq_and_gptq_weights_are_served_from_their_checkpoint(engine, fmt, holder, first):
    """AWQ and GPTQ weights load only from a checkpoint quantized so: the command names a placeholder to replace (and
    the comment which repository it stands for) rather than the 16-bit repository, on which --quantization awq fails
    as copied (before: the 16-bit repo, with a comment above it)."""
    repo = preset("llama-3.1-8b").hf_repo
    sc = {"model": "llama-3.1-8b", "mode": "inference", "weights_format": fmt, "serving_engine": engine, "accelerator": "l40s", "batch_size": 8, "seq_len": 2048}
    text = launch_command(sc)
    found = settings(text)
    model = found.get("--model-path") if engine == "sglang" else parse(text)[1][0][2]
    if holder is None:
        assert model == repo and "REPLACE_WITH" not in text
        return
    assert model == holder, text
    kind = fmt.split("-")[0].upper()
    assert f"# replace {holder} with the {kind} 4-bit checkpoint of {repo}" in text
    if first:
        assert parse(text)[1][0][:2] == first
    # vLLM takes an explicit --quantization awq / gptq literally (its slow kernels, not Marlin): the checkpoint names
    # the method (the estimate helper's review of stop 48, M1); SGLang keeps its flag
    assert ("--quantization" in found) is (engine == "sglang"), text


@pytest.mark.parametrize(
    ("engine", "flag", "value"), [("vllm", "--kv-cache-dtype", "fp8"), ("sglang", "--kv-cache-dtype", "fp8_e4m3"), ("tensorrt-llm", "kv_cache_config.dtype", "fp8")]
)
def test_an_fp8_kv_cache_is_passed_on(engine, flag, value):
    sc = {
        "model": "llama-3.1-8b",
        "mode": "inference",
        "weights_format": "bf16",
        "kv_cache_format": "fp8",
        "tensor_parallel": 1,
        "batch_size": 8,
        "seq_len": 2048,
        "serving_engine": engine,
        "accelerator": "h100-sxm",
    }
    found = settings(launch_command(sc))
    assert set(found) <= set(table()[engine])
    assert found[flag] == value


def test_llama_cpp_slots_share_one_context_and_quantized_cache():
    sc = {
        "model": "llama-3.1-70b",
        "mode": "inference",
        "weights_format": "gguf-q4_k_m",
        "kv_cache_format": "q8_0",
        "tensor_parallel": 1,
        "batch_size": 5,
        "seq_len": 4096,
        "serving_engine": "llama.cpp",
        "accelerator": "m2-max-64gb",
    }
    found = settings(launch_command(sc))
    assert found["-np"] == "5" and found["-c"] == str(5 * 4096)
    assert found["--cache-type-k"] == found["--cache-type-v"] == "q8_0"
    assert found["-m"].endswith("Q4_K_M.gguf")


# --- hostile model names ----------------------------------------------------------------------------------------------


def _hostile_scenarios(name: str) -> list[dict[str, Any]]:
    config = {**(preset("llama-3.1-8b").config or {}), "_name_or_path": name}
    model = {"hf_config": config, "name": name[:120]}
    common = {"model": model, "accelerator": "h100-sxm", "seq_len": 2048}
    out = [{**common, "mode": "inference", "weights_format": "bf16", "tensor_parallel": 2, "batch_size": 16, "serving_engine": e} for e in _engines()]
    for stack in _stacks():
        for method, zero, tp, pp, dp in (("qlora", 0, 1, 1, 1), ("full", 3, 1, 1, 8), ("lora", 1, 2, 2, 2)):
            out.append(
                {
                    **common,
                    "mode": "training",
                    "method": method,
                    "precision": "bf16",
                    "zero_stage": zero,
                    "tensor_parallel": tp,
                    "pipeline_parallel": pp,
                    "data_parallel": dp,
                    "batch_size": 2,
                    "gradient_accumulation_steps": 4,
                    "gradient_checkpointing": True,
                    "training_stack": stack,
                }
            )
    return out


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_model_name_comes_out_as_one_quoted_word(name):
    for sc in _hostile_scenarios(name):
        text = launch_command(sc)
        files, commands = parse(text)  # a newline in the name must not start a line of its own
        assert all(c[0] in PROGRAMS for c in commands), text
        words = [_decoded(w) for c in commands for w in c]
        in_python = any(name in _kwargs(w).values() or f"{json.dumps(name)}" in w for w in words if "mii.serve" in w)
        in_files = any(json.dumps(name) in body for body in files.values())
        gguf = sc.get("serving_engine") == "llama.cpp"  # serves a GGUF file named in the text, not the repo
        assert gguf or name in words or in_python or in_files, f"the model name did not survive quoting:\n{text}"
        for body in files.values():
            assert HEREDOC_END not in [line.strip() for line in body.splitlines()]


def _decoded(word: str) -> str:
    """A word as bash reads it: shlex.split leaves bash's $'...' (used for text with control characters) as $ + body."""
    if word.startswith("$") and "\\" in word:
        return word[1:].encode().decode("unicode_escape")
    return word


def test_a_hostile_name_in_a_comment_stays_a_comment():
    sc = {
        "model": {"params": 8e9, "name": "x\nrm -rf /\n# y"},
        "mode": "inference",
        "weights_format": "bf16",
        "tensor_parallel": 1,
        "batch_size": 1,
        "seq_len": 512,
        "serving_engine": "vllm",
        "accelerator": "h100-sxm",
    }
    text = launch_command(sc)
    assert PLACEHOLDER_MODEL in text
    assert all(line.startswith(("#", "vllm", "  --")) for line in text.splitlines()), text


def test_a_hostile_provider_from_a_users_price_list_stays_a_comment():
    p = plan(Goal(goal="serve", model="llama-3.1-8b", requests_per_day=2000)).cheapest
    assert p is not None
    evil = p.model_copy(update={"provider": "evil\ntouch PWNED\n", "instance": "$(touch PWNED)"})
    assert evil.launch
    _, commands = parse(evil.launch)
    assert all(c[0] in PROGRAMS for c in commands)


STUB = """
set -e
record() { prog="$1"; shift; printf '%s\\0' "$@" >> "$prog.args"; }
for p in vllm python trtllm-serve llama-server transformers trl tune accelerate litgpt deepspeed torchrun mlx_lm.convert mlx_lm.server mlx_lm.lora axolotl; do
  eval "$p() { record $p \\"\\$@\\"; }"
done
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("name", ["$(touch PWNED1)", "`touch PWNED2`", "'; touch PWNED3; '", 'x"; touch PWNED4; "', "x\ntouch PWNED5\n"])
def test_running_the_text_with_stubbed_programs_runs_nothing_else(tmp_path, name):
    """bash runs each text with every program replaced by a function that records its arguments: no canary file
    appears, and the program receives the model name byte for byte."""
    for i, sc in enumerate(_hostile_scenarios(name)):
        d = tmp_path / str(i)
        d.mkdir()
        text = launch_command(sc)
        script = STUB + "\n" + text + "\n"
        done = subprocess.run(["bash", "-c", script], cwd=d, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr + text
        assert not list(d.glob("PWNED*")), f"the text ran an injected command:\n{text}"
        received = [a for f in d.glob("*.args") for a in f.read_text().split("\0")]
        written = [f.read_text() for f in d.iterdir() if f.suffix in (".py", ".yaml", ".json")]
        gguf = sc.get("serving_engine") == "llama.cpp"
        assert gguf or name in received or any(json.dumps(name) in a for a in received + written), text


def test_a_quiet_serving_plan_caps_the_engine_at_the_targets_not_at_the_average_load():
    """At 2,000 requests a day the fleet's average concurrency is 1, and the command said --max-num-seqs 1: every
    burst would queue behind one request. The cap is the most concurrent requests that still meet the latency targets,
    the figure the plan sizes its replicas against. On a part without bf16 (V100) a quantized checkpoint also says
    --dtype float16 (vLLM refuses bf16 before compute capability 8.0), and the plan's 16-bit KV cache reads fp16."""
    r = plan(Goal(goal="serve", model="llama-3.1-8b", requests_per_day=2000))
    p = r.cheapest
    assert p is not None and p.max_batch_meeting_targets > 1
    found = settings(p.launch)
    cap = found.get("--max-num-seqs") or found.get("--max-running-requests")
    assert cap is not None and int(cap) == p.max_batch_meeting_targets
    if not get_accelerator(p.accelerator).supports_bf16:
        assert "bf16" not in (p.weights_format, p.kv_cache_format)
        assert p.weights_format not in ("awq-4bit", "gptq-4bit", "fp8") or found.get("--dtype") == "float16"


def test_a_full_fine_tune_is_not_told_to_start_from_random_weights():
    """The fastest plan for "fine-tune a 70B model on 50M tokens" is a full fine-tune: its launch said "pretraining from
    scratch: start from the model's config (random weights)", which would throw the checkpoint away. Only a pretraining
    goal says so."""
    from core.plan import plan
    from core.plan.goal import Goal

    tune = plan(Goal.model_validate({"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 5e7, "methods": ["full"]}))
    assert tune.cheapest is not None and tune.cheapest.method == "full"
    assert "random weights" not in tune.cheapest.launch and "# Full fine-tune with" in tune.cheapest.launch
    pre = plan(Goal.model_validate({"goal": "pretrain", "model": "llama-3.2-1b", "tokens": 1e9}))
    assert pre.cheapest is not None and pre.cheapest.scenario["training_stack"] == "hf"
    assert "# Pretraining with" in pre.cheapest.launch
    # TRL loads a checkpoint: the pretraining launch builds the model from its config first and trains that (the plan
    # helper's review of stop 48, M3: it said "random weights" and passed the trained checkpoint)
    _, commands = parse(pre.cheapest.launch)
    assert ("python", "init_model.py") in [tuple(c[:2]) for c in commands]
    assert settings(pre.cheapest.launch)["--model_name_or_path"] == "./init"
    assert 'AutoConfig.from_pretrained("meta-llama/Llama-3.2-1B")' in pre.cheapest.launch and "from_config(config" in pre.cheapest.launch
    mega = plan(Goal.model_validate({"goal": "pretrain", "model": "llama-3.2-1b", "tokens": 1e9, "training_stack": "megatron"}))
    assert mega.cheapest is not None and "pretraining from scratch" in mega.cheapest.launch


def test_a_fused_cross_entropy_reaches_the_trainers_config():
    """A scenario with the fused cross-entropy (the memory it saves: tests/core/test_stacks.py) launches it: TRL's
    --use_liger_kernel, Axolotl's Cut Cross-Entropy plugin, a comment for a DeepSpeed script; every name in the flag
    table; without it, none of them."""
    base = {"model": "llama-3.1-8b", "mode": "training", "method": "lora", "accelerator": "h100-sxm", "precision": "bf16-true", "batch_size": 2}
    for fused in (True, False):
        hf = settings(launch_command({**base, "training_stack": "hf", "fused_cross_entropy": fused}))
        axolotl = settings(launch_command({**base, "training_stack": "axolotl", "fused_cross_entropy": fused}))
        deepspeed = launch_command({**base, "training_stack": "deepspeed", "fused_cross_entropy": fused})
        assert ("--use_liger_kernel" in hf) is fused and set(hf) <= set(table()["hf"])
        assert (axolotl.get("plugins") == ["axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"]) is fused
        assert set(axolotl) <= set(table()["axolotl"])
        assert ("apply_liger_kernel_to_llama" in deepspeed) is fused


def test_axolotl_configs_that_axolotl_accepts():
    """Review findings on Axolotl's config: tensor parallelism beside data parallelism shards with FSDP2 at any ZeRO
    stage (dp_shard_size needs an fsdp_config: a DeepSpeed json beside it is refused) and checkpointing stays on through
    fsdp_config; an fp32 run uses SDPA (FlashAttention-2 takes 16-bit inputs) and no Cut Cross-Entropy (16-bit only);
    a part without bf16 gets no full fine-tune (Axolotl's fp16 full fine-tune fails: data/stack_layouts part_problem)."""
    base = {"model": "llama-3.1-8b", "mode": "training", "accelerator": "h100-sxm", "training_stack": "axolotl", "batch_size": 2}
    tp = settings(launch_command({**base, "method": "lora", "zero_stage": 2, "tensor_parallel": 2, "data_parallel": 2, "gradient_checkpointing": True}))
    assert "deepspeed" not in tp and tp["fsdp_version"] == 2 and tp["fsdp_config.activation_checkpointing"] is True
    assert tp["tensor_parallel_size"] == 2 and tp["dp_shard_size"] == 2
    fp32 = settings(launch_command({**base, "method": "lora", "precision": "fp32", "fused_cross_entropy": True}))
    assert fp32["attn_implementation"] == "sdpa" and "plugins" not in fp32 and fp32["bf16"] is False
    from core.catalog.stack_layouts import part_problem

    v100 = get_accelerator("v100-32gb")
    assert part_problem(v100, "full", "axolotl") and not part_problem(v100, "lora", "axolotl") and not part_problem(v100, "full", "hf")
    assert "Axolotl cannot run this" in launch_command({**base, "accelerator": "v100-32gb", "method": "full", "precision": "fp16"})
    r = plan(Goal.model_validate({"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 2e7, "methods": ["full"], "training_stack": "axolotl"}))
    assert r.plans and all(get_accelerator(p.accelerator).supports_bf16 for p in r.plans)


def test_a_goal_with_a_fused_cross_entropy_plans_and_launches_it():
    """Goal.fused_cross_entropy (the Plan page passes the sidebar's): the plans are sized with the fused loss on a stack
    that takes it (never more memory, so at least as cheap), their scenario carries it to the launch text (TRL's
    --use_liger_kernel), and a plan's own scenario is sized with it."""
    from core.memory.estimate import estimate_memory
    from core.scenario import Scenario

    spec = {"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 2e7, "methods": ["full"]}
    plain, fused = (plan(Goal.model_validate({**spec, "fused_cross_entropy": f})) for f in (False, True))
    assert plain.cheapest is not None and fused.cheapest is not None
    assert fused.cheapest.cost <= plain.cheapest.cost
    assert fused.cheapest.scenario["fused_cross_entropy"] is True and "fused_cross_entropy" not in plain.cheapest.scenario
    assert "--use_liger_kernel" in settings(fused.cheapest.launch) and "--use_liger_kernel" not in settings(plain.cheapest.launch)
    sized = estimate_memory(Scenario.model_validate(fused.cheapest.scenario))
    assert sized.fits and sized.activation_parts is not None
    assert sized.activation_parts.logits == 0.25 * fused.cheapest.micro_batch * 2048 * 128_256  # the fused loss, 8B's vocabulary


def test_qlora_on_a_gptq_base_loads_the_gptq_checkpoint_not_bitsandbytes():
    """A QLoRA scenario on a GPTQ base (core/memory/components.qlora_base) launches LoRA on the GPTQ checkpoint: TRL
    without --load_in_4bit and with a note to point at the GPTQ repo; Axolotl with gptq: true and adapter lora (its
    schema refuses adapter qlora with gptq); every name in the flag table. On NF4, bitsandbytes as before; a stack
    without GPTQ (torchtune) trains on NF4 whatever the scenario's weights_format."""
    base = {"model": "llama-3.1-8b", "mode": "training", "method": "qlora", "accelerator": "a100-sxm-80gb", "batch_size": 2}
    for wf in ("gptq-4bit", "nf4"):
        gptq = wf == "gptq-4bit"
        hf_text = launch_command({**base, "training_stack": "hf", "weights_format": wf})
        hf = settings(hf_text)
        assert ("--load_in_4bit" in hf) is not gptq and "--use_peft" in hf and set(hf) <= set(table()["hf"])
        assert ("GPTQ 4-bit checkpoint" in hf_text) is gptq
        # the 16-bit checkpoint would train plain LoRA: a GPTQ run names a placeholder to replace, and says so
        assert (hf["--model_name_or_path"] == GPTQ_PLACEHOLDER) is gptq and (f"replace {GPTQ_PLACEHOLDER}" in hf_text) is gptq
        ax = settings(launch_command({**base, "training_stack": "axolotl", "weights_format": wf}))
        assert ax.get("gptq", False) is gptq and ax.get("load_in_4bit", False) is not gptq and set(ax) <= set(table()["axolotl"])
        assert ax["adapter"] == ("lora" if gptq else "qlora")
    torchtune = launch_command({**base, "training_stack": "torchtune", "weights_format": "gptq-4bit"})
    assert "GPTQ" not in torchtune and "qlora" in torchtune


# --- the scenario's optimizer -------------------------------------------------------------------------------------

OPTIMIZERS = ("adamw", "adamw-8bit", "sgd", "adafactor")
TRANSFORMERS_OPTIM = {"adamw_torch": "adamw", "adamw_bnb_8bit": "adamw-8bit", "adamw_torch_8bit": "adamw-8bit", "sgd": "sgd", "adafactor": "adafactor"}
TORCH_CLASS = {
    "torch.optim.AdamW": "adamw",
    "AdamW": "adamw",
    "bitsandbytes.optim.PagedAdamW8bit": "adamw-8bit",
    "bitsandbytes.optim.AdamW8bit": "adamw-8bit",
    "torchao.optim.AdamW8bit": "adamw-8bit",
    "torch.optim.SGD": "sgd",
    "SGD": "sgd",
    "torch.optim.Adafactor": "adafactor",
    "Adafactor": "adafactor",
}
STACK_PART = {"hf-xla": "tpu-v5e", "mlx-lm": "apple-m3-max"}  # else an H100


def optimizer_written(stack: str, found: dict[str, Any], text: str) -> tuple[str | None, float | None]:
    """The optimizer a launch text sets, read back with the trainer's own names (the scenario's name, or None for
    none), and the SGD momentum it sets (None for none)."""
    momentum: Any = None
    if stack in ("hf", "hf-xla", "unsloth", "axolotl"):
        name = found.get("optimizer" if stack == "axolotl" else "optim" if stack == "unsloth" else "--optim")
        args = found.get("optim_args" if stack == "unsloth" else "--optim_args")
        if args is not None:
            key, _, value = str(args).partition("=")
            momentum = value if key == "momentum" else None
        momentum = found.get("optim_args.momentum", momentum)
        return (None if name is None else TRANSFORMERS_OPTIM[name]), None if momentum is None else float(momentum)
    if stack == "torchtune":
        name = found.get("optimizer._component_")
        momentum = found.get("optimizer.momentum")
    elif stack == "litgpt":
        name = found.get("--optimizer")
        if name is not None and name.startswith("{"):
            spec = json.loads(name)
            name, momentum = spec["class_path"], spec["init_args"].get("momentum")
    elif stack == "deepspeed":
        name = found.get("optimizer.type")
        momentum = found.get("optimizer.params.momentum")
        if name is None and "optimizer=bitsandbytes.optim.AdamW8bit(model.parameters())" in text:
            name = "bitsandbytes.optim.AdamW8bit"  # a client optimizer, built in the script
    elif stack == "megatron":
        name = {"adam": "AdamW", "sgd": "SGD", None: None}[found.get("--optimizer")]
        momentum = found.get("--sgd-momentum")
    else:  # mlx-lm: --optimizer takes the scenario's names
        name = found.get("--optimizer")
        momentum = found.get("optimizer_config.sgd.momentum")
        return name, None if momentum is None else float(momentum)
    return (None if name is None else TORCH_CLASS[name]), None if momentum is None else float(momentum)


def _optimizer_scenario(stack: str, optimizer: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "llama-3.1-8b",
        "mode": "training",
        "method": "full",
        "precision": "bf16",
        "accelerator": STACK_PART.get(stack, "h100-sxm"),
        "batch_size": 1,
        "training_stack": stack,
        "optimizer": optimizer,
        **extra,
    }


def _stack_problem(sc: dict[str, Any]) -> str | None:
    from core.memory.estimate import estimate_memory
    from core.scenario import Scenario

    return estimate_memory(Scenario.model_validate(sc)).stack_problem


@pytest.mark.parametrize("stack", _stacks())
def test_every_stack_launches_the_optimizer_the_memory_counts(stack):
    """A scenario with 8-bit AdamW, SGD or Adafactor launched the trainer's default AdamW (or, for torchtune's
    single-device full configs, bitsandbytes' 8-bit one), so the run did not match the memory the app showed. Now each
    stack writes the scenario's optimizer in its own names (every one in data/launch_flags.csv), SGD with a momentum
    buffer as the memory counts; where the stack or part cannot run it, the estimate's stack_problem and the text say
    so, and the text sets no optimizer."""
    from core.catalog.stack_layouts import load_stack_layouts

    runs = load_stack_layouts()[stack].optimizers
    for optimizer in OPTIMIZERS:
        for extra in ({}, {"method": "lora"}, {"zero_stage": 3, "data_parallel": 4}):
            sc = _optimizer_scenario(stack, optimizer, **extra)
            if extra.get("zero_stage") == 3 and stack in ("mlx-lm", "megatron"):
                continue  # one device / no ZeRO-3: another problem than the optimizer's
            text = launch_command(sc)
            found = settings(text)
            assert set(found) <= set(table()[stack]), f"{stack}: not in data/launch_flags.csv: {sorted(set(found) - set(table()[stack]))}\n{text}"
            written, momentum = optimizer_written(stack, found, text)
            problem = _stack_problem(sc)
            if optimizer in runs:
                assert problem is None, f"{stack} {optimizer} {extra}: {problem}"
                assert written == optimizer, f"{stack} {optimizer} {extra}: wrote {written}\n{text}"
                assert (momentum is not None and momentum > 0) is (optimizer == "sgd"), text
                assert "cannot run this optimizer" not in text
            else:
                assert problem is not None and "no " in problem, f"{stack} {optimizer}: no stack_problem"
                assert f"# {stack} cannot run this optimizer: {problem}" in text, text
                assert written is None, text


def test_eight_bit_adamw_is_bitsandbytes_on_one_gpu_and_torchao_where_bitsandbytes_fails():
    """bitsandbytes' 8-bit AdamW fails under FSDP2 and tensor parallelism (Axolotl's validation refuses it there and
    names torchao's adamw_torch_8bit); torchtune takes bitsandbytes' in its single-device recipes only."""
    one = {"optimizer": "adamw-8bit"}
    sharded = {"optimizer": "adamw-8bit", "zero_stage": 3, "data_parallel": 4}
    tp = {"optimizer": "adamw-8bit", "tensor_parallel": 2}
    for stack, key in (("hf", "--optim"), ("axolotl", "optimizer"), ("unsloth", "optim")):
        assert settings(launch_command(_optimizer_scenario(stack, **one)))[key] == "adamw_bnb_8bit"
        assert settings(launch_command(_optimizer_scenario(stack, **sharded)))[key] == "adamw_torch_8bit"
    for stack, key in (("hf", "--optim"), ("axolotl", "optimizer")):
        assert settings(launch_command(_optimizer_scenario(stack, **tp)))[key] == "adamw_torch_8bit"
    assert settings(launch_command(_optimizer_scenario("torchtune", **one)))["optimizer._component_"] == "bitsandbytes.optim.PagedAdamW8bit"
    assert settings(launch_command(_optimizer_scenario("torchtune", **sharded)))["optimizer._component_"] == "torchao.optim.AdamW8bit"
    ds = settings(launch_command(_optimizer_scenario("deepspeed", **{**sharded, "zero_stage": 2})))
    assert "optimizer.type" not in ds and ds["zero_allow_untested_optimizer"] is True
    assert "zero_allow_untested_optimizer" not in settings(launch_command(_optimizer_scenario("deepspeed", "adamw", zero_stage=2, data_parallel=4)))


def test_an_optimizer_a_part_or_a_qlora_base_cannot_run_is_said_not_launched():
    """8-bit AdamW needs bitsandbytes' CUDA or ROCm kernels (not an Apple part, a TPU, Trainium or Gaudi); LitGPT's
    QLoRA builds bitsandbytes' PagedAdamW whatever is asked, so it trains a QLoRA base with AdamW only."""
    for stack, part in (("hf", "apple-m3-max"), ("hf", "gaudi3"), ("torchtune", "trainium2")):
        sc = _optimizer_scenario(stack, "adamw-8bit", accelerator=part)
        problem = _stack_problem(sc)
        assert problem and "bitsandbytes 8-bit" in problem, (stack, part, problem)
        text = launch_command(sc)
        assert f"cannot run this optimizer: {problem}" in text and optimizer_written(stack, settings(text), text)[0] is None
    assert _stack_problem(_optimizer_scenario("hf", "sgd", accelerator="apple-m3-max")) is None
    assert _stack_problem(_optimizer_scenario("mlx-lm", "adafactor")) is None  # MLX's own optimizers on an Apple part
    qlora = _optimizer_scenario("litgpt", "sgd", method="qlora")
    problem = _stack_problem(qlora)
    assert problem and "QLoRA" in problem and "cannot run this optimizer" in launch_command(qlora)
    assert _stack_problem(_optimizer_scenario("litgpt", "adamw", method="qlora")) is None
    assert "--optimizer" in settings(launch_command(_optimizer_scenario("litgpt", "adamw", method="qlora")))


def test_the_planners_plans_stay_adamw():
    """The planner plans AdamW only: its scenarios name no other optimizer and their texts write AdamW."""
    r = plan(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=2e7))
    assert r.plans
    for p in r.plans:
        assert p.scenario.get("optimizer", "adamw") == "adamw"
        stack = p.scenario["training_stack"]
        assert optimizer_written(stack, settings(p.launch), p.launch)[0] == "adamw", p.launch


# --- CPU offload and the fused optimizer step -----------------------------------------------------------------------

OFFLOAD_KEYS = {
    "hf": {"optimizer": ("deepspeed_config.offload_optimizer_device", "cpu"), "optimizer+params": ("fsdp_config.fsdp_offload_params", True)},
    "axolotl": {"optimizer": ("zero_optimization.offload_optimizer.device", "cpu"), "optimizer+params": ("fsdp_config.offload_params", True)},
    "deepspeed": {"optimizer": ("zero_optimization.offload_optimizer.device", "cpu"), "optimizer+params": ("zero_optimization.offload_param.device", "cpu")},
    "torchtune": {"optimizer": ("fsdp_cpu_offload", "True"), "optimizer+params": ("fsdp_cpu_offload", "True")},
    "megatron": {"optimizer": ("--optimizer-cpu-offload", None)},
}


@pytest.mark.parametrize("stack", sorted(OFFLOAD_KEYS))
def test_cpu_offload_reaches_the_config_and_nothing_offloads_without_it(stack):
    """A scenario's CPU offload (the memory it moves off the device: core/memory/components.py training_peak) is set in
    the stack's own key, every name in the flag table; without offload no key is set. Axolotl's ZeRO-2 writes its own
    DeepSpeed json: Axolotl's zero2.json offloads the optimizer, which a plan without offload does not count."""
    zero = {"optimizer": 2 if stack != "megatron" else 1, "optimizer+params": 3}
    base = {"model": "llama-3.1-8b", "mode": "training", "method": "full", "accelerator": "a100-sxm-80gb", "batch_size": 2, "data_parallel": 4, "training_stack": stack}
    for offload, (key, value) in OFFLOAD_KEYS[stack].items():
        on = settings(launch_command({**base, "zero_stage": zero[offload], "offload": offload}))
        off = settings(launch_command({**base, "zero_stage": zero[offload]}))
        assert on[key] == value and set(on) <= set(table()[stack]), (stack, offload, on)
        assert not any("offload" in k for k in off), (stack, offload, off)


def test_a_stack_without_offload_says_so_in_the_text_and_the_estimate():
    from core.memory.estimate import estimate_memory
    from core.scenario import Scenario

    sc = {"model": "llama-3.1-8b", "mode": "training", "method": "full", "accelerator": "a100-sxm-80gb", "data_parallel": 4, "zero_stage": 3, "offload": "optimizer"}
    text = launch_command({**sc, "training_stack": "litgpt"})
    assert "litgpt has no CPU offload" in text
    assert estimate_memory(Scenario.model_validate({**sc, "training_stack": "litgpt"})).stack_problem == "litgpt has no CPU offload"
    assert estimate_memory(Scenario.model_validate({**sc, "training_stack": "deepspeed"})).stack_problem is None
    params = {**sc, "zero_stage": 1, "offload": "optimizer", "training_stack": "megatron"}
    assert estimate_memory(Scenario.model_validate(params)).stack_problem is None
    fsdp = launch_command({**sc, "training_stack": "hf"})
    assert "FSDP's CPU offload moves the parameters with the optimizer states" in fsdp


@pytest.mark.parametrize(("accumulation", "fused"), [(1, "True"), (4, "False")])
def test_torchtunes_full_fine_tune_fuses_the_step_as_the_plan_counts(accumulation, fused):
    """torchtune's full fine-tune with one micro-batch a step is counted with the optimizer step fused into the backward
    pass (STACKS grads_freed_in_backward): the launch sets optimizer_in_bwd=True; with accumulation it must be False
    (the recipes refuse both together, and the single-device configs default to True)."""
    sc = {"model": "llama-3.1-8b", "mode": "training", "method": "full", "accelerator": "a100-sxm-80gb", "training_stack": "torchtune"}
    for devices in (1, 4):
        found = settings(launch_command({**sc, "gradient_accumulation_steps": accumulation, "data_parallel": devices, "zero_stage": 3 if devices > 1 else 0}))
        assert found["optimizer_in_bwd"] == fused
    assert "optimizer_in_bwd" not in settings(launch_command({**sc, "method": "lora"}))


def test_zero_on_one_gpu_runs_its_engine_as_the_estimate_counts_it():
    """A one-GPU Hugging Face scenario at ZeRO 1-2 is counted with DeepSpeed's 16-bit adapters (components.lora_fp32_inputs):
    its launch runs DeepSpeed (it ran without an engine until stop 39); at ZeRO 0 it runs plain."""
    sc = {"model": "llama-3.1-8b", "mode": "training", "method": "lora", "accelerator": "a100-sxm-80gb", "training_stack": "hf"}
    assert settings(launch_command({**sc, "zero_stage": 2}))["distributed_type"] == "DEEPSPEED"
    assert settings(launch_command({**sc, "zero_stage": 3}))["distributed_type"] == "FSDP"
    assert settings(launch_command(sc))["distributed_type"] == "NO"


@pytest.mark.parametrize(
    ("stack", "zero", "optimizer", "words"),
    [
        ("hf", 2, "sgd", "DeepSpeed's CPU Adam"),
        ("axolotl", 1, "adamw-8bit", "DeepSpeed's CPU Adam"),
        ("deepspeed", 2, "adamw-8bit", "refuses a client optimizer"),
        ("hf", 3, "adamw-8bit", "8-bit AdamW's GPU kernels"),
        ("megatron", 1, "sgd", "runs Adam"),
    ],
)
def test_offloaded_states_are_stepped_by_the_optimizer_the_engine_allows(stack, zero, optimizer, words):
    """With CPU offload the engine picks the optimizer: Accelerate swaps the trainer's for DeepSpeed's CPU Adam, DeepSpeed
    refuses a client optimizer, FSDP's offload steps CPU tensors (no 8-bit kernels), Megatron's offload runs Adam. The
    estimate says so in one line and so does the launch text; AdamW, and SGD on the DeepSpeed stack's own config, pass."""
    from core.memory.estimate import estimate_memory
    from core.scenario import Scenario

    sc = {"model": "llama-3.1-8b", "mode": "training", "method": "full", "accelerator": "a100-sxm-80gb", "data_parallel": 4, "zero_stage": zero}
    sc |= {"offload": "optimizer", "training_stack": stack, "optimizer": optimizer}
    problem = estimate_memory(Scenario.model_validate(sc)).stack_problem
    assert problem is not None and words in problem
    assert words in launch_command(sc)
    assert estimate_memory(Scenario.model_validate({**sc, "optimizer": "adamw"})).stack_problem is None
    if stack == "deepspeed":
        assert estimate_memory(Scenario.model_validate({**sc, "optimizer": "sgd"})).stack_problem is None


def test_torchtune_offload_on_one_gpu_runs_the_distributed_recipe():
    """torchtune offloads through FSDP (fsdp_cpu_offload) in its distributed recipes only: one GPU with offload runs
    full_finetune_distributed on one process, as the estimate counts the offload."""
    sc = {
        "model": "llama-3.1-8b",
        "mode": "training",
        "method": "full",
        "accelerator": "a100-sxm-80gb",
        "training_stack": "torchtune",
        "zero_stage": 3,
        "offload": "optimizer",
    }
    text = launch_command(sc)
    _, commands = parse(text)
    run = next(c for c in commands if c[:2] == ["tune", "run"])
    assert "full_finetune_distributed" in run and run[run.index("--nproc_per_node") + 1] == "1"
    assert settings(text)["fsdp_cpu_offload"] == "True"


@pytest.mark.parametrize(
    ("part", "weights", "kv", "kv_value", "quantization", "note"),
    [
        ("h100-sxm", "fp8", "fp8", "fp8", True, None),
        ("gaudi3", "bf16", "fp8", "fp8_inc", False, None),  # vllm-gaudi accepts only fp8_inc (platform.py)
        ("trainium2", "fp8", "fp8", "fp8", False, "ModelOpt static FP8 checkpoint"),  # the 2026 Neuron plugin refuses --quantization
        ("trainium", "fp8", "fp8", "auto", False, "override_neuron_config"),  # Trn1 / Inf2: NxD Inference's own config
    ],
)
def test_vllm_fp8_on_platform_plugins_uses_their_own_spelling(part, weights, kv, kv_value, quantization, note):
    sc = {"model": "llama-3.1-8b", "mode": "inference", "weights_format": weights, "kv_cache_format": kv, "accelerator": part, "serving_engine": "vllm"}
    text = launch_command(sc)
    found = settings(text)
    assert found["--kv-cache-dtype"] == kv_value, text
    assert ("--quantization" in found) is quantization, text
    assert note is None or any(line.startswith("#") and note in line for line in text.splitlines()), text


def test_gpt_oss_on_hopper_runs_tensorrt_llms_triton_moe_kernels():
    """TensorRT-LLM's gpt-oss guide: Hopper runs MXFP4 x BF16 in the TRITON MoE backend ("use the TRITON moe_backend on
    Hopper"), the published runs' setting; CUTLASS is the default, so the plan's config says it. Not on Blackwell."""
    r = plan(Goal.model_validate({"goal": "serve", "model": "gpt-oss-20b", "requests_per_day": 20_000, "serving_engine": "tensorrt-llm"}))
    hopper = [p for p in r.plans if p.accelerator.startswith(("h100", "h200", "gh200"))]
    assert hopper
    for p in hopper:
        check(p)
        assert 'moe_config:\n  backend: "TRITON"' in p.launch, p.launch
    b200 = launch_command({"model": "gpt-oss-20b", "mode": "inference", "weights_format": "mxfp4", "accelerator": "b200", "serving_engine": "tensorrt-llm"})
    assert "moe_config" not in b200


def test_the_pages_name_the_running_request_cap_in_each_engines_flag():
    """The Inference page's under-load charts mark the cap on running requests in the engine's own flag (the
    llama.cpp charts said max_num_seqs for its -np slots): each flag is the table's, carrying the plan's batch, and
    the launch writes it."""
    from core.speed.load import RUNNING_LIMIT_FLAG, running_limit_words

    for engine, flag in RUNNING_LIMIT_FLAG.items():
        assert table()[engine].get(flag) == "micro_batch", (engine, flag)
    assert running_limit_words("llama.cpp", 4) == "-np 4 slots"
    assert running_limit_words("vllm", 1024) == "--max-num-seqs 1,024"
    assert running_limit_words("hf-transformers", 8) == "at most 8 running"  # generate() batches what it gets


def test_a_catalog_region_that_reads_as_a_setting_is_said_in_words():
    """skypilot's catalogs name hyperbolic's only region "default": a price label read "(default)" like a setting."""
    from core.catalog.prices import load_prices, region_text
    from core.money.pricing import label

    row = next(r for r in load_prices() if r.provider == "hyperbolic" and r.region == "default")
    assert label(row).endswith("(the provider's default region)") and "(default)" not in label(row)
    assert region_text("us-east-1") == "us-east-1" and region_text("Earth") == "one global region"


DPO_STACKS = ("hf", "torchtune", "unsloth", "axolotl")  # data/stack_layouts.csv dpo_methods


@pytest.mark.parametrize("stack", _stacks())
def test_a_preference_tuning_goal_launches_its_trainers_dpo_or_is_refused(stack):
    """DPO (core/memory/objective.py): on a stack with a DPO trainer every plan of a DPO goal passes the flag table and
    runs that trainer (TRL's `trl dpo` or DPOTrainer, Axolotl's rl: dpo, torchtune's *_dpo_* recipes), with pairs in
    the batch's words and no packing; a goal on a stack without one plans nothing and says why in one line, and the
    parts whose own stack has none (PyTorch/XLA's TPUs) are left out in one line together."""
    for methods in (["full"], ["lora"]):
        r = plan(Goal.model_validate({"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 2e7, "objective": "dpo", "methods": methods, "training_stack": stack}))
        if stack not in DPO_STACKS:
            said = "has no DPO trainer; preference tuning runs on Hugging Face (TRL), torchtune, Unsloth and Axolotl"
            assert not r.plans and len(r.skipped) == 1 and r.skipped[0].endswith(said), r.skipped
            continue
        tpus = [s for s in r.skipped if "PyTorch/XLA" in s]
        assert len(tpus) == 1 and tpus[0].startswith("tpu-"), r.skipped
        assert r.plans, (stack, methods)
        for p in [r.cheapest, *r.plans[:4]]:
            assert p is not None and p.scenario["objective"] == "dpo" and p.scenario["training_stack"] in DPO_STACKS
            run_stack = p.scenario["training_stack"]
            check(p)
            text = p.launch
            assert "pairs, a chosen and a rejected sequence" in text and "prompt, chosen and rejected" in text
            assert {"hf": "trl dpo", "unsloth": "DPOTrainer(", "axolotl": 'rl: "dpo"', "torchtune": "_dpo_"}[run_stack] in text, text
            assert "--packing" not in text and "sample_packing: true" not in text and "SFTTrainer" not in text
            if run_stack == "torchtune" and p.method == "full":
                assert "full_dpo_distributed" in text and "ref_checkpointer.checkpoint_dir=./model" in text


def test_torchtune_has_no_qlora_dpo_and_says_so():
    r = plan(Goal.model_validate({"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 2e7, "objective": "dpo", "methods": ["qlora"], "training_stack": "torchtune"}))
    assert not r.plans
    assert any("torchtune has no DPO recipe for QLoRA (it runs DPO with a full fine-tune and LoRA)" in s for s in r.skipped), r.skipped


@pytest.mark.parametrize(
    ("stack", "method", "said"), [("megatron", "full", "Megatron-LM has no DPO trainer"), ("torchtune", "qlora", "torchtune has no DPO recipe for QLoRA")]
)
def test_a_dpo_setup_a_stack_cannot_run_gets_no_command(stack, method, said):
    """'Run this setup' on a DPO scenario its stack has no recipe for says why and writes no command (it wrote
    Megatron's pretrain_gpt.py as a DPO run, and a torchtune config that does not exist)."""
    from core.plan.launch import launch_command

    text = launch_command({"model": "llama-3.1-8b", "mode": "training", "method": method, "objective": "dpo", "training_stack": stack, "train_tokens": 1e8})
    assert f"no launch command: {said}" in text
    assert not [line for line in text.splitlines() if line and not line.startswith("#")], text


def test_a_full_dpo_scenario_reads_as_a_fine_tune_of_one_pair():
    from core.plan.launch import launch_command

    text = launch_command({"model": "llama-3.1-8b", "mode": "training", "method": "full", "objective": "dpo", "training_stack": "hf", "train_tokens": 1e8})
    assert "Full fine-tune by preference tuning (DPO)" in text and "(global batch 1 pair, a chosen" in text
    assert "to pretrain" not in text


def test_the_replicas_note_names_the_parts_own_devices():
    """The plan helper's review of stop 48 (L1): a TPU fleet's launch said "1 GPU(s) (CUDA_VISIBLE_DEVICES)"."""
    for acc, words in (("tpu-v5e", "each on its own 1 TPU chip, behind"), ("mi300x", "each on its own 1 GPU (HIP_VISIBLE_DEVICES), behind")):
        p = plan(Goal.model_validate({"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 2e6, "accelerators": [acc]})).cheapest
        assert p is not None and p.data_parallel > 1
        (line,) = [ln for ln in p.launch.splitlines() if "replicas: run this once per replica" in ln]
        assert words in line and "CUDA_VISIBLE_DEVICES" not in line, line


def test_fp8_weights_whose_16_bit_checkpoint_cannot_load_first_come_from_an_fp8_checkpoint():
    """vLLM's FP8 docs: "we load the model at original precision before quantizing down to 8-bits, so you need enough
    memory to load the whole model". The cheapest 405B serving plan (8 x H100 at TP 8, FP8) said `--quantization fp8`
    on the BF16 repo: 811 GB / 8 = 101 GB a GPU against the 0.9 x 85.5 GB vLLM takes (the plan helper's review of
    stop 48, M4). Now: an FP8 checkpoint's placeholder, no --quantization (the checkpoint names its method); an 8B
    (16 GB) still quantizes online; DeepSeek-V3 ships in FP8 and loads as it is."""
    from core.plan.launch.facts import FP8_PLACEHOLDER

    base = {"mode": "inference", "weights_format": "fp8", "accelerator": "h100-sxm", "serving_engine": "vllm", "seq_len": 2048}
    big = launch_command({**base, "model": "llama-3.1-405b", "tensor_parallel": 8})
    assert f"vllm serve {FP8_PLACEHOLDER}" in big and "--quantization" not in big and "101 GB a GPU" in big
    assert "--quantization fp8" in launch_command({**base, "model": "llama-3.1-8b", "tensor_parallel": 1})
    ds = launch_command({**base, "model": "deepseek-v3", "tensor_parallel": 8, "accelerator": "h200"})
    assert FP8_PLACEHOLDER not in ds and "deepseek-ai/DeepSeek-V3" in ds
    # the weights as loaded, by hand: the 405B's 16-bit weights over 8 GPUs against 90% of an H100's usable memory
    from core.catalog.accelerators import get_accelerator
    from core.model.formats import FORMATS, weight_bytes
    from core.scenario import Scenario

    need = weight_bytes(Scenario(model="llama-3.1-405b").architecture, FORMATS["bf16"]) / 8
    assert need / 1e9 == pytest.approx(101.4, abs=0.1) and need > 0.9 * get_accelerator("h100-sxm").usable_memory_bytes


def test_a_bare_multi_node_scenario_launches_on_its_nodes_with_sequence_parallelism():
    """The Training page's launch of a sidebar layout (no plan, so no instances): data parallel 4 x tensor parallel 8 x
    pipeline 4 on H100s wrote `torchrun --nnodes 1 --nproc_per_node 128`, and Accelerate's num_machines 1 (the
    estimate helper's review of stop 48, M2): 128 GPUs are 16 nodes of 8, as the speed model times them. Megatron's
    command turns on the sequence parallelism the memory counts under tensor parallelism (M4)."""
    layout = {"mode": "training", "method": "full", "accelerator": "h100-sxm", "data_parallel": 4, "tensor_parallel": 8, "pipeline_parallel": 4, "zero_stage": 1}
    mega = launch_command({"model": "llama-3.1-70b", "training_stack": "megatron", **layout})
    found = settings(mega)
    assert (found["--nnodes"], found["--nproc_per_node"]) == ("16", "8") and "--sequence-parallel" in mega.split()
    no_tp = {"model": "llama-3.1-70b", "training_stack": "megatron", **layout, "tensor_parallel": 1, "data_parallel": 32}
    assert "--sequence-parallel" not in launch_command(no_tp).split()
    full = {"mode": "training", "method": "full", "accelerator": "h100-sxm"}
    hf = launch_command({"model": "llama-3.1-8b", "training_stack": "hf", **full, "data_parallel": 32, "zero_stage": 3})
    assert settings(hf)["--num_machines"] == "4" and "num_machines: 4" in hf


LORA_SETTINGS = {  # where each stack's launch says the rank and the targets (data/launch_flags.csv)
    "hf": ("--lora_r", "--lora_target_modules"),
    "hf-xla": ("--lora_r", "--lora_target_modules"),
    "axolotl": ("lora_r", None),
    "unsloth": ("r", "target_modules"),
    "litgpt": ("--lora_r", "--lora_mlp"),
    "torchtune": ("model.lora_rank", "model.apply_lora_to_mlp"),
    "mlx-lm": ("lora_parameters.rank", "lora_parameters.keys"),
}


@pytest.mark.parametrize("stack", sorted(LORA_SETTINGS))
def test_every_stack_launches_the_scenarios_lora_rank_and_targets(stack):
    """The launch wrote rank 16 on every stack whatever the scenario's lora_rank, and LitGPT's and torchtune's defaults
    (query and value; q, v, output and the MLP) where the memory counts all the linear layers (the estimate helper's
    review of stop 48, M3). At rank 64 the launch says 64 (alpha 128 where the stack takes one), and the MLP is adapted
    only for all-linear."""
    acc = {"mlx-lm": "apple-m3-ultra-512gb", "hf-xla": "tpu-v5e"}.get(stack, "h100-sxm")
    rank_key, mlp_key = LORA_SETTINGS[stack]
    for targets in ("attention", "all-linear"):
        sc = {"model": "llama-3.1-8b", "mode": "training", "method": "lora", "training_stack": stack, "accelerator": acc}
        sc |= {"lora_rank": 64, "lora_targets": targets, "precision": "bf16-true"}
        found = settings(launch_command(sc))
        assert str(found[rank_key]) == "64", (stack, found)
        mlp = targets == "all-linear"
        if stack == "axolotl":
            assert ("lora_target_linear" in found) is mlp and ("lora_target_modules" in found) is not mlp
        elif stack in ("hf", "hf-xla"):
            assert (found[mlp_key] == "all-linear") is mlp and (mlp or found[mlp_key] == "q_proj k_proj v_proj o_proj")
        else:
            assert ("gate_proj" in str(found[mlp_key]) or str(found[mlp_key]).lower() == "true") is mlp, (stack, found[mlp_key])


def test_deepspeeds_adamw_trains_at_a_fine_tuning_rate_not_its_own_default():
    """DeepSpeed's AdamW block without params trains at its default lr of 1e-3 (the estimate helper's review of stop
    48, L7): the config now sets TRL's SFTConfig default, 2e-5, the rate the Hugging Face stacks' launches train at."""
    text = launch_command({"model": "llama-3.1-8b", "mode": "training", "method": "full", "training_stack": "deepspeed", "accelerator": "h100-sxm", "zero_stage": 2})
    assert settings(text)["optimizer.params.lr"] == 2e-5


@pytest.mark.parametrize(
    ("engine", "want"),
    [
        ("vllm", {"--pipeline-parallel-size": "2", "--max-num-seqs": "48", "--max-num-batched-tokens": "2048", "--gpu-memory-utilization": "0.8"}),
        ("sglang", {"--pp-size": "2", "--max-running-requests": "48", "--chunked-prefill-size": "2048", "--mem-fraction-static": "0.8"}),
        ("tensorrt-llm", {"--pp_size": "2", "--max_batch_size": "48", "--max_num_tokens": "2048"}),
    ],
)
def test_a_bare_serving_scenario_launches_with_its_own_scheduler_settings(engine, want):
    """The Inference page's command is the sidebar's scenario: its pipeline stages, its engine's cap on running
    requests (max_num_seqs), its tokens a step (max_num_batched_tokens, which the latency under load chunks prompts
    by) and its memory share, as the estimate counts them. Were dropped for the engine's defaults and 0.9 (stop 48's
    estimate review, L6); each flag is in data/launch_flags.csv."""
    sc = {"model": "llama-3.1-70b", "mode": "inference", "serving_engine": engine, "accelerator": "h100-sxm", "tensor_parallel": 2, "pipeline_parallel": 2}
    sc |= {"batch_size": 16, "max_num_seqs": 48, "max_num_batched_tokens": 2048, "gpu_memory_utilization": 0.8}
    found = settings(launch_command(sc))
    assert not set(found) - set(table()[engine]), sorted(set(found) - set(table()[engine]))
    assert {k: found.get(k) for k in want} == want
    # unset, the engine's own: its default share of memory (SGLang's 0.88, as the memory counts it) and no step flag
    unset = ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization")
    plain = settings(launch_command({k: v for k, v in sc.items() if k not in unset} | {"pipeline_parallel": 1}))
    assert not {"--pipeline-parallel-size", "--pp-size", "--pp_size", "--max-num-batched-tokens", "--chunked-prefill-size", "--max_num_tokens"} & set(plain)
    assert plain.get({"vllm": "--max-num-seqs", "sglang": "--max-running-requests", "tensorrt-llm": "--max_batch_size"}[engine]) == "16"
    if engine == "sglang":
        assert plain["--mem-fraction-static"] == "0.88"


def test_llama_cpp_launches_with_the_scenarios_gpu_layers():
    """-ngl is the scenario's n_gpu_layers where it keeps layers in system RAM (the memory and the speed count them
    there), all of them (999) otherwise."""
    sc = {"model": "llama-3.1-70b", "mode": "inference", "serving_engine": "llama.cpp", "accelerator": "rtx-4090", "weights_format": "gguf-q4_k_m"}
    assert settings(launch_command(sc | {"gpu_layers": 40}))["-ngl"] == "40"
    assert settings(launch_command(sc | {"gpu_layers": 0}))["-ngl"] == "0"
    assert settings(launch_command(sc))["-ngl"] == "999"


def test_tensorrt_llm_takes_a_prompt_past_its_default_step_budget():
    """With chunked prefill off (its default, as the latency under load times it) TensorRT-LLM refuses a prompt longer
    than max_num_tokens, 8,192 by default ("should not exceed max_num_tokens (8192)": NVIDIA/TensorRT-LLM #9277); a
    plan for 20,000-token prompts launched a server that would refuse every request (the stop-50 research note on
    NIM's 20,000/2,000 rows). The budget is raised to the sequence; a shorter one keeps the default; a scenario's own
    budget is written as set, with a warning where prompts would be refused."""
    goal = {"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 5000, "input_tokens": 20000, "output_tokens": 2000}
    goal = Goal.model_validate(goal | {"serving_engine": "tensorrt-llm"})
    result = plan(goal)
    assert result.cheapest is not None
    found = settings(result.cheapest.launch)
    assert found["--max_num_tokens"] == "22000" and found["--max_seq_len"] == "22000"
    check(result.cheapest)
    short = {"model": "llama-3.1-8b", "mode": "inference", "serving_engine": "tensorrt-llm", "accelerator": "h100-sxm", "seq_len": 4096}
    assert "--max_num_tokens" not in settings(launch_command(short))
    own = launch_command(short | {"seq_len": 16384, "max_num_batched_tokens": 4096})
    assert settings(own)["--max_num_tokens"] == "4096" and "refused unless chunked prefill is on" in own


@pytest.mark.parametrize("name", ["--trust-remote-code", "-rf", "  --help"])
def test_a_model_name_that_reads_as_an_option_is_never_an_argument(name):
    """Quoting keeps `--trust-remote-code` one word, but a program still reads it as an option: `vllm serve
    --trust-remote-code`, `trl sft ... --model_name_or_path --trust-remote-code` (stop 50's hosting review, LOW 7; a
    shared link's config can carry any _name_or_path). Every engine and stack writes the placeholder and says why."""
    for sc in _hostile_scenarios(name):
        text = launch_command(sc)
        _, commands = parse(text)
        words = [w.strip() for c in commands for w in c[1:]]
        assert name.strip() not in words, text
        assert PLACEHOLDER_MODEL in text and "starts with '-'" in text, text
