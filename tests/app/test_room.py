"""The workshop room (issue #29 parts 1 and 3), without a browser: a pasted or fetched config.json is confirmed beside
the paste box in one line (its name escaped: a config's name is user input), and the presenter view's link key moves a
page's main inputs from the sidebar to beside its chart. The layout itself is measured in tests/browser/test_room.py."""

import json

from app_pages.shared.planning import headline
from app_pages.shared.text import plain
from core.memory.validation import load_cases
from core.plan import Goal, plan
from tests.app.conftest import charts, metric, no_exception, open_link, run_app
from tests.app.test_hub_import import _fetch, hub  # noqa: F401  (the loopback Hub fixture)

QWEN3_MOE = {  # Qwen3-30B-A3B's shape, as pasted: no name in it
    "model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
    "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_attention_heads": 32,
    "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
}  # fmt: skip


def _read_line(at) -> str:
    lines = [c.value for c in at.sidebar.caption if c.value.startswith("Read: ")]
    assert len(lines) == 1, [c.value for c in at.sidebar.caption]
    return lines[0]


def test_a_pasted_config_is_confirmed_in_one_line():
    at = run_app(params={"src": "config"})
    at.text_area(key="cfg_text").set_value(json.dumps(QWEN3_MOE)).run()
    no_exception(at)
    line = _read_line(at)
    for words in ("**qwen3\\_moe**", "30\\.5B parameters (3\\.35B active)", "48 layers", "GQA \\(32 heads / 4 KV\\)", "context 40,960", "KV cache 96 KiB per token"):
        assert words in line, (words, line)


def test_the_config_name_is_escaped():
    hostile = QWEN3_MOE | {"_name_or_path": "[click](https://evil.example)<img src=x onerror=alert(1)>**bold**"}
    at = run_app(params={"src": "config"})
    at.text_area(key="cfg_text").set_value(json.dumps(hostile)).run()
    no_exception(at)
    line = _read_line(at)
    assert "](" not in line and "<img" not in line and "https://" not in line
    assert "evil\\.example" in line  # what is left of the name is shown, escaped


def test_latent_attention_and_a_sliding_window_are_named():
    mla = {
        "model_type": "deepseek_v3", "_name_or_path": "tiny-mla", "hidden_size": 1024, "intermediate_size": 2816,
        "moe_intermediate_size": 256, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
        "first_k_dense_replace": 1, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
        "q_lora_rank": 256, "kv_lora_rank": 128, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64,
        "vocab_size": 32000, "max_position_embeddings": 16384,
    }  # fmt: skip
    at = run_app(params={"src": "config"})
    at.text_area(key="cfg_text").set_value(json.dumps(mla)).run()
    assert "MLA \\(latent 128\\)" in _read_line(at) and "**tiny\\-mla**" in _read_line(at) and "KV cache 1\\.25 KiB" in _read_line(at)
    window = {  # Mistral 7B v0.1: a 4,096-token window on every layer
        "model_type": "mistral", "_name_or_path": "windowed", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
        "max_position_embeddings": 32768, "sliding_window": 4096,
    }  # fmt: skip
    at.text_area(key="cfg_text").set_value(json.dumps(window)).run()
    assert "sliding window 4,096 on 32 of 32 layers" in _read_line(at)


def test_a_fetched_config_is_called_by_its_hub_id(hub):  # noqa: F811
    at = _fetch("Qwen/Qwen3-8B")
    no_exception(at)
    assert "**Qwen/Qwen3\\-8B**" in _read_line(at)
    assert json.loads(at.text_area(key="cfg_text").value)["_name_or_path"] == "Qwen/Qwen3-8B"


def test_the_presenter_view_draws_the_main_inputs_beside_the_chart():
    at = open_link("memory", {"present": "true"})
    no_exception(at)
    sidebar_keys = {getattr(w, "key", None) for kind in ("selectbox", "select_slider") for w in at.sidebar.get(kind)}
    main_keys = {getattr(w, "key", None) for kind in ("selectbox", "select_slider") for w in at.main.get(kind)}
    assert {"acc", "batch", "seq", "fmt"} <= main_keys and not {"acc", "batch", "seq", "fmt"} & sidebar_keys
    assert at.toggle(key="present").value is True
    at.toggle(key="present").set_value(False).run()  # off again: the inputs go back to the sidebar
    no_exception(at)
    sidebar_keys = {getattr(w, "key", None) for kind in ("selectbox", "select_slider") for w in at.sidebar.get(kind)}
    assert {"acc", "batch", "seq", "fmt"} <= sidebar_keys


def test_the_training_page_presents_its_time_and_cost_chart_with_its_inputs():
    at = open_link("training", {"present": "true", "mode": "training"})
    no_exception(at)
    assert {"model", "method"} <= {getattr(w, "key", None) for kind in ("selectbox", "radio") for w in at.main.get(kind)}
    assert "tokens" in {getattr(w, "key", None) for w in at.main.get("number_input")}
    # the narrow column draws the method one choice a line ("Full fine-tune" was cut in a row of buttons at 1024 px)
    method = next(r for r in at.main.get("radio") if r.key == "method")
    assert "Full (all weights)" in method.options
    method.set_value("qlora").run()
    no_exception(at)
    assert at.session_state["method"] == "qlora" and at.query_params.get("method") == "qlora"


def _keys(where, *kinds: str) -> set:
    return {getattr(w, "key", None) for kind in kinds for w in where.get(kind)}


def test_the_inference_page_presents_its_decode_chart_with_its_inputs():
    at = open_link("inference", {"present": "true"})
    no_exception(at)
    moved = {"model", "acc", "fmt", "seq"}
    assert moved <= _keys(at.main, "selectbox", "select_slider") and not moved & _keys(at.sidebar, "selectbox", "select_slider")


def test_plan_draws_every_goal_input_beside_its_chart_with_a_short_answer_above():
    """The default view is chart-first too (issue #29): the goal's inputs in the column beside the chart, the ones
    past the first three folded under them; none is lost. The short answer names the same plan as the full one."""
    goals = {
        "fine-tune": ({"goal", "ptok", "epochs", "deadline", "pseq", "budget", "price", "cloud", "pbf16"}, {"ptok": "20"}, {"tokens": 20e6}),
        "serve": ({"goal", "rpd", "tin", "tout", "peak", "ttft", "tps", "budget", "price", "cloud", "pep"}, {"rpd": "10000"}, {"requests_per_day": 10_000}),
    }
    for goal, (keys, link, asked) in goals.items():
        at = open_link("plan", {"goal": goal, "budget": "1000000", **link})  # a budget set: the folded inputs open
        no_exception(at)
        drawn = _keys(at.main, "number_input", "selectbox", "segmented_control", "button_group", "toggle")
        assert keys <= drawn, (goal, keys - drawn)
        assert any(e.label.startswith(("Length, budget", "Peak")) and e.proto.expanded for e in at.main.expander), goal
        best = plan(Goal(goal=goal, model="llama-3.1-8b", budget_usd=1e6, **asked)).cheapest
        assert best is not None
        short = [m.value for m in at.markdown if m.value.startswith("#### Cheapest plan for")]
        assert len(short) == 1 and plain(headline(best, "on-demand", short=True)) in short[0], short


def test_method_sums_up_the_published_cases_beside_its_chart():
    at = run_app("method")
    no_exception(at)
    cases = load_cases()
    within = sum(abs(c.estimated_bytes() / c.measured_bytes - 1) <= 0.15 for c in cases)
    assert metric(at, "Cases within 15%") == f"{within} of {len(cases)}"
    titles = [c["layout"]["title"]["text"] for c in charts(at)]  # the published cases first, then our own GPU runs
    assert titles == ["Our estimate against each published measurement", "Our estimate against each of our GPU runs (what nvidia-smi showed)"]


def test_the_memory_page_presents_a_workshops_training_knobs_beside_its_chart():
    """In training mode the instructor's knobs are beside the chart (the sidebar had precision, checkpointing and ZeRO,
    and opening it at 1024 px squeezed the chart the room watches): six inputs, the method first after the part."""
    from app_pages.shared.fields import defaults
    from app_pages.shared.presenter import MAX_BESIDE, beside

    at = open_link("memory", {"present": "true", "mode": "training"})
    no_exception(at)
    keys = beside(defaults() | {"present": True, "mode": "training"}, "memory")
    assert keys == ("acc", "method", "seq", "batch", "gc", "zero") and len(keys) == MAX_BESIDE
    assert {"acc", "seq", "batch", "zero"} <= _keys(at.main, "selectbox", "select_slider")
    assert "gc" in _keys(at.main, "toggle") and "method" in _keys(at.main, "radio")
    assert not {"gc", "zero", "method"} & _keys(at.sidebar, "selectbox", "toggle", "radio", "segmented_control", "button_group")
    # a link that sets the objective (DPO) shows it beside the chart: the room must see why LoRA at batch 1 takes 110 GiB
    dpo = beside(defaults() | {"present": True, "mode": "training", "obj": "dpo"}, "memory")
    assert dpo == ("acc", "method", "obj", "seq", "batch", "gc")
    at = open_link("memory", {"present": "true", "mode": "training", "obj": "dpo", "method": "lora"})
    no_exception(at)
    assert "obj" in _keys(at.main, "selectbox", "select_slider", "radio", "segmented_control")


def test_the_memory_bar_says_at_which_moment_of_the_step_it_is_drawn():
    """Checkpointing moves a full fine-tune's peak from the loss step to the optimizer step, and the bar, drawn at the
    peak, shows the gradients whole and no activations: the room read it as checkpointing creating gradients. The
    axis says the moment (core's peak_phase), as the metric under it does; a serving bar says none."""
    from core.estimate import estimate
    from core.scenario import Scenario

    for gc in ("false", "true"):
        at = open_link("memory", {"mode": "training", "gc": gc, "model": "llama-3.1-8b"})
        no_exception(at)
        r = estimate(Scenario(model="llama-3.1-8b", mode="training", gradient_checkpointing=gc == "true", seq_len=4096))
        words = {"loss": "the loss step", "optimizer step": "the optimizer step"}.get(r.peak_phase, r.peak_phase)
        bar = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Memory per device"))
        assert bar["layout"]["xaxis"]["title"]["text"] == f"Memory per device at its peak, {words} (GiB)"
        assert metric(at, "Peak happens at") == words
    served = open_link("memory", {"model": "llama-3.1-8b"})
    bar = next(c for c in charts(served) if c["layout"]["title"]["text"].startswith("Memory per device"))
    assert bar["layout"]["xaxis"]["title"]["text"] == "Memory per device (GiB)"


def test_the_training_page_opens_on_its_chart_in_the_presenter_view():
    """The Training page drew its warnings and four metrics above its chart, which the presenter view then put below a
    1024 x 768 projector's fold: there the chart comes first and the metrics follow; elsewhere the metrics lead."""

    def order(at) -> tuple[int, int]:
        elements = list(_walk(at.main))  # depth first, in page order
        first_metric = next(i for i, e in enumerate(elements) if type(e).__name__ == "Metric")
        first_chart = next(i for i, e in enumerate(elements) if getattr(getattr(e, "proto", None), "component_name", "") == "llmgp_chart")
        return first_chart, first_metric

    link = {"mode": "training", "model": "llama-3.1-8b", "acc": "h100-sxm"}
    presenting = open_link("training", {**link, "present": "true"})
    no_exception(presenting)
    chart, first_metric = order(presenting)
    assert chart < first_metric
    default = open_link("training", link)
    no_exception(default)
    chart, first_metric = order(default)
    assert first_metric < chart


def _walk(block):
    for child in getattr(block, "children", {}).values():
        yield child
        yield from _walk(child)


def test_the_presenter_view_opens_training_on_its_chart_before_its_notes_and_train_vs_serve_on_its_answer():
    """Stop 50's projector review: Training's info box (the sidebar set to serving), its dataset caption and its Price
    input sat above the presenter view's chart (H3); Training vs inference showed nine inputs before its answer at
    1280 x 720 (H4). In the presenter view the chart, and the answer with its charts, now come first."""

    def first(at, kind: str) -> int:
        elements = list(_walk(at.main))
        if kind == "chart":
            return next(i for i, e in enumerate(elements) if getattr(getattr(e, "proto", None), "component_name", "") == "llmgp_chart")
        return next(i for i, e in enumerate(elements) if type(e).__name__ == kind)

    training = open_link("training", {"model": "llama-3.1-8b", "present": "true"})  # the sidebar serving: an info box
    no_exception(training)
    assert training.info and first(training, "chart") < min(first(training, "Info"), first(training, "ButtonGroup"))
    link = {"model": "llama-3.1-8b", "mode": "training", "method": "lora", "tokens": "0.02"}
    presenting = open_link("train_vs_serve", {**link, "present": "true"})
    no_exception(presenting)
    assert first(presenting, "Metric") < first(presenting, "chart") < first(presenting, "NumberInput")
    default = open_link("train_vs_serve", link)
    no_exception(default)
    assert first(default, "NumberInput") < first(default, "Metric")


def test_the_presenter_view_names_the_scenario_above_the_bars():
    """The model and the method are not among the inputs beside the Memory chart: the room never saw "Llama 3.1 8B,
    QLoRA" (stop 50's projector review, M2). One line above the bars says it, in the presenter view only."""
    link = {"model": "llama-3.1-8b", "mode": "training", "method": "qlora", "acc": "rtx-4090"}
    presenting = open_link("memory", {**link, "present": "true"})
    no_exception(presenting)
    want = "Llama 3.1 8B · QLoRA · 1 × 4,096 tokens · 1 × NVIDIA GeForce RTX 4090"
    assert any(m.value.replace("\\", "") == f"**{want}**" for m in presenting.markdown)
    default = open_link("memory", link)
    assert not any(want in m.value.replace("\\", "") for m in default.markdown)
