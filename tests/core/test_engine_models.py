"""Which model architectures each serving engine implements (data/engine_models.csv): DeepSpeed-MII builds a dozen model
types only, TensorRT-LLM's PyTorch backend has no Gemma 2, OLMo, Falcon or Phi-2, mlx-lm no Falcon. Before, the planner
priced DeepSpeed-MII serving Qwen3 and DeepSeek-V3 and TensorRT-LLM serving Gemma 2, none of which starts."""

from __future__ import annotations

import json

import pytest

from core.catalog.accelerators import DATA_DIR
from core.catalog.engine_models import checkpoint_model_type, load_engine_models, model_problem
from core.memory.engines import ENGINES
from core.memory.estimate import estimate_memory
from core.plan import Goal
from core.plan.serve import plan_serving
from core.scenario import HFConfig, Scenario

PRESETS = json.loads((DATA_DIR / "models.json").read_text())


def test_every_engine_has_one_row():
    assert set(load_engine_models()) == set(ENGINES)
    for row in load_engine_models().values():
        assert not (row.model_types & row.refused_model_types)


# (engine, preset, runs): the engines' model registries (the rows' sources)
@pytest.mark.parametrize(
    ("engine", "model", "runs"),
    [
        ("deepspeed-mii", "llama-3.1-8b", True),  # llama_v2 takes model_type llama (Llama 3 in the MII README)
        ("deepspeed-mii", "mixtral-8x7b", True),
        ("deepspeed-mii", "phi-3-mini-4k", True),
        ("deepspeed-mii", "qwen3-8b", False),  # engine_factory: 'Unsupported model type'
        ("deepspeed-mii", "deepseek-v3", False),
        ("deepspeed-mii", "gemma-2-9b", False),
        ("deepspeed-mii", "mistral-small-3.1-24b", False),  # mistral3: the checkpoint's outer type, not its text model's
        ("tensorrt-llm", "gemma-2-9b", False),  # no Gemma2 in the PyTorch backend's architecture index
        ("tensorrt-llm", "olmo-2-7b", False),
        ("tensorrt-llm", "falcon-40b", False),
        ("tensorrt-llm", "gemma-3-12b", True),  # Gemma3ForConditionalGeneration is registered
        ("tensorrt-llm", "deepseek-v3", True),
        ("tensorrt-llm", "gpt-oss-120b", True),
        ("mlx", "falcon-40b", False),  # mlx-lm has falcon_h1 only
        ("mlx", "gemma-2-9b", True),
        ("vllm", "falcon-40b", True),
    ],
)
def test_which_engines_run_which_architectures(engine, model, runs):
    problem = model_problem(engine, model, model, ENGINES[engine].label)
    assert (problem is None) is runs
    if problem is not None:
        assert "\n" not in problem and problem.startswith(f"{ENGINES[engine].label} does not run {model}") and "it runs in vLLM" in problem


def test_the_broad_engines_run_every_catalog_model():
    for engine in ("vllm", "sglang", "llama.cpp", "hf-transformers"):
        for m in PRESETS:
            assert model_problem(engine, m["id"], m["id"]) is None, (engine, m["id"])


def test_a_pasted_config_is_checked_by_its_model_type_and_a_parameter_count_is_not():
    jamba = HFConfig(
        name="Jamba",
        hf_config={"model_type": "jamba", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 14336, "vocab_size": 65536},
    )
    assert checkpoint_model_type(jamba) == "jamba"
    assert model_problem("deepspeed-mii", jamba, "Jamba") is not None  # MII's list is exact: anything else is refused
    assert model_problem("tensorrt-llm", jamba, "Jamba") is None  # a refusal list: an unknown type is not checked
    assert checkpoint_model_type({"params": 7e9}) is None
    # a hostile model_type reaches the one-line message as plain characters, at most 120 of them
    hostile = HFConfig(name="x", hf_config={**jamba.hf_config, "model_type": '**bold** =HYPERLINK("x")\n<b>' + "y" * 500})
    said = model_problem("deepspeed-mii", hostile, "x")
    assert said is not None and "\n" not in said and not any(c in said for c in '*=<>"') and len(checkpoint_model_type(hostile)) == 120


def test_the_estimate_warns_and_the_planner_skips_every_part_for_it():
    sc = Scenario(model="qwen3-8b", mode="inference", serving_engine="deepspeed-mii", accelerator="h100-sxm")
    r = estimate_memory(sc)
    assert r.stack_problem is not None and r.stack_problem.startswith("DeepSpeed-MII (FastGen) does not run Qwen3 8B (model_type qwen3)")
    assert estimate_memory(sc.replace(serving_engine="vllm")).stack_problem is None
    options, skipped, _ = plan_serving(Goal(goal="serve", model="qwen3-8b", requests_per_day=10000, serving_engine="deepspeed-mii"))
    assert not options and skipped and all("does not run Qwen3 8B" in line for line in skipped)
    llama, _, _ = plan_serving(Goal(goal="serve", model="llama-3.1-8b", requests_per_day=10000, serving_engine="deepspeed-mii"))
    assert llama


def test_the_serving_table_and_the_comparison_read_the_same_rule():
    """The Inference page's every-accelerator table and the GPU vs TPU / Compare rows priced DeepSpeed-MII serving
    Qwen3 on every part while the estimate warned and the planner found nothing: one rule now
    (core/memory/problems.serving_problem)."""
    from core.money.compare import compare_accelerators
    from core.money.serving import Traffic, serving_options

    sc = Scenario(model="qwen3-8b", mode="inference", serving_engine="deepspeed-mii", accelerator="h100-sxm")
    traffic = Traffic(requests_per_day=10_000, input_tokens_per_request=1000, output_tokens_per_request=300)
    assert serving_options(sc, traffic, accelerator_ids=["h100-sxm", "a100-sxm-80gb"]) == ()
    assert serving_options(sc.replace(model="llama-3.1-8b"), traffic, accelerator_ids=["h100-sxm", "a100-sxm-80gb"])
    for row in compare_accelerators(sc, ["h100-sxm", "a100-sxm-80gb"]):
        assert row.decode_tokens_per_s is None and any(n.startswith("deepspeed-mii does not run Qwen3 8B") for n in row.notes), row.notes
