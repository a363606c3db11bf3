"""Expert parallelism on the Inference page (issue #27): the sidebar toggle (URL key `ep`, default off: a link without
it opens exactly as before), both bounds of the EP step stated, and a dense model or an engine without EP refused
in one line."""

import pytest

from app_pages.shared.fields import defaults, fields
from app_pages.shared.scenario_io import build_scenario
from core.estimate import estimate
from tests.app.conftest import metric, no_exception, open_link, run_app

FIELDS = fields()
R1 = {"model": "deepseek-r1", "fmt": "fp8", "kv": "fp8", "acc": "h200", "tp": "8", "batch": "256", "engine": "sglang"}


def _texts(at) -> str:
    return " ".join([c.value for c in at.caption] + [m.value for m in at.markdown] + [e.value for e in at.error]).replace("\\", "")


def test_an_old_link_opens_as_before_and_the_toggle_turns_ep_on():
    at = run_app("inference", R1)
    no_exception(at)
    assert at.toggle(key="ep").value is False
    before = metric(at, "Tokens/s, all users")
    assert "Expert parallel over" not in _texts(at)
    # the link's numbers are the core's with EP off (the field's default): the old link's results are unchanged
    link = defaults() | {k: FIELDS[k].parse(v) for k, v in R1.items()}
    assert "ep" not in R1 and link["ep"] is False
    sc, problem = build_scenario(link, "")
    assert problem is None and sc is not None and sc.expert_parallel is False
    assert before == f"{estimate(sc).inference.aggregate_tokens_per_s:,.0f}"
    at.toggle(key="ep").set_value(True).run()
    no_exception(at)
    assert at.query_params["ep"] in ("True", ["True"])  # bool fields write True, as flash does
    on = estimate(sc.replace(expert_parallel=True)).inference
    assert metric(at, "Tokens/s, all users") == f"{on.aggregate_tokens_per_s:,.0f}" != before
    text = _texts(at)
    assert "Expert parallel over 8 GPUs" in text and "two-batch overlap" in text
    assert f"{on.aggregate_tokens_per_s_overlapped:,.0f}" in text


def test_a_dense_model_with_ep_is_one_line():
    at = open_link("inference", {"model": "llama-3.1-8b", "ep": "true", "tp": "2"})
    no_exception(at)
    lines = [t for t in (e.value.replace("\\", "") for e in [*at.error, *at.warning]) if "mixture-of-experts model: this one is dense" in t]
    assert len(lines) == 1 and "\n" not in lines[0].strip(), lines


def test_llama_cpp_with_ep_is_one_line():
    at = open_link("inference", {"model": "qwen3-30b-a3b", "ep": "true", "tp": "2", "engine": "llama.cpp", "fmt": "gguf-q4_k_m"})
    no_exception(at)
    lines = [t for t in (e.value.replace("\\", "") for e in [*at.error, *at.warning]) if "llama.cpp has no expert-parallel serving" in t]
    assert len(lines) == 1 and "\n" not in lines[0].strip(), lines


def test_the_plan_sentence_and_table_say_expert_parallel():
    from app_pages.shared.planning import headline, plan_table
    from core.plan import Goal, plan

    r = plan(Goal(goal="serve", model="deepseek-r1", requests_per_day=2_000_000, input_tokens=1000, output_tokens=1000, expert_parallel=True))
    c = r.cheapest
    assert c.expert_parallel
    assert f"(each expert-parallel over {c.tensor_parallel} GPUs)" in headline(c, "on-demand")
    rows = plan_table(r.plans, serving=True)
    assert any(row["Replicas x TP"].endswith("(expert-parallel)") for row in rows)
    assert any(not row["Replicas x TP"].endswith("(expert-parallel)") for row in rows)


def test_the_memory_page_breakdown_shows_the_ep_weights_per_device():
    """The Memory page's per-device bars with ep on: weights = all weights - routed experts x 7/8 (93.9 GiB for
    DeepSeek-R1 FP8 on 8 GPUs, against 78.3 GiB under TP 8), from the formula the speed and the planner use; its
    assumptions say expert-parallel, not that the MLA cache is replicated on every rank."""
    from core.memory.components import expert_parallel_weight_bytes
    from core.scenario import Scenario
    from tests.app.conftest import charts

    at = run_app("memory", R1 | {"ep": "True"})
    no_exception(at)
    want = expert_parallel_weight_bytes(Scenario(model="deepseek-r1").architecture, "fp8", 8) / 2**30
    bars = {t["name"]: t["x"][0] for f in charts(at) for t in f["data"] if t.get("y") == ["per device"]}
    assert bars["Weights"] == pytest.approx(want)
    text = _texts(at)
    assert "expert-parallel over 8 devices" in text and "replicated on every tensor-parallel rank" not in text


@pytest.mark.parametrize("batch", ["2", "256"])
@pytest.mark.parametrize("model", ["deepseek-r1", "qwen3-235b-a22b"])
def test_the_memory_page_gives_one_count_of_sequences_with_ep(model, batch):
    """Memory page, EP on over 8 H200: "Sequences the pool holds" and "Largest batch that fits" are one answer, in whole
    sequences. They read 219.61 against 840 (DeepSeek-R1, batch 2): the pool's count divided it by the batch's own KV
    cache over the batch, where a rank holds ceil(B/8) of them, so it moved with the batch; and it was a fraction."""
    at = run_app("memory", R1 | {"model": model, "batch": batch, "seq": "4096", "engine": "vllm", "ep": "True"})
    no_exception(at)
    largest = metric(at, "Largest batch that fits")
    assert metric(at, "Sequences the pool holds") == largest
    assert "." not in largest and int(largest.replace(",", "")) % 8 == 0  # whole sequences, the same on each rank


def test_the_inference_page_counts_the_same_sequences_and_devices_with_ep():
    """One answer on every page: with EP on over 4 H200 (too few for DeepSeek-R1 FP8's experts), the Memory page's fewest
    devices is an 8-GPU expert-parallel replica, and the Inference page's speeds and its most concurrent sequences are
    for that replica (they were for TP 2 x 3 pipeline stages, without EP)."""
    params = R1 | {"tp": "4", "batch": "64", "seq": "4096", "ep": "True"}
    memory = run_app("memory", params)
    no_exception(memory)
    assert metric(memory, "Fewest devices that fit") == "8 devices"
    assert "(EP 8)" in next(m.proto.help for m in memory.metric if m.label == "Fewest devices that fit").replace("\\", "")
    eight = run_app("memory", params | {"tp": "8"})
    inference = run_app("inference", params)
    no_exception(inference)
    assert metric(inference, "Most concurrent sequences") == metric(eight, "Largest batch that fits") == metric(eight, "Sequences the pool holds")
    assert "speeds are for the smallest layout that fits (8 devices, expert-parallel)" in _texts(inference) + " ".join(w.value for w in inference.warning)
