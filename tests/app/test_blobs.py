"""Long texts a session keeps are stored deflated, once for every session holding the same text, and gone when no
session holds them (app_pages/shared/blobs.py); writing the link compresses nothing again (issue #25)."""

from __future__ import annotations

import gc
import json

from app_pages.shared import blobs
from app_pages.shared.prices import TEMPLATE
from app_pages.shared.state import PRICE_TEXT, SAVED, encode_blob
from tests.app.conftest import no_exception, open_link

PRICES = TEMPLATE + "Our cloud,h100x8,h100-sxm,8,17.60,,us-east,false,2026-11-01,our contract,\n"
SAVED_SET = [{"name": "LoRA 7B", "scenario": {"model": "qwen2.5-7b", "mode": "training", "method": "lora"}}]
LINK = {"model": "llama-3.1-8b", "prc": encode_blob(PRICES), "cmp": encode_blob(json.dumps(SAVED_SET, separators=(",", ":")))}


def test_the_same_text_is_stored_once_and_its_token_is_the_links():
    text = "a price list " * 1000
    first, second = blobs.store(text), blobs.store(str(text))  # two sessions, two equal strings
    assert first is second and blobs.stored_count() >= 1
    assert first.text() == text and first.token() == encode_blob(text)
    assert len(first.packed) < len(text) / 10, "kept deflated"


def test_a_text_no_session_holds_is_gone_from_the_store():
    gc.collect()  # sessions of earlier tests (AppTest objects in cycles) still waiting to be collected hold theirs
    before = blobs.stored_count()
    held = [blobs.store(f"hostile link {i} " * 500) for i in range(50)]
    assert blobs.stored_count() == before + 50
    del held
    gc.collect()
    assert blobs.stored_count() == before, "the store holds no more than the live sessions do"


def test_two_sessions_on_one_link_hold_one_copy_of_its_blobs():
    first, second = open_link("compare", LINK), open_link("compare", LINK)
    no_exception(first), no_exception(second)
    for key in (PRICE_TEXT, SAVED):
        assert first.session_state[key] is second.session_state[key]
    assert first.session_state[PRICE_TEXT].text() == PRICES
    assert first.query_params["prc"] in (LINK["prc"], [LINK["prc"]]), "the link written back is the one opened"
    assert first.query_params["cmp"] in (LINK["cmp"], [LINK["cmp"]])


def test_a_rerun_compresses_no_blob_again(monkeypatch):
    at = open_link("compare", LINK | {"src": "config", "cfg": encode_blob(json.dumps({"model_type": "llama", "hidden_size": 4096}))})
    no_exception(at)
    calls: list[int] = []
    real = blobs.zlib.compress
    monkeypatch.setattr(blobs.zlib, "compress", lambda data, level=-1: calls.append(len(data)) or real(data, level))
    at.run()
    no_exception(at)
    assert "cfg" in at.query_params and "prc" in at.query_params and "cmp" in at.query_params
    assert calls == [], "the link's tokens are the stored bytes"
