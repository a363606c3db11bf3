"""Your own price list in the app (issue #12): kept in the link (`prc`, with the `pmode` field), shown where it is in
use, and every priced page agrees with the core priced from the same rows. A hostile or broken list in a link gets
one message and the catalog's prices; nothing in it renders as Markdown."""

import pytest

from app_pages.shared.fields import defaults
from app_pages.shared.prices import TEMPLATE, PriceList
from app_pages.shared.scenario_io import build_scenario
from app_pages.shared.state import PRICE_TEXT, encode_blob
from core.catalog.accelerators import load_accelerators
from core.catalog.price_trust import merge_prices
from core.catalog.prices import parse_price_csv
from core.estimate import estimate
from core.scenario import Scenario
from tests.app.conftest import metric, no_exception, open_link, run_app
from tests.core.test_user_prices import MINE

IDS = {a.id for a in load_accelerators()}
LINK = {"model": "llama-3.1-8b", "acc": "h100-sxm", "prc": encode_blob(MINE)}


def _rows(mode: str):
    return merge_prices(parse_price_csv(MINE, IDS)[0], mode)


def test_the_template_reads_as_one_good_row():
    rows, problems = parse_price_csv(TEMPLATE, IDS)
    assert len(rows) == 1 and not problems


def test_a_link_with_a_price_list_prices_the_training_page():
    at = run_app("training", LINK | {"mode": "training", "tokens": "1"})
    no_exception(at)
    assert at.session_state[PRICE_TEXT].text() == MINE  # kept deflated (app_pages/shared/blobs.py)
    assert any("Priced from your own list: 2 rows for 2 accelerators" in c.value.replace("\\", "") for c in at.caption)
    sc = Scenario(model="llama-3.1-8b", mode="training", train_tokens=1e9, accelerator="h100-sxm")
    assert "Our cloud" in estimate(sc, _rows("replace")).training.price_instance
    # the link keeps the list and the mode after the run writes the URL back
    assert at.query_params["prc"] == [LINK["prc"]] or at.query_params["prc"] == LINK["prc"]


def test_only_mine_on_the_inference_page_matches_the_core():
    at = run_app("inference", LINK | {"pmode": "only", "mode": "inference"})
    no_exception(at)
    sc, _ = build_scenario(defaults() | {"model": "llama-3.1-8b", "acc": "h100-sxm", "mode": "inference"}, "")
    inf = estimate(sc, _rows("only")).inference
    assert metric(at, f"\\$ / M tokens, batch {inf.batch_size}") == f"${inf.usd_per_million_tokens:,.2f}"
    assert inf.usd_per_million_tokens != estimate(sc).inference.usd_per_million_tokens


@pytest.mark.parametrize("page", ["plan", "train_vs_serve", "gpu_vs_tpu", "method"])
def test_every_priced_page_says_the_list_is_in_use(page):
    at = run_app(page, LINK | {"pmode": "only"})
    no_exception(at)
    shown = " ".join(c.value for c in at.caption) + " ".join(i.value for i in at.info)
    assert "Priced from your own list" in shown.replace("\\", "")


def test_the_plan_page_plans_on_the_users_rows_only():
    at = run_app("plan", LINK | {"pmode": "only"})
    no_exception(at)
    headline = next(m.value for m in at.markdown if m.value.startswith("### "))
    assert "Our cloud" in headline or "On\\-prem" in headline, headline


@pytest.mark.parametrize(
    "token, says",
    [("!!!", "could not be read"), (encode_blob("a" * 300_000), "could not be read")],
)
def test_an_unreadable_price_blob_in_a_link_says_so_and_uses_the_catalog(token, says):
    at = open_link("training", {"model": "llama-3.1-8b", "prc": token})
    no_exception(at)
    assert any(says in w.value for w in at.warning)
    assert PRICE_TEXT not in at.session_state
    assert not any("Priced from your own list" in c.value.replace("\\", "") for c in at.caption)


def test_a_hostile_price_list_renders_no_link_image_or_html():
    evil = MINE.replace("Our cloud", "[Claim free H100s](http://evil.example/phish) ![x](http://evil.example/p.png) <img src=x onerror=alert(1)>")
    at = run_app("training", {"model": "llama-3.1-8b", "acc": "h100-sxm", "mode": "training", "prc": encode_blob(evil)})
    no_exception(at)
    rendered = [e.value for e in (*at.markdown, *at.caption, *at.warning, *at.info) if isinstance(e.value, str)]
    for text in rendered:
        assert "](http" not in text and "<img" not in text, text


def test_a_list_with_bad_rows_keeps_the_good_ones_and_names_the_bad():
    broken = MINE + "Cheap,x,no-such-gpu,1,1.0,,r,false,2026-01-01,src,\n"
    at = run_app("inference", {"model": "llama-3.1-8b", "acc": "h100-sxm", "prc": encode_blob(broken)})
    no_exception(at)
    assert any("no-such-gpu" in w.value.replace("\\", "") for w in at.warning)
    assert any("2 rows for 2 accelerators" in c.value.replace("\\", "") for c in at.caption)


def test_price_list_args_are_the_cache_key_and_rows():
    assert PriceList("", None).args == ("", None)


@pytest.mark.parametrize("flagged", [False, True])
def test_flagged_catalog_rows_price_the_plan_only_when_the_toggle_is_on(flagged):
    """mithril's flat 1.00 USD per H100-hour (data/price_flags.csv) is left out of every bill unless `pflag` is on;
    then the page says the whole catalog prices it, and the plan can rent there."""
    query = {"model": "llama-3.1-8b", "goal": "fine-tune", "ptok": "20"} | ({"pflag": "True"} if flagged else {})
    at = open_link("plan", query)
    no_exception(at)
    headline = " ".join(m.value for m in at.markdown).replace("\\", "")
    said = any("whole catalog, its flagged rows too" in c.value.replace("\\", "") for c in at.caption)
    assert said == flagged
    assert ("mithril" in headline.lower()) == flagged, headline[:400]


def _later_script():
    import streamlit as st

    from app_pages.shared.page_types import PriceList
    from app_pages.shared.prices import price_list, price_list_later
    from app_pages.shared.state import set_price_text
    from tests.core.test_user_prices import MINE

    set_price_text(MINE)
    later = price_list_later({"pmode": "replace"})
    held = [c.cell_contents for c in later.__closure__ or ()]
    st.session_state["holds_rows"] = any(isinstance(v, (tuple, PriceList)) for v in held)
    st.session_state["same_rows"] = later().rows == price_list({"pmode": "replace"}).rows and later().rows is not None


def test_a_download_built_on_click_holds_the_price_text_not_its_parsed_rows():
    """The Inference page's "Every priced instance" CSV is built on click by a callable that lives as long as the
    session. It holds the session's stored (deflated, shared) price text and parses it again through the shared cache
    when clicked; holding the parsed rows kept 1.7 MB per hostile session alive after the cache had dropped them."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_later_script, default_timeout=60).run()
    assert not at.exception
    assert at.session_state["holds_rows"] is False
    assert at.session_state["same_rows"] is True
