"""Process-wide caches bounded in bytes (app_pages/shared/cache.py, issue #25): every cache the app keeps across
sessions goes through shared_cache, whose entries together stay within CACHE_BUDGET_BYTES (least recently used
dropped first, computed again when next asked for), whatever one entry weighs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app_pages.shared import cache

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _small_budget(monkeypatch):
    cache.reset_ledger()
    monkeypatch.setattr(cache, "CACHE_BUDGET_BYTES", 8 * 2**20)
    yield
    cache.reset_ledger()


def test_every_process_wide_cache_of_the_app_is_bounded_in_bytes():
    """No page keeps a Streamlit cache outside the ledger (an entry cap alone let 64 entries of 2.3 MB stay)."""
    raw = []
    for path in [ROOT / "app.py", *sorted((ROOT / "app_pages").rglob("*.py"))]:
        if path.name == "cache.py":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"@st\.cache_(resource|data)\b|st\.cache_(resource|data)\(", line):
                raw.append(f"{path.relative_to(ROOT)}:{n}")
    assert not raw, f"use app_pages.shared.cache.shared_cache: {raw}"


def test_entries_beyond_the_byte_budget_are_dropped_least_recently_used_first():
    computed: list[int] = []

    @cache.shared_cache(max_entries=1000)
    def big(i: int) -> bytes:
        computed.append(i)
        return bytes(2**20) + str(i).encode()  # 1 MiB each: the entry cap alone would keep 1,000

    for i in range(40):
        big(i)
    assert cache.ledger_bytes() <= cache.CACHE_BUDGET_BYTES
    assert len(computed) == 40
    big(39)  # the newest is kept
    assert len(computed) == 40
    big(0)  # the oldest was dropped: computed again
    assert computed[-1] == 0 and len(computed) == 41
    big.clear()


def test_a_hit_keeps_an_entry_and_arguments_named_with_an_underscore_are_not_weighed():
    computed: list[int] = []

    @cache.shared_cache(max_entries=1000)
    def priced(i: int, _rows: bytes = b"") -> bytes:
        computed.append(i)
        return bytes(2**20)

    rows = bytes(50 * 2**20)  # a large unhashed argument (a price list's rows): not part of the entry
    priced(0, rows)
    for i in range(1, 30):
        priced(0, rows)  # used all along: never the least recently used
        priced(i, rows)
    assert cache.ledger_bytes() <= cache.CACHE_BUDGET_BYTES
    n = len(computed)
    priced(0, rows)
    assert len(computed) == n, "the entry used all along stayed"
    priced.clear()


def test_the_ledger_follows_the_entry_cap():
    @cache.shared_cache(max_entries=3)
    def small(i: int) -> str:
        return "x" * 1000

    for i in range(10):
        small(i)
    assert 3_000 < cache.ledger_bytes() < 3 * 20_000, "three entries known, as Streamlit keeps three"
    small.clear()


def test_a_serving_entry_for_a_long_price_list_weighs_what_it_holds():
    """The issue's example: one serving-options entry for a long price list weighs megabytes, while a catalog price
    row it refers to is shared by every session and not counted."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from abuse import worst_prices

    from core.catalog.accelerators import load_accelerators
    from core.catalog.price_trust import merge_prices
    from core.catalog.prices import load_prices, parse_price_csv
    from core.money.serving import Traffic, serving_options
    from core.scenario import Scenario

    rows, _ = parse_price_csv(worst_prices(1), {a.id for a in load_accelerators()})
    traffic = Traffic(requests_per_day=100_000, input_tokens_per_request=1_000, output_tokens_per_request=300)
    options = serving_options(Scenario(model="llama-3.1-8b"), traffic, merge_prices(rows, "replace"))
    assert 1 * 2**20 < cache.weight_bytes(options) < 20 * 2**20
    assert cache.weight_bytes(load_prices()[0]) == 1, "a catalog row, shared by every session, weighs nothing (1: the floor)"


def test_a_page_run_again_reuses_its_cached_functions_and_calls_the_latest_definition(tmp_path):
    """A page's file runs on every rerun (rerun.exec_page), defining its cached functions again: the same code gets
    the same wrapper (no new Streamlit cache named from its source each time, issue #25), which calls the function
    object of the latest run. Values computed in an earlier run are shared, as Streamlit shares them."""
    source = "from app_pages.shared.cache import shared_cache\n\n@shared_cache(max_entries=8)\ndef twice(x: int) -> int:\n    return FACTOR * x\n"
    page = tmp_path / "page_under_test.py"
    page.write_text(source)
    code = compile(source, str(page), "exec")
    first: dict = {"FACTOR": 2}
    exec(code, first)
    assert first["twice"](3) == 6
    second: dict = {"FACTOR": 10}
    exec(code, second)
    assert second["twice"] is first["twice"], "decorated once"
    assert second["twice"](3) == 6, "the value computed before is kept"
    assert second["twice"](4) == 40, "a new value is computed by the latest definition"
    edited = tmp_path / "edited_page.py"
    edited.write_text(source.replace("FACTOR * x", "FACTOR * x + 1"))
    other = compile(edited.read_text(), str(edited), "exec")
    third: dict = {"FACTOR": 2}
    exec(other, third)
    assert third["twice"] is not first["twice"] and third["twice"](3) == 7, "changed code: a cache of its own"
    first["twice"].clear()
    third["twice"].clear()
