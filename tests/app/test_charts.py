"""The chart component (app_pages/shared/plot.py): Streamlit's Plotly module is found in the pinned Streamlit (so an
upgrade that moves it fails here instead of quietly drawing with the slower st.plotly_chart), and the fallback draws
the same figures."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages.shared import plot

from .conftest import charts, no_exception, run_app


def test_streamlits_plotly_module_is_found():
    assert plot.CHUNK is not None
    assert (Path(st.__file__).parent / "static" / "static" / "js" / plot.CHUNK).is_file()
    assert plot._COMPONENT is not None, "charts are drawn by the component unless LLMGP_NATIVE_CHARTS=1"


def test_the_fallback_draws_the_same_figures(monkeypatch):
    drawn = run_app("memory", {"model": "llama-3.1-8b", "seq": "8192"})
    no_exception(drawn)
    assert not drawn.get("plotly_chart") and len(charts(drawn)) == 3
    monkeypatch.setattr(plot, "_COMPONENT", None)
    st.cache_resource.clear()
    fallback = run_app("memory", {"model": "llama-3.1-8b", "seq": "8192"})
    no_exception(fallback)
    assert len(fallback.get("plotly_chart")) == 3 and not fallback.get("bidi_component")
    for ours, native in zip(charts(drawn), charts(fallback), strict=True):
        assert ours["data"] == native["data"]
        assert ours["layout"]["title"] == native["layout"]["title"]
