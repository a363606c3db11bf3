"""Your own price list (issue #12: "users can still upload their own price CSV"): the rows reach every priced
answer (the training cost, the serving price, the comparison, buy vs rent, the planner) and the CLI, merged with
the catalog by mode."""

import json
import subprocess
import sys

import pytest

from core.catalog.accelerators import load_accelerators
from core.catalog.price_trust import billable_prices, merge_prices
from core.catalog.prices import COLUMNS, parse_price_csv
from core.estimate import estimate
from core.money.buy_rent import buy_vs_rent
from core.money.compare import compare_accelerators
from core.money.pricing import by_accelerator, rows_for, run_usd_per_hour
from core.money.serving import Traffic, serving_plan
from core.plan import Goal, plan
from core.scenario import Scenario

HEADER = ",".join(COLUMNS)
# A team's contract: 8 x H100 SXM for $17.60 an hour (a 1-year reservation), and an on-prem 4 x L40S box.
MINE = (
    HEADER
    + "\nOur cloud,h100x8-reserved,h100-sxm,8,17.60,,us-east,false,2026-11-01,our 1-year contract,"
    + "\nOn-prem,l40s-box,l40s,4,3.00,,lab,true,2026-11-01,power and amortisation,\n"
)
IDS = {a.id for a in load_accelerators()}


@pytest.fixture(scope="module")
def own():
    rows, problems = parse_price_csv(MINE, IDS)
    assert not problems and len(rows) == 2
    return rows


def test_replace_swaps_the_catalog_rows_of_the_accelerators_the_list_prices(own):
    merged = merge_prices(own, "replace")
    catalog = billable_prices()  # the catalog's part is what it can vouch for (no placeholder or stale rows)
    assert [r for r in merged if r.accelerator_id == "h100-sxm"] == [own[0]]
    assert [r for r in merged if r.accelerator_id == "l40s"] == [own[1]]
    untouched = [r for r in catalog if r.accelerator_id not in ("h100-sxm", "l40s")]
    assert len(merged) == len(own) + len(untouched)
    assert rows_for("a100-sxm-80gb", merged) == rows_for("a100-sxm-80gb")
    assert merge_prices(own, "only") == own
    assert by_accelerator(merged) is by_accelerator(merged), "one index per list, reused"


def test_the_training_cost_is_priced_from_the_users_rows(own):
    sc = Scenario(model="llama-3.1-8b", mode="training", train_tokens=1e9, accelerator="h100-sxm")
    catalog, mine = estimate(sc).training, estimate(sc, merge_prices(own, "replace")).training
    assert catalog is not None and mine is not None
    assert mine.price_instance == "Our cloud h100x8-reserved (us-east)"
    # whole 8-GPU instances for the devices used, for the run's hours
    assert mine.cost_usd == pytest.approx(run_usd_per_hour(own[0], mine.devices) * mine.wall_hours)
    assert catalog.price_instance != mine.price_instance
    assert mine.wall_hours == catalog.wall_hours, "prices change the bill, not the time"
    assert any("in the price list in use" in n for n in mine.assumptions), "the note says which list priced it"
    assert any("in the catalog" in n for n in catalog.assumptions)


def test_serving_comparison_and_buy_vs_rent_use_the_list(own):
    only = merge_prices(own, "only")
    sc = Scenario(model="llama-3.1-8b", mode="inference", accelerator="l40s")
    p = serving_plan(sc, Traffic(requests_per_day=50_000, input_tokens_per_request=500, output_tokens_per_request=200), rows=only)
    assert (p.provider, p.instance_type) == ("On-prem", "l40s-box")
    rows = {r.accelerator_id: r for r in compare_accelerators(sc, ["l40s", "h100-sxm", "a100-sxm-80gb"], only)}
    assert rows["l40s"].usd_per_device_hour == pytest.approx(3.00 / 4)
    assert rows["h100-sxm"].usd_per_device_hour == pytest.approx(17.60 / 8)
    assert rows["a100-sxm-80gb"].usd_per_device_hour is None, "only: nothing else is priced"
    bvr = buy_vs_rent("h100-sxm", usd_per_kwh=0.15, utilisation=0.6, devices=8, rows=only)
    assert bvr.rent_usd_per_year == pytest.approx(17.60 * 8760 * 0.6, rel=1e-6)


def test_the_planner_prices_from_the_list(own):
    goal = Goal(goal="fine-tune", model="llama-3.1-8b", tokens=2e7)
    mine = plan(goal, merge_prices(own, "only"))
    assert mine.cheapest is not None
    assert {(p.provider, p.instance) for p in mine.plans} <= {("Our cloud", "h100x8-reserved"), ("On-prem", "l40s-box")}
    assert plan(goal).cheapest.provider != "On-prem", "the built-in catalog knows no on-prem box"


def test_a_price_list_changes_no_memory_or_speed_number(own):
    sc = Scenario(model="qwen3-8b", mode="inference", accelerator="h100-sxm")
    a, b = estimate(sc), estimate(sc, merge_prices(own, "only"))
    drop = {"inference"}
    assert {k: v for k, v in a.model_dump().items() if k not in drop} == {k: v for k, v in b.model_dump().items() if k not in drop}
    priced = {"usd_per_replica_hour", "usd_per_million_tokens", "usd_per_million_output_tokens_full_load", "price_instance", "assumptions"}
    assert a.inference.model_dump(exclude=priced) == b.inference.model_dump(exclude=priced)


def _cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core", *args], input=stdin, capture_output=True, text=True, timeout=120)


def test_the_cli_prices_from_a_csv_and_refuses_a_bad_one(tmp_path):
    mine = tmp_path / "mine.csv"
    mine.write_text(MINE)
    scenario = json.dumps({"model": "llama-3.1-8b", "mode": "training", "train_tokens": 1e9, "accelerator": "h100-sxm"})
    out = _cli("estimate", "-", "--prices", str(mine), stdin=scenario)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["training"]["price_instance"] == "Our cloud h100x8-reserved (us-east)"
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "\nx,y,no-such-gpu,8,1,,r,false,2026-01-01,src,\n")
    out = _cli("estimate", "-", "--prices", str(bad), stdin=scenario)
    assert out.returncode == 2 and "no-such-gpu" in out.stderr and "Traceback" not in out.stderr
    out = _cli("plan", "-", "--prices", str(tmp_path / "missing.csv"), stdin=json.dumps({"goal": "fine-tune", "model": "llama-3.1-8b"}))
    assert out.returncode == 2 and "cannot read" in out.stderr
