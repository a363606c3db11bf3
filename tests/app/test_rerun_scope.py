"""What reruns when an input changes (app_pages/shared/rerun.py): a sidebar input that leaves the sidebar as drawn
reruns only the page fragment, which AppTest shows as a run that sent no sidebar element; one that changes the
sidebar (the workload switch, a slider value off its stops) reruns everything. Either way every value is kept and
the fragment-only run is charged by the fair-share guard.

A browser asks for a run of the sidebar inputs' fragment when one of them changes; AppTest asks for a whole run.
`page_alone` stands in for the browser's request (the callback sees a fragment run); tests/browser/test_fragment.py
checks the real one."""

from __future__ import annotations

import pytest

from app_pages.shared import guard
from app_pages.shared.fields import fields
from app_pages.shared.rerun import sidebar_shape

from .conftest import metric, no_exception, run_app


@pytest.fixture
def page_alone(monkeypatch):
    from app_pages.shared import st_private

    monkeypatch.setattr(st_private, "fragment_only_run", lambda: True)


def test_a_slider_move_reruns_the_page_alone_and_updates_it(page_alone):
    at = run_app("memory", {"model": "llama-3.1-8b"})
    assert len(at.sidebar.select_slider) == 2
    before = metric(at, "Memory per device")
    at.select_slider(key="seq").set_value(32768).run()
    no_exception(at)
    assert len(at.sidebar.select_slider) == 0 and not at.sidebar.children, "the sidebar was not sent again"
    assert metric(at, "Memory per device") != before
    assert at.query_params["seq"] == "32768"


def test_a_change_that_reshapes_the_sidebar_reruns_everything(page_alone):
    at = run_app("memory", {"model": "llama-3.1-8b"})
    at.segmented_control(key="mode").set_value("training").run()
    no_exception(at)
    shown = {w.key for w in at.sidebar.selectbox} | {w.key for w in at.sidebar.segmented_control}
    assert {"method", "opt", "stack"} <= shown, "training inputs appear at once"


def test_values_typed_in_page_alone_runs_survive_a_full_run(page_alone):
    at = run_app("memory", {"model": "llama-3.1-8b"})
    at.select_slider(key="seq").set_value(16384).run()
    at.run()  # AppTest keeps only what a run sent: a plain run (a full one) draws the sidebar again
    at.select_slider(key="batch").set_value(4).run()
    at.run()
    at.segmented_control(key="mode").set_value("training").run()  # a full run
    no_exception(at)
    assert at.select_slider(key="seq").value == 16384 and at.select_slider(key="batch").value == 4


def test_shape_covers_what_the_sidebar_shows():
    values = {k: f.default for k, f in fields().items()}
    same = dict(values, seq=65536, acc="a100-sxm-80gb")
    assert sidebar_shape(same) == sidebar_shape(values)
    assert sidebar_shape(dict(values, mode="training")) != sidebar_shape(values)
    assert sidebar_shape(dict(values, src="config")) != sidebar_shape(values)
    assert sidebar_shape(dict(values, seq=5000)) != sidebar_shape(values), "a value between stops adds a stop"


def test_a_page_alone_run_is_charged_by_the_guard(page_alone, monkeypatch):
    at = run_app("memory", {"model": "llama-3.1-8b"})
    calls = []
    original = guard.before_run
    monkeypatch.setattr(guard, "before_run", lambda: calls.append(1) or original())
    at.select_slider(key="seq").set_value(8192).run()
    assert not at.sidebar.children and calls == [1]
    at.run()  # a full run: the app's turn covers the page's, one charge
    assert calls == [1, 1]
    at.segmented_control(key="mode").set_value("training").run()
    assert calls == [1, 1, 1]


def test_a_sidebar_change_inside_a_whole_run_keeps_it_whole(monkeypatch):
    """A move that shares its run with a page switch (clicked while a run was in progress) must not narrow that run
    to the old page's fragment: the callback leaves a whole run alone."""
    from app_pages.shared import st_private

    monkeypatch.setattr(st_private, "fragment_only_run", lambda: False)
    at = run_app("memory", {"model": "llama-3.1-8b"})
    at.select_slider(key="seq").set_value(32768).run()
    no_exception(at)
    assert len(at.sidebar.select_slider) == 2, "a whole run: the sidebar was drawn"
    assert at.query_params["seq"] == "32768"
