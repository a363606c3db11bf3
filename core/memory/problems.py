"""Why a scenario cannot run as set, in one line: its training stack or part (data/stack_layouts.csv), or its serving
engine on its part (data/engine_models.csv, data/engine_formats.csv, data/format_kernels.csv,
data/kv_cache_kernels.csv); and the KV cache the engine runs there instead."""

from __future__ import annotations

from core.catalog.accelerators import get_accelerator
from core.catalog.engine_models import model_problem
from core.catalog.format_kernels import kernels_problem
from core.catalog.kv_cache_kernels import nearest_kv_cache
from core.catalog.presets import preset, preset_ids
from core.catalog.stack_layouts import base_problem, layout_problem, objective_problem, training_part_problem
from core.memory.components import gptq_base, qlora_base, sram_resident
from core.memory.engines import ENGINES
from core.scenario import Scenario
from core.text import listed


def scenario_problem(sc: Scenario) -> str | None:
    """Why the scenario's training stack or part cannot run it, its optimizer included (data/stack_layouts.csv), or
    why its serving engine has no kernels there for its weights' format or their FP8 KV cache (data/format_kernels.csv),
    or why its tensor-parallel size does not split the model's attention (heads_problem), or None."""
    if sc.mode != "training":
        return heads_problem(sc) or context_problem(sc) or serving_problem(sc, ENGINES[sc.serving_engine].label)
    stack = sc.training_stack
    base = base_problem(qlora_base(sc).id, sc.zero_stage, sc.offload, sc.tensor_parallel) if gptq_base(sc) else None
    acc = get_accelerator(sc.accelerator)
    # the Training sweep's and the planner's rule for the part (an inference-only part, no stack for its kind, its
    # kernels), with the part's name where it says the id (Inferentia2 trained with no word on the Training page)
    part = training_part_problem(acc, sc.method, stack, sc.optimizer, sc.objective)
    return (
        base
        or objective_problem(stack, sc.objective, sc.method)
        or layout_problem(stack, sc.method, sc.zero_stage, sc.tensor_parallel, sc.pipeline_parallel, sc.data_parallel, sc.optimizer, sc.offload)
        or heads_problem(sc)
        or (None if part is None else acc.name + part.removeprefix(acc.id) if part.startswith(f"{acc.id}: ") else part)
    )


def serving_problem(sc: Scenario, engine_name: str | None = None) -> str | None:
    """Why the serving engine (written `engine_name`, else its id) cannot serve the scenario on its part, in one line:
    no implementation of the model's architecture (data/engine_models.csv), or the weights' format not loaded or
    without kernels there, or their FP8 KV cache (data/engine_formats.csv, data/format_kernels.csv). None on the SRAM
    chips, which run their vendor's own stack. The estimate's warning, the every-accelerator table's and the
    comparison's one rule."""
    if sram_resident(sc):
        return None
    return model_problem(sc.serving_engine, sc.model, sc.architecture.name, engine_name) or kernels_problem(
        sc.weights_format, sc.kv_cache_format, sc.serving_engine, get_accelerator(sc.accelerator), engine_name, sc.architecture
    )


def runnable_kv_cache(sc: Scenario) -> str | None:
    """Where the serving engine cannot keep the scenario's KV cache on its part for its model but would serve the
    scenario with another, the nearest in bytes it keeps there (core/catalog/kv_cache_kernels.nearest_kv_cache:
    llama.cpp asked for FP8, Q8_0; vLLM on a T4, INT8); None where the cache is not what stops it."""
    if sc.mode != "inference" or serving_problem(sc) is None:
        return None
    kv = nearest_kv_cache(sc.kv_cache_format, sc.serving_engine, get_accelerator(sc.accelerator), sc.architecture)
    return kv if kv is not None and serving_problem(sc.replace(kv_cache_format=kv)) is None else None


def heads_problem(sc: Scenario) -> str | None:
    """Why the scenario's tensor-parallel size does not split its model's attention (Architecture.splits_over: serving
    engines replicate KV heads over a multiple of them, training stacks divide them), with the sizes that do, or None.
    llama.cpp's split and the SRAM chips' vendor stacks are not a head split."""
    tp, arch = sc.tensor_parallel, sc.architecture
    serving = sc.mode == "inference"
    if tp == 1 or sram_resident(sc) or (serving and sc.serving_engine == "llama.cpp") or arch.splits_over(tp, replicate_kv=serving):
        return None
    sizes = [str(t) for t in range(2, 65) if arch.splits_over(t, replicate_kv=serving)]
    kv = "" if arch.is_mla or arch.num_kv_heads == arch.num_heads else f" and {arch.num_kv_heads} KV heads"
    rule = "KV heads split evenly or replicated over a multiple of them" if serving else "the training stacks divide both"
    where = f"it splits over {listed(sizes, 'sizes', first=6)} ({rule})" if sizes else "no tensor-parallel size splits it"
    return f"Tensor parallel {tp} does not split the model's attention ({arch.num_heads} query heads{kv}): {where}"


# Serving engines that refuse a context longer than the model's unless told to go past it: vLLM ("User-specified
# max_model_len ... is greater than the derived max_model_len ...": VLLM_ALLOW_LONG_MAX_MODEL_LEN) and SGLang
# (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN). llama.cpp and Transformers run past it with a warning, and degrade.
CONTEXT_BOUND_ENGINES = frozenset({"vllm", "sglang"})


def context_window(sc: Scenario) -> int:
    """The model's context window: its config's max_position_embeddings, or its model card's published context where
    that is longer (Command R: 8,192 in its config, 131,072 on its card)."""
    model = sc.model
    published = preset(model).context_length if isinstance(model, str) and model in preset_ids() else None
    return max(sc.architecture.max_context, published or 0)


def context_problem(sc: Scenario) -> str | None:
    """Why a serving engine refuses the scenario's sequence length (past the model's context window), or None. The
    planner's refusal of a serving goal says the same (core/plan/serve.py)."""
    if sc.mode != "inference" or sc.serving_engine not in CONTEXT_BOUND_ENGINES:
        return None
    window = context_window(sc)
    if sc.seq_len <= window:
        return None
    engine = ENGINES[sc.serving_engine].label
    return f"{sc.architecture.name} takes at most {window:,} tokens a sequence (its context window); {engine} refuses the {sc.seq_len:,} asked"
