"""Every catalog row validates and cites a source; price rows name real
accelerators; every preset and accelerator the dashboard can pick evaluates."""

import json

import pytest

from core.catalog.accelerators import load_accelerators
from core.catalog.ecosystem import load_ecosystem
from core.catalog.presets import DATA_DIR, load_presets
from core.catalog.prices import load_prices
from core.estimate import estimate
from core.scenario import Scenario

ACCELERATORS = [a.id for a in load_accelerators()]  # the dashboard's accelerator picker
PRESETS = list(load_presets())  # the dashboard's model picker
WORKSHOP = json.loads((DATA_DIR / "workshop_presets.json").read_text())  # the dashboard's one-click scenarios


def test_every_row_is_validated_and_sourced():
    for a in load_accelerators():  # loading validates every row (core/catalog/accelerators.py)
        assert len(a.source.strip()) >= 10 and a.as_of, a.id
    for p in load_prices():
        assert len(p.source.strip()) >= 10 and p.as_of, p.instance_type
    for e in load_ecosystem():
        assert e.source.startswith("https://"), e
    for p in load_presets().values():
        assert p.source and p.published_params_source, p.id


@pytest.mark.parametrize(("supports_fp8", "fp8_tflops"), [(True, None), (False, 989.4)])
def test_fp8_support_and_its_rate_come_together(supports_fp8, fp8_tflops):
    """supports_fp8 is the one "has FP8 matmuls" (weights W8A8, an FP8 KV cache read without decoding it) and
    fp8_tflops its rate: a row with one and not the other is refused, so the two cannot disagree."""
    h100 = next(a for a in load_accelerators() if a.id == "h100-sxm")
    with pytest.raises(ValueError, match="supports_fp8"):
        type(h100).model_validate(h100.model_dump() | {"supports_fp8": supports_fp8, "fp8_tflops": fp8_tflops})


def test_every_price_row_names_a_catalog_accelerator():
    known = set(ACCELERATORS)
    missing = {p.accelerator_id for p in load_prices()} - known
    assert not missing


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_evaluates(preset):
    inf = estimate(Scenario(model=preset, accelerator="h100-sxm"))
    assert inf.inference is not None and inf.inference.decode_tokens_per_s > 0
    train = estimate(Scenario(model=preset, mode="training", train_tokens=1e9, accelerator="h100-sxm"))
    assert train.training is not None and train.training.wall_hours > 0


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_every_accelerator_evaluates(accelerator):
    from core.catalog.accelerators import get_accelerator
    from core.catalog.engine_hardware import engine_problem
    from core.memory.engines import ENGINES

    acc = get_accelerator(accelerator)
    engine = next((e for e in ("vllm", "llama.cpp", "hf-transformers") if engine_problem(e, acc) is None), None)
    if engine is None:  # a part no engine's builds run on any more (the K80: data/engine_hardware.csv) says so for each
        assert accelerator == "k80" and all(engine_problem(e, acc) for e in ENGINES)
    else:
        inf = estimate(Scenario(model="llama-3.1-8b", accelerator=accelerator, serving_engine=engine))
        assert inf.inference is not None and inf.inference.time_to_first_token_s > 0
    train = estimate(Scenario(model="llama-3.1-8b", mode="training", method="qlora", train_tokens=1e8, accelerator=accelerator))
    assert train.training is not None and train.training.gpu_hours > 0


@pytest.mark.parametrize("item", WORKSHOP, ids=[w["id"] for w in WORKSHOP])
def test_every_workshop_scenario_evaluates(item):
    sc = Scenario.model_validate(item["scenario"])
    res = estimate(sc)
    assert (res.inference is not None) == (sc.mode == "inference")
    assert (res.training is not None) == (sc.train_tokens is not None)


def test_managed_services_are_covered_and_dated():
    from core.catalog.managed import load_managed_services

    rows = load_managed_services()
    assert {"google-colab", "aws-sagemaker-training", "aws-sagemaker-inference", "azure-ml-compute", "snowflake-spcs"} <= {r.service for r in rows}
    assert all(r.source and r.as_of for r in rows)
    colab_h100 = next(r for r in rows if r.service == "google-colab" and r.accelerator_id == "h100-sxm")
    assert colab_h100.usd_per_hour and colab_h100.usd_per_hour < 5


def test_api_and_purchase_catalogs_are_sourced():
    from core.catalog.api_prices import load_api_prices
    from core.catalog.purchases import load_facility, load_purchases

    api = load_api_prices()
    assert len(api) >= 15 and len({r.preset for r in api if r.preset}) >= 10
    assert all(r.source and r.as_of for r in api)
    assert {"h100-sxm", "b200", "rtx-4090"} <= {p.accelerator_id for p in load_purchases()}
    assert 1.0 < load_facility()["pue_industry_average_uptime_2023"].value < 2.0


def test_every_provider_renting_whole_nodes_says_whether_they_form_a_cluster():
    """A provider with rows of whole nodes (8 GPUs and up) is in data/providers.csv, sourced and dated: one left out
    would silently be allowed to span nodes (core/catalog/providers.py)."""
    from core.catalog.providers import load_providers

    providers = load_providers()
    whole_nodes = {p.provider for p in load_prices() if p.accelerators_per_instance >= 8}
    assert whole_nodes - set(providers) == set()
    for p in providers.values():
        assert p.source.startswith("https://") and p.as_of and len(p.evidence) >= 20, p.provider
    assert not providers["vast"].multi_node and providers["aws"].multi_node  # a host marketplace; EFA clusters


def test_resold_and_community_hosts_never_span_nodes():
    """A row that resells another cloud's machine (its instance type names that cloud: `lambdalabs__8xA100...`) or a
    community host (RunPod's Community Cloud) is one host with ordinary networking, whatever its seller offers
    besides; names are matched without regard to case."""
    from core.catalog.providers import spans_nodes

    resold = [p for p in load_prices() if "__" in p.instance_type]
    assert resold and not any(spans_nodes(p.provider, p.instance_type) for p in resold)
    assert not spans_nodes("runpod", "8x H100 SXM (Community Cloud)") and spans_nodes("runpod", "8x H100 SXM (Secure Cloud)")
    assert not spans_nodes("Vast", "8x") and spans_nodes("AWS", "p5.48xlarge") and spans_nodes("our own cluster", "8x")
