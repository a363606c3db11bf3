"""One answer on every page (issue 26, part 5): the Plan page's serve goal, the Inference page's bill, Training vs
inference and Compare give the same monthly bill for the same scenario and traffic, and so does `python -m core plan`.

On c3a883d the Inference page and Training vs inference sized the fleet at the sidebar's training batch and a 70%
utilisation, the Plan at the busiest hour and the latency targets: this failed (the pages read neither the busiest
hour nor the targets)."""

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, metric, no_exception, open_link

CASES = {
    # 8B at 2M requests a day, a busiest hour 3 x the average, tighter targets than the defaults: several instances
    "8B, 2M/day": ({"rpd": "2000000", "tin": "1000", "tout": "300", "peak": "3", "ttft": "1.5", "tps": "25"}, 2_000_000, 1000, 300, 3.0, 1.5, 25.0),
    # the defaults but the traffic: one small instance
    "8B, 10k/day": ({"rpd": "10000"}, 10_000, 1000, 300, 2.0, 2.0, 20.0),
}


def _cli_cheapest(rpd: float, tin: int, tout: int, peak: float, ttft: float, tps: float) -> dict:
    goal = {"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": rpd, "input_tokens": tin, "output_tokens": tout}
    goal |= {"peak_to_average": peak, "ttft_s": ttft, "tokens_per_s_per_user": tps}
    out = subprocess.run([sys.executable, "-m", "core", "plan", "-"], input=json.dumps(goal), capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["cheapest"]


@pytest.mark.parametrize("case", CASES)
def test_plan_inference_and_train_vs_serve_bill_the_same_fleet(case):
    link, *goal = CASES[case]
    cli = _cli_cheapest(*goal)
    want = f"${cli['usd_per_month']:,.0f}"
    at = open_link("plan", {"model": "llama-3.1-8b", "goal": "serve", **link})
    no_exception(at)
    assert metric(at, "Monthly bill") == want
    next(b for b in at.button if b.label == "Load the cheapest plan").click().run()  # the plan's scenario, every page
    no_exception(at)
    assert at.title[0].value == "Memory" and at.session_state["acc"] == cli["accelerator"]
    at.switch_page(str(ROOT / "app_pages" / "inference.py")).run()
    no_exception(at)
    assert metric(at, "Monthly cost") == want, (cli["instance"], cli["scenario"])
    at.switch_page(str(ROOT / "app_pages" / "train_vs_serve.py")).run()
    no_exception(at)
    assert metric(at, "Serving (per month)") == want
    at.switch_page(str(ROOT / "app_pages" / "compare.py")).run()
    next(b for b in at.button if b.label == "Save current scenario").click().run()
    no_exception(at)
    table = next(d.value for d in at.dataframe if "Serving USD / month at the traffic" in d.value.columns)
    assert f"${table['Serving USD / month at the traffic'].iloc[0]:,.0f}" == want


def _text(at) -> str:
    return " ".join(m.value for m in (*at.markdown, *at.caption)).replace("\\", "")


def test_the_api_comparison_is_prefilled_and_never_reads_never():
    """With no per-token price typed, the pages compare with the cheapest offer of the same model in
    data/api_prices.csv (c3a883d compared with nothing and showed "—" where the fleet never breaks even)."""
    from core.catalog.api_prices import nearest_api_price
    from core.catalog.presets import preset

    row, same = nearest_api_price("llama-3.1-8b", preset("llama-3.1-8b").architecture.total_params, 1000, 300) or (None, None)
    assert row is not None and same
    at = open_link("train_vs_serve", {"model": "llama-3.1-8b"})
    no_exception(at)
    # an 8B model at $0.03 per million output tokens through an API: owning never pays back at 10,000 requests a day
    assert metric(at, "Break-even vs per-token API") == "never"
    assert f"{row.provider}'s {row.model}" in _text(at)
    at = open_link("inference", {"model": "llama-3.1-8b"})
    no_exception(at)
    assert "Dedicated vs per-token API" in _text(at) and f"{row.provider}'s {row.model}" in _text(at)


def test_a_links_api_price_wins_over_the_catalogs():
    at = open_link("train_vs_serve", {"model": "llama-3.1-8b", "rpd": "2000000", "api_in": "3", "api_out": "15"})
    no_exception(at)
    assert "your prices ($3 in, $15 out per million tokens)" in _text(at)
    assert metric(at, "Break-even vs per-token API").startswith("month")


@pytest.mark.parametrize(("util", "peak"), [("50", 2.0), ("70", 100 / 70), ("100", 1.0)])
def test_a_link_from_before_the_busiest_hour_keeps_its_fleet(util, peak):
    """`util` (the highest average load to plan for) was the bill's sizing before the busiest hour; a link with it and
    no `peak` opens with peak = 100 / util, which sizes the same replicas (a link's keys are a contract)."""
    at = open_link("inference", {"model": "llama-3.1-8b", "util": util})
    no_exception(at)
    assert at.session_state["peak"] == pytest.approx(peak)
    at = open_link("inference", {"model": "llama-3.1-8b", "util": util, "peak": "5"})
    assert at.session_state["peak"] == 5.0


def _cli(verb: str, payload: dict) -> dict:
    out = subprocess.run([sys.executable, "-m", "core", verb, "-"], input=json.dumps(payload), capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("pick", ["cheapest", "fastest"])
def test_a_training_plan_costs_the_same_on_plan_training_and_the_cli(pick):
    """The same fine-tune run is billed the same by the planner (`plan`, the Plan page), `estimate`, the Training page,
    Training vs inference and Compare: setup, communication and whole instances everywhere (core/money/run_bill.py).

    On 868c5fd this failed: `estimate` and the Training page billed the ideal computation alone (no setup, no
    communication: the issue's "LoRA on 256 H100s is 2.7 min / $11 on Training and 18 min / $76 on Plan"), Training vs
    inference and Compare showed that ideal bill, and `estimate` had no billed run at all."""
    from app_pages.shared.planning import headline
    from app_pages.shared.text import hours_text
    from core.plan.result import Plan

    cli = _cli("plan", {"goal": "fine-tune", "model": "llama-3.1-8b", "tokens": 2e7})[pick]
    est = _cli("estimate", cli["scenario"])["training"]
    # `estimate` on the plan's own scenario: the same instances, hours and dollars
    assert est["instances"] == cli["instances"] and est["run_hours"] == pytest.approx(cli["hours"], rel=1e-9)
    assert est["run_usd"] == pytest.approx(cli["usd"], rel=1e-9)
    assert est["run_hours"] == pytest.approx(est["setup_hours"] + est["wall_hours_with_comm"], rel=1e-12)
    at = open_link("plan", {"model": "llama-3.1-8b", "goal": "fine-tune", "ptok": "20"})
    no_exception(at)
    sentence = headline(Plan.model_validate(cli), "on-demand")
    assert any(sentence in m.value.replace("\\", "") for m in at.markdown)  # the page's headline is the CLI's plan
    label = "Load the cheapest plan" if pick == "cheapest" else "Load the fastest plan"
    next(b for b in at.button if b.label == label).click().run()
    no_exception(at)
    assert at.session_state["acc"] == cli["accelerator"]
    at.switch_page(str(ROOT / "app_pages" / "training.py")).run()
    no_exception(at)
    usd = f"${cli['usd']:,.2f}"
    assert f"{hours_text(cli['hours'])}, {usd}" in _text(at), _text(at)
    at.switch_page(str(ROOT / "app_pages" / "train_vs_serve.py")).run()
    no_exception(at)
    assert metric(at, "Training run (one-off)") == (f"${cli['usd']:,.0f}" if cli["usd"] >= 100 else f"${cli['usd']:,.2f}")
    at.switch_page(str(ROOT / "app_pages" / "compare.py")).run()
    next(b for b in at.button if b.label == "Save current scenario").click().run()
    no_exception(at)
    table = next(d.value for d in at.dataframe if "Training run (USD)" in d.value.columns)
    assert table["Training run (USD)"].iloc[0] == round(cli["usd"], 2) and table["Training hours"].iloc[0] == round(cli["hours"], 2)


def test_a_reserved_plan_costs_the_same_on_every_page_and_both_verbs():
    """Pretraining 70B on 2T tokens needs more B200s than any on-demand order: the plan is a Lambda 1-Click Cluster,
    billed whole weeks (data/reservations.csv). `plan` names the reservation and the hours paid (fields added beside
    `hours` and `usd`); `estimate` on the plan's scenario, the Plan page, Training and Training vs inference bill the
    same dollars for the same run."""
    cli = _cli("plan", {"goal": "pretrain", "model": "llama-3.1-70b", "tokens": 2e12})["cheapest"]
    assert cli["reservation"] == "1-Click Cluster" and cli["reservation_min_term_hours"] == 168
    assert cli["paid_hours"] >= max(168, cli["hours"]) and cli["paid_hours"] % 168 == 0
    est = _cli("estimate", cli["scenario"])["training"]
    assert est["instances"] == cli["instances"] and est["run_hours"] == pytest.approx(cli["hours"], rel=1e-9)
    assert est["run_usd"] == pytest.approx(cli["usd"], rel=1e-9)
    assert est["run_reservation"] == cli["reservation"] and est["run_paid_hours"] == cli["paid_hours"]
    at = open_link("plan", {"model": "llama-3.1-70b", "goal": "pretrain", "ptok": "2000000"})
    no_exception(at)
    usd = f"${cli['usd']:,.0f}"
    lines = [m.value.replace("\\", "") for m in at.markdown]
    assert any(f"{usd} reserved" in line and "needs a reservation: 1-Click Cluster, minimum 7 days" in line for line in lines), lines
    next(b for b in at.button if b.label == "Load the cheapest plan").click().run()
    at.switch_page(str(ROOT / "app_pages" / "training.py")).run()
    no_exception(at)
    assert f"{usd}" in _text(at)
    # The page's options are billed as the curve and the plan bill them: its cheapest run is the plan's reserved one,
    # and its table lists the reservation-billed runs beside the on-demand ones, marked as such (on 381285b the
    # options were on-demand only: the cheapest read a 6-year run on 6 MI300X while the curve priced the 1CC).
    assert metric(at, "Cheapest run") == usd
    # ... and the same hours: the page runs the plan's own layout at the plan's device count (before, it scaled its
    # fewest-devices layout, tensor parallel 8 x 64 ZeRO-3 ranks: 468 h where the plan said 374 h, for the same weeks paid)
    from app_pages.shared.text import hours_text

    cheapest = next(m for m in at.metric if m.label == "Cheapest run")
    assert hours_text(cli["hours"]) in cheapest.help.replace("\\", ""), cheapest.help
    table = next(d.value for d in at.dataframe if "Rented" in d.value.columns)
    reserved = table[table["Rented"] == "reservation, 1 week min"]
    assert len(reserved) and set(reserved["Provider"]) >= {"lambda"}, table[["Provider", "Instance", "Rented"]]
    assert {"on demand", "reservation, 1 day min"} <= set(table["Rented"]), set(table["Rented"])  # AWS Capacity Blocks: by the day
    at.switch_page(str(ROOT / "app_pages" / "train_vs_serve.py")).run()
    no_exception(at)
    assert metric(at, "Training run (one-off)") == usd


def test_the_training_pages_spot_caption_names_the_spot_instance_it_prices():
    """A consistency review of stop 49 (item 3): with Price = spot the caption gave the spot bill beside the on-demand
    instance's name. Both are now the spot row's (the estimate's spot_price_instance and run_spot_usd), said as spot."""
    from app_pages.shared.fields import defaults, fields
    from app_pages.shared.scenario_io import build_scenario
    from core.estimate import estimate

    link = {"model": "qwen2.5-14b", "mode": "training", "method": "lora", "acc": "a100-sxm-80gb", "tokens": "0.2"}
    sc, _ = build_scenario(defaults() | {k: fields()[k].parse(v) for k, v in link.items()}, "")  # the page's own scenario
    assert sc is not None
    est = estimate(sc).training
    assert est is not None and est.run_spot_usd is not None and est.spot_price_instance != est.price_instance
    for price, usd, instance, words in (("spot", est.run_spot_usd, est.spot_price_instance, "on spot"), ("on-demand", est.run_usd, est.price_instance, "on demand")):
        at = open_link("training", link | {"price": price})
        no_exception(at)
        (own,) = [c.value.replace("\\", "") for c in at.caption if c.value.startswith("Your setup")]
        assert f"${usd:,.2f} {words}" in own and str(instance) in own, own


def test_train_vs_serve_blames_the_missing_bill_and_buys_a_serving_setup_as_its_fleet():
    """A consistency review of stop 49 (items 4 and 5): a 70B QLoRA on RTX 3090s, whose 15-card training run no row
    rents, said "No serving bill ... no price for it" where Compare shows its $934 a month; and a serving setup's buy vs
    rent weighed the training layout's 16 H100s where the serving fleet is one."""
    at = open_link("train_vs_serve", {"model": "llama-3.1-70b", "mode": "training", "method": "qlora", "acc": "rtx-3090", "tokens": "0.01"})
    no_exception(at)
    warnings = [w.value.replace("\\", "") for w in at.warning]
    assert any("No training bill to compare on NVIDIA GeForce RTX 3090" in w for w in warnings) and not any("No serving bill" in w for w in warnings)
    assert metric(at, "Serving (per month)").startswith("$")
    served = open_link("train_vs_serve", {"model": "llama-3.1-8b", "mode": "inference", "acc": "h100-sxm", "batch": "16"})
    no_exception(served)
    devices = next(m for m in served.metric if m.label == "Devices")
    assert devices.value == "1" and "serving fleet" in devices.help


def test_a_loaded_serving_plan_keeps_its_batch():
    """A consistency review of stop 49 (item 1): the Plan's cheapest 8B serving plan at 100,000 requests a day runs 11
    concurrent requests a replica; loaded, the batch slider (powers of two) showed 8 and the Inference page's figures
    were batch 8's. The slider holds any whole number between its stops, as the sequence length does."""
    at = open_link("inference", {"model": "llama-3.1-8b", "mode": "inference", "batch": "11"})
    no_exception(at)
    assert at.session_state["batch"] == 11
    assert not [w for w in at.warning if "Batch" in w.value and "nearest" in w.value]


def test_a_spot_training_bill_is_the_same_on_every_page_that_bills_the_run():
    """Price = Spot in a link: the Training page billed the run on spot ($17.24) where Training vs inference, Compare
    and GPU vs TPU showed the on-demand $32.50 under the same label (stop 49's consistency review, item 3). Training
    vs inference now draws the Price input and bills the run as it says ("spot" in the label); Compare and GPU vs
    TPU show both bills, each column saying which. All equal the CLI's run_usd / run_spot_usd."""
    link = {"model": "qwen2.5-14b", "mode": "training", "method": "lora", "acc": "a100-sxm-80gb", "tokens": "0.2", "price": "spot"}
    at = open_link("training", link)
    no_exception(at)
    from app_pages.shared.fields import defaults, fields
    from app_pages.shared.scenario_io import build_scenario
    from app_pages.shared.text import usd_text

    sc, _ = build_scenario(defaults() | {k: fields()[k].parse(v) for k, v in link.items()}, "")
    cli = _cli("estimate", sc.model_dump(mode="json", exclude_none=True))["training"]
    assert cli["run_spot_usd"] < cli["run_usd"]
    assert f"{usd_text(cli['run_spot_usd'])}" in _text(at)
    tvs = open_link("train_vs_serve", link)
    no_exception(tvs)
    assert metric(tvs, "Training run (one-off, spot)") == usd_text(cli["run_spot_usd"])
    tvs.session_state["price"] = "on-demand"
    tvs.run()
    assert metric(tvs, "Training run (one-off)") == usd_text(cli["run_usd"])
    gvt = open_link("gpu_vs_tpu", link)
    no_exception(gvt)
    table = next(d.value for d in gvt.dataframe if "Training run on spot (USD)" in d.value.columns)
    row = table[table["Accelerator"] == "NVIDIA A100 SXM4 80GB"].iloc[0]
    assert row["Training run (USD)"] == round(cli["run_usd"], 2) and row["Training run on spot (USD)"] == round(cli["run_spot_usd"], 2)
    at.switch_page(str(ROOT / "app_pages" / "compare.py")).run()
    next(b for b in at.button if b.label == "Save current scenario").click().run()
    no_exception(at)
    table = next(d.value for d in at.dataframe if "Training run on spot (USD)" in d.value.columns)
    assert table["Training run on spot (USD)"].iloc[0] == round(cli["run_spot_usd"], 2) and table["Training run (USD)"].iloc[0] == round(cli["run_usd"], 2)
