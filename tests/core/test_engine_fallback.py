"""A serving scenario whose engine does not run on its part is shown with the first engine that does (core/engine_fallback.py)."""

from __future__ import annotations

from core.catalog.accelerators import get_accelerator
from core.catalog.engine_hardware import engine_problem
from core.engine_fallback import with_runnable_engine


def test_vllm_on_a_v100_is_shown_with_the_first_engine_that_runs_there():
    got = with_runnable_engine({"model": "llama-3.1-8b", "mode": "inference", "accelerator": "v100-32gb"})
    assert got is not None
    sc, said = got
    v100 = get_accelerator("v100-32gb")
    assert engine_problem("vllm", v100) is not None and engine_problem(sc.serving_engine, v100) is None
    assert sc.serving_engine == "llama.cpp"  # the engines' order: vLLM, SGLang, TensorRT-LLM, llama.cpp ...
    assert said.startswith("vLLM does not run on NVIDIA V100 SXM2 32GB: its CUDA builds need compute capability 7.5")
    assert said.endswith("Shown with llama.cpp, which does (choose another under Serving engine).")


def test_nothing_changes_where_the_engine_runs_or_where_no_engine_does():
    assert with_runnable_engine({"model": "llama-3.1-8b", "mode": "inference", "accelerator": "h100-sxm"}) is None
    assert with_runnable_engine({"model": "llama-3.1-8b", "mode": "training", "accelerator": "v100-32gb"}) is None
    # a K80: no engine's builds run on it any more (data/engine_hardware.csv), so the refusal stands
    assert with_runnable_engine({"model": "llama-3.2-1b", "mode": "inference", "accelerator": "k80"}) is None
