"""Issue #9: the field table is the one source of truth. A row added to it (and nothing else edited) shows up as a
widget, travels in the URL, shapes the scenario and appears in the Compare page's settings table."""

from __future__ import annotations

import pytest

from app_pages.shared.field import Field, inference
from app_pages.shared.fields import fields
from app_pages.shared.style import Units
from core.estimate import estimate
from core.scenario import Scenario

from .conftest import metric, no_exception, run_app

LABEL = "KV cache precision (a row added by a test)"


@pytest.fixture
def new_row():
    """Swap the table's KV-cache row for a new one with its own URL key and label (the cached table is the dict
    every module reads, so editing it is adding a row to the table)."""
    table = fields()
    saved = dict(table)
    del table["kv"]
    table["kvx"] = Field("kvx", LABEL, "choice", "bf16", ("bf16", "fp8"), section="workload", scenario="kv_cache_format", applies=inference)
    yield
    table.clear()
    table.update(saved)


def test_a_new_row_is_a_widget_a_url_key_a_scenario_field_and_a_compare_row(new_row):
    at = run_app(params={"model": "llama-3.1-8b", "seq": "32768", "kvx": "fp8"})
    no_exception(at)
    assert any(s.label == LABEL for s in at.selectbox), "the widget"
    want = Units("GiB")(estimate(Scenario(model="llama-3.1-8b", seq_len=32768, kv_cache_format="fp8")).memory_per_device_bytes.total)
    assert metric(at, "Memory per device") == want, "the scenario"
    assert at.query_params.get("kvx") in ("fp8", ["fp8"]), "the URL"
    at.switch_page("app_pages/compare.py").run()
    next(b for b in at.button if b.label == "Save current scenario").click().run()
    no_exception(at)
    settings = at.dataframe[-1].value
    assert LABEL in list(settings.index), "the Compare page's settings table"
    assert list(settings.loc[LABEL]) == ["fp8"]


def test_the_precision_help_explains_bf16_against_fp16_with_the_formats_own_numbers():
    """A seed-note topic (BF16 vs FP16 range): the help's figures are the formats' own, worked out here: FP16's
    largest finite number (numpy's float16) and BF16's 8 exponent bits as FP32's ((2 - 2^-7) x 2^127)."""
    import numpy as np

    from app_pages.shared.fields import fields

    said = fields()["prec"].help
    assert f"{float(np.finfo(np.float16).max):,.0f}" == "65,504" and "largest 65,504" in said
    assert f"{(2 - 2**-7) * 2.0**127:.0e}" == "3e+38" and "about 3e38" in said
    assert np.finfo(np.float16).nmant == 10 and "10 of precision" in said and "7 bits of precision" in said
