"""A serving scenario whose engine does not run on its part (vLLM on a V100: its builds need compute capability 7.5)
is shown with the first engine that does, said in one line, rather than refused: the Plan page's cheapest fine-tune
runs on V100s, and a reader who opened Inference from it met an error box and no numbers. The scenario as given is
still refused by its validator (core/scenario.py); this is the pages' second try, never a silent change."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from core.catalog.accelerators import UnknownAcceleratorError, get_accelerator
from core.catalog.engine_hardware import engine_problem
from core.catalog.format_kernels import kernels_problem
from core.memory.engines import ENGINES
from core.scenario import Scenario


def with_runnable_engine(fields: dict[str, Any]) -> tuple[Scenario, str] | None:
    """Where `fields` describe a serving scenario whose engine the part refuses: the same scenario with the first engine
    (in the engines' order) that runs on the part, validates and loads its weights and KV cache there (the estimate's
    kernels rule), and the sentence that says so; None otherwise (MLX 4-bit weights on an AMD part: no engine)."""
    if fields.get("mode", "inference") != "inference":
        return None
    try:
        acc = get_accelerator(str(fields.get("accelerator", "h100-sxm")))
    except UnknownAcceleratorError:
        return None
    engine = str(fields.get("serving_engine", "vllm"))
    why = engine_problem(engine, acc)
    if why is None:
        return None
    for other in ENGINES:
        if other == engine or engine_problem(other, acc) is not None:
            continue
        try:
            sc = Scenario.model_validate({**fields, "serving_engine": other})
        except ValidationError:
            continue
        if kernels_problem(sc.weights_format, sc.kv_cache_format, other, acc, arch=sc.architecture) is not None:
            continue  # it runs on the part, but not these weights or this cache there: no better than the refusal
        said = ENGINES[engine].label + why.split("; on it:")[0].removeprefix(engine) if why.startswith(engine) else why.split("; on it:")[0]
        return sc, f"{said}. Shown with {ENGINES[other].label}, which does (choose another under Serving engine)."
    return None
