"""Where engines run a format they need kernels for (data/format_kernels.csv: gpt-oss's MXFP4), and what the planner,
the estimate and the launch command make of it."""

from __future__ import annotations

import re

import pytest

from core.catalog.accelerators import get_accelerator, load_accelerators
from core.catalog.format_kernels import format_problem, kernels_problem, load_format_kernels, weights_problem
from core.catalog.presets import preset
from core.catalog.price_trust import billable_prices
from core.catalog.providers import can_serve
from core.memory.engines import ENGINES
from core.memory.estimate import estimate_memory
from core.model.formats import FORMATS
from core.plan import Goal, plan
from core.plan.launch import launch_command
from core.plan.serve import searched_formats, shipped_format
from core.scenario import HFConfig, Scenario
from tests.core.csv_rows import load_error


def test_every_row_names_a_format_engines_and_parts_of_the_catalogs():
    ids = [a.id for a in load_accelerators()]
    for r in load_format_kernels():
        assert r.weights_format in FORMATS
        assert set(r.engines.split()) <= set(ENGINES), r.engines
        assert any(re.search(r.accelerator_pattern, i) for i in ids), f"{r.accelerator_pattern} matches no part"
        assert r.runs != "kernel" or r.source.count(" ") > 5


# The documented facts (data/format_kernels.csv's sources), one per engine and generation.
@pytest.mark.parametrize(
    ("engine", "part", "runs", "fp8_kv"),
    [
        ("vllm", "v100-32gb", False, False),  # GptOssMxfp4Config.get_min_capability() = 80; vLLM issue #22288
        ("vllm", "t4", False, False),
        ("vllm", "a100-sxm-80gb", True, False),  # the recipe: Ampere by default with Marlin MXFP4 MoE
        ("vllm", "h100-sxm", True, True),  # vLLM's FP8 KV-cache post: gpt-oss-20b on H100 with --kv-cache-dtype fp8
        ("vllm", "b200", True, True),
        ("vllm", "mi300x", True, False),  # the recipe names MI300X / MI325X / MI355X
        ("vllm", "rx-7900-xtx", False, False),  # RDNA3: no MXFP4 kernel (an emulation PR is open)
        ("sglang", "v100-32gb", False, False),
        ("sglang", "h200", True, False),  # no FP8 KV cache for gpt-oss on Hopper (SGLang #9782; PR #9783 Blackwell only)
        ("sglang", "b200", True, True),
        ("tensorrt-llm", "h200", True, False),  # its gpt-oss README's KV table: Hopper bf16 yes, fp8 no
        ("tensorrt-llm", "b200", True, True),
        ("tensorrt-llm", "a100-sxm-80gb", False, False),  # its gpt-oss guides name Hopper and Blackwell only
        ("llama.cpp", "v100-32gb", True, False),  # GGML's MXFP4 type on CUDA, Metal, Vulkan, CPU (PR #15091)
        ("llama.cpp", "apple-m2-max", True, False),
        ("hf-transformers", "t4", True, False),  # Transformers' MXFP4 kernels from compute capability 7.5
        ("mlx", "apple-m2-max", True, False),
        ("deepspeed-mii", "h100-sxm", False, False),  # MII loads 16-bit weights only (data/engine_formats.csv)
    ],
)
def test_where_each_engine_runs_mxfp4(engine, part, runs, fp8_kv):
    """Whether its MXFP4 weights run, and whether gpt-oss's attention sinks keep an FP8 cache there
    (data/kv_cache_kernels.csv: the cache is the attention's, whatever the weights)."""
    acc = get_accelerator(part)
    assert (weights_problem("mxfp4", engine, acc) is None) is runs
    arch = preset("gpt-oss-20b").architecture
    assert (kernels_problem("mxfp4", "fp8", engine, acc, arch=arch) is None) is fp8_kv


def test_transformers_dequantizes_mxfp4_where_it_has_no_kernels():
    problem = format_problem("mxfp4", "hf-transformers", get_accelerator("v100-32gb"))
    assert problem is not None and "dequantizes MXFP4 to BF16" in problem


def test_formats_the_table_does_not_list_are_not_restricted():
    for part in ("v100-32gb", "h200", "apple-m2-max"):
        acc = get_accelerator(part)
        assert format_problem("bf16", "tensorrt-llm", acc) is None
    assert format_problem("mxfp4", "vllm", get_accelerator("groq-lpu")) is None  # its own stack: not checked


GPT_OSS_CONFIG = {
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_hidden_layers": 24,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "vocab_size": 201088,
    "num_local_experts": 32,
    "num_experts_per_tok": 4,
    "max_position_embeddings": 131072,
    "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]},
}


def test_the_planner_serves_a_model_in_the_format_it_ships():
    assert shipped_format("gpt-oss-120b") == "mxfp4"
    assert shipped_format("llama-3.1-8b") is None  # bf16: the engine's formats
    assert shipped_format("deepseek-v3") is None  # fp8: AWQ and GPTQ copies of it are searched as before
    assert shipped_format(HFConfig(hf_config=GPT_OSS_CONFIG)) == "mxfp4"  # a pasted config says it too
    for hostile in ([1, 2], {"quant_method": ["mxfp4"]}, {"quant_method": "<b>mxfp4</b>"}, "mxfp4", {"quant_method": "gguf-q2_k"}, {"quant_method": "fp8"}):
        assert shipped_format(HFConfig(hf_config={**GPT_OSS_CONFIG, "quantization_config": hostile})) is None
    goal = Goal.model_validate({"goal": "serve", "model": "gpt-oss-20b", "requests_per_day": 20_000})
    assert searched_formats(goal) == ("mxfp4",)
    assert searched_formats(goal.model_copy(update={"model": "llama-3.1-8b"})) == ("bf16", "fp8", "awq-4bit", "gptq-4bit")


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tensorrt-llm", "llama.cpp"])
def test_every_gpt_oss_plan_runs_mxfp4_where_the_engine_has_kernels_for_it(engine):
    r = plan(Goal.model_validate({"goal": "serve", "model": "gpt-oss-120b", "requests_per_day": 100_000, "serving_engine": engine}))
    assert r.plans
    for p in r.plans:
        acc = get_accelerator(p.accelerator)
        assert p.weights_format == "mxfp4"
        assert format_problem("mxfp4", engine, acc) is None, p.accelerator
        assert kernels_problem("mxfp4", p.kv_cache_format, engine, acc, arch=preset("gpt-oss-120b").architecture) is None, p.accelerator
    if engine == "tensorrt-llm":  # Hopper and Blackwell only; Hopper's KV cache in BF16
        assert {p.accelerator for p in r.plans} <= {"h100-sxm", "h100-pcie", "h100-nvl", "h200", "h200-nvl", "gh200", "h20", "b200", "gb200", "b300", "gb300"}
        assert all(p.kv_cache_format == "bf16" for p in r.plans if p.accelerator.startswith("h"))
    if engine == "vllm":  # the T4 (compute capability 7.5): vLLM runs there, its MXFP4 kernels do not; skipped with the reason
        assert any(s.startswith("t4: ") and "MXFP4" in s and "compute capability 8.0" in s for s in r.skipped)


def test_before_this_table_gpt_oss_was_planned_in_formats_it_does_not_ship_in():
    # The failure this guards against, as a check that can fail: the cheapest plan for gpt-oss-20b was a GPTQ copy
    # on a V100, where vLLM does not run gpt-oss at all.
    r = plan(Goal.model_validate({"goal": "serve", "model": "gpt-oss-20b", "requests_per_day": 20_000}))
    assert r.cheapest is not None and r.cheapest.weights_format == "mxfp4"
    assert not r.cheapest.accelerator.startswith(("v100", "t4", "quadro-rtx"))


def test_the_estimate_says_where_the_engine_cannot_run_the_format_or_its_fp8_cache():
    def problem(**kw):
        return estimate_memory(Scenario.model_validate({"model": "gpt-oss-20b", "mode": "inference", "weights_format": "mxfp4", **kw})).stack_problem

    said = problem(accelerator="t4", kv_cache_format="fp16")
    assert said is not None and "vLLM does not run MXFP4 on NVIDIA T4" in said and "compute capability 8.0" in said
    said = problem(accelerator="h200", serving_engine="tensorrt-llm", kv_cache_format="fp8")
    assert said is not None and said.startswith("TensorRT-LLM has no FP8 KV cache on NVIDIA H200") and "gpt-oss" in said
    assert problem(accelerator="h200", serving_engine="tensorrt-llm", kv_cache_format="bf16") is None
    # the cache is the attention's: gpt-oss's sinks have none there in 16-bit weights either
    assert problem(accelerator="h200", serving_engine="tensorrt-llm", kv_cache_format="fp8", weights_format="bf16") == said
    assert problem(accelerator="b200", serving_engine="tensorrt-llm", kv_cache_format="fp8") is None
    said = problem(accelerator="v100-32gb", serving_engine="hf-transformers", kv_cache_format="fp16")
    assert said is not None and "dequantizes MXFP4 to BF16" in said


def test_launch_commands_load_the_shipped_mxfp4_checkpoint():
    r = plan(Goal.model_validate({"goal": "serve", "model": "gpt-oss-20b", "requests_per_day": 2_000, "serving_engine": "llama.cpp"}))
    assert r.cheapest is not None and "-m model-MXFP4.gguf" in r.cheapest.launch
    vllm = plan(Goal.model_validate({"goal": "serve", "model": "gpt-oss-20b", "requests_per_day": 2_000})).cheapest
    assert vllm is not None and "--quantization" not in vllm.launch and "--dtype auto" in vllm.launch  # vLLM reads quant_method


def test_mlx_serves_the_shipped_mxfp4_checkpoint_without_converting_it():
    sc = {"model": "gpt-oss-20b", "mode": "inference", "weights_format": "mxfp4", "serving_engine": "mlx", "accelerator": "apple-m2-max"}
    text = launch_command(sc)
    assert "mlx_lm.convert" not in text and "mlx_lm.server \\\n  --model openai/gpt-oss-20b" in text
    check_text = launch_command({**sc, "weights_format": "mlx-q4", "model": "llama-3.1-8b"})
    assert "mlx_lm.convert" in check_text  # other formats are converted to MLX's layout first, as before


@pytest.mark.parametrize(
    ("engine", "refused", "runs"),
    [
        ("vllm", ("k80", "m60", "v100-16gb"), ("t4", "a100-sxm-80gb", "mi250x")),  # compute capability 7.5 since 2026-04's wheels
        ("sglang", ("v100-16gb", "t4", "mi250x"), ("a100-sxm-80gb", "mi300x")),  # sgl-kernel is built for sm_80 and up
        ("tensorrt-llm", ("t4", "v100-16gb"), ("a10g", "l4")),  # its support matrix: Ampere and newer
        ("deepspeed-mii", ("t4",), ("a100-sxm-80gb",)),
        ("mlx", ("v100-16gb",), ("t4", "apple-m2-max")),  # MLX's CUDA backend: SM 7.5 and up
        ("llama.cpp", ("k80",), ("m60", "v100-16gb", "t4")),  # CUDA 12 builds start at compute capability 5.0
    ],
)
def test_an_engine_refuses_generations_below_its_floor_and_the_planner_says_why(engine, refused, runs):
    from core.catalog.engine_hardware import engine_problem

    for part in refused:
        problem = engine_problem(engine, get_accelerator(part))
        assert problem is not None and "\n" not in problem and problem.startswith(f"{engine} does not run on"), (part, problem)
        with pytest.raises(ValueError, match=f"{re.escape(engine)} does not run on"):
            Scenario.model_validate({"model": "llama-3.1-8b", "mode": "inference", "serving_engine": engine, "accelerator": part})
    for part in runs:
        assert engine_problem(engine, get_accelerator(part)) is None, part
    r = plan(Goal.model_validate({"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 20_000, "serving_engine": engine}))
    assert not {p.accelerator for p in r.plans} & set(refused)
    # every refused part the price list rents to serving endpoints is listed as skipped, with its reason
    priced = {row.accelerator_id for row in billable_prices(None) if can_serve(row.provider)}
    assert set(refused) & priced, f"{engine}: none of {refused} is priced, so nothing here is checked"
    for part in set(refused) & priced:
        assert any(s.startswith(f"{part}: {engine} does not run on") for s in r.skipped), part


# (module, file, the module's path attribute, its loader, the columns before source and as_of, the sourced columns after
# them: each filled with a valid source)
KERNELS_TABLE = ("format_kernels", "format_kernels.csv", "FORMAT_KERNELS_CSV", "load_format_kernels", "weights_format,engines,accelerator_pattern,runs", ())
FORMATS_TABLE = (
    "engine_formats",
    "engine_formats.csv",
    "ENGINE_FORMATS_CSV",
    "load_engine_formats",
    "engine,weights_formats,searched_formats,kv_cache_formats",
    ("kv_cache_source",),
)
KV_COLUMNS = "kv_cache_format,engines,accelerator_pattern,runs,attention,head_dims"
KV_TABLE = ("kv_cache_kernels", "kv_cache_kernels.csv", "KV_CACHE_KERNELS_CSV", "load_kv_cache_kernels", KV_COLUMNS, ())


@pytest.mark.parametrize(
    ("table", "cells", "problem"),
    [
        (KERNELS_TABLE, "mxfp4,vllm,^(h100,kernel", "not a regular expression"),  # a pattern that does not compile
        (KERNELS_TABLE, "mxfp4,vLLM Engine,.,kernel", "engine ids"),
        (KERNELS_TABLE, "mxfp4,vllm,.,fast", "runs"),
        (FORMATS_TABLE, "vllm,bf16 fp9,bf16,bf16", "unknown: fp9"),  # not a format of core/model/formats.py
        (FORMATS_TABLE, "vllm,bf16 fp8,bf16 awq-4bit,bf16", "not among weights_formats"),  # the planner would try what the engine cannot load
        (FORMATS_TABLE, "vllm,,bf16,bf16", "weights_formats"),
        (FORMATS_TABLE, "vllm,bf16,bf16,bf16 fp4", "unknown: fp4"),  # not a KV-cache format of core/model/formats.py
        (KV_TABLE, "fp4,vllm,.,kernel,any,", "KV-cache format"),
        (KV_TABLE, "fp8,vllm,.,dequantized,any,", "runs"),  # a cache is stored in its format or refused
        (KV_TABLE, "fp8,vllm,^(a100,kernel,any,", "not a regular expression"),
        (KV_TABLE, "fp8,vllm,.,kernel,plain,64 big", "head_dims"),  # head sizes are whole numbers
        (KV_TABLE, "fp8,vllm,.,kernel,gqa,", "attention"),
        (KV_TABLE, "fp8,vllm,.,maybe,any,", "runs"),  # not a yes or no
    ],
)
def test_a_broken_row_is_refused_naming_the_file_and_field(tmp_path, monkeypatch, table, cells, problem):
    import importlib

    module, name, path_attr, loader, columns, sourced = table
    bad = tmp_path / name
    source = "a source of ten words or so"
    header = ",".join([columns, "source", "as_of", *sourced])
    bad.write_text(f"{header}\n{cells},{source},2026-11-27{''.join(f',{source}' for _ in sourced)}\n")
    said = str(load_error(monkeypatch, importlib.import_module(f"core.catalog.{module}"), path_attr, loader, bad))
    assert name in said and problem in said, said


def test_an_engine_floor_needs_its_reason_and_source(tmp_path, monkeypatch):
    import core.catalog.engine_hardware as eh

    bad = tmp_path / "engine_hardware.csv"
    bad.write_text("engine,vendors,as_of,source,refused_pattern\nvllm,nvidia,2026-11,a source of ten words or so,^v100-\n")
    said = str(load_error(monkeypatch, eh, "ENGINE_HARDWARE_CSV", "load_engine_hardware", bad))
    assert "refused_why and refused_source" in said, said


def test_deepspeed_mii_serves_16_bit_weights_only():
    """MII's only quantization is FP6 weights (mii/config.py: quantization_mode 'wf6af16'): it loads no AWQ, GPTQ or FP8
    checkpoint. Its plans put 4-bit AWQ on an RTX A4000 before this row; now they are 16-bit, and the estimate says so
    where the sidebar asks it for a quantized format. Other engines keep those formats (the pair is MII's only)."""
    r = plan(Goal.model_validate({"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 20_000, "serving_engine": "deepspeed-mii"}))
    assert r.plans and {p.weights_format for p in r.plans} <= {"bf16", "fp16"}
    sc = Scenario.model_validate({"model": "llama-3.1-8b", "mode": "inference", "weights_format": "awq-4bit", "serving_engine": "deepspeed-mii"})
    said = estimate_memory(sc).stack_problem
    assert said is not None and said.startswith("DeepSpeed-MII") and "wf6af16" in said, said
    assert format_problem("awq-4bit", "vllm", get_accelerator("h100-sxm")) is None
    vllm = plan(Goal.model_validate({"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 20_000}))
    assert any(p.weights_format == "awq-4bit" for p in vllm.plans)


def test_the_serving_table_and_the_comparison_leave_out_parts_the_engine_cannot_serve_on():
    """The Inference page's table of every priced accelerator ranked a Quadro RTX 8000 cheapest for gpt-oss-20b in
    MXFP4 under vLLM, then a T4 and TPUs, parts the planner skips; the comparison table gave vLLM's figures on a K80."""
    from core.money.compare import compare_accelerators
    from core.money.serving import Traffic, serving_options

    sc = Scenario.model_validate({"model": "gpt-oss-20b", "mode": "inference", "weights_format": "mxfp4", "accelerator": "h100-sxm"})
    traffic = Traffic(requests_per_day=20_000, input_tokens_per_request=1000, output_tokens_per_request=300)
    plans = serving_options(sc, traffic)
    assert plans
    for p in plans:
        acc = get_accelerator(p.accelerator_id)
        assert format_problem("mxfp4", "vllm", acc) is None and not p.accelerator_id.startswith(("t4", "quadro", "tpu", "v100")), p.accelerator_id
    rows = {r.accelerator_id: r for r in compare_accelerators(sc, ["h100-sxm", "t4", "k80"])}
    assert rows["h100-sxm"].decode_tokens_per_s is not None and not any("does not run" in n for n in rows["h100-sxm"].notes)
    for part, words in (("t4", "vllm does not run MXFP4 on NVIDIA T4"), ("k80", "vllm does not run on NVIDIA Tesla K80")):
        row = rows[part]
        assert row.decode_tokens_per_s is None and row.usd_per_million_tokens is None
        assert any(n.startswith(words) for n in row.notes), row.notes


def test_a_dense_config_that_says_mxfp4_keeps_the_engines_formats():
    """MXFP4 here quantizes routed experts only: a dense model's config saying quant_method mxfp4 has nothing in it, so
    the planner keeps the engine's formats rather than serving the 16-bit size as 'MXFP4'."""
    llama = {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "quantization_config": {"quant_method": "mxfp4"},
    }
    assert shipped_format(HFConfig(hf_config=llama)) is None
