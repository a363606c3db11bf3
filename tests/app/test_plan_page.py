"""The Plan page through AppTest: the root opens it, the headline is core's cheapest plan, serving metrics are core's,
and loading a plan puts its scenario into the sidebar and every page."""

import re

from app_pages.shared.planning import headline
from app_pages.shared.style import Units
from app_pages.shared.text import usd_text
from core.estimate import estimate
from core.plan import Goal, plan
from core.scenario import Scenario

from .conftest import charts, metric, no_exception, open_link


def _markdown(at) -> str:
    return " ".join(m.value for m in at.markdown).replace("\\", "")


def test_bare_root_opens_plan_and_a_root_link_opens_memory():
    at = open_link("home", {})
    no_exception(at)
    assert at.title[0].value == "Plan"
    at = open_link("home", {"model": "llama-3.1-70b", "seq": "8192"})
    no_exception(at)
    assert at.title[0].value == "Memory"
    want = Units("GiB")(estimate(Scenario(model="llama-3.1-70b", seq_len=8192)).memory_per_device_bytes.total)
    assert metric(at, "Memory per device") == want


def test_fine_tune_headline_is_cores_cheapest_plan():
    at = open_link("plan", {"model": "llama-3.1-70b", "goal": "fine-tune", "ptok": "20"})
    no_exception(at)
    best = plan(Goal(goal="fine-tune", model="llama-3.1-70b", tokens=20e6)).cheapest
    assert best is not None
    assert headline(best, "on-demand") in _markdown(at)
    assert len(charts(at)) == 2, "the frontier and the strategies are drawn"


def test_serving_metrics_are_cores():
    at = open_link("plan", {"goal": "serve", "rpd": "2000", "tin": "1000", "tout": "300"})
    no_exception(at)
    best = plan(Goal(goal="serve", model="llama-3.1-8b", requests_per_day=2000, input_tokens=1000, output_tokens=300)).cheapest
    assert best is not None
    assert metric(at, "Monthly bill") == f"${best.usd_per_month:,.0f}"
    # $1.38 and $6.00 (the bill over 2,000 x 1,300 tokens a day for 30.4 days, and over the 300 output ones): cents, as
    # the sentence under them says them (before: $1.385 beside "$1.38")
    assert best.usd_per_million_tokens >= 1 and best.usd_per_million_output_tokens >= 1
    assert metric(at, "USD / M tokens (in + out)") == f"${best.usd_per_million_tokens:,.2f}"
    assert metric(at, "USD / M output tokens") == f"${best.usd_per_million_output_tokens:,.2f}"
    assert "per-token API" in _markdown(at) or any("per-token API" in h.value for h in at.subheader)


def test_loading_the_cheapest_plan_sets_every_page():
    at = open_link("plan", {"model": "llama-3.1-8b", "goal": "fine-tune", "ptok": "50"})
    no_exception(at)
    best = plan(Goal(goal="fine-tune", model="llama-3.1-8b", tokens=50e6)).cheapest
    assert best is not None
    next(b for b in at.button if b.label == "Load the cheapest plan").click().run()
    no_exception(at)
    assert at.title[0].value == "Memory"
    want = Units("GiB")(estimate(Scenario.model_validate(best.scenario)).memory_per_device_bytes.total)
    assert metric(at, "Memory per device") == want
    assert at.session_state["acc"] == best.accelerator and at.session_state["mode"] == "training"


def test_an_invalid_goal_warns_and_keeps_the_inputs():
    at = open_link("plan", {"goal": "serve", "tin": "2000000", "tout": "200000"})
    no_exception(at)
    assert any("not valid" in w.value for w in at.warning)
    assert at.session_state["tin"] == 2_000_000


def test_require_bf16_on_the_page_is_the_goals_and_travels_in_the_link():
    """'Fine-tune Llama 3.3 70B on 50M tokens': the cheapest plan is LoRA on 8 x V100 in FP16 (no BF16, no
    FlashAttention-2). With the Plan page's 'Require BF16' on (link key pbf16), the headline is the planner's cheapest
    under Goal.require_bf16, on a part with BF16."""
    from core.catalog.accelerators import get_accelerator

    at = open_link("plan", {"model": "llama-3.3-70b", "goal": "fine-tune", "ptok": "50"})
    no_exception(at)
    loose = plan(Goal(goal="fine-tune", model="llama-3.3-70b", tokens=50e6)).cheapest
    assert not get_accelerator(loose.accelerator).supports_bf16  # the case the toggle is for
    at.toggle(key="pbf16").set_value(True).run()
    no_exception(at)
    assert at.query_params["pbf16"] == "True"
    strict = plan(Goal(goal="fine-tune", model="llama-3.3-70b", tokens=50e6, require_bf16=True)).cheapest
    assert get_accelerator(strict.accelerator).supports_bf16 and strict.accelerator != loose.accelerator
    assert headline(strict, "on-demand") in _markdown(at)


def test_the_longer_run_offer_reads_as_a_wait_within_twice_the_horizon():
    """The 70B pretraining's offer was 8 x MI300X for 5.6 years. The page now offers the cheapest run within twice
    the 30 days (core/money/picks.LONGER_RUN_FACTOR), with what it saves and the deadline that would plan on it; and
    the chart marks the planner's own picks."""
    from app_pages.shared.text import hours_text

    at = open_link("plan", {"model": "llama-3.1-70b", "goal": "pretrain", "ptok": "2000000"})
    no_exception(at)
    r = plan(Goal(goal="pretrain", model="llama-3.1-70b", tokens=2e12))
    longer = r.cheaper_if_longer
    assert longer is not None and longer.hours <= 2 * 720
    text = " ".join(c.value for c in at.caption).replace("\\", "")
    want = (
        f"Waiting longer would save ${r.cheapest.usd - longer.usd:,.0f}: {headline(longer, 'on-demand')} It runs past 30 days (no deadline set) "
        f"(the planner offers waits of up to 2 times that); set a deadline of {hours_text(longer.hours)} to plan on it."
    )
    assert want in text, text
    marks = next(t for t in charts(at)[0]["data"] if t.get("mode") == "markers+text")
    assert list(marks["text"]) == ["cheapest and fastest"] and (marks["x"][0], marks["y"][0]) == (r.cheapest.hours, r.cheapest.usd)


def test_a_serve_goal_plans_with_the_sidebars_serving_engine():
    """The Plan page planned vLLM whatever the sidebar's engine (it took the training stack, not the engine): with
    TensorRT-LLM in the sidebar, gpt-oss-120b's cheapest plan is TensorRT-LLM's own (MXFP4 on Hopper or Blackwell,
    data/format_kernels.csv), the CLI's, and the caption names the engine."""
    link = {"model": "gpt-oss-120b", "goal": "serve", "rpd": "100000", "tin": "1000", "tout": "300", "engine": "tensorrt-llm"}
    at = open_link("plan", link)
    no_exception(at)
    goal = Goal(goal="serve", model="gpt-oss-120b", requests_per_day=100_000, input_tokens=1000, output_tokens=300, serving_engine="tensorrt-llm")
    best = plan(goal).cheapest
    vllm = plan(goal.model_copy(update={"serving_engine": "vllm"})).cheapest
    assert best is not None and vllm is not None and best.accelerator != vllm.accelerator  # the engine decides the part
    assert headline(best, "on-demand") in _markdown(at) and "with TensorRT-LLM, up to" in headline(best, "on-demand")
    assert best.scenario["serving_engine"] == "tensorrt-llm" and best.weights_format == "mxfp4"
    assert any("served with TensorRT-LLM (from the sidebar)" in c.value.replace("\\", "").replace("*", "") for c in at.caption)
    # MXFP4 is the format gpt-oss ships in (post-trained so): no "what the plan trades" for it, as there is for AWQ
    assert not any(h.value == "What the cheapest plan trades for its price" for h in at.subheader)
    awq = open_link("plan", {"model": "llama-3.1-8b", "goal": "serve", "rpd": "2000", "tin": "1000", "tout": "300"})
    assert any(h.value == "What the cheapest plan trades for its price" for h in awq.subheader)


def test_an_engine_without_the_models_architecture_says_so_once():
    """DeepSpeed-MII builds no Qwen3 (data/engine_models.csv): the planner skips every part for that one reason and the
    page says it in one sentence naming the engines that run it, not once a part (no_plan_reason)."""
    from core.plan.result import no_plan_reason

    at = open_link("plan", {"model": "qwen3-8b", "goal": "serve", "rpd": "10000", "engine": "deepspeed-mii"})
    no_exception(at)
    said = at.error[0].value.replace("\\", "")
    assert said.startswith("No plan fits: DeepSpeed-MII (FastGen) does not run Qwen3 8B (model_type qwen3)"), said
    assert said.count("does not run") == 1 and "it runs in vLLM, SGLang, TensorRT-LLM, llama.cpp and 3 more engines" in said
    assert re.search(r"\(on a100-sxm-80gb, b200, b300 and \d+ more parts\)$", said), said
    # the grouping itself: each reason once with its parts, in the order first seen, the first four reasons
    lines = ["a: x", "b: y", "c: x", "d: x", "e: x", "f: z", "g: w", "h: v"]
    assert no_plan_reason(lines) == "x (on a, c, d and 1 more parts); y (on b); z (on f); w (on g)"
    assert no_plan_reason(["no colon here"]) == "no colon here"


def test_fp8_weights_on_a_gpu_without_fp8_matmuls_are_said_to_run_weight_only():
    """vLLM serves FP8 checkpoints on an A100 or an RTX 3090 through FP8 Marlin (data/format_kernels.csv): the plan's
    sentence and its table say so, an H100's plan does not."""
    from app_pages.shared.planning import headline, plan_table
    from core.plan import Goal, plan

    r = plan(Goal.model_validate({"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 20_000, "accelerators": ["rtx-3090", "h100-sxm"]}))
    fp8 = [p for p in r.plans if p.weights_format == "fp8"]
    assert {p.accelerator for p in fp8} == {"rtx-3090", "h100-sxm"}, [p.accelerator for p in fp8]
    for p in fp8:
        ampere = p.accelerator == "rtx-3090"
        assert ("FP8 weights (weight-only)" in headline(p, "on_demand")) is ampere
        assert (plan_table((p,), serving=True)[0]["Weights"] == "FP8 (weight-only)") is ampere


def test_a_llama_cpp_plan_with_a_q8_0_cache_says_so():
    """The planner keeps llama.cpp's K and V in Q8_0 where memory binds (tests/core/test_kv_cache_kernels.py): the
    sentence names the cache as it does an FP8 one."""
    from app_pages.shared.planning import headline
    from core.plan import Goal, plan

    goal = {"goal": "serve", "model": "llama-3.1-70b", "requests_per_day": 500, "serving_engine": "llama.cpp", "input_tokens": 32000, "output_tokens": 500}
    best = plan(Goal.model_validate(goal | {"tokens_per_s_per_user": 5, "ttft_s": 120})).cheapest
    assert best is not None and best.kv_cache_format == "q8_0"
    assert "weights with a Q8_0 KV cache on 1 x NVIDIA RTX 6000 Ada" in headline(best, "on_demand")


def test_a_pretraining_goal_on_a_fine_tuning_sized_dataset_says_so_and_offers_the_optimal_one():
    """The Pretrain goal kept the fine-tune's 20 million tokens and headlined "Pretrain Llama 3.1 8B: 49 min, $0.70". A
    link keeps its dataset; the page says it is fine-tuning-sized and offers the compute-optimal count: 20 tokens a
    parameter (Hoffmann et al. 2022), 8.03 billion parameters x 20 = 161 billion, which plans it in weeks."""
    at = open_link("plan", {"goal": "pretrain", "model": "llama-3.1-8b"})
    no_exception(at)
    said = [c.value.replace("\\", "") for c in at.caption if "fine-tuning-sized" in c.value.replace("\\", "")]
    assert len(said) == 1 and "about 161 billion" in said[0] and "20 million tokens" in said[0], said
    button = next(b for b in at.button if b.key == "ptok_optimal")
    assert button.label == "Plan it at 161,000 million tokens"
    button.click().run()
    no_exception(at)
    assert at.session_state["ptok"] == 161_000.0
    assert not [c for c in at.caption if "fine-tuning-sized" in c.value.replace("\\", "")]
    best = plan(Goal(goal="pretrain", model="llama-3.1-8b", tokens=161e9)).cheapest
    assert best is not None and best.hours is not None and best.hours > 24 * 7  # weeks, not minutes
    fine = open_link("plan", {"goal": "fine-tune", "model": "llama-3.1-8b"})
    assert not [c for c in fine.caption if "fine-tuning-sized" in c.value.replace("\\", "")]


def test_each_strategy_bar_says_how_many_devices_it_is_on():
    """The fine-tune goal for a 70B model headlines LoRA with ZeRO-3 over 8 devices, and the strategies chart under it
    said "LoRA: does not fit" (that bar was one H100): each bar names its devices, and LoRA over 8 is among them,
    worked out from the core's estimate of the same scenario."""
    from core.memory.estimate import estimate_memory

    at = open_link("plan", {"goal": "fine-tune", "model": "llama-3.1-70b"})
    no_exception(at)
    fig = next(f for f in charts(at) if f["layout"]["title"]["text"].startswith("Memory per device by strategy"))
    names = fig["data"][0]["y"]
    assert all(", one device<br>" in n or " over 8<br>" in n for n in names), names
    lora8 = Scenario(model="llama-3.1-70b", mode="training", method="lora", precision="bf16-true", gradient_checkpointing=True)
    lora8 = lora8.replace(zero_stage=3, data_parallel=8, seq_len=2048)
    fits = estimate_memory(lora8).fits
    from app_pages.shared.charts import peak_words

    label = f"LoRA, ZeRO-3 over 8<br>{'fits' if fits else '<b>does not fit</b>'}, peak at {peak_words(estimate_memory(lora8))}"
    assert label in names and fits, names  # each bar says the moment it is drawn at (stop 50's projector review, M12)


def test_a_cheapest_plan_far_below_its_market_shows_the_market_price_plan_and_loads_it():
    """The 70B fine-tune's cheapest plan rents a V100 listing at a twentieth of the part's market: the page says so
    with the band, names core's cheapest plan at a market price, and its button loads that plan's scenario."""
    at = open_link("plan", {"model": "llama-3.1-70b", "goal": "fine-tune", "ptok": "50"})
    no_exception(at)
    r = plan(Goal(goal="fine-tune", model="llama-3.1-70b", tokens=50e6))
    assert r.cheapest is not None and r.cheapest.price_note is not None and r.cheapest_at_market is not None
    text = _markdown(at)
    assert f"**Its price is {r.cheapest.price_note}**" in text
    assert "**At a market price:** " + headline(r.cheapest_at_market, "on-demand") in text
    # the one-line answer above the chart, the line a manager quotes, carries the caveat and the market price
    answer = next(m.value.replace("\\", "") for m in at.markdown if m.value.startswith("#### Cheapest plan"))
    assert answer.endswith(f"Its price is one listing far below its market; at a market price: {usd_text(r.cheapest_at_market.cost)}."), answer
    next(b for b in at.button if b.label == "Load the market-price plan").click().run()
    no_exception(at)
    assert at.title[0].value == "Memory"
    assert at.session_state["acc"] == r.cheapest_at_market.accelerator != r.cheapest.accelerator
    # a goal whose cheapest plan is at a market price has neither the line nor the button
    at = open_link("plan", {"model": "llama-3.1-70b", "goal": "serve", "rpd": "200000"})
    no_exception(at)
    assert plan(Goal(goal="serve", model="llama-3.1-70b", requests_per_day=200_000)).cheapest_at_market is None
    assert "At a market price" not in _markdown(at) and not any(b.label == "Load the market-price plan" for b in at.button)


def test_the_cloud_filter_plans_on_one_providers_prices_and_stays_in_the_link():
    """A seed-note topic (AWS, Azure and GCP GPU instances): the Plan page's cloud filter plans on that provider's
    rows only (Goal.providers), as the core plans it, and the link keeps it."""
    at = open_link("plan", {"model": "llama-3.1-70b", "goal": "fine-tune", "ptok": "50", "cloud": "aws"})
    no_exception(at)
    best = plan(Goal(goal="fine-tune", model="llama-3.1-70b", tokens=50e6, providers=["aws"])).cheapest
    assert best is not None and best.provider == "aws"
    headline = next(str(m.value) for m in at.markdown if str(m.value).startswith("#### Cheapest plan"))
    assert f"{best.devices} x {best.accelerator_name}".replace(".", "\\.") in headline
    assert at.query_params.get("cloud") in ("aws", ["aws"])
    shown = next(d.value for d in at.dataframe if "Where" in d.value.columns)
    assert len(shown) > 1 and all(str(w).startswith("aws ") for w in shown["Where"]), list(shown["Where"])


def test_a_prompt_past_the_models_context_window_is_one_sentence_not_a_list_of_parts():
    """no_plan_reason reads 'part: why' lines; a goal-wide sentence with a colon of its own is said whole."""
    at = open_link("plan", {"model": "gpt2", "goal": "serve", "tin": "100000"})
    no_exception(at)
    (err,) = [e.value.replace("\\", "") for e in at.error]
    assert err == (
        "No plan fits: GPT-2 124M takes at most 1,024 tokens a sequence (its context window); a 100,000-token prompt and a "
        "300-token answer are 100,300: serving engines refuse a longer context"
    )
