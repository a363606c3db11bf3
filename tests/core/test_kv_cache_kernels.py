"""Which KV-cache formats each serving engine stores (data/engine_formats.csv's kv_cache_formats) and on which parts
(data/kv_cache_kernels.csv): the one rule the estimate's warning, the help and the planner read. Before, the pages
sized an FP8 cache for llama.cpp, Transformers and DeepSpeed-MII and a Q4_0 one for vLLM without a word, the help
offered vLLM an FP8 cache on an A100 that the planner never searched, and the planner kept FP8 weights and caches to
parts with FP8 arithmetic, where vLLM runs FP8 weights weight-only on Turing and Ampere (FP8 Marlin) and stores an
FP8 cache on Ampere (FlashInfer)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from core.catalog.accelerators import get_accelerator
from core.catalog.engine_formats import cache_problem, caches, load_engine_formats
from core.catalog.format_kernels import kernels_problem
from core.catalog.kv_cache_kernels import kv_cache_problem, load_kv_cache_kernels, nearest_kv_cache, stores_kv
from core.layout import Layout
from core.memory.engines import ENGINES
from core.memory.estimate import estimate_memory
from core.memory.evaluator import Evaluator, fit_capacity
from core.memory.fixes import same_device_fixes
from core.memory.problems import runnable_kv_cache
from core.plan import Goal
from core.plan.launch import launch_command
from core.plan.serve import kv_formats, plan_serving
from core.scenario import Scenario
from core.speed.roofline import roofline


def test_every_engine_stores_16_bit_caches_and_names_its_source():
    """The default cache is never warned about; every engine's list is sourced."""
    rows = load_engine_formats()
    assert set(rows) == set(ENGINES)
    for engine, row in rows.items():
        assert {"bf16", "fp16"} <= set(row.kv_cache_formats), engine
        assert len(row.kv_cache_source) >= 10, engine


# (KV format, engine, part, stored there): data/engine_formats.csv's and data/kv_cache_kernels.csv's sources
@pytest.mark.parametrize(
    ("kv", "engine", "part", "stored"),
    [
        ("fp8", "vllm", "h100-sxm", True),  # FlashAttention 3
        ("fp8", "vllm", "l40s", True),
        ("fp8", "vllm", "a100-sxm-80gb", True),  # FlashInfer, picked where FlashAttention 2 refuses FP8
        ("fp8", "vllm", "rtx-3090", True),
        ("fp8", "vllm", "t4", False),  # FlashInfer's floor is SM 8.0 since vLLM 0.24, Triton's FP8 SM 8.9
        ("fp8", "vllm", "mi300x", True),
        ("fp8", "vllm", "mi250x", False),  # not documented (no FP8 in CDNA2)
        ("fp8", "vllm", "tpu-v5e", True),  # tpu-inference: memory only
        ("fp8", "vllm", "gaudi3", True),  # as fp8_inc
        ("fp8", "sglang", "a100-sxm-80gb", True),  # FlashInfer, SGLang's default there
        ("fp8", "sglang", "mi300x", True),
        ("fp8", "tensorrt-llm", "h100-sxm", True),
        ("fp8", "llama.cpp", "rtx-4090", False),  # no FP8 cache type
        ("fp8", "hf-transformers", "h100-sxm", False),  # quantized caches are quanto's and HQQ's integers
        ("fp8", "deepspeed-mii", "h100-sxm", False),  # the model's own 16 bits
        ("fp8", "mlx", "apple-m3-max-64gb", False),
        ("q8_0", "llama.cpp", "rtx-4090", True),
        ("q4_0", "llama.cpp", "apple-m3-max-64gb", True),
        ("q8_0", "mlx", "apple-m3-max-64gb", True),  # --kv-bits 8
        ("q8_0", "vllm", "h100-sxm", False),
        ("int8", "vllm", "a100-sxm-80gb", True),  # int8_per_token_head, Triton attention
        ("int8", "vllm", "tpu-v6e", False),  # not documented there
        ("int8", "hf-transformers", "a100-sxm-80gb", False),  # HQQ's cache is generate()'s, not transformers serve's
        ("int8", "sglang", "h100-sxm", False),  # its --int8-kv-cache is not modelled
        ("int8", "tensorrt-llm", "h100-sxm", False),  # the TensorRT-engine backend's only
    ],
)
def test_where_each_engine_stores_each_cache(kv, engine, part, stored):
    acc = get_accelerator(part)
    assert stores_kv(kv, engine, acc) is stored
    problem = kv_cache_problem(kv, engine, acc, ENGINES[engine].label)
    assert (problem is None) is stored
    if problem is not None:
        assert "\n" not in problem and problem.startswith(f"{ENGINES[engine].label} has no") and "KV cache" in problem


@pytest.mark.parametrize(
    ("model", "stored"),
    [
        ("llama-3.1-8b", True),  # head size 128: FlashInfer
        ("gemma-2-9b", True),  # 256
        ("phi-3-mini-4k", False),  # head size 96: no FlashInfer kernel, and Triton's FP8 needs SM 8.9
        ("deepseek-v3", False),  # MLA: Triton MLA's FP8 needs SM 8.9, FlashMLA Hopper
        ("gpt-oss-20b", False),  # attention sinks: FlashInfer's only in its TRT-LLM kernels (SM 10.0)
    ],
)
def test_vllms_fp8_cache_on_ampere_depends_on_the_models_attention(model, stored):
    """On an A100 vLLM's only kernels that write an FP8 cache are FlashInfer's, for head sizes 64-512 without MLA or
    sinks; on an H100 every model has one (FlashAttention 3, FlashMLA)."""
    sc = Scenario(model=model, mode="inference", accelerator="a100-sxm-80gb", kv_cache_format="fp8", weights_format="bf16")
    assert stores_kv("fp8", "vllm", get_accelerator("a100-sxm-80gb"), sc.architecture) is stored
    said = estimate_memory(sc).stack_problem
    assert (said is None) is stored
    reason = {"phi-3-mini-4k": "its head size 96", "deepseek-v3": "its multi-head latent attention", "gpt-oss-20b": "its attention sinks"}
    assert stored or f"for {sc.architecture.name} ({reason[model]})" in said, said  # the model is refused, not the A100
    assert stores_kv("fp8", "vllm", get_accelerator("h100-sxm"), sc.architecture)
    assert stores_kv("fp8", "vllm", get_accelerator("a100-sxm-80gb"))  # a part's own question: the common model


def test_the_line_names_what_the_engine_stores_and_who_stores_the_format():
    why = cache_problem("fp8", "llama.cpp", "llama.cpp")
    assert why == "llama.cpp has no FP8 KV cache: it caches K and V in BF16, FP16, Q8_0, Q4_0; FP8 KV caches: vLLM, SGLang and TensorRT-LLM"
    why = kv_cache_problem("fp8", "vllm", get_accelerator("t4"), "vLLM")
    assert why is not None and why.startswith("vLLM has no FP8 KV cache on NVIDIA T4: ") and "compute capability 8.0" in why
    assert caches("vllm", "fp8") and not caches("deepspeed-mii", "fp8")


def test_the_rows_name_whole_kernel_targets_and_their_sources():
    from core.catalog.accelerators import load_accelerators

    groups: dict[str, set[str]] = {}
    for a in load_accelerators():
        if a.kernel_target is not None:
            groups.setdefault(a.kernel_target, set()).add(a.id)
    for r in load_kv_cache_kernels():
        assert all(r.kv_cache_format in load_engine_formats()[e].kv_cache_formats for e in r.engines.split()), r
        for target, ids in groups.items():
            hit = {i for i in ids if re.search(r.accelerator_pattern, i)}
            assert hit in (set(), ids), (r.kv_cache_format, r.engines, target, sorted(hit))


def test_the_estimate_warns_and_keeps_the_setup():
    """llama.cpp asked for an FP8 cache: the Memory and Inference pages' one line, the figures the setup's own."""
    sc = Scenario(model="llama-3.1-8b", mode="inference", weights_format="gguf-q4_k_m", kv_cache_format="fp8", serving_engine="llama.cpp", accelerator="rtx-4090")
    r = estimate_memory(sc)
    assert r.stack_problem is not None and r.stack_problem.startswith("llama.cpp has no FP8 KV cache")
    ok = estimate_memory(sc.replace(kv_cache_format="q8_0"))
    assert ok.stack_problem is None and ok.memory_per_device_bytes.kv_cache > r.memory_per_device_bytes.kv_cache  # Q8_0: 8.5 bits
    assert kernels_problem("fp8", "bf16", "vllm", get_accelerator("a100-sxm-80gb")) is None  # FP8 Marlin, weight-only


# (engine, part, model, asked, the nearest cache the engine keeps there for the model): bytes per value from
# core/model/formats.KV_CACHE_BYTES (FP8 and INT8 1, Q8_0 34/32, BF16 and FP16 2), the rows of this file's table
NEAREST = [
    ("llama.cpp", "rtx-4090", "llama-3.1-8b", "fp8", "q8_0"),  # 1.06 bytes against 1: Q8_0, not BF16
    ("vllm", "t4", "llama-3.1-8b", "fp8", "int8"),  # the same byte, in vLLM's int8_per_token_head
    ("vllm", "a100-sxm-80gb", "phi-3-mini-4k", "fp8", "int8"),  # head size 96: no FlashInfer FP8 cache
    ("sglang", "h100-sxm", "llama-3.1-8b", "int8", "fp8"),  # SGLang keeps no INT8 cache; its FP8 one on Hopper
    ("hf-transformers", "h100-sxm", "llama-3.1-8b", "fp8", "bf16"),  # 16-bit only: the first of the two
    ("tensorrt-llm", "h200", "gpt-oss-20b", "fp8", "bf16"),  # attention sinks on Hopper: BF16
    ("vllm", "h100-sxm", "llama-3.1-8b", "fp8", None),  # kept: nothing instead
    ("vllm", "rtx-4090", "llama-3.1-8b", "q4_0", "fp8"),  # 0.56 bytes: FP8 and INT8 equally near, FP8 first
]


@pytest.mark.parametrize(("engine", "part", "model", "asked", "nearest"), NEAREST)
def test_the_nearest_cache_the_engine_keeps_is_offered_instead(engine, part, model, asked, nearest):
    """What the Memory and Inference pages' warning offers in place of a cache the engine does not keep (the page's
    figure with it beside the setup's): the nearest in bytes it keeps on the part for the model, and only where it
    makes the setup runnable (runnable_kv_cache)."""
    sc = Scenario(model=model, mode="inference", serving_engine=engine, accelerator=part, kv_cache_format=asked)
    assert nearest_kv_cache(asked, engine, get_accelerator(part), sc.architecture) == nearest
    assert runnable_kv_cache(sc) == nearest
    if nearest is not None:
        assert stores_kv(nearest, engine, get_accelerator(part), sc.architecture)
        assert estimate_memory(sc.replace(kv_cache_format=nearest)).stack_problem is None


def test_no_cache_is_offered_where_the_weights_are_what_stops_it():
    """vLLM does not run gpt-oss's MXFP4 on a T4 whatever its cache: nothing instead (the weights' line says why)."""
    sc = Scenario(model="gpt-oss-20b", mode="inference", serving_engine="vllm", accelerator="t4", weights_format="mxfp4", kv_cache_format="fp8")
    assert estimate_memory(sc).stack_problem is not None and nearest_kv_cache("fp8", "vllm", get_accelerator("t4"), sc.architecture) == "int8"
    assert runnable_kv_cache(sc) is None


def _fix_labels(sc: Scenario) -> str:
    capacity = fit_capacity(sc, float(get_accelerator(sc.accelerator).usable_memory_bytes))
    return " | ".join(f.label for f in same_device_fixes(sc, Evaluator(sc, sc.architecture), capacity))


def test_the_help_offers_the_caches_the_engine_stores_there():
    """A context too long for the part: llama.cpp is offered its Q8_0 cache (not FP8), vLLM an FP8 one on an A100
    (FlashInfer) and its INT8 one on a T4, where no FP8 cache is stored."""
    cpp = Scenario(model="llama-3.1-8b", mode="inference", serving_engine="llama.cpp", weights_format="gguf-q4_k_m", accelerator="rtx-3060-12gb", seq_len=65536)
    labels = _fix_labels(cpp)
    assert "KV cache in Q8_0" in labels and "FP8" not in labels, labels
    a100 = Scenario(model="llama-3.1-8b", mode="inference", serving_engine="vllm", accelerator="a100-sxm-40gb", seq_len=131072, batch_size=2)
    assert "KV cache in FP8" in _fix_labels(a100)
    t4 = Scenario(model="llama-3.2-1b", mode="inference", serving_engine="vllm", accelerator="t4", weights_format="fp16", kv_cache_format="fp16")
    t4 = t4.replace(seq_len=131072, batch_size=4)
    labels = _fix_labels(t4)
    assert "KV cache in FP8" not in labels and "KV cache in INT8" in labels  # vLLM's int8_per_token_head instead


def test_the_planner_searches_what_the_engine_stores_where_it_does():
    """vLLM on an A100 serves FP8 weights (FP8 Marlin, weight-only), and on a T4 never with an FP8 cache; llama.cpp
    is searched with its 16-bit cache only (its Q8_0 one is the user's choice)."""
    goal = {"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 20_000}
    options, _, _ = plan_serving(Goal.model_validate({**goal, "accelerators": ["a100-sxm-80gb", "t4"]}))
    formats = {(o.accelerator.id, o.weights_format, o.kv_cache_format) for o in options}
    assert ("a100-sxm-80gb", "fp8", "bf16") in formats and ("a100-sxm-80gb", "fp8", "fp8") in formats
    assert ("t4", "fp8", "fp16") in formats  # FP8 Marlin from Turing, FP16 activations
    assert not any(a == "t4" and kv == "fp8" for a, _, kv in formats)
    sglang, _, _ = plan_serving(Goal.model_validate({**goal, "serving_engine": "sglang", "accelerators": ["a100-sxm-80gb"]}))
    assert any(o.weights_format == "fp8" for o in sglang)
    assert kv_formats(Goal.model_validate({**goal, "serving_engine": "llama.cpp"})) == ("bf16", "q8_0")  # -ctk / -ctv q8_0
    assert kv_formats(Goal.model_validate({**goal, "serving_engine": "mlx"})) == ("bf16",)  # its quantized cache is not batched
    assert kv_formats(Goal.model_validate({**goal, "serving_engine": "deepspeed-mii"})) == ("bf16",)


def test_a_q8_0_cache_makes_a_cheaper_llama_cpp_plan_where_memory_binds():
    """Llama 3.1 70B Q4_K_M with 32,000-token prompts on llama.cpp: its 32,500-token context fits one 48 GB RTX 6000
    Ada only with K and V in Q8_0 (8.5 bits), $270 a month; with a 16-bit cache the cheapest plan is two L40S at $555.
    The launch keeps K and V in Q8_0 with flash attention on (llama.cpp refuses a quantized V cache without)."""
    from core.plan import plan

    goal = Goal.model_validate(
        {"goal": "serve", "model": "llama-3.1-70b", "requests_per_day": 500, "serving_engine": "llama.cpp", "input_tokens": 32000, "output_tokens": 500}
        | {"tokens_per_s_per_user": 5, "ttft_s": 120}
    )
    options, _, _ = plan_serving(goal)
    one = {o.kv_cache_format for o in options if o.accelerator.id == "rtx-6000-ada" and o.tensor_parallel == 1 and o.weights_format == "gguf-q4_k_m"}
    assert one == {"q8_0"}  # a 16-bit cache of 32,500 tokens does not fit beside the 40 GiB of weights
    best = plan(goal).cheapest
    assert best is not None and best.kv_cache_format == "q8_0" and best.accelerator == "rtx-6000-ada"
    bf16 = min(o.cost for o in options if o.kv_cache_format != "q8_0")
    assert best.usd_per_month < bf16
    assert "--cache-type-k q8_0" in best.launch and "--cache-type-v q8_0" in best.launch and "-fa on" in best.launch


def test_a_q8_0_cache_holds_twice_the_tokens_and_decodes_as_16_bits():
    """llama.cpp decodes its Q8_0 blocks in its attention kernels (on Metal to F16 before them): the step is the 16-bit
    cache's, the memory 34 bytes per 32 values."""
    sc = Scenario(model="llama-3.1-8b", mode="inference", accelerator="rtx-4090", serving_engine="llama.cpp", weights_format="gguf-q4_k_m", kv_cache_format="fp16")
    acc = get_accelerator("rtx-4090")
    f16 = roofline(sc, acc, Layout(1, 1, 1)).decode_step(np.array([8.0]), 16_000.0)[0][0]
    q8 = roofline(sc.replace(kv_cache_format="q8_0"), acc, Layout(1, 1, 1)).decode_step(np.array([8.0]), 16_000.0)[0][0]
    assert q8 == pytest.approx(f16, rel=1e-9)
    mem = [estimate_memory(sc.replace(kv_cache_format=k, seq_len=16_384)).memory_per_device_bytes.kv_cache for k in ("fp16", "q8_0")]
    assert mem[1] == pytest.approx(mem[0] * (34 / 32) / 2, rel=0.01)


def test_an_fp8_cache_without_fp8_arithmetic_holds_more_and_reads_as_16_bits():
    """On an A100 FlashInfer decodes the FP8 cache in software: twice the tokens fit, the decode step at a long context
    is the 16-bit cache's (no published speed-up; vLLM PR #49077 measured its software path slower). On an H100 the
    FP8 cache's step is the shorter one."""
    for part, faster in (("a100-sxm-80gb", False), ("h100-sxm", True)):
        sc = Scenario(model="llama-3.1-8b", mode="inference", accelerator=part, serving_engine="vllm")
        acc = get_accelerator(part)
        bf16 = roofline(sc, acc, Layout(1, 1, 1)).decode_step(np.array([64.0]), 32_000.0)[0][0]
        fp8 = roofline(sc.replace(kv_cache_format="fp8"), acc, Layout(1, 1, 1)).decode_step(np.array([64.0]), 32_000.0)[0][0]
        assert bool(fp8 < 0.9 * bf16) is faster, (part, fp8, bf16)
        if not faster:
            assert fp8 == pytest.approx(bf16, rel=1e-9)
    one = estimate_memory(Scenario(model="llama-3.1-8b", mode="inference", accelerator="a100-sxm-80gb", kv_cache_format="fp8", seq_len=8192))
    two = estimate_memory(Scenario(model="llama-3.1-8b", mode="inference", accelerator="a100-sxm-80gb", seq_len=8192))
    assert one.memory_per_device_bytes.kv_cache * 2 == pytest.approx(two.memory_per_device_bytes.kv_cache, rel=1e-6)


def test_the_launch_says_how_the_engine_runs_it():
    """FP8 weights on an A100: a comment that vLLM runs them weight-only; its INT8 cache by vLLM's own name; an H100
    runs FP8 natively and says nothing of it."""
    base = {"model": "llama-3.1-8b", "mode": "inference", "serving_engine": "vllm", "weights_format": "fp8"}
    a100 = launch_command({**base, "accelerator": "a100-sxm-80gb", "kv_cache_format": "fp8"})
    assert "run weight-only in vLLM (FP8 Marlin" in a100 and "--quantization fp8" in a100 and "--kv-cache-dtype fp8" in a100
    h100 = launch_command({**base, "accelerator": "h100-sxm"})
    assert "weight-only" not in h100
    for other in ("hf-transformers", "tensorrt-llm"):  # dequantized to BF16 there / no FP8 kernels before Ada: no such note
        assert "weight-only" not in launch_command({**base, "accelerator": "a100-sxm-80gb", "serving_engine": other})
    int8 = launch_command({**base, "accelerator": "a100-sxm-80gb", "weights_format": "bf16", "kv_cache_format": "int8"})
    assert "--kv-cache-dtype int8_per_token_head" in int8


def test_the_cache_is_the_attentions_whatever_the_weights():
    """gpt-oss's attention sinks decide where its FP8 cache runs, in any weight format the engine serves it in: SGLang
    and TensorRT-LLM keep one on Blackwell but not on Hopper, vLLM on Hopper but not on Ada (before, only the MXFP4
    rows said so, and gpt-oss in BF16 or AWQ was given an FP8 cache on those parts)."""
    from core.catalog.engine_formats import planned_formats
    from core.catalog.format_kernels import weights_problem

    arch = Scenario(model="gpt-oss-20b", mode="inference").architecture
    llama = Scenario(model="llama-3.1-8b", mode="inference").architecture
    expected = {("sglang", "b200"): True, ("sglang", "h100-sxm"): False, ("tensorrt-llm", "b200"): True, ("tensorrt-llm", "h200"): False}
    expected |= {("vllm", "h100-sxm"): True, ("vllm", "l40s"): False, ("vllm", "a100-sxm-80gb"): False, ("sglang", "a100-sxm-80gb"): False}
    for (engine, part), stored in expected.items():
        acc = get_accelerator(part)
        served = [f for f in ("mxfp4", *planned_formats(engine)) if weights_problem(f, engine, acc) is None]
        assert served, (engine, part)
        for fmt in served:
            assert (kernels_problem(fmt, "fp8", engine, acc, arch=arch) is None) is stored, (engine, part, fmt)
            assert kernels_problem(fmt, "fp8", engine, acc, arch=llama) is None, (engine, part, fmt)  # no sinks: stored
    why = kernels_problem("bf16", "fp8", "sglang", get_accelerator("a100-sxm-80gb"), "SGLang", arch)
    assert why is not None and "attention sinks" in why and "Triton" in why  # the model is refused, not the part


def test_tensorrt_llms_fp8_cache_follows_its_matrix_and_vllms_int8_cache_is_not_mla():
    """TensorRT-LLM's hardware matrix (read at two commits) marks an FP8 KV cache on Ampere to Blackwell; vLLM's INT8
    cache is its Triton attention's, which does not run DeepSeek's MLA."""
    llama = Scenario(model="llama-3.1-8b", mode="inference").architecture
    for part in ("a100-sxm-80gb", "l40s", "h100-sxm", "b200"):
        assert kernels_problem("bf16", "fp8", "tensorrt-llm", get_accelerator(part), arch=llama) is None, part
    deepseek = Scenario(model="deepseek-v3", mode="inference").architecture
    assert kernels_problem("bf16", "int8", "vllm", get_accelerator("h100-sxm"), arch=llama) is None
    assert kernels_problem("bf16", "int8", "vllm", get_accelerator("h100-sxm"), arch=deepseek) is not None


def test_a_llama_cpp_replica_over_several_gpus_is_a_layer_split():
    """llama.cpp splits a model over GPUs by layers (--split-mode layer, its default), each token passing the GPUs one
    after another: the planner prices such a replica as pipeline stages (the Inference page's "several cards in one
    box" figure), not as a tensor-parallel group four times as fast, and launches it so; a tensor-parallel scenario
    launches llama.cpp's row split."""
    from core.plan import plan
    from core.speed.roofline import inference_speed

    goal = Goal.model_validate(
        {"goal": "serve", "model": "llama-3.1-70b", "requests_per_day": 3000, "serving_engine": "llama.cpp", "input_tokens": 16000, "output_tokens": 500}
        | {"tokens_per_s_per_user": 5, "ttft_s": 60}
    )
    options, _, _ = plan_serving(goal)
    several = [o for o in options if o.tensor_parallel > 1]
    assert several and all(o.scenario.pipeline_parallel == o.tensor_parallel and o.scenario.tensor_parallel == 1 for o in several)
    best = plan(goal).cheapest
    assert best is not None and best.pipeline_parallel > 1 and best.tensor_parallel == 1
    assert f"--split-mode layer \\\n  --tensor-split {','.join(['1'] * best.pipeline_parallel)}" in best.launch
    sc = Scenario.model_validate(best.scenario | {"batch_size": 1})
    layers = inference_speed(sc, prompt_tokens=16000, output_tokens=500).decode_tokens_per_s
    rows = inference_speed(sc.replace(tensor_parallel=best.pipeline_parallel, pipeline_parallel=1), prompt_tokens=16000, output_tokens=500)
    assert layers < 0.8 * rows.decode_tokens_per_s  # the speed the tensor-parallel pricing gave it
    text = launch_command({"model": "llama-3.1-8b", "mode": "inference", "serving_engine": "llama.cpp", "weights_format": "gguf-q4_k_m", "tensor_parallel": 2})
    assert "--split-mode row" in text
