"""Issue #25's families of hostile input, through every page: a price list whose prices no rental has or whose names
are Markdown links and spreadsheet formulas, a Compare set with a formula for a name, goals whose bounds only fail
together, uploads the widgets cannot show, and llama.cpp with its layers in too little system RAM. Each page gives one
clear message or a finite answer: no exception, no inf or nan, nothing rendered from input, no formula in any table
Streamlit can export."""

from __future__ import annotations

import ast
import base64
import csv
import io
import json
import math
import re
import zlib

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app_pages.shared.scenario_io import load_scenario_json
from app_pages.shared.state import CFG_TEXT
from core.catalog.presets import preset
from core.catalog.prices import COLUMNS

from .conftest import PAGES, ROOT, no_exception, open_link
from .test_injection import injected, markdown_texts

PHISH_NAME = "[Claim free H100 hours](http://evil.example/phish)"
FORMULA = '=HYPERLINK("http://evil.example/x","open")'
# inf or nan as Python writes a result; not inside a word ("Infinity Fabric") nor quoted from the input ('nan')
NON_FINITE = re.compile(r"(?<![\w.'\"])(inf|nan)(?![\w'\"])", re.I)


def token(text: str) -> str:
    return base64.urlsafe_b64encode(zlib.compress(text.encode(), 9)).decode()


def price_list(price: str = "2.50", provider: str = PHISH_NAME, instance: str = FORMULA, spot: str = "") -> str:
    """A list of 8-device instances of the accelerators every page prices by default (the H100 and its peers)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for acc in ("h100-sxm", "a100-sxm-80gb", "rtx-4090", "l40s", "h200"):
        writer.writerow([provider, instance, acc, 8, price, spot, "us-east", "false", "2026-11-01", "our contract", ""])
    return token(out.getvalue())


def table_cells(at) -> list:
    cells = []
    for df in list(at.dataframe) + list(at.table):
        frame = df.value
        cells += list(frame.to_numpy().ravel()) + list(frame.columns) + list(frame.index)
    return cells


def assert_safe(at, own: tuple[str, ...] = ()) -> None:
    """The four promises of issue #25 for one run. `own`: names the input itself carries (a Compare scenario's name, a
    price row's provider), shown as typed: a scenario the user named "NaN" is their text, not a number that went
    non-finite (hypothesis found one), so they are left out of the inf/nan check, never out of the others."""
    no_exception(at)
    texts = markdown_texts(at)
    for text in texts:
        assert not injected(text), (injected(text), text[:200])
        plain = text.replace("\\", "")
        for name in sorted({n.strip() for n in own if n.strip()}, key=len, reverse=True):
            # as a word of its own: a one-letter name "e" must not turn "inferentia2" into "inf rentia2"
            plain = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", " ", plain)
        assert not NON_FINITE.search(plain), text[:200]
    for cell in table_cells(at):
        if isinstance(cell, float):
            assert not math.isinf(cell), cell  # (an empty cell is NaN in a frame: shown blank)
        if isinstance(cell, str):
            assert not (cell[:1] and cell[0] in "=+-@\t\r"), f"a spreadsheet would run {cell[:60]!r}"
            assert cell.strip() in {n.strip() for n in own} or not NON_FINITE.fullmatch(cell.strip()), cell


def test_the_price_list_reads_whole():
    from core.catalog.accelerators import load_accelerators
    from core.catalog.prices import parse_price_csv

    rows, problems = parse_price_csv(zlib.decompress(base64.urlsafe_b64decode(price_list())).decode(), {a.id for a in load_accelerators()})
    assert len(rows) == 5 and problems == [] and rows[0].provider == PHISH_NAME and rows[0].instance_type == FORMULA


def test_the_checks_see_each_family():
    assert injected(PHISH_NAME) and NON_FINITE.search("Monthly bill: $inf") and NON_FINITE.search("nan months")
    assert not NON_FINITE.search("Inference, information, financing")


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize(
    "prices",
    [
        pytest.param({"price": "1e308"}, id="1e308"),
        pytest.param({"price": "2.50", "spot": "1e-300"}, id="tiny-spot"),
        pytest.param({"price": "8000"}, id="ceiling"),  # $1,000 per device-hour: the dearest price a row may have
        pytest.param({"price": "2.50"}, id="names"),
    ],
)
def test_a_hostile_price_list_in_the_link(page, prices):
    at = open_link(page, {"prc": price_list(**prices), "pmode": "only"})
    assert_safe(at)


@pytest.mark.parametrize("page", ["training", "inference", "train_vs_serve"])
def test_names_from_the_price_list_reach_the_help_texts_escaped(page):
    """The tooltips that quote a provider and instance (Cheapest run, Monthly cost, Serving per month) show them as
    text: the escaped name is there, the link is not."""
    at = open_link(page, {"prc": price_list(), "pmode": "only", "mode": "training" if page == "training" else "inference"})
    helps = [m.proto.help for m in at.metric if m.proto.help]
    assert any("evil" in h for h in helps), helps
    assert_safe(at)


@pytest.mark.parametrize("page", ["compare", "memory"])
def test_a_compare_set_named_with_a_formula(page):
    saved = [{"name": FORMULA, "scenario": {"model": "llama-3.1-8b", "batch_size": 4096}}, {"name": "+SUM(A1)", "scenario": {"model": "llama-3.2-1b"}}]
    at = open_link(page, {"cmp": token(json.dumps(saved))})
    assert_safe(at)


def test_compare_shows_every_setting_as_saved_not_as_a_slider_stop():
    saved = [
        {"name": "big batch", "scenario": {"model": "llama-3.1-8b", "mode": "training", "method": "lora", "batch_size": 4096, "lora_rank": 12}},
        {"name": "served", "scenario": {"model": "llama-3.1-8b", "batch_size": 4096, "lora_rank": 12}},
    ]
    at = open_link("compare", {"cmp": token(json.dumps(saved))})
    frame = next(df.value for df in at.dataframe if "Batch (per device) / concurrent sequences" in list(df.value.index))
    assert frame.loc["Batch (per device) / concurrent sequences"].iloc[0] == "4,096"
    assert frame.loc["LoRA rank"].iloc[0] == "12"
    # a setting that does not shape a scenario reads "—" (a served model's LoRA rank, a training run's serving engine)
    assert frame.loc["LoRA rank"].iloc[1] == "—" and frame.loc["Serving engine"].iloc[0] == "—"
    assert frame.loc["Serving engine"].iloc[1] != "—"


def test_no_page_draws_a_metric_or_a_table_around_the_escaping_wrappers():
    """Every metric goes through text.metric (help escaped) and every table through tables.show_table (formulas
    neutralised): a direct call would skip them."""
    offenders = []
    for path in sorted((ROOT / "app_pages").rglob("*.py")):
        if path.name in ("text.py", "tables.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("metric", "dataframe", "table", "data_editor"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.func.attr}(")
    assert offenders == []


def test_the_plan_page_takes_the_goals_sequence_whatever_the_sidebars_output_length():
    at = open_link("plan", {"out": "2048"})
    assert_safe(at)
    assert not at.warning, [w.value for w in at.warning]
    assert any("Strategies" in h.value for h in at.subheader), "the strategies chart's section is drawn"


def test_the_plan_page_names_tokens_times_epochs_beyond_the_limit():
    at = open_link("plan", {"ptok": "1e10", "epochs": "1000"})
    assert_safe(at)
    assert [w.value for w in at.warning if "tokens x epochs" in w.value]


# ------------------------------------------------------------------------------------------------------- uploads


@pytest.mark.parametrize(("scenario", "named"), [({"mode": "training", "method": "lora", "lora_rank": 12}, "LoRA rank")])
def test_an_upload_the_sliders_would_round_is_refused_naming_the_value(scenario, named):
    values, error = load_scenario_json(json.dumps({"model": "llama-3.1-8b", **scenario}).encode())
    assert values is None and named in error and "Nothing was changed" in error, error


# batch 3: the batch slider holds any whole number between its stops since stop 49 (a serving plan's 11 showed as 8)
SHOWN_EXACTLY = [{"batch_size": 4}, {"batch_size": 3}, {"seq_len": 3000, "output_tokens": 17}, {"mode": "training", "mfu": 0.333, "data_parallel": 3}]


@pytest.mark.parametrize("scenario", SHOWN_EXACTLY)
def test_an_upload_the_widgets_show_exactly_loads(scenario):
    values, error = load_scenario_json(json.dumps({"model": "llama-3.1-8b", **scenario}).encode())
    assert error is None and values


def test_an_upload_is_bounded_after_it_is_written_back_as_text():
    """A 960 kB file of non-ASCII text in a config.json used to come back as a 2.9 MB text box (every character
    escaped as \\uXXXX), after which every click sent more than Streamlit's 1 MB message limit."""
    cfg = dict(preset("llama-3.1-8b").config or {})
    cfg["padding"] = "é" * 400_000  # 800 kB as UTF-8, 400,000 characters as text
    data = json.dumps({"model": {"hf_config": cfg}}, ensure_ascii=False).encode()
    assert len(data) < 1_000_000
    values, error = load_scenario_json(data)
    assert values is None and "characters" in error and "Nothing was changed" in error, error
    cfg["padding"] = "é" * 1_000  # a config with a little non-ASCII text loads, and its text box keeps é as é
    values, error = load_scenario_json(json.dumps({"model": {"hf_config": cfg}}).encode())
    assert error is None and "é" * 1_000 in values[CFG_TEXT]


# ------------------------------------------------------------------------------------------- llama.cpp and its RAM


def test_llama_cpp_with_its_layers_in_too_little_ram_gives_one_answer():
    """70B in BF16 with -ngl 0 on a 24 GB card and 64 GiB of RAM: 132.7 GiB of layers stay in RAM. Every answer on
    the page says it does not fit, and the advice names the system RAM."""
    at = open_link("memory", {"model": "llama-3.1-70b", "engine": "llama.cpp", "ngl": "0", "acc": "rtx-4090", "ram": "64"})
    assert_safe(at)
    shown = {m.label: (m.value, m.proto.help) for m in at.metric}
    assert shown["Fits one device?"][0] == "No" and "system RAM" in shown["Fits one device?"][1]
    assert shown["Largest batch that fits"][0] == "not even 1"  # "none" read as "no limit"
    assert shown["Longest context that fits"][0] == "none at this batch"
    assert shown["Fewest devices that fit"][0] == "none"
    advice = " ".join(m.value.replace("\\", "") for m in at.markdown)
    assert "System RAM is what is short" in advice and "132.7 GiB" in advice
    assert "More devices: fits on 1" not in advice


# ----------------------------------------------------------------------------------------- generated, by family
# Each family's fields drawn from its own hostile values (not a list of examples): the page the family feeds must keep
# every promise of assert_safe. AppTest runs cost about a second each, so each family draws a few dozen.

FAMILY = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAME_TEXT = st.one_of(st.sampled_from([PHISH_NAME, FORMULA, "+1", "-x", "@SUM(A1)", "\t=1", "<b>x</b>", "$x^2$", "ok"]), st.text(min_size=1, max_size=30))
PRICE_TEXT = st.one_of(st.sampled_from(["1e308", "1e-300", "nan", "inf", "-1", "0", "8000", "0.08", "2.5", "９"]), st.floats(allow_nan=True).map(repr))


@FAMILY
@given(
    page=st.sampled_from(["training", "inference", "train_vs_serve", "plan", "gpu_vs_tpu"]),
    provider=NAME_TEXT,
    instance=NAME_TEXT,
    price=PRICE_TEXT,
    spot=st.one_of(st.just(""), PRICE_TEXT),
)
@example(page="training", provider="ok", instance="e", price="1e308", spot="")  # a one-letter name inside "inferentia2"
def test_generated_price_lists(page, provider, instance, price, spot):
    at = open_link(page, {"prc": price_list(price, provider.replace("\x00", ""), instance.replace("\x00", ""), spot), "pmode": "only"})
    assert_safe(at, own=(provider, instance))


SCENARIO_VALUE = st.one_of(st.integers(-5, 5000), st.sampled_from([3, 12, 4096, 1e16, 0.333, -1, None, True, "x", float("nan")]))


@FAMILY
@given(
    names=st.lists(NAME_TEXT, min_size=1, max_size=5),
    fields=st.lists(st.sampled_from(["batch_size", "lora_rank", "seq_len", "output_tokens", "tensor_parallel", "gpu_layers", "train_tokens", "mfu"]), max_size=3),
    values=st.lists(SCENARIO_VALUE, min_size=3, max_size=3),
)
def test_generated_compare_sets(names, fields, values):
    saved = [
        {"name": n, "scenario": {"model": "llama-3.1-8b", "mode": "training" if i % 2 else "inference", **dict(zip(fields, values, strict=False))}}
        for i, n in enumerate(names)
    ]
    at = open_link("compare", {"cmp": token(json.dumps(saved))})
    assert_safe(at, own=tuple(names))


@settings(max_examples=200, deadline=None)
@given(
    fields=st.dictionaries(
        st.sampled_from(
            [
                "batch_size",
                "lora_rank",
                "seq_len",
                "output_tokens",
                "data_parallel",
                "tensor_parallel",
                "pipeline_parallel",
                "gpu_layers",
                "host_memory_gib",
                "train_tokens",
                "mfu",
                "mode",
                "method",
            ]
        ),
        st.one_of(SCENARIO_VALUE, st.sampled_from(["training", "lora", "qlora"])),
        max_size=5,
    )
)
def test_generated_uploads_load_exactly_or_are_refused(fields):
    """An upload either loads as values the widgets show exactly (the scenario they rebuild is the file's) or is
    refused with one message; never rounded without a word."""
    from app_pages.shared.scenario_io import build_scenario
    from core.scenario import Scenario

    data = json.dumps({"model": "llama-3.1-8b", **fields}).encode()
    values, error = load_scenario_json(data)
    assert (values is None) != (error is None)
    if error is not None:
        assert "Nothing was changed" in error and len(error) < 1_000, error
        return
    sent = Scenario.model_validate(json.loads(data))
    from app_pages.shared.fields import fields as table

    full = {f.key: f.default for f in table().values()} | values
    rebuilt, problem = build_scenario(full, values.get(CFG_TEXT, ""))
    assert problem is None, problem
    for f in table().values():  # every input that shapes this scenario carries the file's value exactly
        if f.scenario and f.applies(full) and getattr(sent, f.scenario) is not None and not isinstance(getattr(sent, f.scenario), str):
            assert getattr(rebuilt, f.scenario) == pytest.approx(getattr(sent, f.scenario)), (f.scenario, getattr(rebuilt, f.scenario), getattr(sent, f.scenario))


@FAMILY
@given(
    ngl=st.sampled_from(["-1", "0", "1", "13", "80", "1024"]),
    ram=st.sampled_from(["1", "16", "64", "256", "65536"]),
    fmt=st.sampled_from(["bf16", "gguf-q4_k_m", "gguf-q2_k"]),
    seq=st.sampled_from(["128", "4096", "131072"]),
)
def test_generated_offload_fields(ngl, ram, fmt, seq):
    at = open_link("memory", {"model": "llama-3.1-70b", "engine": "llama.cpp", "ngl": ngl, "ram": ram, "fmt": fmt, "seq": seq, "acc": "rtx-4090"})
    assert_safe(at)
    shown = {m.label: m.value for m in at.metric}
    if shown.get("Fits one device?") == "No":  # no answer beside the verdict says it fits
        assert shown["Largest batch that fits"] == "not even 1" or "System RAM" not in " ".join(m.value for m in at.markdown)


def test_a_metric_that_came_out_not_finite_is_refused_in_words():
    from app_pages.shared.text import metric

    class Column:
        def metric(self, label, value, help=None, **kwargs):
            self.drawn = (label, value, help, kwargs)

    col = Column()
    metric(col, "Monthly bill", "$inf", help="[x](http://evil.example)", delta="+$nan")
    assert col.drawn[1] == "not computable" and col.drawn[3] == {} and "finite" in col.drawn[2]
    metric(col, "Monthly bill", "$1,234", help="[x](http://evil.example)")
    assert col.drawn[1] == "$1,234" and not injected(col.drawn[2])


def test_a_compare_scenario_named_nan_is_shown_as_its_name():
    """Hypothesis's find (2026-11-26): a saved scenario named "NAN" shows its name; the run is otherwise safe, and a
    computed NaN would still fail the check (the name is exempt only as the whole cell)."""
    saved = [{"name": "NAN", "scenario": {"model": "llama-3.1-8b", "mode": "inference"}}]
    at = open_link("compare", {"cmp": token(json.dumps(saved))})
    assert_safe(at, own=("NAN",))
    assert "NAN" in [c for c in table_cells(at) if isinstance(c, str)]


def test_a_link_whose_config_cannot_be_read_says_so_first():
    """A link with a broken config.json blob: the page said "Paste or upload a config.json" and folded the cause (the
    link's config could not be read) under "1 more warning"; the cause comes first."""
    at = open_link("plan", {"src": "config", "cfg": "zzzz"})
    assert_safe(at)
    shown = [w.value.replace("\\", "") for w in at.warning]
    assert shown and shown[0].startswith("The config.json in the link could not be read"), shown
