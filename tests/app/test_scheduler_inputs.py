"""The Inference page's engine-scheduler inputs (issue #27: max_num_seqs, max_num_batched_tokens, prefix-cache hits and
how users arrive): they move the latency-under-load curves, travel in the link, default to the engine's own settings
(a link from before them shows what it showed), and absurd values are refused with one message."""

from __future__ import annotations

import numpy as np

from app_pages.shared.fields import fields
from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.scenario import Scenario
from core.speed.load import default_scheduler, load_curve, scenario_scheduler

from .conftest import array_of, charts, no_exception, open_link

KEYS = ("mns", "mnbt", "pcache", "arrive")


def ttft_curve(at) -> tuple[list, list]:
    """The p50 line of the page's time-to-first-token chart: (users, seconds)."""
    fig = next(f for f in charts(at) if f["layout"]["title"]["text"].startswith("Time to first token"))
    line = fig["data"][0]
    return array_of(line["x"]), array_of(line["y"])


def test_the_defaults_are_the_engines_own():
    """Left at their defaults the inputs set nothing: the scenario is the one a link from before them made, and the
    scheduler is the engine's documented one."""
    table = fields()
    assert all(table[k].to_scenario(table[k].default) in (None, 0.0, "steady") for k in KEYS)
    sc = Scenario(model="llama-3.1-8b")
    acc = get_accelerator("h100-sxm")
    assert scenario_scheduler(sc, 1000, acc) == default_scheduler("vllm", 1000, acc)


def drawn(at) -> set[str]:
    return {e.key for e in [*at.number_input, *at.segmented_control] if e.key in KEYS}


def test_the_inputs_are_folded_until_opened_and_keep_their_values_folded():
    """The inputs sit in a fold drawn only while open (app_pages/shared/fold.py): a plain link starts with it closed
    and its curves drawn; opened, the four inputs and the caption; a value set there still moves the curve and stays
    in the link once the fold is closed again; a link that sets one opens it from the start."""
    at = open_link("inference", {"model": "llama-3.1-8b", "seq": "4096"}, folds=None)
    no_exception(at)
    assert drawn(at) == set() and ttft_curve(at)[0]
    at.session_state["fold_scheduler"] = True
    at.run()
    assert drawn(at) == set(KEYS) and "running requests" in scheduler_caption(at)
    _, before = ttft_curve(at)
    at.number_input(key="mns").set_value(16).run()
    _, opened = ttft_curve(at)
    at.session_state["fold_scheduler"] = False
    at.run()
    no_exception(at)
    _, closed = ttft_curve(at)
    assert drawn(at) == set() and closed == opened != before
    assert at.query_params.get("mns") in ("16", ["16"])
    assert drawn(open_link("inference", {"model": "llama-3.1-8b", "arrive": "synchronised"}, folds=None)) == set(KEYS)


def test_changing_max_num_seqs_changes_the_curve():
    at = open_link("inference", {"model": "llama-3.1-8b", "seq": "4096"})
    no_exception(at)
    users, before = ttft_curve(at)
    at.number_input(key="mns").set_value(16).run()
    no_exception(at)
    users_after, after = ttft_curve(at)
    assert users_after == users
    x, b, a = np.array(users), np.array(before), np.array(after)
    assert np.allclose(a[x <= 16], b[x <= 16], rtol=1e-9)  # up to 16 users nobody waits for a slot
    assert np.all(a[x > 16] > b[x > 16])  # past it users queue for one of the 16 running requests
    assert at.query_params.get("mns") in ("16", ["16"])


def test_arrivals_and_the_step_budget_reach_the_curve_through_the_link():
    """A link with the benchmark's arrivals and a 1,024-token budget draws the curve core/speed/load.py gives for that
    scenario (the page's own layout, output tokens and memory's room)."""
    at = open_link("inference", {"model": "llama-3.1-8b", "seq": "4096", "arrive": "synchronised", "mnbt": "1024", "pcache": "50.0"})
    no_exception(at)
    users, shown = ttft_curve(at)
    sc = Scenario(model="llama-3.1-8b", seq_len=4096, max_num_batched_tokens=1024, prefix_cache_hit_fraction=0.5, arrivals="synchronised")
    from core.estimate import estimate

    inf = estimate(sc).inference
    acc = get_accelerator("h100-sxm")
    run = (Layout(1, 1, 1), np.array(users), inf.prompt_tokens, inf.output_tokens)
    want = load_curve(sc, acc, *run, max_running=inf.max_concurrent_sequences, arrivals="synchronised")
    assert np.allclose(shown, want["time_to_first_token_p50_s"], rtol=1e-6)
    steady = load_curve(sc.replace(arrivals="steady"), acc, *run, max_running=inf.max_concurrent_sequences)
    assert not np.allclose(shown, steady["time_to_first_token_p50_s"], rtol=1e-3)


def test_absurd_scheduler_values_are_refused_with_one_message():
    for key, raw in (("mns", "1e12"), ("mnbt", "-5"), ("pcache", "nan"), ("arrive", "<b>all</b>"), ("mns", "2.5")):
        at = open_link("inference", {"model": "llama-3.1-8b", key: raw})
        no_exception(at)
        said = [w.value for w in at.warning if f"URL parameter {key}=" in w.value]
        assert len(said) == 1, (key, raw, [w.value for w in at.warning])


def test_a_step_budget_under_16_is_refused_by_the_input_with_its_label():
    """A budget of 1-15 tokens a step (the engine's least is 16: core/scenario.py): the input keeps what the link or
    the reader put in it, the page goes on with the engine's default, and one message names the input as the page
    shows it (it named the scenario field max_num_batched_tokens, and the page stopped with the input out of sight)."""
    label = fields()["mnbt"].label
    said = f"{label}: 5 is not used (it must be 0 or at least 16); 0 is used until it is changed."
    at = open_link("inference", {"model": "llama-3.1-8b", "mnbt": "5", "mns": "256"})
    no_exception(at)
    text = [m.value.replace("\\", "") for m in [*at.error, *at.warning]]  # the Markdown source escapes _ ( ) . :
    assert text == [said], text
    assert at.session_state["mnbt"] == 5 and at.session_state["mns"] == 256  # what the link said stays in the inputs
    box = next(n for n in at.number_input if n.label == label)  # drawn: the page went on
    assert box.value == 5 and not any("Fix the input" in i.value for i in at.info)
    assert scheduler_caption(at) == scheduler_caption(open_link("inference", {"model": "llama-3.1-8b", "mns": "256"}))
    # typed into the box: the same rule, the same message; 16 is taken
    at = box.set_value(16).run()
    assert not at.warning and "16 tokens per engine step" in scheduler_caption(at)
    at = next(n for n in at.number_input if n.label == label).set_value(5).run()
    assert [w.value.replace("\\", "") for w in at.warning] == [said]


def scheduler_caption(at) -> str:
    return next(c.value.replace("\\", "") for c in at.caption if c.value.startswith("The curves assume"))


def test_the_metric_rows_batch_is_read_off_the_curves_under_load():
    """The metric row's time to first token is one request alone; the line under it gives the same figures with the
    sidebar's batch of users sharing the replica, p50 and p90, read off the curves below (which mark that batch), and
    equal to core/speed/load.py for the scenario: the Plan quotes figures under load, and the page had them only as a
    chart (stop 49's consistency review, item 1b)."""
    at = open_link("inference", {"model": "llama-3.1-8b", "acc": "h100-sxm", "seq": "4096", "batch": "16"})
    no_exception(at)
    sc = Scenario(model="llama-3.1-8b", accelerator="h100-sxm", seq_len=4096, batch_size=16)
    from core.estimate import estimate

    inf = estimate(sc).inference
    acc = get_accelerator("h100-sxm")
    want = load_curve(sc, acc, Layout(1, 1, 1), np.array([16.0]), inf.prompt_tokens, inf.output_tokens, max_running=inf.max_concurrent_sequences)
    (line,) = [c.value.replace("\\", "") for c in at.caption if c.value.startswith("Under load, 16 users sharing the replica")]
    ms = [f"{want[f'time_to_first_token_{q}_s'][0] * 1e3:,.0f} ms" for q in ("p50", "p90")]
    tps = [f"{want[f'tokens_per_s_per_user_{q}'][0]:,.1f}" for q in ("p50", "p90")]
    assert f"waits {ms[0]} for the first token (slowest 10%: {ms[1]})" in line and f"sees {tps[0]} tokens/s (slowest 10%: {tps[1]})" in line, line
    users, shown = ttft_curve(at)
    assert shown[users.index(16)] == want["time_to_first_token_p50_s"][0]
    fig = next(f for f in charts(at) if f["layout"]["title"]["text"].startswith("Time to first token"))
    assert any(a["text"] == "your batch: 16" for a in fig["layout"]["annotations"])
    assert float(inf.time_to_first_token_s) < float(want["time_to_first_token_p50_s"][0])  # alone is faster than shared
