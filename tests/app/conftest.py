import json
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["plan", "memory", "training", "inference", "train_vs_serve", "gpu_vs_tpu", "compare", "method"]


@pytest.fixture(autouse=True)
def _fresh_caches():
    from app_pages.shared.cache import reset_ledger

    st.cache_data.clear()
    st.cache_resource.clear()
    reset_ledger()
    yield


def browser_url(page: str) -> dict[str, str]:
    """The URL a browser sends with every run on `page` (st.context.url; rerun.asked_page reads which page it asks
    for). A whole run's st.context.url names the page st.navigation chose whatever this says; a fragment-only run's
    names this page in AppTest (its page registry is made anew each run), as a browser's URL would."""
    return {"url": f"http://localhost:8501/{page.replace('_', '-')}"}


def open_folds(at: AppTest, open_: bool | None = True) -> None:
    """Every folded section open (or closed) from the next run on: a fold is drawn only while open
    (app_pages/shared/fold.py), and the tests check what it holds as they did before it was folded. None: each fold
    as the app starts it (a fold's own tests)."""
    from app_pages.shared.fold import KEYS

    if open_ is None:
        return
    for key in KEYS:
        at.session_state[key] = open_


def run_app(page: str = "memory", params: dict | None = None, timeout: float = 60, folds: bool | None = True) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    at.context = browser_url(page)
    open_folds(at, folds)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()  # the root: a link with parameters opens Memory, a bare one the Plan page (app_pages/home.py)
    if page != "memory" or not params:
        at.switch_page(str(ROOT / "app_pages" / f"{page}.py")).run()
    return at


def metric(at: AppTest, label: str) -> str:
    for m in at.metric:
        if m.label == label:
            return m.value
    raise KeyError(f"no metric {label!r}; have {[m.label for m in at.metric]}")


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def open_link(page: str, query: dict[str, str], folds: bool | None = True) -> AppTest:
    """A shared link opened on `page`: the page is the session's first run, as for a browser opening /<url_path>?...
    (conftest.run_app runs Memory first, which consumes the link's warnings). AppTest.switch_page() cannot target a
    st.Page with a custom url_path before the first run, so this sets the page hash a browser's deep link sends:
    calc_hash(url_path), url_path being the file name with '-' for '_' (app.py's convention).
    test_deep_links_open_the_requested_page guards this use of a private attribute."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.context = browser_url(page)
    open_folds(at, folds)
    for key, value in query.items():
        at.query_params[key] = value
    at._page_hash = calc_hash(page.replace("_", "-"))
    return at.run()


def charts(at: AppTest) -> list[dict]:
    """The figures a run drew (dicts with data and layout), through the app's chart component
    (app_pages/shared/plot.py) or, where it falls back, st.plotly_chart."""
    out = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    for element in at.get("bidi_component"):
        if element.proto.component_name == "llmgp_chart":
            out.append(json.loads(json.loads(element.proto.json)["spec"]))
    return out


def array_of(value) -> list:
    """A figure's data array as a list: plotly writes numpy arrays as {"dtype", "bdata"} (base64), lists as lists."""
    if isinstance(value, dict) and "bdata" in value:
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).tolist()
    return list(value)
