"""Every page through AppTest: no exception, numbers equal core's for the same
scenario, and an input change updates them."""

import base64
import math

import numpy as np
import pytest

from app_pages.shared.style import Units
from app_pages.shared.text import device_hours_text, flops_text, hours_text, usd_text
from core.estimate import estimate
from core.memory.validation import load_cases
from core.money.buy_rent import buy_vs_rent
from core.money.compare import compare_accelerators
from core.money.serving import Traffic, serving_plan
from core.scenario import Scenario

from .conftest import PAGES, array_of, charts, metric, no_exception, open_link, run_app


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("mode", ["inference", "training"])
def test_every_page_runs_in_both_modes(page, mode):
    at = run_app(page, params={"mode": mode})
    no_exception(at)
    assert at.title and not at.error


def test_training_page_numbers_equal_core_and_follow_tokens():
    params = {"mode": "training", "tokens": "100", "model": "llama-3.1-8b", "zero": "1", "dp": "8"}
    at = run_app("training", params=params)
    no_exception(at)
    sc = Scenario(model="llama-3.1-8b", mode="training", train_tokens=100e9, zero_stage=1, data_parallel=8, seq_len=4096)
    est = estimate(sc).training
    assert metric(at, "Compute") == flops_text(est.flops)
    assert metric(at, "Device-hours") == device_hours_text(est.gpu_hours)
    at.number_input(key="tokens").set_value(200.0).run()
    no_exception(at)
    assert metric(at, "Compute") == flops_text(2 * est.flops)


@pytest.mark.parametrize("fmt", ["awq-4bit", "gguf-q4_k_m", "fp8"])
def test_a_serving_format_is_trained_from_its_16_bit_weights(fmt):
    """Serving weights in a quantized format (AWQ, GGUF, FP8) cannot be fully fine-tuned: the Training page showed an
    error box for them. It now trains the model's weights in the sidebar's precision (BF16 here), says so, and its
    numbers are that scenario's; weights already in BF16 get no such note."""
    at = run_app("training", params={"model": "qwen3-32b", "fmt": fmt, "acc": "rtx-4090"})
    no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert any("BF16 weights" in i.value and "QLoRA" in i.value for i in at.info), [i.value for i in at.info]
    # no training tokens in the sidebar: the page bills the Plan page's dataset, 20 million tokens x 1 epoch by default
    est = estimate(Scenario(model="qwen3-32b", mode="training", accelerator="rtx-4090", train_tokens=2e7, seq_len=4096)).training
    assert metric(at, "Compute") == flops_text(est.flops)
    assert metric(at, "Device-hours") == device_hours_text(est.gpu_hours)
    tvs = run_app("train_vs_serve", params={"model": "qwen3-32b", "fmt": fmt, "acc": "rtx-4090"})
    no_exception(tvs)
    assert not tvs.error and any("BF16 weights" in c.value for c in tvs.caption)
    plain = run_app("training", params={"model": "qwen3-32b", "acc": "rtx-4090"})
    assert not any("BF16 weights" in i.value for i in plain.info)
    assert metric(plain, "Compute") == metric(at, "Compute")


def test_a_run_of_minutes_reads_in_minutes():
    """Qwen3 32B on 100M tokens: the fastest offer (up to a provider's 64 devices, 15 min of setup included) takes
    minutes, which the metric once showed as "0.0 h"; it reads in minutes, as the Plan page does."""
    at = run_app("training", params={"model": "qwen3-32b", "acc": "rtx-4090", "price": "spot", "mode": "training", "tokens": "0.1"})
    no_exception(at)
    fastest = metric(at, "Fastest run")
    assert fastest.endswith(" min") and fastest != "0 min", fastest
    assert [hours_text(h) for h in (0.01, 0.05, 5.25, 100.0)] == ["36 s", "3 min", "5.2 h", "4.2 days"]


def test_prices_read_in_whole_dollars_cents_or_two_significant_digits():
    """Every page says a price one way (a Plan metric said $1.385 beside "$1.38" in its sentence): whole dollars from
    $100, cents from $1, two significant digits below (a million tokens at $0.021 is not $0.02); never nan."""
    prices = (25696.4, 100, 78.24, 2.371, 1, 0.5, 0.021, 0.0021, 0, float("nan"))
    assert [usd_text(u) for u in prices] == ["$25,696", "$100", "$78.24", "$2.37", "$1.00", "$0.50", "$0.021", "$0.0021", "$0.00", "—"]


def test_a_room_past_the_memory_search_reads_as_a_floor():
    """Qwen2.5 0.5B on an H200 at 512 tokens: vLLM's pool holds about 21,000 sequences, and the memory's search stops at
    4,096 (core/memory/fit.MAX_BATCH): the Inference page said "4,096" as if it were the room; it says "4,096+"."""
    from core.memory.fit import MAX_BATCH

    sc = Scenario(model="qwen2.5-0.5b", mode="inference", accelerator="h200", seq_len=512)
    r = estimate(sc)
    assert r.inference.max_concurrent_sequences == MAX_BATCH == 4096 and r.kv_pool_sequences > 20_000
    at = run_app("inference", params={"model": "qwen2.5-0.5b", "acc": "h200", "seq": "512", "mode": "inference"})
    no_exception(at)
    assert metric(at, "Most concurrent sequences") == "4,096+"
    assert any("(room for 4,096+)" in a.value for a in [*at.info, *at.success, *at.warning]), [a.value for a in at.info]
    small = run_app("inference", params={"model": "llama-3.1-70b", "acc": "h100-sxm", "fmt": "fp8", "tp": "2", "mode": "inference"})
    assert not metric(small, "Most concurrent sequences").endswith("+")
    # the Memory page writes the same floor the same way, in its metric and its help
    mem = run_app("memory", params={"model": "qwen2.5-0.5b", "acc": "h200", "seq": "512", "mode": "inference"})
    no_exception(mem)
    assert metric(mem, "Largest batch that fits") == "4,096+"
    assert not [m for m in mem.metric if "at least 4,096" in (m.help or "")]


def test_inference_page_numbers_equal_core_and_follow_batch():
    at = run_app("inference", params={"model": "llama-3.1-70b", "fmt": "fp8", "tp": "2", "batch": "32", "seq": "8192"})
    no_exception(at)
    sc = Scenario(model="llama-3.1-70b", weights_format="fp8", tensor_parallel=2, batch_size=32, seq_len=8192)
    inf = estimate(sc).inference
    assert metric(at, "Time to first token") == f"{inf.time_to_first_token_s * 1e3:,.0f} ms"
    assert metric(at, "Tokens/s per user") == f"{inf.decode_tokens_per_s:,.1f}"
    assert metric(at, "Most concurrent sequences") == f"{inf.max_concurrent_sequences:,}"
    plan = serving_plan(sc, Traffic(requests_per_day=10_000, input_tokens_per_request=1_000, output_tokens_per_request=300), max_utilisation=0.7)
    assert metric(at, "Replicas needed") == f"{plan.replicas:,}"
    before = metric(at, "Tokens/s per user")
    at.select_slider(key="batch").set_value(1).run()
    no_exception(at)
    assert metric(at, "Tokens/s per user") != before


@pytest.mark.parametrize(
    "query",
    [{"model": "llama-3.1-70b"}, {"model": "qwen3-32b", "acc": "a100-sxm-80gb", "seq": "16384", "batch": "8", "kv": "fp8"}],
)
def test_inference_charts_draw_the_replica_the_metrics_describe(query):
    """A model that needs two devices (the page says its speeds are for that layout): the decode chart passes through
    the metrics' own speeds at the scenario's batch (it drew one device: about 18 tokens/s next to 33.5), and the KV
    chart leaves memory for the KV cache at a short context (it showed none: one device's weights alone overflow)."""
    at = run_app("inference", query)
    no_exception(at)
    inf = estimate(
        Scenario(
            model=query["model"],
            accelerator=query.get("acc", "h100-sxm"),
            seq_len=int(query.get("seq", 4096)),
            batch_size=int(query.get("batch", 1)),
            kv_cache_format=query.get("kv", "bf16"),
        )
    ).inference
    assert inf.devices_per_replica > 1
    decode = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Decode"))
    i = decode["data"][0]["x"].index(inf.batch_size)
    assert decode["data"][0]["y"][i] == pytest.approx(inf.decode_tokens_per_s, rel=1e-6)
    assert decode["data"][1]["y"][i] == pytest.approx(inf.aggregate_tokens_per_s, rel=1e-6)
    assert metric(at, "Tokens/s per user") == f"{inf.decode_tokens_per_s:,.1f}"
    kv = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("KV"))
    free = kv["data"][1]["y"]
    first = np.frombuffer(base64.b64decode(free["bdata"]), dtype=free["dtype"])[0] if isinstance(free, dict) else free[0]
    assert first > 0
    # the context axis in the words people use for contexts (it read "1000" beside "10k")
    ticks = kv["layout"]["xaxis"]["ticktext"]
    assert "4k" in ticks and "1000" not in ticks and set(ticks) <= {"256", "1k", "4k", "16k", "64k", "128k", "256k", "1M"}


def test_traffic_input_changes_monthly_cost():
    at = run_app("inference")
    before = metric(at, "Utilisation")
    at.number_input(key="rpd").set_value(1_000_000).run()
    no_exception(at)
    assert metric(at, "Utilisation") != before


def test_train_vs_serve_uses_core_bills():
    at = run_app("train_vs_serve", params={"tokens": "10", "mode": "training"})
    no_exception(at)
    sc = Scenario(model="llama-3.1-8b", mode="training", train_tokens=10e9, seq_len=4096)
    assert metric(at, "Training run (one-off)") == usd_text(estimate(sc).training.run_usd)  # the one bill: setup and communication in


def test_train_vs_serve_draws_and_keeps_the_links_serving_engine_while_training():
    """In training mode the sidebar draws no serving engine: the page ignored a link's engine= and sent the reader to
    an input that was not there. It draws the engine itself, serves with the link's, and keeps the training bill
    where nothing is priced for serving."""
    link = {"model": "llama-3.1-8b", "mode": "training", "acc": "v100-32gb", "engine": "llama.cpp", "fmt": "gguf-q4_k_m"}
    at = run_app("train_vs_serve", params=link)
    no_exception(at)
    engine = next(s for s in at.selectbox if s.label == "Serving engine")
    assert engine.value == "llama.cpp"
    assert not [w for w in at.warning if w.value.startswith("No serving bill")]  # llama.cpp runs on a V100
    assert any(m.label == "Serving (per month)" for m in at.metric)
    engine.set_value("vllm").run()
    no_exception(at)
    said = [w.value.replace("\\", "") for w in at.warning if w.value.startswith("No serving bill")]
    assert len(said) == 1 and "(*Serving engine* above)" in said[0], said
    assert any(m.label == "Training run (one-off)" for m in at.metric)


def test_train_vs_serve_keeps_the_training_bill_where_the_serving_engine_cannot_run():
    """A fine-tune the planner puts on V100s (no BF16: FP16 LoRA) loads into the sidebar with the default engine, vLLM,
    whose builds left Volta (data/engine_hardware.csv). The page showed nothing but the refusal; the training bill
    does not depend on the engine, so it stays, with the one line that says why there is no serving bill."""
    from app_pages.shared.fields import defaults, fields
    from app_pages.shared.scenario_io import build_scenario

    link = {"model": "llama-3.1-8b", "mode": "training", "acc": "v100-32gb"}
    at = run_app("train_vs_serve", params=link)
    no_exception(at)
    sc, _ = build_scenario(defaults() | {k: fields()[k].parse(v) for k, v in link.items()}, "")  # the page's own scenario
    assert sc is not None
    training = estimate(sc.replace(train_tokens=20e6)).training
    assert training is not None and training.run_usd is not None
    assert metric(at, "Training run (one-off)") == usd_text(training.run_usd)
    said = [w.value.replace("\\", "") for w in at.warning if w.value.startswith("No serving bill")]
    assert len(said) == 1 and "vllm does not run on NVIDIA V100" in said[0] and "llama.cpp" in said[0], said
    assert "Serving engine" in said[0]  # another engine serves there: the sidebar's input to change
    assert not any(m.label == "Serving (per month)" for m in at.metric)
    k80 = run_app("train_vs_serve", params={"model": "llama-3.2-1b", "mode": "training", "acc": "k80"})
    no_exception(k80)
    said = [w.value.replace("\\", "") for w in k80.warning if w.value.startswith("No serving bill")]
    assert len(said) == 1 and "Serving engine" not in said[0], said  # no engine runs on a K80: nothing to switch to


def test_buy_vs_rent_with_typed_price():
    at = run_app("train_vs_serve", params={"acc": "h100-sxm", "buy_usd": "30000"})
    no_exception(at)
    # a serving setup (the sidebar's default mode) is bought or rented as its fleet, not as the training layout: the
    # sidebar's 8B at its default batch on one H100 replica (its bill's replicas x devices: test_one_answer.py)
    shown = next(m for m in at.metric if m.label == "Devices")
    assert "serving fleet" in shown.help
    devices = int(shown.value)
    assert devices == 1
    expected = buy_vs_rent("h100-sxm", usd_per_kwh=0.15, utilisation=0.6, devices=devices, purchase_usd_per_device=30000, pue=1.58)
    assert metric(at, "Own: per year") == f"${expected.own_usd_per_year:,.0f}"
    assert metric(at, "Rent: per year") == f"${expected.rent_usd_per_year:,.0f}"
    assert metric(at, "Pays for itself after") == f"{expected.payback_months:,.0f} months"


def test_break_even_beyond_every_hour_of_the_year_reads_never():
    """70B training on H100s: owning would need more hours than a year has to cost less than renting (the page read
    "Break-even utilisation 256%"); it says never, and why, and the owning line rises with the electricity paid."""
    at = run_app("train_vs_serve", params={"model": "llama-3.1-70b", "mode": "training"})
    no_exception(at)
    shown = next(m for m in at.metric if m.label == "Break-even utilisation")
    assert shown.value == "never" and "of the year's hours" in shown.help.replace("\\", "")  # help is Markdown, escaped
    pays = next(m for m in at.metric if m.label == "Pays for itself after")
    assert "owning never costs less per year" in pays.help.replace("\\", "")
    own = next(t for t in charts(at) if "Owning vs renting" in t["layout"]["title"]["text"])["data"][0]["y"]
    assert own[-1] > own[0]


def test_buy_vs_rent_answers_by_default_even_for_a_consumer_card():
    """Issue #11: no purchase price typed, an RTX 4080 that no cloud rents: still an answer, never a stopped page."""
    at = run_app("train_vs_serve", params={"acc": "rtx-4080", "model": "llama-3.2-1b"})
    no_exception(at)
    assert metric(at, "Own: per year").startswith("$")
    assert any("no cloud rents" in c.value for c in at.caption)


def test_gpu_vs_tpu_table_covers_every_accelerator():
    at = run_app("gpu_vs_tpu")
    no_exception(at)
    rows = compare_accelerators(Scenario(model="llama-3.1-8b", seq_len=4096))
    assert len(at.dataframe[0].value) == len(rows)
    assert charts(at)


def test_gpu_vs_tpu_bills_training_runs_as_the_training_page_does():
    """In training mode with no token count in the sidebar, GPU vs TPU left its run cost and hours empty while the
    Training page billed the Plan page's dataset (20 million tokens by default): it bills that dataset too, says so,
    and its H100 run is core's bill of it, to the cent."""
    at = run_app("gpu_vs_tpu", params={"model": "llama-3.1-8b", "mode": "training", "method": "lora"})
    no_exception(at)
    assert any("20,000,000 tokens" in c.value for c in at.caption)
    table = at.dataframe[0].value
    row = compare_accelerators(Scenario(model="llama-3.1-8b", mode="training", method="lora", seq_len=4096, train_tokens=20e6), ["h100-sxm"])[0]
    assert row.training_run_usd is not None
    h100 = table[table["Accelerator"] == row.name].iloc[0]
    assert h100["Training run (USD)"] == round(row.training_run_usd, 2)
    assert h100["USD per device-hour (cheapest instance for the layout)"] == round(row.usd_per_device_hour, 2)


def test_gpu_vs_tpu_price_axis_is_marked_in_dollars_at_1_2_5():
    """The price axis spans $0.13-$30 a device-hour: decades alone marked it at $1 and $10 only."""
    at = run_app("gpu_vs_tpu")
    no_exception(at)
    x = charts(at)[0]["layout"]["xaxis"]
    assert len(x["tickvals"]) >= 4 and all(t.startswith("$") for t in x["ticktext"]) and "$2" in x["ticktext"], x["ticktext"]


def test_gpu_vs_tpu_throughput_axis_has_marks_to_read():
    """70B QLoRA: the chips' training throughputs span less than two decades, and a decades-only log axis had one
    mark ("100"); it has 1-2-5 marks within the data's range."""
    at = run_app("gpu_vs_tpu", params={"model": "llama-3.1-70b", "mode": "training", "method": "qlora"})
    no_exception(at)
    fig = charts(at)[0]
    y = fig["layout"]["yaxis"]
    ys = [v for trace in fig["data"] for v in trace.get("y") or [] if v]
    low, high = min(ys) / 1.3, max(ys) * 1.3
    if math.log10(max(ys) / min(ys)) < 2:  # 1-2-5 marks within the data's range
        assert len(y["tickvals"]) >= 2 and set(y["ticktext"]) <= {"10", "20", "50", "100", "200", "500", "1,000", "2,000"}
        assert all(low <= v <= high for v in y["tickvals"])
    else:  # two decades or more: marks written out (1-2-5, or decades past nine), at least two within the data's range
        assert len(y["tickvals"]) >= 2 and all(low <= v <= high for v in y["tickvals"])
        assert all(t == f"{v:,.0f}" or t == f"{v:g}" for t, v in zip(y["ticktext"], y["tickvals"], strict=True)), y["ticktext"]
    default = charts(run_app("gpu_vs_tpu", params={"mode": "training"}))[0]["layout"]["yaxis"]  # 100 to 10,000: "10,000", not "10k"
    assert "10k" not in default["ticktext"] and all("k" not in t for t in default["ticktext"])


def test_compare_save_and_url_round_trip():
    at = run_app("compare")
    no_exception(at)
    at.button[0].click().run()  # save current scenario
    no_exception(at)
    assert len(at.dataframe[0].value) == 1
    token = at.query_params["cmp"]
    again = run_app("compare", params={"cmp": token})
    no_exception(again)
    assert len(again.dataframe[0].value) == 1


def test_compare_bad_token_warns():
    at = open_link("compare", {"cmp": "not-a-real-token"})
    no_exception(at)
    assert any("could not be read" in w.value for w in at.warning)


def test_method_page_lists_every_validation_case():
    at = run_app("method")
    no_exception(at)
    assert len(at.dataframe[0].value) == len(load_cases())


def test_method_page_shows_what_each_engine_runs():
    """The engine tables the pages' warnings and the planner read (data/engine_formats.csv, engine_models.csv,
    format_kernels.csv, kv_cache_kernels.csv), one row per engine and per kernel rule, with their sources."""
    from core.catalog.format_kernels import load_format_kernels
    from core.catalog.kv_cache_kernels import load_kv_cache_kernels
    from core.memory.engines import ENGINES

    at = run_app("method")
    no_exception(at)
    frames = [d.value for d in at.dataframe]
    engines = next(f for f in frames if "Model types (config.json)" in f.columns)
    assert list(engines["Engine"]) == [e.label for e in ENGINES.values()]
    mii = engines[engines["Engine"] == ENGINES["deepspeed-mii"].label].iloc[0]
    assert mii["Loads"] == "BF16, FP16" and "qwen3" not in mii["Model types (config.json)"] and "llama" in mii["Model types (config.json)"]
    trt = engines[engines["Engine"] == "TensorRT-LLM"].iloc[0]
    assert trt["Model types (config.json)"].startswith("any but ") and "gemma2" in trt["Model types (config.json)"]
    kernels = next(f for f in frames if "Id pattern" in f.columns and "Runs" in f.columns)
    assert len(kernels) == len(load_format_kernels()) and set(kernels["Runs"]) == {"kernel", "dequantized", "unsupported"}
    # the KV caches each engine stores (data/engine_formats.csv) and where (data/kv_cache_kernels.csv)
    assert engines.set_index("Engine").loc["llama.cpp", "KV cache in"] == "BF16, FP16, Q8_0, Q4_0"
    caches = next(f for f in frames if "KV cache" in f.columns and "Stored" in f.columns)
    assert len(caches) == len(load_kv_cache_kernels()) and set(caches["Stored"]) == {"yes", "no"}
    ampere = caches[(caches["Engines"] == "vLLM") & (caches["Head sizes"] != "any")].iloc[0]  # what the page adds to the rows
    assert (ampere["Models"], ampere["Head sizes"], ampere["Stored"]) == ("no MLA or sinks", "64, 128, 256, 512", "yes")
    # each row's parts by name, not as its pattern alone: the catalog's parts whose ids the pattern matches
    names = set(ampere["Parts"].split(", "))
    assert {"A100 SXM4 80GB", "RTX 3090"} <= names and not {"H100 SXM5 80GB", "T4"} & names, ampere["Parts"]


def test_inference_prices_say_what_they_assume_and_no_label_repeats():
    """Issue #11: each per-token price names its batch and utilisation; no two figures share a label."""
    from .conftest import open_link

    at = open_link("inference", {"batch": "64", "rpd": "2000"})
    labels = [m.label for m in at.metric]
    assert len(labels) == len(set(labels)), labels
    per_token = [label for label in labels if "/ M" in label or "per million" in label]
    assert len(per_token) == 2
    assert any("batch 64" in label for label in per_token) and any("load" in label for label in per_token)


def test_inference_table_lists_each_accelerator_at_its_cheapest_instance():
    """One row per priced accelerator (its cheapest instance, how many instances price it), cheapest first; every
    instance is in the CSV download beside it."""
    import io

    import pandas as pd

    from app_pages.shared.inference_views import every_offer_csv
    from core.catalog.accelerators import get_accelerator
    from core.money.serving import serving_options

    at = run_app("inference")
    no_exception(at)
    table = next(d.value for d in at.dataframe if "Instances priced" in d.value.columns)
    sc = Scenario(model="llama-3.1-8b")
    traffic = Traffic(requests_per_day=10_000, input_tokens_per_request=1000, output_tokens_per_request=300)
    opts = serving_options(sc, traffic)
    assert table["Accelerator"].is_unique and table["Instances priced"].sum() == len(opts)
    assert list(table["Monthly (USD)"].dropna()) == sorted(table["Monthly (USD)"].dropna())
    for _, row in table.iterrows():
        mine = [o for o in opts if get_accelerator(o.accelerator_id).name == row["Accelerator"]]
        assert row["Monthly (USD)"] == round(min(o.usd_per_month for o in mine))
    every = pd.read_csv(io.StringIO(every_offer_csv(sc.model_dump_json(), traffic.model_dump_json(), 1.0)))
    assert len(every) == len(opts) and set(every["Accelerator"]) == set(table["Accelerator"])


def test_a_csv_cell_from_a_link_is_not_a_formula():
    from app_pages.shared.text import spreadsheet_safe

    assert spreadsheet_safe('=HYPERLINK("http://x")') == '\'=HYPERLINK("http://x")'
    assert [spreadsheet_safe(v) for v in ("+1", "-x", "@A1", "lambda", 5, -3.0)] == ["'+1", "'-x", "'@A1", "lambda", 5, -3.0]


def test_the_kv_chart_shows_why_the_sidebars_layout_does_not_hold_the_batch():
    """Llama 3.1 70B in FP8, 32 sequences, the sidebar's two H100s: they hold the weights and 32 x 8k tokens but not
    32 x 16k. The KV chart stays on those two devices (it jumped to the three-device layout that fits, where nothing
    looked wrong): at 16k the KV line is above what is left for it, at 8k below, and the line of what is left (the
    chart's data) is the same at both contexts, so a move only moves the marker."""
    drawn = {}
    for seq in ("8192", "16384"):
        at = run_app("inference", {"model": "llama-3.1-70b", "fmt": "fp8", "kv": "fp8", "tp": "2", "batch": "32", "seq": seq})
        no_exception(at)
        kv = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("KV"))
        assert kv["layout"]["yaxis"]["title"]["text"] == "GiB on each of 2 devices"
        x, need, left = (np.array(array_of(kv["data"][i][a])) for i, a in ((0, "x"), (0, "y"), (1, "y")))
        at_seq = np.interp(np.log(int(seq)), np.log(x), need), np.interp(np.log(int(seq)), np.log(x), left)
        drawn[seq] = (x, left, at_seq)
        alert = [a.value for a in at.info] + [w.value for w in at.warning]
        assert any("the sidebar's 2 x NVIDIA H100" in a for a in alert), alert
    assert drawn["8192"][2][0] < drawn["8192"][2][1], "8k fits: the KV line is below what is left"
    assert drawn["16384"][2][0] > drawn["16384"][2][1], "16k does not: the KV line is above what is left"
    assert np.array_equal(drawn["8192"][0], drawn["16384"][0]) and np.array_equal(drawn["8192"][1], drawn["16384"][1])


def test_inference_warning_names_the_sidebars_layout():
    """Llama 3.1 70B in FP8 at 32 x 16k tokens overflows the sidebar's two H100s (TP 2): the warning says so (it said
    "one H100"), and the speeds are for the three-device layout that fits."""
    at = run_app("inference", {"model": "llama-3.1-70b", "fmt": "fp8", "kv": "fp8", "tp": "2", "batch": "32", "seq": "16384"})
    no_exception(at)
    (warning,) = [w.value for w in at.warning if "not hold the model" in w.value]
    assert "the sidebar's 2 x NVIDIA H100" in warning and "(3 devices)" in warning, warning


def test_training_curve_says_why_it_has_no_price_beyond_one_host():
    """No provider in the catalog rents RTX 4090 nodes on a cluster network (data/providers.csv): the curve's cost
    stops at one instance, and the page says why; an H100 run is priced at every count and says nothing."""
    at = run_app("training", {"model": "llama-3.1-8b", "mode": "training", "acc": "rtx-4090", "tokens": "10"})
    no_exception(at)
    notes = [c.value for c in at.caption if c.value.startswith("No on-demand price from")]
    assert len(notes) == 1 and "RTX 4090" in notes[0] and "16 devices" in notes[0] and "reservations.csv" not in notes[0], notes
    # H100s: on demand up to 64 (the stated default order); past it, Lambda's 1-Click Cluster prices the run (a
    # reservation, data/reservations.csv), and the page says so.
    at = run_app("training", {"model": "llama-3.1-8b", "mode": "training", "acc": "h100-sxm", "tokens": "10"})
    notes = [c.value.replace("\\", "") for c in at.caption if c.value.startswith("No on-demand price from")]
    assert len(notes) == 1 and "from 128 devices" in notes[0] and "runs of up to" in notes[0] and "as one (data/reservations.csv" in notes[0], notes


def test_train_vs_serve_months_of_serving_keeps_two_figures_below_one():
    """A $30 LoRA of 70B on 50M tokens against a serving bill of about $1,900 a month is about 0.016 months of
    serving: the metric read "0.0"; it reads the ratio of the page's own two bills to two significant figures."""
    at = run_app("train_vs_serve", params={"model": "llama-3.3-70b", "mode": "training", "method": "lora", "tokens": "0.05"})
    no_exception(at)
    train = float(metric(at, "Training run (one-off)").strip("$").replace(",", ""))
    serve = float(metric(at, "Serving (per month)").strip("$").replace(",", ""))
    shown = metric(at, "Training = months of serving")
    assert train / serve < 0.1 and shown != "0.0"
    assert float(shown) == pytest.approx(train / serve, rel=0.05)  # the bills are shown rounded to whole dollars


def test_train_vs_serve_bars_span_the_horizon_and_the_answer_is_one_sentence():
    """The bars compare the one-off training bill with serving over the page's horizon (24 months by default): their
    title read "Over 0.005989627786743428 months" and both bars were equal, the horizon overwritten by the
    months-of-serving ratio. Above them, the answer in words: both bills and the per-token API's month."""
    from .conftest import charts

    at = run_app("train_vs_serve", params={"model": "llama-3.1-70b", "mode": "training", "method": "lora", "tokens": "0.02", "months": "24"})
    no_exception(at)
    serve = float(metric(at, "Serving (per month)").strip("$").replace(",", ""))
    bars = next(f for f in charts(at) if f["layout"]["title"]["text"].startswith("Over"))
    assert bars["layout"]["title"]["text"] == "Over 24 months"
    training_usd, serving_usd = bars["data"][0]["y"]
    assert serving_usd == pytest.approx(24 * serve, rel=0.01) and serving_usd > 100 * training_usd  # $1,883 x 24 against $11
    said = [m.value.replace("\\", "") for m in at.markdown if "Training once" in m.value]
    assert len(said) == 1 and f"Serving it yourself: ${serve:,.0f} a month." in said[0] and "The per-token API: $" in said[0], said


def test_a_figure_that_does_not_apply_reads_as_a_dash():
    """The GPU vs TPU table blanks the serving figures of parts the engine does not run on (29 rows for vLLM) and the
    prices of unpriced parts: every interactive table shows a missing value as a dash, not Streamlit's "None"."""
    from app_pages.shared.tables import MISSING_CELL

    from .conftest import open_link

    at = open_link("gpu-vs-tpu", {"model": "llama-3.1-70b"})
    no_exception(at)
    table = at.dataframe[0]
    assert table.value["Time to first token (ms)"].isna().any()
    assert MISSING_CELL == "—" and all(d.proto.placeholder == MISSING_CELL for d in at.dataframe)


def test_each_kv_cache_choice_names_its_engines_and_reads_whole_in_its_box():
    """The KV-cache choices name the engines that store them (data/engine_formats.csv), short enough that no full name
    shows under the box: a KV move then leaves the sidebar as drawn and reruns the page alone
    (tests/app/test_lower_section.py)."""
    from app_pages.shared.fields import fields
    from app_pages.shared.widgets import LONG_CHOICE

    f = fields()["kv"]
    assert f.fmt("fp8") == "FP8 (vLLM, SGLang, TRT-LLM)" and f.fmt("q8_0") == "Q8_0 (llama.cpp, MLX)" and f.fmt("bf16") == "BF16"
    assert max(len(f.fmt(v)) for v in f.options) <= LONG_CHOICE


def test_the_cheapest_v100_plan_opens_on_the_inference_page_with_an_engine_that_runs_there():
    """The Plan page's cheapest fine-tune runs on V100s; its scenario keeps the default engine, vLLM, which left Volta.
    Opened on Inference (and Memory in serving mode) it showed an error box and no numbers: it is now served with
    llama.cpp, said in one warning, and the numbers are that scenario's."""
    from core.engine_fallback import with_runnable_engine

    at = run_app("inference", params={"model": "llama-3.1-8b", "mode": "training", "acc": "v100-32gb", "method": "lora"})
    no_exception(at)
    assert not at.error
    said = [w.value.replace("\\", "") for w in at.warning if "does not run on NVIDIA V100" in w.value]
    assert len(said) == 1 and "Shown with llama.cpp" in said[0], [w.value for w in at.warning]
    assert metric(at, "Tokens/s per user")
    mem = run_app("memory", params={"model": "llama-3.1-8b", "acc": "v100-32gb"})
    no_exception(mem)
    assert not mem.error
    got = with_runnable_engine({"model": "llama-3.1-8b", "mode": "inference", "accelerator": "v100-32gb", "seq_len": 4096})
    assert got is not None
    want = Units("GiB")(estimate(got[0]).memory_per_device_bytes.total)
    assert metric(mem, "Memory per device") == want


def test_the_cheapest_run_is_never_shown_dearer_than_the_readers_own():
    """The Plan's cheapest fine-tune loaded on Training: "Cheapest run $1" sat beside "Your setup ... $0.53" (whole
    dollars against cents); both read in cents now, and the cheapest is not above the reader's own run."""
    import re

    link = {
        "mode": "training",
        "model": "llama-3.1-8b",
        "acc": "v100-32gb",
        "seq": "2048",
        "method": "lora",
        "prec": "fp16-true",
        "ga": "8",
        "zero": "3",
        "dp": "8",
        "tokens": "0.02",
    }
    at = run_app("training", params=link)
    no_exception(at)
    cheapest = metric(at, "Cheapest run")
    assert re.fullmatch(r"\$\d+\.\d\d", cheapest), cheapest
    own = next(m for m in (re.search(r"Your setup \(.*?\): [^,]+, \$([\d,.]+)", c.value.replace("\\", "")) for c in at.caption) if m)
    assert float(cheapest[1:]) <= float(own.group(1).replace(",", "").rstrip(".")), (cheapest, own.group(0))


def test_cpu_only_llama_cpp_says_system_ram_holds_the_model():
    """llama.cpp with -ngl 0 runs every layer on the CPU from system RAM: the page said one RTX 4090 held the model."""
    at = run_app("inference", params={"acc": "rtx-4090", "engine": "llama.cpp", "fmt": "gguf-q4_k_m", "ngl": "0"})
    no_exception(at)
    held = [i.value for i in at.info if i.value.startswith("At these settings")]
    assert len(held) == 1 and "system RAM" in held[0] and "RTX 4090 holds" not in held[0], held
    gpu = run_app("inference", params={"acc": "rtx-4090", "engine": "llama.cpp", "fmt": "gguf-q4_k_m"})
    assert any(i.value.startswith("At these settings one NVIDIA GeForce RTX 4090 holds") for i in gpu.info)


def test_the_inference_page_says_what_the_formats_trade_in_quality():
    """The sidebar's weight and KV-cache formats get the Plan page's sourced quality notes (data/quality_notes.csv):
    GGUF Q2_K names BiLLM's 1-bit result; BF16 weights and cache trade nothing and say nothing."""
    at = open_link("inference", {"model": "llama-3.1-70b", "fmt": "gguf-q2_k", "engine": "llama.cpp", "acc": "rtx-4090"})
    no_exception(at)
    assert any(e.label == "What these formats trade in quality" for e in at.expander)
    assert any("BiLLM" in str(m.value) for m in at.markdown)
    plain_bf16 = open_link("inference", {"model": "llama-3.1-8b"})
    assert not any(e.label == "What these formats trade in quality" for e in plain_bf16.expander)


def test_compare_leaves_out_columns_no_scenario_has_a_figure_for_and_says_so():
    """A set of serving scenarios showed three all-dash training columns that pushed the speed and the memory off a
    1280 px screen (stop 50's projector review, M9): a column empty for every saved scenario is left out, in words."""
    at = run_app("compare")  # the default scenario: served
    no_exception(at)
    at.button[0].click().run()
    no_exception(at)
    columns = list(at.dataframe[0].value.columns)
    assert "Training run (USD)" not in columns and "Training hours" not in columns and "Tokens/s per user" in columns
    said = [c.value.replace("\\", "") for c in at.caption if c.value.replace("\\", "").startswith("Left out")]
    assert said and "Training hours, Training run (USD), Training run on spot (USD)" in said[0], said
