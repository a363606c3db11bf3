"""The Inference page's box of different cards (issue #12): the numbers are the core's (core/speed/mixed.py) for
the sidebar's scenario, the inputs travel in the link, and a bad value in a link is one warning."""

from app_pages.shared.fields import defaults
from app_pages.shared.scenario_io import build_scenario
from core.speed.mixed import mixed_box
from tests.app.conftest import metric, no_exception, open_link, run_app

LINK = {"model": "llama-3.1-70b", "acc": "rtx-3090", "fmt": "gguf-q4_k_m", "engine": "llama.cpp"}


def test_a_3090_and_a_4090_on_the_inference_page_match_the_core():
    at = run_app("inference", LINK | {"box2": "rtx-4090"})
    no_exception(at)
    sc, _ = build_scenario(defaults() | LINK, "")
    box = mixed_box(sc, ["rtx-3090", "rtx-4090"])
    assert metric(at, "Tokens/s per user (box)") == f"{box.decode_tokens_per_s:,.1f}"
    assert metric(at, "Layers per card") == "40 + 40"
    assert metric(at, "Fits in the box?") == "Yes"
    assert at.query_params["box2"] in ("rtx-4090", ["rtx-4090"])


def test_the_page_speed_with_llama_cpp_is_the_layer_split():
    at = run_app("inference", LINK | {"box1": "2"})
    no_exception(at)
    assert metric(at, "Tokens/s per user") == metric(at, "Tokens/s per user (box)"), "llama.cpp's default split is by layers"


def test_too_many_cards_or_an_unknown_card_in_a_link():
    at = run_app("inference", LINK | {"box1": "8", "box2": "rtx-4090", "box2n": "7"})
    no_exception(at)
    assert any("up to 8 cards" in i.value for i in at.info)
    at = open_link("inference", LINK | {"box2": "<b>evil</b>"})
    no_exception(at)
    assert any("box2" in w.value and "ignored" in w.value for w in at.warning)


def test_with_another_engine_the_box_says_it_is_llama_cpps_split():
    """The section is llama.cpp's layer split; with SGLang in the sidebar it said nothing of the engine (a new
    user's pass over the pages): it says the sidebar's engine splits over identical cards and this is llama.cpp's."""
    at = run_app("inference", LINK | {"engine": "sglang", "box2": "rtx-4090"})
    no_exception(at)
    assert any("The sidebar's engine is SGLang" in c.value and "how llama.cpp would serve" in c.value for c in at.caption)
    at = run_app("inference", LINK | {"box2": "rtx-4090"})
    assert not any("The sidebar's engine is" in c.value for c in at.caption)
