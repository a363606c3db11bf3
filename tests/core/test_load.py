"""Latency under load (core/speed/load.py): published engine measurements at 1 to 100 concurrent users
(tests/data/load_latency.csv, with the calibration rows and the known misses stated), invariants, and the serving
core's use of the p90 figures."""

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from core.catalog.accelerators import get_accelerator
from core.catalog.engine_timing import load_engine_timing
from core.layout import Layout
from core.memory.evaluator import fit_capacity
from core.money.serving import Traffic, memory_by_batch, replica_capacity, request_scenario
from core.scenario import Scenario
from core.speed.load import ALL_KEYS, ARRIVALS, Scheduler, closed_loop, default_scheduler, load_curve
from core.speed.roofline import inference_speed, roofline
from tests.core.recorded import check_row
from tests.core.test_roofline import row_scenario

ROWS = list(csv.DictReader((Path(__file__).resolve().parents[1] / "data" / "load_latency.csv").open(newline="")))
TOLERANCE = 0.25  # issue #27: within 25% of published engine measurements


def _scenario(row: dict) -> Scenario:
    return row_scenario(row, mode="inference", batch_size=1)


def predicted(row: dict, arrivals: str | None = None) -> dict[str, float]:
    """Our mean time to first token and inter-token latency for a published closed-loop run, with the running
    requests capped by what fits in memory (as the planner caps them), under the row's arrival pattern (NIM's
    benchmark: every user starts at once with identical requests, "synchronised")."""
    sc = _scenario(row)
    acc, lay = get_accelerator(row["accelerator"]), Layout(1, int(row["tensor_parallel"]), 1)
    fits = memory_by_batch(sc, lay) <= fit_capacity(sc, float(acc.usable_memory_bytes))
    room = int(np.flatnonzero(fits).max()) + 1
    users = np.array([float(row["concurrency"])])
    out = load_curve(sc, acc, lay, users, int(row["prompt_tokens"]), int(row["output_tokens"]), max_running=room, arrivals=arrivals or row["arrivals"])
    return {k: float(v[0]) for k, v in out.items()}


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_published_rows(row):
    """Each row against our figure of the statistic it publishes (the mean over requests, or the median)."""
    got, stat = predicted(row), row["statistic"]
    ttft = got[f"time_to_first_token_{stat}_s"] / (float(row["ttft_ms"]) / 1e3) - 1
    speed = (1.0 / got[f"inter_token_latency_{stat}_s"]) / (1e3 / float(row["itl_ms"])) - 1
    for what, err, expect in (("ttft", ttft, row["expect_ttft"]), ("speed", speed, row["expect_speed"])):
        if expect == "within":
            assert abs(err) <= TOLERANCE, (what, f"{err:+.0%}", row["source"])
        else:  # a known miss stays a miss: change the row's flag when the model improves
            assert abs(err) > TOLERANCE, (what, f"{err:+.0%}", row["note"])


def test_the_table_has_vllm_rows_under_both_arrival_patterns():
    """Issue #27 item 1: rows of another engine than NIM's TensorRT-LLM, one run of identical requests started together
    and one whose requests end at EOS (so they fall out of step), each with its source and date."""
    vllm = [r for r in ROWS if r["engine"] == "vllm"]
    assert {r["arrivals"] for r in vllm} == {"steady", "synchronised"}
    assert all(r["source"] and r["as_of"] and r["role"] == "check" for r in vllm)


def test_the_table_has_sglang_rows():
    """Issue #27 item 3: SGLang's own published runs at several concurrencies (its cookbook's closed-loop sweeps), for a
    dense and a MoE model, each with its source and date; one calibrates SGLang's eager prefill time per layer
    (data/engine_timing.csv names it), the others check it."""
    sglang = [r for r in ROWS if r["engine"] == "sglang"]
    assert {r["model"] for r in sglang} >= {"llama-3.1-70b", "qwen3-235b-a22b"}
    assert len({r["concurrency"] for r in sglang}) >= 3
    assert all(r["source"] and r["as_of"] for r in sglang)
    calibration = [r["id"] for r in sglang if r["role"] == "calibration"]
    named = [t.calibrated_on.split()[-1] for t in load_engine_timing() if "sglang" in t.engines.split() and t.calibrated_on.startswith("tests/data/load_latency.csv")]
    assert calibration == named == ["sgl056-q3-235b-bf16-b200x8-1000-1000-c1"]
    assert sum(r["role"] == "check" for r in sglang) == len(sglang) - 1


def test_the_table_checks_more_than_it_calibrates():
    calibration = [r for r in ROWS if r["role"] == "calibration"]
    checks = [r for r in ROWS if r["role"] == "check"]
    assert len(calibration) == 5 and len(checks) >= 40
    # issue #27's rows: 1, 25 and 50 users, on rows not calibrated on, for both models
    for c in ("1", "25", "50"):
        speed = [r for r in checks if r["concurrency"] == c and r["expect_speed"] == "within"]
        ttft = [r for r in checks if r["concurrency"] == c and r["expect_ttft"] == "within"]
        assert {r["model"] for r in speed} >= {"llama-3.3-70b", "llama-3.1-8b"}, c
        assert ttft, c


def test_the_issues_headline_row():
    """Llama 3.3 70B fp8 on two H100s, 5,000 prompt + 500 output tokens, 50 users: NIM measures 16.7 tokens/s per user
    and 0.83 s to the first token, where the unloaded roofline said about 44 tokens/s and 0.34 s. Tokens/s per user
    within 25%; the first token a recorded miss just outside (+25.4%; +24.9% until 2026-11-26, when TensorRT-LLM's
    decode time per sequence and layer lengthened the decode steps the synchronised wave waits behind)."""
    row = next(r for r in ROWS if r["id"] == "nim180-l33-70b-fp8-tp2-5000-500-c50")
    got = predicted(row)
    assert 1 / got["inter_token_latency_mean_s"] == pytest.approx(1e3 / 59.73, rel=TOLERANCE)
    check_row(got["time_to_first_token_mean_s"], 0.8345, (0.8345, 0.8345 * 1.254, row["note"]), TOLERANCE)
    sc = _scenario(row)
    unloaded = inference_speed(sc.replace(batch_size=50), prompt_tokens=5000, output_tokens=500)
    assert unloaded.decode_tokens_per_s > 2 * (1 / got["inter_token_latency_mean_s"])  # the interference halves it


SC = Scenario(model="llama-3.1-8b", accelerator="h100-sxm", weights_format="bf16", serving_engine="vllm", mode="inference", seq_len=3000, output_tokens=500)
ACC, LAY = get_accelerator("h100-sxm"), Layout(1, 1, 1)
USERS = np.array([1, 2, 5, 10, 25, 50, 100, 200, 400], dtype=float)


def test_latency_grows_with_concurrency_and_p90_is_above_p50():
    out = load_curve(SC, ACC, LAY, USERS, 2500, 500)
    for k in ("time_to_first_token_mean_s", "time_to_first_token_p50_s", "time_to_first_token_p90_s", "inter_token_latency_p50_s", "inter_token_latency_p90_s"):
        assert np.all(np.diff(out[k]) >= -1e-12), k
    assert np.all(out["time_to_first_token_p90_s"] >= out["time_to_first_token_p50_s"])
    assert np.all(out["inter_token_latency_p90_s"] >= out["inter_token_latency_p50_s"])
    assert np.all(out["tokens_per_s_per_user_p90"] <= out["tokens_per_s_per_user_p50"])
    assert np.all(np.diff(out["output_tokens_per_s"]) > 0)  # more users, more tokens a second (below saturation)


def test_one_user_sees_the_unloaded_roofline():
    """At one user nobody else's prompt interrupts the decode and nobody queues: the inter-token latency is the
    roofline's batch-1 step and the time to first token its prefill plus the step that hands the token over."""
    out = load_curve(SC, ACC, LAY, np.array([1.0]), 2500, 500)
    one = inference_speed(SC.replace(batch_size=1), prompt_tokens=2500, output_tokens=500)
    assert out["inter_token_latency_p50_s"][0] == pytest.approx(one.decode_step_s, rel=0.01)
    assert out["inter_token_latency_p90_s"][0] == pytest.approx(one.decode_step_s, rel=0.01)
    roof = roofline(SC, ACC, LAY)
    prefill = float(roof.mixed_step(1.0, 2750.0, 2500.0, 2500)[0])  # the whole prompt in one step (8,192-token budget)
    assert out["time_to_first_token_p90_s"][0] == pytest.approx(prefill + one.decode_step_s, rel=0.01)
    assert prefill == pytest.approx(one.time_to_first_token_s, rel=0.05)  # the prefill roofline, plus one step's fixed time


def test_chunk_budget_trades_first_token_for_smooth_decoding():
    """Sarathi-Serve (arXiv 2403.02310, Sec. 4-5): a smaller token budget per step splits prompts into more chunks,
    so decodes are interrupted by shorter steps (lower tail inter-token latency) and prompts take more steps (a
    longer time to first token)."""
    small = Scheduler(1024, 512, True)
    large = Scheduler(1024, 8192, True)
    a = load_curve(SC, ACC, LAY, np.array([50.0]), 2500, 500, scheduler=small)
    b = load_curve(SC, ACC, LAY, np.array([50.0]), 2500, 500, scheduler=large)
    assert a["inter_token_latency_p90_s"][0] - a["inter_token_latency_p50_s"][0] < b["inter_token_latency_p90_s"][0] - b["inter_token_latency_p50_s"][0]
    assert a["time_to_first_token_p50_s"][0] > b["time_to_first_token_p50_s"][0]


def test_prefix_caching_and_max_num_seqs():
    base = default_scheduler("vllm", 2500)
    cached = base._replace(prefix_cache_hit_fraction=0.8)
    a = load_curve(SC, ACC, LAY, np.array([50.0]), 2500, 500, scheduler=base)
    b = load_curve(SC, ACC, LAY, np.array([50.0]), 2500, 500, scheduler=cached)
    assert b["time_to_first_token_p50_s"][0] < a["time_to_first_token_p50_s"][0]
    assert b["inter_token_latency_p50_s"][0] <= a["inter_token_latency_p50_s"][0]
    # beyond max_num_seqs users wait for a slot: (users - running) / requests per second (Little's law)
    few = base._replace(max_num_seqs=16)
    c = load_curve(SC, ACC, LAY, np.array([16.0, 48.0]), 2500, 500, scheduler=few)
    wait = c["time_to_first_token_mean_s"][1] - c["time_to_first_token_mean_s"][0]
    assert wait == pytest.approx(32 / c["requests_per_s"][0], rel=1e-9)
    assert c["inter_token_latency_mean_s"][1] == pytest.approx(c["inter_token_latency_mean_s"][0], rel=1e-12)


def test_one_user_waits_for_the_servers_intake_once():
    """The server takes a request in before the engine sees it (`request_intake_s`): one user's time to first token is
    the intake, the prefill and the step that hands the token over, under either arrival pattern. By hand."""
    roof = roofline(SC, ACC, LAY)
    sched = Scheduler(1024, 8192, True, request_intake_s=0.05)
    by_hand = 0.05 + float(roof.mixed_step(0.0, 2750.0, 2500.0, 2500)[0]) + float(roof.mixed_step(0.0, 2750.0, 0.0, 2500)[0])
    loop = closed_loop(roof, 1, 2500, 500, sched, 1024)
    assert loop["time_to_first_token_mean_s"] == pytest.approx(by_hand, rel=1e-9)
    steady = load_curve(SC, ACC, LAY, np.array([1.0]), 2500, 500, scheduler=sched)
    assert steady["time_to_first_token_p90_s"][0] == pytest.approx(by_hand, rel=0.01)


def test_the_intake_spreads_a_wave_over_steps():
    """Ten users with 200-token prompts whose requests are taken in 20 ms apart, decode steps of a few ms: each prompt
    reaches the engine alone, so after the start-up wave no user waits for another's prefill, where without the intake the
    whole wave shares one step. Every request's TTFT is then at most its own intake, the step under way, one prompt's
    step and the hand-over step (below the lockstep wave's)."""
    roof = roofline(SC, ACC, LAY)
    lockstep = closed_loop(roof, 10, 200, 100, Scheduler(1024, 8192, True), 1024)
    spread = closed_loop(roof, 10, 200, 100, Scheduler(1024, 8192, True, request_intake_s=0.02), 1024)
    assert spread["time_to_first_token_p90_s"] < lockstep["time_to_first_token_p50_s"]
    alone = float(roof.mixed_step(9.0, 250.0, 200.0, 200)[0])  # one prompt beside nine decodes, the most it can carry
    assert spread["time_to_first_token_p90_s"] <= 0.02 + 2 * alone + float(roof.mixed_step(9.0, 250.0, 0.0, 200)[0]) + 1e-9


def test_synchronised_one_user_is_the_steady_one_user():
    """One user has nobody to be synchronised with: both arrival patterns give the unloaded figures."""
    a = load_curve(SC, ACC, LAY, np.array([1.0]), 2500, 500)
    b = load_curve(SC, ACC, LAY, np.array([1.0]), 2500, 500, arrivals="synchronised")
    for k in ("time_to_first_token_mean_s", "inter_token_latency_mean_s"):
        assert b[k][0] == pytest.approx(a[k][0], rel=0.02), k


def test_a_wave_that_fits_one_step_stays_in_lockstep():
    """Ten users with 200-token prompts under an 8,192-token budget: the whole wave is prefilled in one step, so
    every user gets its first token after that step (and the step that hands it over), finishes in the same step and
    sends the next request with the others: the wave repeats. By hand from the roofline's step costs."""
    roof = roofline(SC, ACC, LAY)
    got = closed_loop(roof, 10, 200, 100, Scheduler(1024, 8192, True), 1024)
    step = float(roof.mixed_step(0.0, 250.0, 2000.0, 200)[0]) + float(roof.mixed_step(0.0, 250.0, 0.0, 200)[0])
    assert got["time_to_first_token_p50_s"] == pytest.approx(step, rel=1e-9)
    assert got["time_to_first_token_p90_s"] == pytest.approx(step, rel=1e-9)


def test_the_start_up_wave_by_hand():
    """Eight users with 1,000-token prompts, whole prompts under a 4,096-token budget: the start-up wave is prefilled four
    prompts a step. The first four get their token after the first step (no decodes) and the step that hands it over;
    the next four after the second step, which also carries the first four's decodes, and the hand-over step of four
    decodes. By hand from the roofline's step costs."""
    roof = roofline(SC, ACC, LAY)

    def step(decodes: float, tokens: float) -> float:
        return float(roof.mixed_step(decodes, 1050.0, tokens, 1000)[0])

    got = closed_loop(roof, 8, 1000, 100, Scheduler(1024, 4096, False), 1024)
    first = step(0.0, 4000.0) + step(0.0, 0.0)
    second = step(0.0, 4000.0) + step(4.0, 4000.0) + step(4.0, 0.0)
    assert got["time_to_first_token_startup_mean_s"] == pytest.approx((first + second) / 2, rel=1e-9)


def test_a_wave_over_several_steps_queues_more_than_steady_arrivals():
    """Forty users with 1,000-token prompts and whole prompts (no chunking) under a 4,096-token budget: four prompts
    a step, so the start-up wave takes ten steps. After it the groups of four stay staggered by a prefill step and
    each group's requests arrive while the previous group's prefill runs: every request waits for one, where
    independent arrivals of the same load mostly find the engine decoding."""
    sched = Scheduler(1024, 4096, False)
    sync = load_curve(SC, ACC, LAY, np.array([40.0]), 1000, 50, scheduler=sched, arrivals="synchronised")
    steady = load_curve(SC, ACC, LAY, np.array([40.0]), 1000, 50, scheduler=sched)
    assert sync["time_to_first_token_p90_s"][0] >= sync["time_to_first_token_p50_s"][0]
    assert sync["time_to_first_token_mean_s"][0] > 1.5 * steady["time_to_first_token_mean_s"][0]


def test_benchmark_rows_lie_between_the_two_arrival_patterns():
    """NIM's runs are partly synchronised: on most of its rows the measured time to first token lies between the steady
    (independent arrivals) and the synchronised figure, within the 25% tolerance. The rows where it does not are the
    8B's long-prompt runs whose figure is above both (tests/data/load_latency.csv notes)."""
    loaded = [r for r in ROWS if r["concurrency"] != "1" and r["id"].startswith("nim")]
    between = []
    for r in loaded:
        lo, hi = sorted(predicted(r, a)["time_to_first_token_mean_s"] for a in ARRIVALS)
        between.append((1 - TOLERANCE) * lo <= float(r["ttft_ms"]) / 1e3 <= (1 + TOLERANCE) * hi)
    assert sum(between) >= 0.75 * len(loaded), f"{sum(between)} of {len(loaded)}"


def test_synchronised_arrivals_for_a_pasted_config():
    """A scenario of a pasted config.json (a dict inside: not hashable) is simulated like a preset's (the page's
    link with a config and benchmark arrivals raised a TypeError in the simulation's cache)."""
    cfg = {
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
    }
    sc = Scenario(model={"hf_config": cfg}, seq_len=2048)
    out = load_curve(sc, ACC, LAY, np.array([1.0, 8.0]), 1500, 500, arrivals="synchronised")
    assert np.all(np.isfinite(out["time_to_first_token_p90_s"])) and out["time_to_first_token_mean_s"][1] > out["time_to_first_token_mean_s"][0]


@pytest.mark.parametrize("arrivals", ARRIVALS)
@pytest.mark.parametrize(
    ("users", "prompt", "output", "sched"),
    [
        ([0.0, -3.0, float("nan"), 1e12], 2500, 500, None),
        ([1.0, 2048.0], 1, 1, None),
        ([1.0, 50.0], 2_000_000, 1, None),
        ([1.0, 50.0], 2500, 500, Scheduler(1, 1, True)),
        ([1.0, 50.0], 2500, 500, Scheduler(2048, 1, False, 5.0)),
    ],
)
def test_absurd_inputs_give_finite_figures(users, prompt, output, sched, arrivals):
    out = load_curve(SC, ACC, LAY, np.array(users), prompt, output, scheduler=sched, arrivals=arrivals)
    assert set(out) == set(ALL_KEYS)
    for k, v in out.items():
        assert np.all(np.isfinite(v)) and np.all(v >= 0), k


def test_the_serving_core_checks_the_p90_figures():
    traffic = Traffic(requests_per_day=1e6, input_tokens_per_request=2500, output_tokens_per_request=500, ttft_s=1.0, tokens_per_s_per_user=40)
    sc = request_scenario(SC, traffic)
    cap = replica_capacity(sc, ACC, LAY, traffic)
    assert not isinstance(cap, str)
    top = cap.max_batch_meeting_targets
    assert cap.curve["time_to_first_token_p90_s"][-1] <= 1.0 and cap.curve["tokens_per_s_per_user_p90"][-1] >= 40
    if top < cap.max_batch_that_fits:  # one more user misses a target at p90
        nxt = load_curve(sc, ACC, LAY, np.array([top + 1.0]), 2500, 500, max_running=cap.max_batch_that_fits)
        assert nxt["time_to_first_token_p90_s"][0] > 1.0 or nxt["tokens_per_s_per_user_p90"][0] < 40
    # the curve's headline figures are the median user's
    assert np.array_equal(cap.curve["decode_tokens_per_s"], cap.curve["tokens_per_s_per_user_p50"])
    assert math.isfinite(cap.output_tokens_per_s)


def test_within_stops_at_the_last_concurrency_meeting_the_targets():
    """The planner's shortcut (`within`) answers the same figures as the whole curve, up to its last batch within
    both targets at p90, and nothing past it."""
    users = np.arange(1, 1025, dtype=float)
    whole = load_curve(SC, ACC, LAY, users, 2500, 500)
    for target in ((0.5, 60.0), (2.0, 20.0), (0.05, 20.0)):
        cut = load_curve(SC, ACC, LAY, users, 2500, 500, within=target)
        ok = np.flatnonzero((whole["time_to_first_token_p90_s"] <= target[0]) & (whole["tokens_per_s_per_user_p90"] >= target[1]))
        top = int(ok[-1]) + 1 if ok.size else 0
        assert len(cut["time_to_first_token_p90_s"]) == top, target
        for k, v in cut.items():
            assert np.allclose(v, whole[k][:top], rtol=1e-12), k
