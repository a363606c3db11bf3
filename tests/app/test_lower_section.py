"""A page's lower section (app_pages/shared/lower.py): Inference's serving bill is a fragment of its own below the
page. It declares what it reads (the served scenario but its context length, and the price list); a sidebar move
that changes none of that reruns the page alone and leaves the bill as drawn, any other reruns both. These tests
check the declaration against what is drawn: the bill drawn from a fresh link is the same at every context length,
and differs where something it reads changed. tests/browser/test_fragment.py checks the same in a real browser."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.shared import lower
from app_pages.shared.scenario_io import build_scenario
from app_pages.shared.state import encode_blob
from core.catalog.prices import COLUMNS

from .conftest import metric, no_exception, run_app
from .test_rerun_scope import page_alone  # noqa: F401  (the fixture)

PRESET = {"model": "llama-3.1-70b", "fmt": "fp8", "kv": "fp8", "tp": "2", "batch": "32"}  # the serve-70B workshop preset
OWN_PRICES = ",".join(COLUMNS) + "\nOur cloud,h100x8,h100-sxm,8,17.60,,us-east,false,2026-11-01,our contract,\n"


def drawn(at: AppTest) -> list[bytes]:
    """Every element of the lower section as sent (its fragment's container is the main pane's second block), less
    the download's per-run file id."""
    blocks = at.main.children
    if len(blocks) < 2:
        return []
    out: list[bytes] = []

    def walk(node) -> None:
        if isinstance(getattr(node, "children", None), dict):
            for k in sorted(node.children):
                walk(node.children[k])
            return
        proto = type(node.proto)()
        proto.CopyFrom(node.proto)
        if hasattr(proto, "deferred_file_id"):
            proto.deferred_file_id = ""
        out.append(proto.SerializeToString(deterministic=True))

    walk(blocks[max(blocks)])
    return out


@pytest.mark.parametrize(
    "link",
    [
        {"model": "llama-3.1-8b"},
        PRESET,
        {"model": "qwen3-32b", "fmt": "awq-4bit", "acc": "rtx-4090", "rpd": "20000", "api_out": "0.9"},
        {"model": "mistral-7b-v0.1", "mode": "training"},  # served from the training scenario
        {"model": "llama-3.1-8b", "prc": encode_blob(OWN_PRICES), "pmode": "only"},
    ],
)
def test_the_serving_bill_is_the_same_at_every_context_length(link):
    """What lets a context move leave the bill as drawn: from fresh links, the section is the same element for
    element at 2k and at 128k tokens, and what it declares it reads is the same."""
    short, long = (run_app("inference", link | {"seq": s}) for s in ("2048", "131072"))
    no_exception(short)
    no_exception(long)
    assert drawn(short) and drawn(short) == drawn(long)
    assert metric(short, "Time to first token") != metric(long, "Time to first token"), "the page above did change"
    assert short.session_state[lower.DRAWN] == long.session_state[lower.DRAWN]


@pytest.mark.parametrize("change", [{"kv": "bf16"}, {"acc": "a100-sxm-80gb"}, {"fmt": "bf16"}, {"pmode": "replace"}])
def test_what_the_bill_reads_changes_it(change):
    """The other side: a change the declaration counts (KV cache, accelerator, format, how your prices merge) does
    change the section, so a move of it reruns the section. (The batch is not one: the bill's batch comes from the
    traffic and its latency targets, core/money/serving.py.)"""
    link = PRESET | {"prc": encode_blob(OWN_PRICES), "pmode": "only", "seq": "8192"}
    before, after = run_app("inference", link), run_app("inference", link | change)
    assert drawn(before) != drawn(after)
    assert before.session_state[lower.DRAWN] != after.session_state[lower.DRAWN]


def test_a_context_or_batch_move_reruns_the_page_alone_and_a_format_move_both(page_alone):  # noqa: F811
    at = run_app("inference", PRESET | {"seq": "8192"})
    bill = drawn(at)
    at.select_slider(key="seq").set_value(16384).run()
    no_exception(at)
    assert not drawn(at), "the lower section was not sent again"
    assert metric(at, "Time to first token") == metric(run_app("inference", PRESET | {"seq": "16384"}), "Time to first token")
    at.run()  # AppTest keeps only what a run sent: a plain run (a whole one) draws the sidebar again
    at.select_slider(key="batch").set_value(16).run()
    no_exception(at)
    assert not drawn(at), "a batch move leaves the bill as drawn too"
    assert drawn(run_app("inference", PRESET | {"seq": "16384", "batch": "16"})) == bill
    at.run()  # AppTest keeps only what a run sent: a plain run (a whole one) draws the sidebar again
    at.selectbox(key="kv").set_value("bf16").run()
    no_exception(at)
    assert not at.sidebar.children, "a run of the two fragments, not of the whole app"
    fresh = run_app("inference", PRESET | {"seq": "16384", "batch": "16", "kv": "bf16"})
    assert drawn(at) == drawn(fresh) != bill
    assert at.query_params["seq"] == "16384" and at.query_params["batch"] == "16" and "kv" not in at.query_params


def test_a_page_that_stops_still_runs_its_lower_section(page_alone):  # noqa: F811
    """A page stopped early (here: 4,096 generated tokens do not fit a 2,048-token context) ends its fragment, not the
    run: the lower section runs and notes that there is nothing to bill. Moving the context up makes the scenario
    valid, which the section reads, so it reruns with the page and shows the bill a fresh link shows."""
    at = run_app("inference", {"model": "llama-3.1-8b", "out": "4096", "seq": "2048"})
    no_exception(at)
    assert at.session_state[lower.DRAWN] == ("inference", "no scenario") and not drawn(at)
    at.select_slider(key="seq").set_value(8192).run()
    no_exception(at)
    assert drawn(at) and drawn(at) == drawn(run_app("inference", {"model": "llama-3.1-8b", "out": "4096", "seq": "8192"}))


def test_a_page_without_a_lower_section_reads_nothing(page_alone):  # noqa: F811
    at = run_app("memory", {"model": "llama-3.1-8b"})
    assert at.session_state[lower.DRAWN] == ("memory", None) and not drawn(at)
    at.select_slider(key="seq").set_value(32768).run()
    no_exception(at)
    assert not at.sidebar.children and metric(at, "Memory per device")


def _stale_check() -> None:
    import streamlit as st

    from app_pages.shared import lower
    from app_pages.shared.fields import fields

    ctx = lower.page_context({k: f.default for k, f in fields().items()} | {"model": "llama-3.1-8b"})
    results = [lower.stale(ctx)]  # never drawn: nothing to be stale
    st.session_state[lower.DRAWN] = ("inference", lower.reads("inference", ctx))
    results.append(lower.stale(ctx))  # drawn from these values
    st.session_state[lower.DRAWN] = ("inference", "drawn from other values")
    results.append(lower.stale(ctx))
    st.session_state[lower.QUEUED] = True  # ...but it runs after the page in this run
    results.append(lower.stale(ctx))
    results.append(lower.stale(ctx))  # the mark is for one run
    st.session_state["results"] = results


def test_the_page_fragment_sees_a_stale_lower_section():
    """The net under a wrong declaration: after a run of the page alone, app.py reruns the whole app when the lower
    section, not run after it, reads something else now."""
    at = AppTest.from_function(_stale_check).run()
    no_exception(at)
    assert at.session_state["results"] == [False, False, True, False, True]


def test_reads_ignore_only_the_context_length_and_the_batch():
    from app_pages.shared.fields import fields

    values = {k: f.default for k, f in fields().items()} | {"model": "llama-3.1-8b"}
    sc, _ = build_scenario(values, "")
    assert sc is not None
    ctx = lower.page_context(values)
    text = lower.reads("inference", ctx)
    assert text is not None and '"seq_len"' not in text and '"batch_size"' not in text and '"output_tokens"' in text
    assert lower.reads("inference", lower.page_context(values | {"seq": 65536})) == text
    assert lower.reads("inference", lower.page_context(values | {"batch": 64})) == text
    assert lower.reads("memory", ctx) is None
