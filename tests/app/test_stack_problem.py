"""A sidebar scenario that asks for what its training stack or part does not run (data/stack_layouts.csv) is told so
in one line on the Memory and Training pages, and the CLI result says it in `stack_problem`; the figures stay. Before
stop 38 the pages showed the numbers silently (QLoRA on a TPU, Axolotl's fp16 full fine-tune on a V100)."""

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, no_exception, open_link

CASES = [
    ({"mode": "training", "method": "qlora", "acc": "tpu-v5e"}, "no bitsandbytes 4-bit kernels"),
    ({"mode": "training", "method": "full", "acc": "v100-32gb", "stack": "axolotl", "prec": "fp16"}, "Axolotl's full fine-tune in fp16 fails"),
]


@pytest.mark.parametrize(("link", "words"), CASES)
@pytest.mark.parametrize("page", ["memory", "training"])
def test_the_page_says_what_the_stack_does_not_run(page, link, words):
    at = open_link(page, {"model": "llama-3.2-1b", **link})
    no_exception(at)
    said = [w.value.replace("\\", "") for w in at.warning if words in w.value.replace("\\", "")]
    assert len(said) == 1 and "The figures below are what this setup would need if it ran" in said[0]


def test_a_runnable_setup_says_nothing_and_the_cli_says_it(tmp_path):
    at = open_link("memory", {"model": "llama-3.2-1b", "mode": "training", "method": "qlora"})
    no_exception(at)
    assert not [w for w in at.warning if "figures below are what this setup would need if it ran" in w.value]
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"model": "llama-3.2-1b", "mode": "training", "method": "qlora", "accelerator": "tpu-v5e"}))
    out = subprocess.run([sys.executable, "-m", "core", "estimate", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "no bitsandbytes 4-bit kernels" in json.loads(out.stdout)["stack_problem"]


SERVING_CASES = [  # the serving engine has no kernels on the part for the weights' format (data/format_kernels.csv) or
    # for the model's FP8 KV cache (data/kv_cache_kernels.csv: gpt-oss's attention sinks)
    ({"acc": "t4", "engine": "vllm"}, "vLLM does not run MXFP4 on NVIDIA T4"),
    ({"acc": "h200", "engine": "tensorrt-llm", "kv": "fp8"}, "TensorRT-LLM has no FP8 KV cache on NVIDIA H200"),
]


@pytest.mark.parametrize(("link", "words"), SERVING_CASES)
@pytest.mark.parametrize("page", ["memory", "inference"])
def test_the_page_says_what_the_serving_engine_does_not_run(page, link, words):
    at = open_link(page, {"model": "gpt-oss-20b", "mode": "inference", "fmt": "mxfp4", **link})
    no_exception(at)
    said = [w.value.replace("\\", "") for w in at.warning if words in w.value.replace("\\", "")]
    assert len(said) == 1 and "The figures below are what this setup would need if it ran" in said[0], [w.value for w in at.warning]
    quiet = open_link(page, {"model": "gpt-oss-20b", "mode": "inference", "fmt": "mxfp4", "acc": "h200", "engine": link["engine"]})
    assert not [w for w in quiet.warning if "figures below are what this setup would need if it ran" in w.value]


@pytest.mark.parametrize("page", ["memory", "inference"])
def test_a_model_served_in_another_format_than_it_ships_in_is_told_so(page):
    """gpt-oss-120b ships its experts in MXFP4 (60.8 GiB); in the sidebar's default BF16 it is 218 GiB, four times the
    experts, a setup nobody serves: one caption says so and names the format to choose; none where it is chosen."""
    from core.model.formats import FORMATS, weight_bytes
    from core.scenario import Scenario

    at = open_link(page, {"model": "gpt-oss-120b", "mode": "inference"})
    no_exception(at)
    said = [c.value.replace("\\", "") for c in at.caption if "ships in" in c.value]
    arch = Scenario(model="gpt-oss-120b").architecture
    gib = weight_bytes(arch, FORMATS["mxfp4"]) / 2**30
    assert gib == pytest.approx(60.8, abs=0.1)  # the gpt-oss model card's checkpoint size for gpt-oss-120b: 60.8 GiB
    assert len(said) == 1 and f"{gib:,.1f} GiB of weights" in said[0] and "MXFP4 experts + BF16" in said[0], said
    chosen = open_link(page, {"model": "gpt-oss-120b", "mode": "inference", "fmt": "mxfp4"})
    assert not [c for c in chosen.caption if "ships in" in c.value]


@pytest.mark.parametrize("page", ["memory", "inference"])
def test_the_warning_gives_the_pages_figure_with_the_cache_the_engine_keeps(page):
    """llama.cpp asked for an FP8 cache (it keeps BF16, FP16, Q8_0, Q4_0): the one warning names Q8_0, the nearest it
    keeps, with the page's own figure for it beside the setup's (Inference: the most concurrent sequences; Memory:
    memory per device), worked out here from the core's estimate of both setups."""
    from core.estimate import estimate
    from core.scenario import Scenario

    link = {"model": "llama-3.1-8b", "mode": "inference", "engine": "llama.cpp", "fmt": "gguf-q4_k_m", "kv": "fp8", "acc": "rtx-4090", "seq": "32768"}
    at = open_link(page, link)
    no_exception(at)
    said = [w.value.replace("\\", "") for w in at.warning if "llama.cpp has no FP8 KV cache" in w.value.replace("\\", "")]
    assert len(said) == 1, [w.value for w in at.warning]
    sc = Scenario(model="llama-3.1-8b", mode="inference", serving_engine="llama.cpp", weights_format="gguf-q4_k_m", kv_cache_format="fp8")
    sc = sc.replace(accelerator="rtx-4090", seq_len=32768)
    asked, kept = estimate(sc), estimate(sc.replace(kv_cache_format="q8_0"))
    if page == "inference":
        runs, here = kept.inference.max_concurrent_sequences, asked.inference.max_concurrent_sequences
        assert runs < here  # Q8_0's 8.5 bits hold fewer than FP8's 8
        expected = f"With the KV cache in Q8_0, which llama.cpp keeps here: {runs:,} concurrent sequences of 32,768 tokens ({here:,} with FP8 as set)."
    else:
        runs_gib, here_gib = kept.memory_per_device_bytes.total / 2**30, asked.memory_per_device_bytes.total / 2**30
        assert runs_gib > here_gib
        expected = f"With the KV cache in Q8_0, which llama.cpp keeps here: {runs_gib:,.1f} GiB per device ({here_gib:,.1f} GiB with FP8 as set)."
    assert said[0].endswith(expected), said[0]


@pytest.mark.parametrize("page", ["memory", "inference"])
def test_fp8_weights_without_fp8_matmuls_are_said_to_run_weight_only(page):
    """vLLM serves FP8 weights on an A100 through FP8 Marlin (16-bit activations): one caption says so, as the Plan
    page's "FP8 (weight-only)" and the launch's comment do; none on an H100 (FP8 matmuls), none where the engine
    does not run them there (Transformers on a T4 dequantizes: its warning says so)."""
    base = {"model": "llama-3.1-8b", "mode": "inference", "fmt": "fp8"}

    def said(link: dict[str, str]) -> list[str]:
        at = open_link(page, base | link)
        no_exception(at)
        return [c.value.replace("\\", "") for c in at.caption if "weight-only" in c.value.replace("\\", "")]

    a100 = said({"engine": "vllm", "acc": "a100-sxm-80gb"})
    assert len(a100) == 1 and a100[0].startswith("FP8 weights on NVIDIA A100 SXM4 80GB run weight-only in vLLM (FP8 Marlin"), a100
    assert "prompts at the 16-bit rate" in a100[0]
    assert said({"engine": "vllm", "acc": "h100-sxm"}) == []
    assert said({"engine": "hf-transformers", "acc": "t4"}) == []


@pytest.mark.parametrize(("mode", "tp", "words"), [("inference", "8", "it splits over 2, 5, 10, 20 and 40"), ("training", "4", "it splits over 2, 5 and 10")])
def test_a_tensor_parallel_size_that_does_not_split_the_heads_is_told_so(mode, tp, words):
    """Phi-3 Medium: 40 query heads, 10 KV heads. vLLM divides the KV heads by the tensor-parallel size or replicates
    them over a multiple of them, so TP 4 and 8 stop at start-up; Megatron divides the query groups (no replication).
    TP 2 says nothing (the plan helper's review of stop 48, H1)."""
    at = open_link("memory", {"model": "phi-3-medium-4k", "mode": mode, "tp": tp} | ({"stack": "megatron"} if mode == "training" else {}))
    no_exception(at)
    said = [t for t in (w.value.replace("\\", "") for w in at.warning) if "does not split the model's attention" in t]
    assert len(said) == 1 and "40 query heads and 10 KV heads" in said[0] and words in said[0], [w.value for w in at.warning]
    quiet = open_link("memory", {"model": "phi-3-medium-4k", "mode": mode, "tp": "2"} | ({"stack": "megatron"} if mode == "training" else {}))
    assert not [w for w in quiet.warning if "does not split" in w.value]
