"""The chart component (app_pages/shared/plot.py): plotly.js is found in the plotly package and is really plotly.js (so
a plotly release that moves or renames it fails here instead of quietly drawing with the slower st.plotly_chart), a
file that is not plotly.js is refused, and the fallback draws the same figures."""

from __future__ import annotations

from pathlib import Path

import plotly
import streamlit as st
from plotly.offline import get_plotlyjs_version

from app_pages.shared import plot

from .conftest import charts, no_exception, run_app


def test_plotly_js_comes_from_the_plotly_package():
    path = plot.plotly_js()
    assert path == Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert plot.SOURCE is not None and plot.SOURCE.endswith("/plotly.min.js") and plot.SOURCE.startswith("component/")
    assert f"plotly.js v{get_plotlyjs_version()}" in path.read_text(encoding="utf-8")[:200]
    assert "streamlit" not in str(path)
    assert plot._COMPONENT is not None, "charts are drawn by the component unless LLMGP_NATIVE_CHARTS=1"


def test_a_file_that_is_not_plotly_is_refused(tmp_path):
    assert plot.plotly_js(tmp_path) is None  # missing
    (tmp_path / "plotly.min.js").write_text("/* not plotly */ window.Plotly = {};\n")
    assert plot.plotly_js(tmp_path) is None
    (tmp_path / "plotly.min.js").write_text("/**\n* plotly.js v0.0.1\n*/\n")
    assert plot.plotly_js(tmp_path) is None  # another version than the package's
    (tmp_path / "plotly.min.js").write_text(f"/**\n* plotly.js v{get_plotlyjs_version()}\n*/\n")
    assert plot.plotly_js(tmp_path) == tmp_path / "plotly.min.js"


def test_the_fallback_draws_the_same_figures(monkeypatch):
    drawn = run_app("memory", {"model": "llama-3.1-8b", "seq": "8192"})
    no_exception(drawn)
    assert not drawn.get("plotly_chart") and len(charts(drawn)) == 3
    monkeypatch.setattr(plot, "_COMPONENT", None)
    st.cache_resource.clear()
    fallback = run_app("memory", {"model": "llama-3.1-8b", "seq": "8192"})
    no_exception(fallback)
    assert len(fallback.get("plotly_chart")) == 3 and not [c for c in fallback.get("bidi_component") if c.proto.component_name == plot.COMPONENT_NAME]
    for ours, native in zip(charts(drawn), charts(fallback), strict=True):
        assert ours["data"] == native["data"]
        assert ours["layout"]["title"] == native["layout"]["title"]
