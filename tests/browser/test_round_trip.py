"""Every input on every page through a link, in a real browser (issue #9): a link that sets every field of the field
table away from its default (and the blobs: a pasted config.json, the Compare set, a price list of one's own) is
opened on each page; the link the app then shows keeps every one of those values, and opened in a fresh browser
context it shows the same page: every metric, every input's value and every line of text, chart titles included."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from app_pages.shared.fields import fields
from app_pages.shared.scenario_io import build_scenario
from app_pages.shared.state import BLOB_PARAMS, decode_blob, encode_blob
from core.catalog.prices import COLUMNS

from .conftest import charts_drawn, wait_ready

pytestmark = pytest.mark.browser

PAGES = ["plan", "memory", "training", "inference", "train-vs-serve", "gpu-vs-tpu", "compare", "method"]
PAGE_FIELDS = {  # the page inputs (section "page"), each away from its default
    "sweep": "batch", "price": "spot", "rpd": "2500", "tin": "800", "tout": "200", "util": "60.0", "box1": "2",
    "box2": "rtx-4090", "box2n": "2", "api_in": "0.5", "api_out": "1.5", "months": "36", "kwh": "0.2", "busy": "50.0",
    "buy_usd": "250000.0", "pue": "1.3", "goal": "pretrain", "ptok": "2.0", "epochs": "2.0", "pseq": "4096",
    "peak": "3.0", "ttft": "1.5", "tps": "30.0", "deadline": "48.0", "budget": "50000.0", "pbf16": "True", "pep": "True",
    "mns": "64", "mnbt": "2048", "pcache": "20.0", "arrive": "synchronised", "cloud": "aws",
}  # fmt: skip
CONFIG = {  # a small Llama-shaped config.json, pasted
    "model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 16,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 8192,
}  # fmt: skip
PRICES = ",".join(COLUMNS) + "\nOur cloud,h100x8-reserved,h100-sxm,8,17.60,9.50,us-east,false,2026-11-01,our contract,\n"
SAVED = [{"name": "LoRA 7B", "scenario": {"model": "qwen2.5-7b", "mode": "training", "method": "lora", "accelerator": "a100-sxm-80gb"}}]
LINKS = {
    # training on a preset: every training input set, the price list and the Compare set in the link
    "training": {
        "model": "qwen2.5-7b", "mode": "training", "acc": "a100-sxm-80gb", "batch": "4", "seq": "2048", "method": "qlora",
        "qbase": "gptq-4bit", "opt": "adamw-8bit", "prec": "fp16", "stack": "axolotl", "ga": "4", "gc": "True", "flash": "False", "fce": "True",
        "rank": "32", "targets": "attention", "zero": "2", "dp": "2", "tokens": "0.5", "mfu": "35.0", "units": "GB",
        "pmode": "only", "prc": encode_blob(PRICES), "cmp": encode_blob(json.dumps(SAVED)),
    },
    # serving a pasted config.json with llama.cpp, with the GPU-memory and CPU inputs set
    "config.json, llama.cpp": {
        "src": "config", "cfg": encode_blob(json.dumps(CONFIG)), "acc": "rtx-4090", "fmt": "int8", "kv": "q8_0",
        "engine": "llama.cpp", "ngl": "12", "ram": "128.0", "rambw": "90.0", "out": "512", "gmu": "85.0", "batch": "2",
        "seq": "8192", "offload": "optimizer", "pp": "2", "obj": "dpo",
    },
    # a parameter count on hardware of one's own
    "own hardware": {"src": "params", "params": "13.0", "acc": "custom", "cmem": "48.0", "cbw": "1200.0", "ctf": "150.0", "tp": "2", "pflag": "True", "present": "True"},
    # a mixture of experts served expert-parallel over two GPUs (ep applies to MoE models on vLLM, SGLang, TensorRT-LLM)
    "expert parallel": {"model": "qwen3-30b-a3b", "engine": "sglang", "tp": "2", "ep": "True"},
}  # fmt: skip
SHOWN = """() => {
  const main = document.querySelector('[data-testid=stMain]'), side = document.querySelector('[data-testid=stSidebar]');
  const text = [...main.querySelectorAll('[data-testid=stElementContainer]')]
    .filter(e => !e.querySelector('[data-testid=stElementContainer]') && !e.querySelector('.js-plotly-plot'))
    .map(e => e.innerText.trim()).filter(t => t);
  const titles = [...main.querySelectorAll('.js-plotly-plot .gtitle')].map(t => t.textContent);
  const inputs = [...document.querySelectorAll('[data-testid=stMain] input, [data-testid=stSidebar] input')]
    .map(i => (i.getAttribute('aria-label') || '') + '=' + (i.type === 'checkbox' ? i.checked : i.value));
  const chosen = [...side.querySelectorAll('[data-testid=stSelectbox], [data-testid=stSlider], [data-testid=stButtonGroup]')]
    .map(e => e.innerText.trim());
  return {text, titles, inputs, chosen, metrics: [...main.querySelectorAll('[data-testid=stMetric]')].map(m => m.innerText)};
}"""


def test_the_links_set_every_field():
    """The three links between them move every field off its default, each to a value the field accepts, and each
    describes a valid scenario."""
    table = fields()
    moved = set(PAGE_FIELDS) | {k for link in LINKS.values() for k in link if k in table}
    assert moved == set(table), set(table) - moved
    for name, link in LINKS.items():
        query = link | PAGE_FIELDS
        values = {k: f.default for k, f in table.items()} | {k: table[k].parse(v) for k, v in query.items() if k in table}
        assert all(values[k] != table[k].default for k in query if k in table), name
        cfg = json.dumps(CONFIG) if values["src"] == "config" else ""
        assert build_scenario(values, cfg)[0] is not None, (name, build_scenario(values, cfg)[1])


def meaning(query: dict[str, str]) -> dict[str, object]:
    """A link's values as the app reads them: the blobs inflated (the Compare set as JSON: the app writes it compact)."""
    out: dict[str, object] = dict(query)
    for key in BLOB_PARAMS:
        if key in query:
            text = decode_blob(query[key], 1_000_000)
            out[key] = json.loads(text) if key == "cmp" else text
    return out


HOSTS = "() => document.querySelectorAll('[data-testid=stMain] [data-testid=stBidiComponentRegular]').length"


def shown(page) -> dict:
    wait_ready(page, settle=0.5)
    # Some pages draw no chart for some links (a price-less part on Training): wait until the count of chart
    # elements holds still across an idle settle, then for every one of them drawn with its latest figure, also
    # those below the fold.
    count = -1
    while count != page.evaluate(HOSTS):
        count = page.evaluate(HOSTS)
        wait_ready(page, settle=0.5)
    charts_drawn(page, every=True, least=count)
    return page.evaluate(SHOWN)


@pytest.mark.parametrize("name", list(LINKS))
def test_every_input_on_every_page_round_trips_through_a_link_in_a_fresh_browser(open_page, name):
    sent = LINKS[name] | PAGE_FIELDS
    for path in PAGES:
        first = open_page(f"/{path}?{urlencode(sent)}", height=1600)
        got = {k: v[-1] for k, v in parse_qs(urlsplit(first.url).query).items()}
        assert meaning({k: got[k] for k in sent if k in got}) == meaning(sent), f"{path}: the link the app shows lost a value"
        before = shown(first)
        assert before["metrics"] or path not in ("memory", "training", "inference", "train-vs-serve"), f"{path}: nothing computed"
        assert not first.query_selector('[data-testid="stException"]'), path
        fresh = open_page("/" + first.url.split("/", 3)[3], height=1600)
        after = shown(fresh)
        assert after == before, (path, {k: [x for x in after[k] if x not in before[k]][:3] for k in after if after[k] != before[k]})
