"""Which weight formats each serving engine loads (data/engine_formats.csv) and where its AWQ, GPTQ and FP8 kernels run
(data/format_kernels.csv): the one rule the estimate's warning, the help's alternatives and the planner read. Before,
vLLM was asked to serve MLX files and Transformers GGUF ones without a word, and every engine was planned with vLLM's
AWQ / GPTQ table (core/model/kernels.py, now rows of the table)."""

from __future__ import annotations

import re

import pytest

from core.catalog.accelerators import get_accelerator
from core.catalog.engine_formats import load_engine_formats, load_problem, loads, planned_formats
from core.catalog.format_kernels import kernels_problem, weights_problem
from core.memory.engines import ENGINES
from core.memory.estimate import estimate_memory
from core.memory.evaluator import Evaluator, fit_capacity
from core.memory.fixes import same_device_fixes
from core.plan import Goal
from core.plan.serve import plan_serving, searched_formats
from core.scenario import Scenario


def test_every_engine_has_one_row_and_plans_only_formats_it_loads():
    rows = load_engine_formats()
    assert set(rows) == set(ENGINES)
    for engine, row in rows.items():
        assert row.searched_formats and set(row.searched_formats) <= set(row.weights_formats), engine
        goal = Goal(goal="serve", model="llama-3.1-8b", requests_per_day=1000, serving_engine=engine)
        assert searched_formats(goal) == planned_formats(engine) == row.searched_formats


# (engine, format, loads): the engines' documents (data/engine_formats.csv's sources)
@pytest.mark.parametrize(
    ("engine", "fmt", "loaded"),
    [
        ("vllm", "awq-4bit", True),
        ("vllm", "gguf-q4_k_m", True),  # experimental, but it loads
        ("vllm", "mlx-q4", False),  # MLX's packing: mlx-lm only
        ("vllm", "gguf-tq1_0", False),
        ("tensorrt-llm", "nf4", False),  # no bitsandbytes (TensorRT-LLM#2472)
        ("tensorrt-llm", "gguf-q4_k_m", False),
        ("tensorrt-llm", "fp8", True),
        ("llama.cpp", "awq-4bit", False),  # GGUF files only
        ("llama.cpp", "gguf-tq2_0", True),
        ("llama.cpp", "fp16", True),  # GGUF F16
        ("hf-transformers", "gguf-q4_k_m", False),  # dequantized to fp32 as it loads
        ("hf-transformers", "nf4", True),
        ("deepspeed-mii", "fp8", False),
        ("deepspeed-mii", "awq-4bit", False),
        ("deepspeed-mii", "bf16", True),
        ("mlx", "mlx-q4", True),
        ("mlx", "awq-4bit", True),  # repacked to MLX's layout as it loads (mlx-lm PR #730)
        ("mlx", "gguf-q4_k_m", False),
        ("mlx", "nf4", False),
    ],
)
def test_which_formats_each_engine_loads(engine, fmt, loaded):
    assert loads(engine, fmt) is loaded
    problem = load_problem(fmt, engine, ENGINES[engine].label)
    assert (problem is None) is loaded
    if problem is not None:
        assert "\n" not in problem and problem.startswith(f"{ENGINES[engine].label} does not load") and "it loads" in problem


def test_the_estimate_warns_when_the_engine_does_not_load_the_format():
    """The Memory and Inference pages' warning (MemoryResult.stack_problem); the figures stay the setup's."""
    sc = Scenario(model="llama-3.1-8b", mode="inference", weights_format="gguf-q4_k_m", serving_engine="hf-transformers", accelerator="rtx-4090")
    r = estimate_memory(sc)
    assert r.stack_problem is not None and "dequantizes a GGUF file" in r.stack_problem and "choose BF16" in r.stack_problem
    assert r.weights_bytes_total > 0  # the setup as set
    ok = estimate_memory(sc.replace(serving_engine="llama.cpp"))
    assert ok.stack_problem is None and ok.weights_bytes_total == r.weights_bytes_total


def test_the_help_offers_only_formats_the_engine_loads():
    """A model that does not fit its part in 16 bits: the fixes name the engine's own smaller formats (mlx-lm's MLX
    4-bit, llama.cpp's GGUF, vLLM's AWQ), never one the engine cannot load."""
    for engine, model, acc, wanted, never in [
        ("mlx", "llama-3.1-70b", "apple-m3-max-64gb", "MLX 4-bit", ("AWQ", "GGUF", "FP8")),
        ("llama.cpp", "llama-3.1-8b", "rtx-3060-12gb", "GGUF Q8_0", ("AWQ", "MLX", "FP8")),
        ("vllm", "llama-3.1-8b", "rtx-3060-12gb", "AWQ", ("GGUF", "MLX")),
    ]:
        sc = Scenario(model=model, mode="inference", serving_engine=engine, accelerator=acc, seq_len=4096)
        capacity = fit_capacity(sc, float(get_accelerator(acc).usable_memory_bytes))
        labels = " | ".join(f.label for f in same_device_fixes(sc, Evaluator(sc, sc.architecture), capacity))
        assert wanted in labels, (engine, labels)
        assert not any(n in labels for n in never), (engine, labels)


# (format, engine, part, runs there): data/format_kernels.csv's sourced rows
@pytest.mark.parametrize(
    ("fmt", "engine", "part", "runs"),
    [
        ("awq-4bit", "vllm", "t4", True),  # vLLM's table: AWQ from Turing
        ("awq-4bit", "vllm", "b200", True),
        ("awq-4bit", "vllm", "mi300x", True),  # ROCm's Triton AWQ kernels (MI300 series and MI355X)
        ("awq-4bit", "vllm", "rx-7900-xtx", False),  # RDNA's 32-wide waves: not documented (they fault)
        ("awq-4bit", "vllm", "tpu-v6e", True),  # tpu-inference: INT4 W4A16 AWQ on v5 and v6
        ("awq-4bit", "vllm", "tpu-v5e", True),
        ("awq-4bit", "vllm", "tpu-v7", False),
        ("awq-4bit", "vllm", "tpu-v4", False),
        ("awq-4bit", "vllm", "gaudi3", True),  # vllm-gaudi: awq_hpu
        ("awq-4bit", "vllm", "trainium2", False),
        ("gptq-4bit", "vllm", "tpu-v6e", False),  # not in tpu-inference's quantization list
        ("gptq-4bit", "vllm", "gaudi3", True),
        ("awq-4bit", "tensorrt-llm", "a100-sxm-80gb", True),  # W4A16 on Ampere, Ada, Hopper
        ("awq-4bit", "tensorrt-llm", "h100-sxm", True),
        ("awq-4bit", "tensorrt-llm", "b200", False),  # not marked for Blackwell
        ("gptq-4bit", "tensorrt-llm", "rtx-5090", False),
        ("fp8", "tensorrt-llm", "a100-sxm-80gb", False),  # FP8 from Ada
        ("fp8", "tensorrt-llm", "l40s", True),
        ("fp8", "tensorrt-llm", "rtx-5090", True),
        ("awq-4bit", "hf-transformers", "v100-32gb", False),  # AutoAWQ: compute capability 7.5
        ("awq-4bit", "hf-transformers", "t4", True),
        ("awq-4bit", "hf-transformers", "mi300x", True),
        ("awq-4bit", "hf-transformers", "apple-m2-max", False),  # not on Metal
        ("gptq-4bit", "hf-transformers", "v100-32gb", True),
        ("gptq-4bit", "hf-transformers", "apple-m2-max", True),  # GPTQModel on Metal
        ("fp8", "hf-transformers", "h100-sxm", True),
        ("fp8", "hf-transformers", "a100-sxm-80gb", False),  # dequantized to BF16 below 8.9
        ("fp8", "vllm", "a100-sxm-80gb", True),  # FP8 Marlin, weight-only (W8A16)
        ("fp8", "vllm", "t4", True),  # FP8 Marlin from Turing (FP16 activations)
        ("fp8", "vllm", "mi250x", False),  # no FP8 on CDNA2: not documented
        ("fp8", "sglang", "a100-sxm-80gb", True),  # its Marlin W8A16 on SM 8.0-8.8
    ],
)
def test_where_awq_gptq_and_fp8_run(fmt, engine, part, runs):
    assert (weights_problem(fmt, engine, get_accelerator(part)) is None) is runs


def test_transformers_dequantizes_fp8_before_ada():
    problem = weights_problem("fp8", "hf-transformers", get_accelerator("a100-sxm-80gb"), "Transformers")
    assert problem is not None and "dequantizes FP8 to BF16" in problem and "choose BF16" in problem


def test_an_fp8_kv_cache_with_awq_weights_where_the_engine_runs_them():
    assert kernels_problem("awq-4bit", "fp8", "vllm", get_accelerator("h100-sxm")) is None
    assert kernels_problem("awq-4bit", "fp8", "vllm", get_accelerator("tpu-v6e")) is None
    assert kernels_problem("fp8", "fp8", "deepspeed-mii", get_accelerator("h100-sxm")) is not None  # not loaded
    why = kernels_problem("awq-4bit", "fp8", "vllm", get_accelerator("tpu-v7"), "vLLM")
    assert why is not None and why.startswith("vLLM has no documented AWQ 4-bit kernels on Google Cloud TPU7x")


def test_the_planner_serves_4_bit_on_tpus_and_mi300s_where_vllm_runs_awq():
    """tpu-inference runs AWQ on v5e / v5p / v6e and vLLM's ROCm build on the MI300 family: a 70B now has 4-bit plans
    there (before, vLLM's CUDA table left every non-NVIDIA part 16-bit and FP8 only), none on TPU7x."""
    goal = {"goal": "serve", "model": "llama-3.1-70b", "requests_per_day": 20000}
    options, _, _ = plan_serving(Goal.model_validate({**goal, "accelerators": ["tpu-v6e", "tpu-v7", "mi300x"]}))
    four_bit = {o.accelerator.id for o in options if o.weights_format == "awq-4bit"}
    assert {"tpu-v6e", "mi300x"} <= four_bit and "tpu-v7" not in four_bit
    assert not any(o.weights_format == "gptq-4bit" for o in options)
    trt, _, _ = plan_serving(Goal.model_validate({**goal, "serving_engine": "tensorrt-llm", "accelerators": ["b200", "h100-sxm"]}))
    assert {o.accelerator.id for o in trt if o.weights_format == "awq-4bit"} == {"h100-sxm"}


def test_every_gpu_names_its_kernel_target():
    """NVIDIA's compute capability (sm_XY) and AMD's gfx target, from the vendors' lists (data/accelerators.csv)."""
    from core.catalog.accelerators import load_accelerators

    targets = {a.id: a.kernel_target for a in load_accelerators() if a.vendor in ("nvidia", "amd")}
    assert None not in targets.values(), [i for i, t in targets.items() if t is None]
    expected = {"v100-32gb": "sm_70", "t4": "sm_75", "a100-sxm-80gb": "sm_80", "rtx-3090": "sm_86", "a10g": "sm_86", "l40s": "sm_89", "rtx-4090": "sm_89"}
    expected |= {"h100-sxm": "sm_90", "h20": "sm_90", "b200": "sm_100", "b300": "sm_103", "rtx-5090": "sm_120", "dgx-spark": "sm_121"}
    expected |= {"mi250x": "gfx90a", "mi300x": "gfx942", "mi325x": "gfx942", "mi355x": "gfx950", "rx-7900-xtx": "gfx1100", "strix-halo-395-128gb": "gfx1151"}
    assert {i: targets[i] for i in expected} == expected


def test_capability_rows_take_whole_kernel_targets():
    """An engine's floor and its kernels are per instruction set: a row's pattern takes every part of a kernel target or
    none (a part added to the catalog beside its siblings, an RTX 3070 beside the 3090, is covered by their rows, and
    a pattern that forgets one fails here)."""
    from core.catalog.accelerators import load_accelerators
    from core.catalog.engine_hardware import load_engine_hardware
    from core.catalog.format_kernels import load_format_kernels

    groups: dict[str, set[str]] = {}
    for a in load_accelerators():
        if a.kernel_target is not None:
            groups.setdefault(a.kernel_target, set()).add(a.id)
    patterns = [(f"format_kernels {r.weights_format} {r.engines}", r.accelerator_pattern) for r in load_format_kernels()]
    patterns += [(f"engine_hardware {r.engine}", r.refused_pattern) for r in load_engine_hardware().values() if r.refused_pattern]
    for where, pattern in patterns:
        for target, ids in groups.items():
            hit = {i for i in ids if re.search(pattern, i)}
            assert hit in (set(), ids), f"{where}: {pattern} takes {sorted(hit)} of {target} {sorted(ids)}"


def test_a_tpu_4_bit_plan_launches_without_vllms_cuda_quantization_name():
    """tpu-inference registers AWQ as auto_awq: the command leaves --quantization to the checkpoint's
    quantization_config and says so; on an NVIDIA part too since stop 49 (vLLM forces the slow AWQ kernel when
    --quantization awq is given, where the checkpoint alone gets its Marlin kernels), without the TPU's note."""
    from core.plan import plan

    goal = {"goal": "serve", "model": "llama-3.1-70b", "requests_per_day": 20000}
    tpu = plan(Goal.model_validate({**goal, "accelerators": ["tpu-v6e"]})).cheapest
    assert tpu is not None and tpu.weights_format == "awq-4bit"
    command = tpu.launch[tpu.launch.index("vllm serve") :]
    assert "--quantization" not in command and "auto_awq" in tpu.launch and "with the AWQ 4-bit checkpoint of" in tpu.launch
    assert command.startswith("vllm serve REPLACE_WITH_THE_AWQ_CHECKPOINT")
    gpu = plan(Goal.model_validate({**goal, "accelerators": ["rtx-5090"]})).cheapest
    assert gpu is not None and gpu.weights_format == "awq-4bit" and "--quantization" not in gpu.launch and "auto_awq" not in gpu.launch
    assert "vllm serve REPLACE_WITH_THE_AWQ_CHECKPOINT" in gpu.launch
