"""Results shared by every session that looks at the same scenario (a shared
link, a workshop room): computed once per process, bounded, read-only (the
core's results are frozen)."""

from __future__ import annotations

import streamlit as st

from core.estimate import Result, estimate
from core.memory.explain import Explanation, explain
from core.scenario import Scenario


@st.cache_resource(max_entries=256, show_spinner=False)
def scenario_of(key: str) -> Scenario:
    return Scenario.model_validate_json(key)


@st.cache_resource(max_entries=256, show_spinner=False)
def cached_estimate(key: str) -> Result:
    """estimate() of the scenario whose JSON is `key` (Scenario.model_dump_json())."""
    return estimate(scenario_of(key))


@st.cache_resource(max_entries=256, show_spinner=False)
def cached_explain(key: str) -> list[Explanation]:
    return explain(scenario_of(key), cached_estimate(key))
